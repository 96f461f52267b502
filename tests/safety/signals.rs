//! SIGINT and SIGTERM finish the batch, write a checkpoint and exit 130 and 143; a save
//! stopped by SIGINT or SIGKILL leaves no temporary behind.

use std::io::{BufRead, BufReader};
use std::path::Path;

use super::common::cli::{TINY, args, strs, succeeds};
use super::runs::{listing, no_temporaries, read_until, resumable, spawn, tensors};

#[test]
fn sigint_and_sigterm_finish_the_batch_write_a_checkpoint_and_exit_130_and_143() {
    let dir = tempfile::tempdir().unwrap();
    let reference = dir.path().join("reference.safetensors");
    succeeds(&strs(&resumable(&dir.path().join("ref-ck"), &reference)));
    for (signal, code) in [("INT", 130), ("TERM", 143)] {
        let checkpoints = dir.path().join(format!("ck-{signal}"));
        let save = dir.path().join(format!("{signal}.safetensors"));
        let mut run = resumable(&checkpoints, &save);
        // Checkpoints only at the end of epochs: the one written here is the signal's.
        let every = run.iter().position(|a| a == "--checkpoint-every").unwrap();
        run.drain(every..every + 2);
        let mut child = spawn(&strs(&run));
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        read_until(&mut lines, "batch 50,");
        run_kill(signal, child.id());
        let rest: Vec<String> = lines.map_while(Result::ok).collect();
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(code), "{rest:?}\n{stderr}");
        assert!(
            rest.iter()
                .any(|l| l.contains(&format!("stopped by SIG{signal}"))),
            "{rest:?}"
        );
        assert!(
            !save.exists(),
            "a stopped run leaves its parameters in the checkpoint"
        );
        let steps: Vec<_> = listing(&checkpoints)
            .into_iter()
            .filter(|name| name.starts_with("step-"))
            .collect();
        assert_eq!(steps.len(), 1, "one checkpoint, the signal's: {steps:?}");
        no_temporaries(&checkpoints);

        let mut resume = run.clone();
        let at = resume.iter().position(|a| a == "--checkpoint").unwrap();
        resume[at] = "--resume".to_string();
        succeeds(&strs(&resume));
        assert_eq!(tensors(&save), tensors(&reference), "SIG{signal}");
    }
}

fn run_kill(signal: &str, pid: u32) {
    let number = match signal {
        "INT" => libc::SIGINT,
        "TERM" => libc::SIGTERM,
        "KILL" => libc::SIGKILL,
        other => panic!("no signal {other} here"),
    };
    let pid = libc::pid_t::try_from(pid).unwrap();
    // SAFETY: kill(2) takes plain integers; the child is ours and not yet reaped.
    assert_eq!(
        unsafe { libc::kill(pid, number) },
        0,
        "kill -{signal} {pid}"
    );
}

#[test]
fn a_save_stopped_by_sigint_or_sigkill_leaves_no_temporary_behind() {
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("big.safetensors");
    // 33.6 M parameters: a 134 MB file, long enough a save to stop inside.
    let big = |save: &Path| {
        spawn(&[
            "train",
            "--device",
            "flex",
            "--batches",
            "1",
            "--batch-size",
            "8",
            "--features",
            "4096",
            "--hidden",
            "4096,4096",
            "--save",
            save.to_str().unwrap(),
        ])
    };
    for (signal, delay_ms) in [("INT", 30), ("INT", 150), ("KILL", 30), ("KILL", 150)] {
        let mut child = big(&save);
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // The save starts right after the epoch's line.
        read_until(&mut lines, "epoch 1:");
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        run_kill(signal, child.id());
        let status = child.wait().unwrap();
        let left = listing(dir.path());
        eprintln!("SIG{signal} {delay_ms} ms after the epoch: {status:?}, left {left:?}");
        if status.success() {
            // The save won the race: the file is whole.
            assert_eq!(left, ["big.safetensors"]);
        } else if signal == "INT" {
            assert_eq!(status.code(), Some(130));
            assert!(left.iter().all(|n| n == "big.safetensors"), "{left:?}");
        } else {
            // SIGKILL runs no code: at most one temporary, every scratch file inside it.
            assert!(
                left.iter()
                    .all(|n| n == "big.safetensors" || n.starts_with(".ember-tmp-")),
                "{left:?}"
            );
            assert!(
                left.iter().filter(|n| n.starts_with('.')).count() <= 1,
                "{left:?}"
            );
        }
        // The next save to the same place removes what a killed one left.
        succeeds(&args(&TINY, &["--save", save.to_str().unwrap()]));
        assert_eq!(listing(dir.path()), ["big.safetensors"]);
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&save).unwrap().permissions(),
        );
        assert_eq!(
            mode & 0o777,
            0o644,
            "a saved file is readable as any file a user writes"
        );
        std::fs::remove_file(&save).unwrap();
    }
}

