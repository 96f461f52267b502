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

/// A character device with /dev/full's numbers, in `dir`: every write to it fails (ENOSPC).
fn full(dir: &std::path::Path) -> std::fs::File {
    let path = dir.join("full-like");
    let _ = std::fs::remove_file(&path);
    let made = std::process::Command::new("mknod")
        .args([path.to_str().unwrap(), "c", "1", "7"])
        .status()
        .unwrap();
    assert!(made.success(), "mknod");
    std::fs::OpenOptions::new().write(true).open(&path).unwrap()
}

/// An output that cannot be written (`2> /dev/full`, `> /dev/full`) is never a panic (b70e607
/// exited 101, "failed printing to stderr"), and never an exit 0 that hides lost lines; what
/// training writes is written all the same.
#[test]
fn a_full_stdout_or_stderr_is_an_exit_status_not_a_panic() {
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let ember = || Command::new(env!("CARGO_BIN_EXE_ember"));
    let tiny = crate::common::cli::TINY;
    // An error, to a full stderr.
    let out = ember()
        .args(["train", "--device", "flex", "--batches", "20", "--lr", "0"])
        .stderr(full(dir.path()))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    // A diverging run, to a full stderr.
    let out = ember()
        .args(tiny)
        .args(["--lr", "1e30"])
        .stderr(full(dir.path()))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    // A good run, to a full stdout: trained and saved, and the exit says the lines were lost.
    let save = dir.path().join("m.safetensors");
    let out = ember()
        .args(tiny)
        .args(["--save", save.to_str().unwrap()])
        .stdout(full(dir.path()))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("standard output could not be written"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(save.exists());
    // `devices` too.
    let out = ember()
        .arg("devices")
        .stdout(full(dir.path()))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
}

/// `--help` and `--version` to a full stdout exited 0, where every command reports it
/// (issue 62).
#[test]
fn help_and_version_to_a_full_stdout_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["--help"][..],
        &["--version"],
        &["train", "--help"],
        &["help"],
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ember"))
            .args(args)
            .stdout(full(dir.path()))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("standard output could not be written"),
            "{stderr}"
        );
    }
}
