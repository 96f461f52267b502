//! A signal to a job: its ranks cannot agree on a batch to stop at, so each ends at once, and
//! rank 0 says what the job keeps.

use super::common::cli::text;
use super::distributed::{chapter_job, mpirun};

/// SIGTERM to `mpirun` ended the job with exit 1 and no word from ember (issue 62): rank 0 now
/// says the job ended at once and names the checkpoints to go on from, which are whole.
#[test]
fn a_signal_to_mpirun_ends_the_job_naming_what_it_keeps() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let ck = ck.to_str().unwrap();
    let tiny = [
        "--batches",
        "100000",
        "--batch-size",
        "16",
        "--features",
        "8",
    ];
    let job = chapter_job(ck, "20", &[&tiny[..], &["--hidden", "4"]].concat());
    let run = mpirun(2, &job)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("mpirun runs (Debian's openmpi-bin: .ci/run installs it)");
    let start = std::time::Instant::now();
    while super::common::cli::checkpoints(std::path::Path::new(ck)).is_empty() {
        assert!(start.elapsed().as_secs() < 120, "no checkpoint after 120 s");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &run.id().to_string()])
        .status();
    assert!(sent.unwrap().success());
    let out = run.wait_with_output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{stdout}{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    // The newest checkpoint as the signal found it, named (it said "its checkpoints are kept",
    // also where none was written yet, hostile pass).
    let newest = super::common::cli::checkpoints(std::path::Path::new(ck))
        .pop()
        .unwrap();
    assert!(newest.join("state.json").is_file(), "{newest:?}");
    assert!(
        stderr.contains("SIGTERM: the job ends at once")
            && stderr.contains(&format!(
                "its last checkpoint is {}: go on with --resume {ck}",
                newest.display()
            )),
        "{stderr}"
    );
}