#[test]
fn a_signal_inside_an_epochs_last_group_stops_the_run_at_the_epochs_end() {
    // 150 batches an epoch, one update of them all: no group ends before the epoch does (and
    // the run has 2 updates, too few for a warm-up).
    let with_groups = |run: Vec<String>| -> Vec<String> {
        let mut run = run;
        let at = run.iter().position(|a| a == "--accumulate").unwrap();
        run[at + 1] = "200".to_string();
        let at = run.iter().position(|a| a == "--lr-schedule").unwrap();
        run[at + 1] = "cosine".to_string();
        run
    };
    let dir = tempfile::tempdir().unwrap();
    let reference = dir.path().join("reference.safetensors");
    succeeds(&strs(&with_groups(resumable(
        &dir.path().join("ref-ck"),
        &reference,
    ))));
    let checkpoints = dir.path().join("ck");
    let save = dir.path().join("resumed.safetensors");
    let run = with_groups(resumable(&checkpoints, &save));
    let mut child = spawn(&strs(&run));
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    read_until(&mut lines, "batch 50,");
    run_kill("INT", child.id());
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130), "{rest:?}");
    // Stopped at the end of the first epoch, its 150 batches in the checkpoint.
    assert!(
        rest.iter().any(|l| l.contains("stopped by SIGINT")),
        "{rest:?}"
    );
    let steps: Vec<String> = listing(&checkpoints)
        .into_iter()
        .filter(|name| name.starts_with("step-"))
        .collect();
    assert_eq!(steps.last().map(String::as_str), Some("step-0000000150"));
    let mut resume = run.clone();
    let at = resume.iter().position(|a| a == "--checkpoint").unwrap();
    resume[at] = "--resume".to_string();
    succeeds(&strs(&resume));
    assert_eq!(tensors(&save), tensors(&reference));
}

/// `compare` keeps its runs' metrics in a scratch directory in `--out` until it reads them back:
/// Ctrl-C ends the comparison at once with 130 and removes it; after a SIGKILL, which runs no
/// code, the next comparison into the same `--out` removes what the killed one left. Before,
/// `.ember-compare-PID/` stayed in `--out` after either.
#[test]
fn a_comparison_stopped_by_sigint_or_sigkill_leaves_no_scratch_behind() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("plots");
    let compare = |batches: &str| {
        let out = out.to_str().unwrap().to_string();
        let flags = [
            "compare",
            "--device",
            "flex",
            "--batches",
            batches,
            "--batch-size",
            "64",
            "--features",
            "64",
            "--hidden",
            "64",
            "--out",
            &out,
        ];
        flags.map(String::from)
    };
    for signal in ["INT", "KILL"] {
        let mut child = spawn(&strs(&compare("3000")));
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // The second run has started: the first one's metrics are in the scratch directory.
        read_until(&mut lines, "[2/3]");
        assert!(
            listing(&out).iter().any(|n| n.starts_with(".ember-tmp-")),
            "the scratch directory is in --out: {:?}",
            listing(&out)
        );
        run_kill(signal, child.id());
        let status = child.wait().unwrap();
        if signal == "INT" {
            assert_eq!(status.code(), Some(130), "SIGINT");
            no_temporaries(&out);
        } else {
            // The orphaned run finishes its batch on SIGTERM (PR_SET_PDEATHSIG) and writes
            // its metrics into the scratch directory: let it end first.
            std::thread::sleep(std::time::Duration::from_secs(2));
            succeeds(&strs(&compare("4")));
            no_temporaries(&out);
        }
    }
}

/// A second signal stops the run at once, and names the newest checkpoint as it found it: it
/// said only "stopped at once", where the run could go on from its checkpoint (hostile pass).
#[test]
fn a_second_signal_stops_at_once_naming_the_last_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    // Batches of a tenth of a second or more: the second signal comes inside one.
    let shape = [
        "--batch-size",
        "2048",
        "--features",
        "1024",
        "--hidden",
        "2048",
    ];
    let flags = ["--batches", "100000", "--checkpoint", ck.to_str().unwrap()];
    let mut child = spawn(&[&TINY[..3], &shape, &flags, &["--checkpoint-every", "3"]].concat());
    let stdout = child.stdout.take().unwrap();
    let drained = std::thread::spawn(move || std::io::read_to_string(stdout));
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let start = std::time::Instant::now();
    while super::common::cli::checkpoints(&ck).is_empty() {
        assert!(start.elapsed().as_secs() < 120, "no checkpoint after 120 s");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The second signal once the first is taken: two sent 10 ms apart arrived as one on a
    // loaded machine (a signal pending twice is pending once), and the run stopped as a first
    // signal stops it.
    run_kill("INT", child.id());
    let mut stderr = read_until(&mut lines, "finishing the batches in flight");
    run_kill("INT", child.id());
    for line in lines {
        stderr.push_str(&line.unwrap());
        stderr.push('\n');
    }
    let status = child.wait().unwrap();
    drained.join().unwrap().unwrap();
    assert_eq!(status.code(), Some(130), "{stderr}");
    let newest = super::common::cli::checkpoints(&ck).pop().unwrap();
    assert!(
        stderr.contains(&format!(
            "SIGINT: stopped at once; a file being written keeps its old content; its last \
             checkpoint is {}: go on with --resume {}",
            newest.display(),
            ck.display()
        )),
        "{stderr}"
    );
}
