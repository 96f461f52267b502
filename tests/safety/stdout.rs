//! A closed standard output (`ember train … | head -1`) ends the printing quietly, not the
//! training or its saving.

use std::io::{BufRead, BufReader};
use std::process::Child;

use super::runs::spawn;

#[test]
fn a_closed_stdout_ends_the_program_quietly() {
    let child = spawn(&[
        "train",
        "--device",
        "flex",
        "--batches",
        "400",
        "--batch-size",
        "64",
        "--features",
        "16",
        "--hidden",
        "8",
    ]);
    let output = after_the_first_line(child);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
}

/// `child | head -1`: reads the first line of its output, closes the pipe, and waits for it.
fn after_the_first_line(mut child: Child) -> std::process::Output {
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    drop(stdout);
    child.wait_with_output().unwrap()
}

/// `ember train … --save m --metrics m.csv | head -1`: the reader goes away after the first
/// line, and the run still trains to the end and writes both (b70e607 exited 0 at the first
/// line it could not print, with neither written).
#[test]
fn a_closed_stdout_stops_the_printing_not_the_saving() {
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("m.safetensors");
    let metrics = dir.path().join("m.csv");
    let child = spawn(&[
        "train",
        "--device",
        "flex",
        "--batches",
        "120",
        "--batch-size",
        "64",
        "--features",
        "16",
        "--hidden",
        "8",
        "--epochs",
        "2",
        "--save",
        save.to_str().unwrap(),
        "--metrics",
        metrics.to_str().unwrap(),
    ]);
    let output = after_the_first_line(child);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let bytes = std::fs::read(&save).expect("--save written after stdout closed");
    let saved = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    assert!(saved.names().iter().any(|n| n.ends_with("weight")));
    let trace = std::fs::read_to_string(&metrics).expect("--metrics written");
    // Both epochs' batches: the run went on to the end.
    assert_eq!(
        trace.lines().count(),
        1 + 2 * 120,
        "{}",
        &trace[..200.min(trace.len())]
    );
}
