//! `mpirun -np N ember train --distributed mpi`: jobs of 2 and 3 ranks on this host, started by
//! Open MPI's own launcher as a user starts them. They need `mpirun` (Debian's openmpi-bin,
//! which `.ci/run` installs) and fail without it.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::cli::{csv_rows, ember, text};
use crate::common::params::{max_difference, values};

/// `mpirun -np N ember ARGS`, as root and with more ranks than cores allowed.
pub(super) fn mpirun(np: usize, args: &[&str]) -> Command {
    let mut command = Command::new("mpirun");
    command
        .args(["--allow-run-as-root", "--oversubscribe", "-np"])
        .arg(np.to_string())
        .arg(env!("CARGO_BIN_EXE_ember"))
        .args(args);
    command
}

/// A job of two ranks started with other arguments (Open MPI's MPMD form, `A : B`).
pub(super) fn two_ranks(first: &[&str], second: &[&str]) -> Command {
    let mut command = Command::new("mpirun");
    command
        .args(["--allow-run-as-root", "--oversubscribe", "-np", "1"])
        .arg(env!("CARGO_BIN_EXE_ember"))
        .args(first)
        .args([":", "-np", "1"])
        .arg(env!("CARGO_BIN_EXE_ember"))
        .args(second);
    command
}

pub(super) fn output(mut command: Command) -> Output {
    command
        .output()
        .expect("mpirun runs (Debian's openmpi-bin: .ci/run installs it)")
}

pub(super) fn job_succeeds(np: usize, args: &[&str]) -> String {
    let out = output(mpirun(np, args));
    let (stdout, stderr) = text(&out);
    assert!(
        out.status.success(),
        "-np {np} {args:?} failed:\n{stdout}{stderr}"
    );
    stdout
}

/// A table of 3 classes, 4 features, `rows` rows.
pub(super) fn table(dir: &Path, rows: usize) -> String {
    let csv = dir.join("table.csv");
    let lines: Vec<String> = (0..rows)
        .map(|i| {
            let f = |k: usize| ((i * (k + 3) * 37 + k * 11) % 101) as f32 / 50.0 - 1.0;
            format!("{},{},{},{},{}", f(0), f(1), f(2), f(3), i % 3)
        })
        .collect();
    std::fs::write(&csv, format!("a,b,c,d,label\n{}\n", lines.join("\n"))).unwrap();
    format!("csv:{}", csv.display())
}

/// The epoch lines' mean losses.
fn losses(stdout: &str) -> Vec<f64> {
    stdout
        .lines()
        .filter_map(|l| l.split("mean loss ").nth(1))
        .map(|rest| rest.split(',').next().unwrap().parse().unwrap())
        .collect()
}

#[test]
fn n_ranks_of_batch_b_step_as_one_process_of_batch_n_b() {
    let dir = tempfile::tempdir().unwrap();
    let data = table(dir.path(), 120);
    for optimizer in ["sgd", "adam"] {
        // (Adam divides each gradient by its own running scale, which makes a unit whose
        // gradient is near 0 step by its rounding: at 0.02 one such unit differs by 2e-5.)
        let lr = if optimizer == "sgd" { "0.5" } else { "0.01" };
        let train = |batch: usize, save: &Path| -> Vec<String> {
            [
                "train",
                "--device",
                "flex",
                "--data",
                &data,
                "--classes",
                "3",
                "--model",
                "mlp:16",
                "--optimizer",
                optimizer,
                "--lr",
                lr,
                "--seed",
                "4",
                "--batch-size",
                &batch.to_string(),
                "--save",
                save.to_str().unwrap(),
                "--metrics",
                save.with_extension("csv").to_str().unwrap(),
            ]
            .iter()
            .map(|a| a.to_string())
            .collect()
        };
        let alone_path = dir.path().join(format!("{optimizer}-alone.safetensors"));
        let alone_args = train(24, &alone_path);
        let alone_args: Vec<&str> = alone_args.iter().map(String::as_str).collect();
        let out = ember(&alone_args);
        let (alone_out, stderr) = text(&out);
        assert!(out.status.success(), "{alone_out}{stderr}");
        let alone = values(&alone_path);
        // 120 examples: 5 steps of 24 alone, of 12 on each of 2 ranks, of 8 on each of 3.
        for np in [2, 3] {
            let path = dir.path().join(format!("{optimizer}-{np}.safetensors"));
            let batch = 24 / np;
            let mut job_args = train(batch, &path);
            job_args.extend(["--distributed".to_string(), "mpi".to_string()]);
            let job_args: Vec<&str> = job_args.iter().map(String::as_str).collect();
            let stdout = job_succeeds(np, &job_args);
            // One rank prints, for the job.
            assert_eq!(
                stdout.matches("epoch 1: time per epoch").count(),
                1,
                "{stdout}"
            );
            let job = values(&path);
            let difference = max_difference(&alone, &job);
            assert!(
                difference < 1e-5,
                "{optimizer}, {np} ranks of batch {batch} against one of 24: parameters differ \
                 by {difference}"
            );
            assert!(alone.iter().any(|v| *v != 0.0));
            // The printed loss is the job's: the one process's mean over the same examples.
            let (a, j) = (losses(&alone_out), losses(&stdout));
            assert_eq!(a.len(), 1);
            assert!((a[0] - j[0]).abs() < 1e-5, "{a:?} alone, {j:?} for the job");
            // So is each batch's in the trace, and the training accuracy.
            let (a, j) = (
                csv_rows(&alone_path.with_extension("csv")),
                csv_rows(&path.with_extension("csv")),
            );
            assert_eq!(a.len(), 5);
            assert_eq!(j.len(), 5, "rank 0's trace, a row a step");
            for (a, j) in a.iter().zip(&j) {
                let (a, j): (f64, f64) = (a["loss"].parse().unwrap(), j["loss"].parse().unwrap());
                assert!(
                    (a - j).abs() < 1e-5,
                    "batch loss {a} alone, {j} for the job"
                );
            }
            let accuracy = |out: &str| {
                out.lines()
                    .find(|l| l.contains("train_acc"))
                    .map(str::to_string)
            };
            assert_eq!(accuracy(&alone_out), accuracy(&stdout));
        }
    }
}

