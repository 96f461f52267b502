//! A run that diverges never writes NaN under the user's name: `--save` keeps its old content,
//! no checkpoint holds non-finite parameters, and `--resume` at a lower `--lr` is the way back.
//! Before 2026-11-25, `--save old.st` was overwritten with NaN and Inf (exit 1), and a resume
//! with another `--lr` was refused.

use common::cli::{TINY, args, checkpoints, ember, fails_with, succeeds, text};

use crate::common;

/// The losses of a `--metrics` CSV, in order.
fn losses(csv: &std::path::Path) -> Vec<f32> {
    let text = std::fs::read_to_string(csv).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let at = header
        .iter()
        .position(|c| *c == "loss")
        .expect("a loss column");
    lines
        .filter_map(|l| l.split(',').nth(at)?.parse().ok())
        .collect()
}

#[test]
fn a_diverged_run_leaves_save_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old.st");
    std::fs::write(&old, "keep\n").unwrap();
    let save = old.to_str().unwrap();
    let line = args(&TINY, &["--lr", "1e30", "--save", save]);
    let out = ember(&line);
    let (stdout, stderr) = text(&out);
    assert!(
        !out.status.success() && stderr.contains("diverged"),
        "{stderr}"
    );
    assert!(
        stderr.contains("the file keeps its old content"),
        "{stderr}"
    );
    // Not "writing what it had trained" beside "--save not written" (issue 62).
    assert!(!stdout.contains("writing what it had trained"), "{stdout}");
    assert_eq!(std::fs::read(&old).unwrap(), b"keep\n");
    // A new path is not made at all.
    let new = dir.path().join("new.st");
    fails_with(
        &args(&TINY, &["--lr", "1e30", "--save", new.to_str().unwrap()]),
        "no file was made",
    );
    assert!(!new.exists());
}

#[test]
fn a_diverged_run_resumes_from_its_last_finite_checkpoint_at_a_lower_lr() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let ck = ck.to_str().unwrap();
    let metrics = dir.path().join("m.csv");
    let m = metrics.to_str().unwrap();
    // Epoch 1 at the default --lr leaves a checkpoint; epoch 2 at 1e30 diverges.
    succeeds(&args(&TINY, &["--checkpoint", ck]));
    let diverged = args(&TINY, &["--resume", ck, "--epochs", "3", "--lr", "1e30"]);
    let out = ember(&diverged);
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("resuming with --lr 1e30 (the checkpoint's run had --lr 0.01)"),
        "{stdout}"
    );
    // The advice names the way back, and the checkpoint it names is the last finite one; its
    // numbers short (they had all their 31 digits, hostile pass).
    assert!(
        stdout.contains("--lr R (this run had --lr 1e30)"),
        "{stdout}"
    );
    assert!(stdout.contains("step-0000000004"), "{stdout}");
    let newest = checkpoints(std::path::Path::new(ck)).pop().unwrap();
    let newest = newest.file_name().unwrap().to_string_lossy();
    assert_eq!(
        newest, "step-0000000004",
        "a checkpoint of the diverged epoch was written"
    );
    // Back at a lower rate: it trains on to the end, every loss finite.
    let back = args(
        &TINY,
        &[
            "--resume",
            ck,
            "--epochs",
            "3",
            "--lr",
            "0.005",
            "--metrics",
            m,
        ],
    );
    let stdout = succeeds(&back);
    assert!(stdout.contains("resuming with --lr 0.005"), "{stdout}");
    let losses = losses(&metrics);
    assert_eq!(losses.len(), 12, "{losses:?}");
    assert!(losses.iter().all(|l| l.is_finite()), "{losses:?}");
}

#[test]
fn a_run_that_diverges_at_once_writes_no_checkpoint_and_says_none_is_there() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let metrics = dir.path().join("m.csv");
    let more = [
        "--lr",
        "1e30",
        "--checkpoint",
        ck.to_str().unwrap(),
        "--checkpoint-every",
        "1",
        "--metrics",
        metrics.to_str().unwrap(),
    ];
    let out = ember(&args(&TINY, &more));
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{stdout}{stderr}");
    assert!(stderr.contains("diverged"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stdout.contains("go on with --resume"), "{stdout}");
    assert_eq!(
        checkpoints(&ck).len(),
        0,
        "a checkpoint of non-finite parameters was written"
    );
    // The checkpoint write failed the run, and the trace so far is written all the same.
    assert!(!losses(&metrics).is_empty());
}

/// An epoch's last update that diverges has no later step to find it: with one update at
/// `--lr 1e30`, the parameters it leaves are finite (about 1e30) but give an infinite loss.
/// The epoch's end finds it before anything keeps them: `--save` stays as it was, no checkpoint
/// is written, and the exit status is 1 (before, the run printed a finite mean loss, wrote
/// those parameters over `--save` and a checkpoint that counted as sound, and exited 0). With
/// `--accumulate`, the epoch's one update is its last too. With `--checkpoint-every 1`, the
/// checkpoint of that update was written before the epoch's end: it is set aside as
/// `diverged-step-1`, so the run names none to resume.
#[test]
fn a_last_update_that_diverges_is_found_before_save_and_the_checkpoint() {
    // TINY with one batch an epoch, and TINY (4 batches) with one update an epoch.
    let one = [&TINY[..3], &["--batches", "1"], &TINY[5..]].concat();
    let every = args(&one, &["--checkpoint-every", "1"]);
    for base in [one, args(&TINY, &["--accumulate", "4"]), every] {
        let dir = tempfile::tempdir().unwrap();
        let (old, ck) = (dir.path().join("old.st"), dir.path().join("ck"));
        std::fs::write(&old, "keep\n").unwrap();
        let flags = [
            "--lr",
            "1e30",
            "--save",
            old.to_str().unwrap(),
            "--checkpoint",
            ck.to_str().unwrap(),
        ];
        let command = args(&base, &flags);
        let stderr = fails_with(&command, "diverged at the epoch's last update");
        assert!(
            stderr.contains("the file keeps its old content"),
            "{stderr}"
        );
        assert_eq!(std::fs::read(&old).unwrap(), b"keep\n", "{base:?}");
        assert!(
            checkpoints(&ck).is_empty(),
            "{base:?}: {:?}",
            checkpoints(&ck)
        );
        if base.contains(&"--checkpoint-every") {
            assert!(ck.join("diverged-step-0000000001").is_dir(), "{stderr}");
        }
    }
}
