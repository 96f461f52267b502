//! Checkpoints are checked, locked and complete: a file changed after it was written or a
//! position edited out of place is refused on resume, a second run on the same directory is
//! refused at start, and a run ends with a checkpoint even when `--checkpoint-every` is longer
//! than the run. b70e607 resumed from the first two silently, let the second run collide
//! mid-way, and left no checkpoint in the last case.

mod common;

use std::path::{Path, PathBuf};

use common::cli::{TINY, args, fails_with, strs, succeeds};

/// A run of `epochs` epochs of 4 batches that keeps its checkpoints in `ck`, with `more`
/// flags.
fn run(ck: &Path, epochs: &str, more: &[&str]) -> Vec<String> {
    let base = args(
        &TINY,
        &["--epochs", epochs, "--checkpoint", ck.to_str().unwrap()],
    );
    args(&base, more).iter().map(|a| a.to_string()).collect()
}

/// The newest checkpoint in `ck`.
fn newest(ck: &Path) -> PathBuf {
    let mut steps: Vec<PathBuf> = std::fs::read_dir(ck)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("step-")
        })
        .collect();
    steps.sort();
    steps.pop().expect("a checkpoint")
}

#[test]
fn a_checkpoint_file_changed_after_it_was_written_is_refused_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    succeeds(&strs(&run(&ck, "1", &[])));
    let model = newest(&ck).join("model.bpk");
    let mut bytes = std::fs::read(&model).unwrap();
    let at = bytes.len() - 5;
    bytes[at] ^= 0x10;
    bytes[at - 40] ^= 0x01;
    std::fs::write(&model, bytes).unwrap();
    let resume = run(&ck, "2", &["--resume", ck.to_str().unwrap()]);
    let stderr = fails_with(&strs(&resume), "model.bpk");
    assert!(
        stderr.contains("the file changed after it was written"),
        "{stderr}"
    );
}

#[test]
fn a_position_edited_out_of_place_is_refused_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    succeeds(&strs(&run(&ck, "1", &[])));
    let state = newest(&ck).join("state.json");
    let text = std::fs::read_to_string(&state).unwrap();
    let edited = text.replace("\"next_batch\": 0", "\"next_batch\": 999");
    assert_ne!(text, edited, "{text}");
    std::fs::write(&state, edited).unwrap();
    let resume = run(&ck, "2", &["--resume", ck.to_str().unwrap()]);
    let stderr = fails_with(&strs(&resume), "checkpoint position");
    assert!(
        stderr.contains("next batch 999") && stderr.contains("records 4 batches"),
        "{stderr}"
    );
}

#[test]
fn a_second_run_on_the_same_checkpoint_directory_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    std::fs::create_dir(&ck).unwrap();
    // A run in progress holds the directory: here, a process of this test's own.
    let mut holder = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    std::fs::write(ck.join("lock"), holder.id().to_string()).unwrap();
    let save = dir.path().join("m.safetensors");
    let args = run(&ck, "2", &["--save", save.to_str().unwrap()]);
    let stderr = fails_with(&strs(&args), &format!("another run (pid {})", holder.id()));
    assert!(stderr.contains(ck.to_str().unwrap()), "{stderr}");
    holder.kill().unwrap();
    holder.wait().unwrap();
    // Once it has ended, its lock is taken over.
    succeeds(&strs(&args));
    assert!(save.exists());
}

#[test]
fn a_run_shorter_than_checkpoint_every_still_ends_with_a_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    succeeds(&strs(&run(&ck, "2", &["--checkpoint-every", "1000"])));
    assert_eq!(newest(&ck).file_name().unwrap(), "step-0000000008");
}

/// A checkpoint that cannot be written (here its name is taken by a dangling symlink) fails
/// the run, and `--save` and `--metrics` are still written, with the message saying so:
/// b70e607 wrote neither, although its README promised they were independent.
#[test]
fn a_failing_checkpoint_write_still_writes_save_and_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    std::fs::create_dir(&ck).unwrap();
    std::os::unix::fs::symlink(dir.path().join("nowhere"), ck.join("step-0000000002")).unwrap();
    let save = dir.path().join("m.safetensors");
    let metrics = dir.path().join("m.csv");
    let more = ["--checkpoint-every", "2", "--save", save.to_str().unwrap()];
    let args = run(
        &ck,
        "1",
        &[&more[..], &["--metrics", metrics.to_str().unwrap()]].concat(),
    );
    let out = common::cli::ember(&strs(&args));
    let (stdout, stderr) = common::cli::text(&out);
    assert!(!out.status.success(), "{stdout}{stderr}");
    assert!(stderr.contains("step-0000000002"), "{stderr}");
    assert!(
        stdout.contains("the run failed after batch 2 of epoch 1"),
        "{stdout}"
    );
    assert!(save.exists() && metrics.exists(), "{stdout}");
}
