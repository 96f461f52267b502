//! Resuming to the same bits: CLI runs (a schedule, clipping, accumulation, early stopping)
//! killed with SIGKILL at several points, and a library
//! run with Adam, Dropout and BatchNorm from any of its checkpoints, end where a run never
//! stopped ends; a resume with other flags is refused, naming them.

use std::io::{BufRead, BufReader};
use std::path::Path;

use burn::prelude::*;
use ember::{Block, Dense, Init, L2Loss, Optimizer, Sequential};
use ember_datasets::Synthetic;
use ember_trainer::fit::{Fit, SyntheticEpochs};

use super::common::cli::{TINY, args, fails_with, strs, succeeds};
use super::runs::{listing, no_temporaries, read_until, resumable, spawn, tensors};

#[test]
fn runs_killed_at_several_points_resume_to_the_same_bits_as_a_run_never_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let reference = dir.path().join("reference.safetensors");
    let stdout = succeeds(&strs(&resumable(&dir.path().join("ref-ck"), &reference)));
    // The run ends by early stopping, after epoch 2 of 3: the resumed runs must too.
    assert!(
        stdout.contains("early stop: loss has not improved by more than 1"),
        "{stdout}"
    );
    assert!(!stdout.contains("epoch 3:"), "{stdout}");
    let expected = tensors(&reference);

    // Where to kill: before any checkpoint, after a line of progress in each epoch, and after
    // a few milliseconds more, so that some kills land inside a step or a checkpoint's write.
    let points: [(&str, u64); 5] = [
        ("training", 0),
        ("batch 50,", 0),
        ("batch 100,", 3),
        ("epoch 1:", 0),
        ("epoch 1:", 11),
    ];
    for (i, (line, extra_ms)) in points.into_iter().enumerate() {
        let checkpoints = dir.path().join(format!("ck{i}"));
        let save = dir.path().join(format!("resumed{i}.safetensors"));
        let run = resumable(&checkpoints, &save);
        let mut child = spawn(&strs(&run));
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        read_until(&mut lines, line);
        std::thread::sleep(std::time::Duration::from_millis(extra_ms));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!save.exists(), "killed before the end, at {line:?}");

        let mut resume = run.clone();
        let at = resume.iter().position(|a| a == "--checkpoint").unwrap();
        resume[at] = "--resume".to_string();
        let out = succeeds(&strs(&resume));
        eprintln!(
            "kill point {i} ({line:?} + {extra_ms} ms): {}",
            out.lines()
                .find(|l| l.contains("resuming") || l.contains("no complete checkpoint"))
                .unwrap_or("?")
        );
        assert_eq!(
            tensors(&save),
            expected,
            "kill point {i}: {line:?} + {extra_ms} ms"
        );
        no_temporaries(&checkpoints);
    }
}

/// A resumed run's optimizer state is restored where the run trains, never on burn's default
/// device: burn-optim creates it on `Device::default()`, which in a build with `cuda` is the
/// card, so resuming an Adam run on flex panicked on a machine without a driver (issue 62).
/// `BURN_DEVICE` sets that default; naming a backend this build lacks makes burn panic the
/// moment anything reaches for it, which is what the CUDA build met.
#[test]
fn a_resume_with_optimizer_state_touches_no_device_it_was_not_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let checkpoints = dir.path().join("ck");
    let ck = checkpoints.to_str().unwrap();
    let save = dir.path().join("m.safetensors");
    let run = args(&TINY, &["--optimizer", "adam", "--checkpoint", ck]);
    succeeds(&run);
    let resume = args(
        &TINY,
        &[
            "--optimizer",
            "adam",
            "--epochs",
            "2",
            "--resume",
            ck,
            "--save",
        ],
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(&resume)
        .arg(&save)
        .env("BURN_DEVICE", "cuda")
        .output()
        .unwrap();
    let (stdout, stderr) = super::common::cli::text(&out);
    assert!(
        out.status.success() && !stderr.contains("panicked"),
        "{stdout}{stderr}"
    );
    assert!(stdout.contains("resuming"), "{stdout}");
    assert!(save.is_file());
}

