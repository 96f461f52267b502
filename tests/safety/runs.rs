//! Shared by the safety tests: `ember` as a child process to read from and stop, the run
//! that is stopped and resumed, and what runs leave on disk (tensors, listings, temporaries).

use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Spawns ember with `args`, its output piped.
pub fn spawn(args: &[&str]) -> Child {
    spawn_in(Path::new("."), args)
}

/// [`spawn`] with `dir` as its working directory.
pub fn spawn_in(dir: &Path, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_ember"))
        .current_dir(dir)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Reads the child's output until a line containing `needle`; returns the lines read.
pub fn read_until(
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
    needle: &str,
) -> String {
    let mut seen = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        seen.push_str(&line);
        seen.push('\n');
        if line.contains(needle) {
            return seen;
        }
    }
    panic!("no line with {needle:?} in:\n{seen}");
}

/// Enough work to stop in the middle: up to 3 epochs of 150 batches, a checkpoint every 7,
/// with a recipe whose state a resume must carry: AdamW's moments, a cosine schedule with
/// warm-up (its rate from the update's number), global-norm clipping, gradients summed over 3
/// batches (a checkpoint due inside a group waits for its end), and early stopping, which ends
/// the run after epoch 2 (the loss does not fall by 1 in an epoch): a resumed run must replay
/// its state and stop there too.
pub fn resumable(checkpoints: &Path, save: &Path) -> Vec<String> {
    [
        "train",
        "--optimizer",
        "adamw",
        "--lr",
        "0.002",
        "--lr-schedule",
        "cosine:warmup=30",
        "--clip-norm",
        "0.5",
        "--accumulate",
        "3",
        "--device",
        "flex",
        "--batches",
        "150",
        "--batch-size",
        "128",
        "--features",
        "128",
        "--hidden",
        "128,64",
        "--epochs",
        "3",
        "--early-stop",
        "loss:1:1",
        "--checkpoint",
        checkpoints.to_str().unwrap(),
        "--checkpoint-every",
        "7",
        "--save",
        save.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec()
}

pub use super::common::params::tensors;

/// Every entry of `dir`, sorted.
pub fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// No temporary of any writer is left anywhere under `dir`.
pub fn no_temporaries(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        assert!(!name.starts_with(".ember-tmp-"), "left behind: {name}");
        if entry.path().is_dir() {
            no_temporaries(&entry.path());
        }
    }
}
