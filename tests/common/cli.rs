//! Running the `ember` binary: success and failure checks shared by the CLI tests.

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