#[test]
fn a_resume_with_other_flags_is_refused_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let checkpoints = dir.path().join("ck");
    let ck = checkpoints.to_str().unwrap();
    succeeds(&args(&TINY, &["--checkpoint", ck]));
    let err = fails_with(&args(&TINY, &["--resume", ck, "--seed", "3"]), "--seed 0");
    assert!(err.contains("this one has --seed 3"), "{err}");
    // Every flag that differs is named at once (b70e607 named one per attempt); --lr may
    // change, and is not among them.
    let mut other = TINY.to_vec();
    let at = other.iter().position(|a| *a == "--batch-size").unwrap();
    other[at + 1] = "16";
    other.extend(["--resume", ck, "--lr", "0.5", "--seed", "3"]);
    let err = fails_with(&other, "--seed 3");
    assert!(err.contains("this one has --batch-size 16"), "{err}");
    assert!(!err.contains("--lr 0.5"), "{err}");
    // --load beside --resume would be ignored: it is refused (b70e607 ignored it).
    let params = dir.path().join("m.safetensors");
    std::fs::write(&params, b"").unwrap();
    fails_with(
        &args(&TINY, &["--resume", ck, "--load", params.to_str().unwrap()]),
        "leave --load out",
    );
    fails_with(
        &args(
            &TINY,
            &["--resume", dir.path().join("none").to_str().unwrap()],
        ),
        "no such directory",
    );
}

#[test]
fn a_library_run_with_adam_dropout_and_batchnorm_resumes_from_any_checkpoint_to_the_same_bits() {
    use ember::{Activation, BatchNorm, Dropout};
    use ember_trainer::checkpoint::{Checkpoint, Checkpointing};

    let device = Device::flex().autodiff();
    // Initialized once: burn's generator is one per process, and the tests beside this one
    // draw from it too, so a second `device.seed(5)` and initialization need not repeat it.
    let net: Sequential = Sequential::new()
        .add(Dense::new(32).activation(Activation::Relu))
        .add(BatchNorm::new())
        .add(Dropout::new(0.5))
        .add(Dense::new(1))
        .initialize(Init::default(), &device);
    let net = net.infer_shape(Tensor::<2>::ones([1, 8], &device)).unwrap();
    let build = || -> (Sequential, Optimizer) {
        let trainer = Optimizer::new(&net, "adam", 0.01).unwrap();
        // A copy with running statistics of its own (a clone's are shared).
        (net.valid().train(), trainer)
    };
    let data = || SyntheticEpochs::new(Synthetic::chapter(16, 8, 1), 6);
    let saved = |net: &Sequential, name: &str, dir: &Path| {
        let path = dir.join(name);
        net.save_parameters(&path).unwrap();
        tensors(&path)
    };
    let dir = tempfile::tempdir().unwrap();
    let checkpoints = dir.path().join("ck");
    let mut every = Checkpointing::new(&checkpoints).every(4);
    every.keep = 100;
    let (net, trainer) = build();
    let full = Fit::new(net, L2Loss, trainer, &device)
        .epochs(3)
        .seed(9)
        .checkpoint(every)
        .run(&mut data())
        .unwrap();
    let expected = saved(&full.net, "full.safetensors", dir.path());
    // Without the per-step seed, Dropout draws other masks and the result differs: the
    // comparison below can fail.
    let (net, trainer) = build();
    let unseeded = Fit::new(net, L2Loss, trainer, &device)
        .epochs(3)
        .run(&mut data())
        .unwrap();
    assert_ne!(
        saved(&unseeded.net, "unseeded.safetensors", dir.path()),
        expected
    );

    let steps: Vec<String> = listing(&checkpoints)
        .into_iter()
        .filter(|name| name.starts_with("step-"))
        .collect();
    assert_eq!(
        steps.len(),
        5,
        "steps 4, 8, 12, 16 and the run's end, 18: {steps:?}"
    );
    for step in steps {
        let checkpoint = Checkpoint::open(&checkpoints.join(&step)).unwrap();
        let (net, trainer) = build();
        let resumed = Fit::new(net, L2Loss, trainer, &device)
            .epochs(3)
            .resume(checkpoint)
            .run(&mut data())
            .unwrap();
        assert_eq!(
            saved(&resumed.net, "resumed.safetensors", dir.path()),
            expected,
            "resumed from {step}"
        );
        assert_eq!(resumed.trace.batches.len(), 18);
        let losses = |t: &ember_trainer::trace::Trace| -> Vec<f32> {
            t.batches.iter().map(|b| b.loss).collect()
        };
        assert_eq!(losses(&resumed.trace), losses(&full.trace), "{step}");
    }
}