/// The synthetic chapter job with checkpoints every `every` batches, in `ck`.
pub(super) fn chapter_job<'a>(ck: &'a str, every: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "train",
        "--device",
        "flex",
        "--distributed",
        "mpi",
        "--checkpoint-every",
        every,
    ];
    args.extend_from_slice(more);
    args.extend_from_slice(&["--checkpoint", ck]);
    args
}

#[test]
fn a_resumed_job_goes_on_bit_for_bit_and_must_keep_its_size() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let (whole, resumed) = (path("whole.safetensors"), path("resumed.safetensors"));
    let (ck_whole, ck_resumed) = (path("ck-whole"), path("ck-resumed"));
    let small = [
        "--features",
        "64",
        "--hidden",
        "256,256",
        "--batch-size",
        "64",
        "--batches",
        "12",
        "--epochs",
        "2",
        "--optimizer",
        "adam",
        "--lr",
        "0.001",
        // Metrics in a job's checkpoints: their sums are gathered from every rank, and a
        // gather of empty sums (right after an epoch's end) was fatal in Open MPI.
        "--eval",
        "mae,mse",
    ];
    let mut once = small.to_vec();
    once.extend_from_slice(&["--save", &whole]);
    let whole_out = job_succeeds(2, &chapter_job(&ck_whole, "5", &once));
    // Step 20 (of the last two kept) is batch 8 of epoch 2: the job goes on inside an epoch.
    let step = format!("{ck_whole}/step-0000000020");
    assert!(
        Path::new(&step).is_dir(),
        "{:?}",
        crate::common::cli::checkpoints(Path::new(&ck_whole))
    );
    let mut args = small.to_vec();
    args.extend_from_slice(&["--resume", &step, "--save", &resumed]);
    let stdout = job_succeeds(2, &chapter_job(&ck_resumed, "5", &args));
    assert!(stdout.contains("resuming from"), "{stdout}");
    // The resumed epoch's mean loss is the job's over all its batches, those before the
    // resume included (the checkpoint carries the job's losses, not rank 0's).
    let epoch_2 = |out: &str| losses(out).last().copied();
    assert_eq!(
        epoch_2(&stdout),
        epoch_2(&whole_out),
        "{stdout}\n{whole_out}"
    );
    let metrics = |out: &str| {
        let lines = out.lines().filter(|line| line.contains("train_mae"));
        lines.map(str::to_string).collect::<Vec<_>>()
    };
    assert_eq!(metrics(&stdout).last(), metrics(&whole_out).last());
    assert_eq!(metrics(&whole_out).len(), 2, "{whole_out}");
    assert_eq!(
        std::fs::read(&whole).unwrap(),
        std::fs::read(&resumed).unwrap(),
        "the resumed job's parameters are the uninterrupted one's, bit for bit"
    );
    // Another size would split the data otherwise: refused, naming the flag, on every rank
    // and without a hang.
    let elsewhere = path("ck-3");
    let out = output(mpirun(3, &chapter_job(&elsewhere, "5", &args)));
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(
        stderr.contains(
            "written by a job of 2 ranks (mpirun -np 2), and this one is a job of 3 ranks \
             (mpirun -np 3)"
        ),
        "{stderr}"
    );
}

/// The pid of rank `rank` among `mpirun`'s processes, from its environment.
fn rank_pid(mpirun: u32, rank: usize) -> Option<u32> {
    let wanted = format!("OMPI_COMM_WORLD_RANK={rank}");
    for entry in std::fs::read_dir("/proc").ok()? {
        let Ok(pid) = entry.ok()?.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let parent = ember::io::proc_stat(pid).and_then(|f| f.get(1)?.parse::<u32>().ok());
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let has = environ
            .split(|b| *b == 0)
            .any(|var| var == wanted.as_bytes());
        if parent == Some(mpirun) && has {
            return Some(pid);
        }
    }
    None
}

