//! `--save` and `--metrics` refuse FIFOs, devices, symlinks to devices, directories and
//! unwritable places before any work and leave them as they were; a symlink to a regular file
//! is followed; a failing metrics write keeps the parameters; killed writers' temporaries are
//! removed by the next write.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::common::cli::{TINY, args, ember, fails_with, succeeds, text};
use super::runs::{read_until, spawn, spawn_in};

fn run(program: &str, args: &[&str]) {
    let status = Command::new(program).args(args).status().unwrap();
    assert!(status.success(), "{program} {args:?}");
}

/// A FIFO, a character device with /dev/null's numbers, a symlink to that device, and a
/// directory, all inside `dir`, each with the words its refusal must use.
fn special_files(dir: &Path) -> Vec<(PathBuf, &'static str)> {
    let fifo = dir.join("fifo");
    let device = dir.join("null-like");
    let link = dir.join("link");
    let directory = dir.join("directory");
    let (looped, back) = (dir.join("loop-a"), dir.join("loop-b"));
    run("mkfifo", &[fifo.to_str().unwrap()]);
    run("mknod", &[device.to_str().unwrap(), "c", "1", "3"]);
    std::os::unix::fs::symlink(&device, &link).unwrap();
    std::fs::create_dir(&directory).unwrap();
    std::os::unix::fs::symlink(&back, &looped).unwrap();
    std::os::unix::fs::symlink(&looped, &back).unwrap();
    vec![
        (fifo, "is a FIFO"),
        (device, "is a character device"),
        (link, "is a symlink to a character device"),
        (directory, "is a directory"),
        // It was called dangling (issue 62's pass).
        (looped, "is a symlink loop"),
    ]
}

fn kind(path: &Path) -> std::fs::FileType {
    std::fs::symlink_metadata(path).unwrap().file_type()
}

#[test]
fn save_and_metrics_refuse_what_is_not_a_regular_file_before_training_and_leave_it_alone() {
    let dir = tempfile::tempdir().unwrap();
    for (path, what) in special_files(dir.path()) {
        let before = kind(&path);
        for flag in ["--save", "--metrics"] {
            let target = path.to_str().unwrap();
            let err = fails_with(&args(&TINY, &[flag, target]), what);
            assert!(err.contains(target), "the path is named: {err}");
            // Refused before any work: no epoch ran.
            let out = ember(&args(&TINY, &[flag, target]));
            assert!(!text(&out).0.contains("epoch 1:"), "{}", text(&out).0);
            assert_eq!(kind(&path), before, "{} was changed", path.display());
        }
    }
    let fifo = dir.path().join("fifo");
    assert!(kind(&fifo).is_fifo());
    assert!(kind(&dir.path().join("null-like")).is_char_device());
    assert!(kind(&dir.path().join("link")).is_symlink());
}

#[test]
fn a_symlink_to_a_regular_file_is_followed_and_stays_a_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.safetensors");
    std::fs::write(&real, b"old").unwrap();
    let link = dir.path().join("model.safetensors");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    succeeds(&args(&TINY, &["--save", link.to_str().unwrap()]));
    assert!(kind(&link).is_symlink());
    let bytes = std::fs::read(&real).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    assert!(file.names().contains(&"0.weight"), "{:?}", file.names());
}

#[test]
fn an_unwritable_output_is_refused_before_training_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    // Root writes through permission bits, so the unwritable place is under a regular file.
    let file = dir.path().join("plain");
    std::fs::write(&file, b"").unwrap();
    let metrics = file.join("m.csv");
    let save = dir.path().join("model.safetensors");
    let err = fails_with(
        &args(
            &TINY,
            &[
                "--metrics",
                metrics.to_str().unwrap(),
                "--save",
                save.to_str().unwrap(),
            ],
        ),
        "is not a directory",
    );
    assert!(err.contains("--metrics"), "{err}");
    assert!(
        !save.exists(),
        "nothing is written by a run that never started"
    );
}

#[test]
fn a_failing_metrics_write_keeps_neither_the_parameters_nor_the_other_output_from_being_written() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let metrics = sub.join("m.csv");
    let save = dir.path().join("model.safetensors");
    let mut child = spawn(&[
        "train",
        "--device",
        "flex",
        "--batches",
        "60",
        "--batch-size",
        "128",
        "--features",
        "128",
        "--hidden",
        "128",
        "--epochs",
        "3",
        "--metrics",
        metrics.to_str().unwrap(),
        "--save",
        save.to_str().unwrap(),
    ]);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    read_until(&mut lines, "batch 50,");
    // The metrics' directory goes away while the run trains.
    std::fs::remove_dir_all(&sub).unwrap();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--metrics"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        rest.iter().any(|l| l.contains("parameters saved")),
        "{rest:?}"
    );
    let bytes = std::fs::read(&save).unwrap();
    safetensors::SafeTensors::deserialize(&bytes).unwrap();
}

#[test]
fn temporaries_that_killed_processes_left_are_removed_by_the_next_write() {
    let dir = tempfile::tempdir().unwrap();
    // No process has a number above Linux's largest pid_max.
    let dead = dir.path().join(".ember-tmp-4194999-0.model.safetensors");
    let dead_dir = dir.path().join(".ember-tmp-4194999-3.other");
    let alive = dir.path().join(format!(
        ".ember-tmp-{}-0.model.safetensors",
        std::process::id()
    ));
    for path in [&dead, &alive] {
        std::fs::write(path, vec![0u8; 1000]).unwrap();
    }
    std::fs::create_dir(&dead_dir).unwrap();
    let save = dir.path().join("model.safetensors");
    succeeds(&args(&TINY, &["--save", save.to_str().unwrap()]));
    assert!(
        !dead.exists(),
        "the dead process's temporary for this target is gone"
    );
    assert!(
        alive.exists(),
        "a running process's temporary is left alone"
    );
    assert!(
        dead_dir.exists(),
        "another target's temporary is left to its own writer"
    );
}

/// `--save` that fails at the run's end (its directory removed while the run trained) no
/// longer loses what was trained: it goes to a free name beside it, else in the working
/// directory, and the error says where; the exit status stays 1. Before, the parameters were
/// gone.
#[test]
fn a_save_that_fails_at_the_end_keeps_what_was_trained_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let mut child = spawn_in(
        dir.path(),
        &[
            "train",
            "--device",
            "flex",
            "--batches",
            "400",
            "--batch-size",
            "128",
            "--features",
            "256",
            "--hidden",
            "512",
            "--epochs",
            "5",
            "--save",
            "sub/x.safetensors",
        ],
    );
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    read_until(&mut lines, "epoch 1:");
    std::fs::remove_dir_all(&sub).unwrap();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{rest:?}\n{stderr}");
    // The whole path: the name alone did not say it is the working directory (issue 62).
    let rescued = dir.path().join("x.rescued.safetensors");
    let rescued = std::path::absolute(&rescued).unwrap();
    assert!(
        stderr.contains(&format!(
            "what the run trained went to {} instead",
            rescued.display()
        )),
        "{stderr}"
    );
    let kept = std::fs::read(dir.path().join("x.rescued.safetensors")).unwrap();
    let file = safetensors::SafeTensors::deserialize(&kept).unwrap();
    assert!(file.names().contains(&"0.weight"), "{:?}", file.names());
}