/// A run resumed from a checkpoint at an epoch's last batch, taken before the epoch's end was
/// recorded, ends that epoch with no batch of its own. Its row in `<stem>.epochs.csv` counts
/// the carried batches' time: it had a time near 0, which replaced the row the stopped run
/// had written (hostile pass, issue 62).
#[test]
fn an_epoch_resumed_at_its_last_batch_keeps_its_batches_time() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let metrics = dir.path().join("m.csv");
    // TINY's device and batches, with batches large enough to take time.
    let shape = ["--batch-size", "256", "--features", "64", "--hidden", "256"];
    let base = args(&args(&TINY[..5], &shape), &["--epochs", "2"]);
    let ck_arg = ck.to_str().unwrap();
    succeeds(&args(
        &base,
        &["--checkpoint", ck_arg, "--checkpoint-every", "4"],
    ));
    // The run as if stopped before its second checkpoint.
    let mut steps = super::common::cli::checkpoints(&ck);
    std::fs::remove_dir_all(steps.pop().unwrap()).unwrap();
    let step_4 = steps.pop().unwrap();
    let (resume, metrics_arg) = (step_4.to_str().unwrap(), metrics.to_str().unwrap());
    succeeds(&args(
        &base,
        &["--resume", resume, "--metrics", metrics_arg],
    ));

    let cell = |row: &std::collections::BTreeMap<String, String>, column: &str| -> f64 {
        row[column].parse().unwrap()
    };
    let batches = super::common::cli::csv_rows(&metrics);
    let carried: Vec<_> = batches.iter().filter(|r| r["epoch"] == "0").collect();
    assert_eq!(carried.len(), 4, "{batches:?}");
    let first = cell(carried[0], "issue_start");
    let done = cell(carried[3], "done") - first;
    let issued = cell(carried[3], "issue_end") - first;
    let epochs = super::common::cli::csv_rows(&metrics.with_file_name("m.epochs.csv"));
    let row = &epochs[0];
    assert!(
        cell(row, "time") >= done && cell(row, "issue_time") >= issued && done > 0.0,
        "epoch 0's row {row:?}: its batches took {done} s from the first issue to the last \
         completion, and {issued} s to the last issue"
    );
}

/// A resume compares what the run trained on by content, not `--data` as typed: the same file
/// named otherwise was refused, and another file under the same name was trained on in
/// silence (hostile pass, issue 62).
#[test]
fn a_resume_compares_the_datas_content_not_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let (sub, ck) = (dir.path().join("a"), dir.path().join("ck"));
    std::fs::create_dir(&sub).unwrap();
    let csv = sub.join("table.csv");
    let table = |rows: usize| -> String {
        (0..rows)
            .map(|i| format!("{},{},{}\n", i % 7, i % 5, i % 3))
            .collect()
    };
    std::fs::write(&csv, table(90)).unwrap();
    let run = |data: String, epochs: &str, more: &[&str]| -> Vec<String> {
        let flags = [
            "train",
            "--device",
            "flex",
            "--classes",
            "3",
            "--batch-size",
            "10",
        ];
        let data = ["--data", &data, "--epochs", epochs];
        [&flags[..], &data, more]
            .concat()
            .iter()
            .map(|a| a.to_string())
            .collect()
    };
    let (plain, other_spelling) = (
        format!("csv:{}", csv.display()),
        format!("csv:{}/../a/./table.csv", sub.display()),
    );
    let ck_arg = ck.to_str().unwrap();
    succeeds(&strs(&run(plain.clone(), "1", &["--checkpoint", ck_arg])));
    let resume = ["--resume", ck_arg];
    succeeds(&strs(&run(other_spelling, "2", &resume)));
    // The same name, other rows.
    std::fs::write(&csv, table(60)).unwrap();
    fails_with(
        &strs(&run(plain, "3", &resume)),
        "it was written by a run with --data's content 540 bytes",
    );
}