#[test]
fn a_killed_rank_ends_the_job_with_an_error_and_the_checkpoint_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let ck = ck.to_str().unwrap();
    // About 20 ms a step on 2 cores: the job runs for seconds after its first checkpoint.
    let long = [
        "--batches",
        "250",
        "--epochs",
        "1",
        "--features",
        "256",
        "--hidden",
        "1024,1024",
        "--batch-size",
        "256",
    ];
    let mut job = mpirun(2, &chapter_job(ck, "20", &long));
    let mut child = job
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mpirun runs (Debian's openmpi-bin)");
    // Once the job has written a checkpoint, rank 1 is killed as the OOM killer would.
    let deadline = Instant::now() + Duration::from_secs(120);
    while crate::common::cli::checkpoints(Path::new(ck)).is_empty() {
        assert!(Instant::now() < deadline, "no checkpoint within 2 minutes");
        assert!(child.try_wait().unwrap().is_none(), "the job ended early");
        std::thread::sleep(Duration::from_millis(50));
    }
    let child_id = child.id();
    let victim = rank_pid(child_id, 1).expect("rank 1 is a child of mpirun");
    let killed = Instant::now();
    assert_eq!(unsafe { libc::kill(victim as i32, libc::SIGKILL) }, 0);
    // The other rank does not hang: the job ends, failed, within a bounded time.
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if killed.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the job still ran 60 s after rank 1 was killed");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = child.wait_with_output().unwrap();
    let (_, stderr) = text(&out);
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("signal 9"),
        "mpirun names the signal:\n{stderr}"
    );
    // The checkpoint is intact: the job goes on from it and ends.
    let mut resume = chapter_job(ck, "20", &long);
    resume.extend_from_slice(&["--resume", ck]);
    let out = output(mpirun(2, &resume));
    let (stdout, stderr) = text(&out);
    let holders: Vec<String> = (0..2)
        .filter_map(|r| rank_pid(child_id, r))
        .map(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default())
        .collect();
    assert!(
        out.status.success(),
        "{stdout}{stderr}\nthe killed job's ranks: {holders:?}"
    );
    assert!(stdout.contains("resuming from"), "{stdout}");
    assert!(stdout.contains("epoch 1: time per epoch"), "{stdout}");
}

#[test]
fn the_trace_shows_each_ranks_all_reduce_inside_its_step_and_what_each_policy_waits_for() {
    let dir = tempfile::tempdir().unwrap();
    for policy in ["barrier", "t+2"] {
        let csv = dir.path().join(format!("{policy}.csv"));
        let json = dir.path().join(format!("{policy}.json"));
        job_succeeds(
            2,
            &[
                "train",
                "--device",
                "flex",
                "--features",
                "64",
                "--hidden",
                "256,256",
                "--batch-size",
                "64",
                "--batches",
                "30",
                "--sync",
                policy,
                "--distributed",
                "mpi",
                "--metrics",
                csv.to_str().unwrap(),
                "--profile",
                json.to_str().unwrap(),
            ],
        );
        let rows = csv_rows(&csv);
        assert_eq!(rows.len(), 30);
        let at = |row: &std::collections::BTreeMap<String, String>, key: &str| -> f64 {
            row[key]
                .parse()
                .unwrap_or_else(|_| panic!("{policy}: {key} in {row:?}"))
        };
        let mut overlapped = 0;
        for (t, row) in rows.iter().enumerate() {
            // Each step's all-reduce lies between its issue and its completion.
            let (start, end) = (at(row, "allreduce_start"), at(row, "allreduce_end"));
            assert!(
                at(row, "issue_end") <= start && start <= end,
                "{policy} {t}: {row:?}"
            );
            assert!(end <= at(row, "done"), "{policy} {t}: {row:?}");
            if let Some(next) = rows.get(t + 1) {
                // The frontend issued batch t+1 while batch t's gradients were summed.
                overlapped += usize::from(at(next, "issue_end") < end);
            }
            if policy == "t+2" && t >= 2 {
                // ... but not batch t+2: it waits for batch t's step, all-reduce included.
                let before = at(&rows[t - 2], "allreduce_end");
                assert!(
                    at(row, "issue_end") >= before,
                    "{policy} {t}: issued too early"
                );
            }
        }
        match policy {
            // The barrier waits for each step, its all-reduce included, before the next.
            "barrier" => assert_eq!(overlapped, 0),
            // t+2 lets the next batch go while this one's gradients travel.
            _ => assert!(overlapped > 0, "t+2 never issued during an all-reduce"),
        }
        let profile: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let slices = profile["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["name"] == "all-reduce")
            .count();
        assert_eq!(
            slices, 30,
            "{policy}: an all-reduce slice a step in the profile"
        );
    }
}
