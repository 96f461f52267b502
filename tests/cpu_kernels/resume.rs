//! A resume with other CPU kernels than the checkpoint's run goes on and says so: the bits then
//! differ from one unbroken run's. It was accepted without a word (hostile pass, issue 62),
//! though a job's ranks must match kernels.

use crate::common::cli::{TINY, args, succeeds};

#[test]
fn a_resume_with_other_kernels_says_so_and_one_with_the_same_says_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let ck = ck.to_str().unwrap();
    let run = |kernels: &str, epochs: &str, more: &[&str]| {
        let base = args(&["--cpu-kernels", kernels], &TINY);
        let base = args(&base, &["--optimizer", "adam", "--epochs", epochs]);
        succeeds(&args(&base, more))
    };
    run("flex", "1", &["--checkpoint", ck]);
    let same = run("flex", "2", &["--checkpoint", ck, "--resume", ck]);
    assert!(
        same.contains("resuming from") && !same.contains("--cpu-kernels"),
        "{same}"
    );
    let other = run("onednn", "3", &["--checkpoint", ck, "--resume", ck]);
    assert!(
        other.contains(
            "resuming with --cpu-kernels onednn (the checkpoint's run had --cpu-kernels flex); \
             the numbers go on in these kernels' rounding"
        ),
        "{other}"
    );
}
