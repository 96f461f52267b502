//! Running the `ember` binary: success and failure checks shared by the CLI tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs the ember binary with `args`.
pub fn ember(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(args)
        .output()
        .expect("running ember")
}

pub fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Runs ember with `args`, expects success, and returns the standard output.
pub fn succeeds(args: &[&str]) -> String {
    let out = ember(args);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{args:?} failed:\n{stdout}{stderr}");
    stdout
}

/// Runs ember with `args`, expects a non-zero exit, an error containing `needle`, no panic;
/// returns the error output.
pub fn fails_with(args: &[&str], needle: &str) -> String {
    let out = ember(args);
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{args:?} should fail:\n{stdout}");
    assert!(
        stderr.contains(needle),
        "{args:?}: expected {needle:?} in:\n{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{args:?} panicked:\n{stderr}");
    stderr
}

/// `ember train` for a few milliseconds: 4 synthetic batches of 32 examples of 8 features,
/// the MLP 8-4-1, on flex.
pub const TINY: [&str; 11] = [
    "train",
    "--device",
    "flex",
    "--batches",
    "4",
    "--batch-size",
    "32",
    "--features",
    "8",
    "--hidden",
    "4",
];

/// `base`, then `more`.
pub fn args<'a>(base: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
    base.iter().chain(more).copied().collect()
}

/// Owned arguments as the `&str`s the helpers above take.
pub fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// The checkpoints in the directory `ck` (its `step-N` entries), oldest first; none where the
/// directory is missing.
pub fn checkpoints(ck: &Path) -> Vec<PathBuf> {
    let mut steps: Vec<PathBuf> = std::fs::read_dir(ck)
        .into_iter()
        .flatten()
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
    steps
}

/// A CSV file written by ember (`--metrics` and its epochs' file), one map a row: column to
/// cell.
pub fn csv_rows(path: &Path) -> Vec<std::collections::BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines
        .map(|line| {
            header
                .iter()
                .zip(line.split(','))
                .map(|(h, c)| (h.to_string(), c.to_string()))
                .collect()
        })
        .collect()
}
