//! `ember train`'s recipe flags: the optimizer and its options, `--lr-schedule` (each batch's
//! rate in the trace), clipping, and their bad values. The numerics are checked against PyTorch
//! in `tests/framework/recipes.rs`; a killed run with a recipe resumes to the same bits in
//! `tests/safety/resume.rs`.

// LeNet's summary in PyTorch; the optimizers' figures there are tests/framework/recipes.rs's.
#![allow(dead_code)]
include!("../reference/torch_recipes.out.rs");

use super::common::cli::{TINY, args, ember, fails_with, succeeds, text};
use super::common::params::{max_difference, values};

#[test]
fn bad_recipe_values_are_errors_naming_the_flag() {
    let cases: [(&[&str], &str); 19] = [
        (&["--optimizer", "lion"], "invalid --optimizer \"lion\""),
        (
            &["--optimizer", "adam", "--momentum", "0.9"],
            "--momentum does not apply to --optimizer adam",
        ),
        (
            &["--optimizer", "adamw", "--nesterov"],
            "--nesterov does not apply",
        ),
        (&["--nesterov"], "--nesterov needs a momentum"),
        (&["--momentum", "1"], "invalid --momentum 1"),
        (
            &["--optimizer", "adam", "--beta2", "1.5"],
            "invalid --beta2 1.5",
        ),
        (&["--wd", "-0.1"], "invalid --wd -0.1"),
        (
            &["--eps", "1e-8"],
            "--eps does not apply to --optimizer sgd",
        ),
        (
            &["--lr-schedule", "cosine:warmup=-1"],
            "invalid --lr-schedule \"cosine:warmup=-1\"",
        ),
        (
            &["--lr-schedule", "step:0:0.1"],
            "invalid --lr-schedule \"step:0:0.1\"",
        ),
        (&["--lr-schedule", "sawtooth"], "cosine:warmup=N"),
        (&["--clip-norm", "0"], "invalid --clip-norm 0"),
        (&["--clip-norm", "nan"], "invalid --clip-norm NaN"),
        (&["--clip-value", "-1"], "invalid --clip-value -1"),
        // Values that are 0 in single precision, where training computes: they trained
        // nothing and exited 0 (issue 62).
        (
            &["--lr", "1e-50"],
            "invalid --lr 1e-50: must be at least about 1.2e-38",
        ),
        (
            &["--clip-value", "1e-46"],
            "invalid --clip-value 1e-46: must be at least about 1.2e-38",
        ),
        (&["--clip-norm", "1e-300"], "is 0 there or flushed to 0"),
        (&["--accumulate", "0"], "invalid --accumulate 0"),
        (&["--accumulate", "-2"], "invalid --accumulate -2"),
    ];
    for (more, needle) in cases {
        fails_with(&args(&TINY, more), needle);
    }
    // A warm-up as long as the run: TINY has 4 batches.
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    fails_with(
        &args(
            &TINY,
            &[
                "--lr-schedule",
                "cosine:warmup=4",
                "--checkpoint",
                ck.to_str().unwrap(),
            ],
        ),
        "invalid --lr-schedule cosine:warmup=4: the warm-up must be shorter than the run's 4 steps",
    );
    let written = std::fs::read_dir(&ck).map_or(0, |d| d.count());
    assert_eq!(written, 0, "refused before any checkpoint is written");
    // Values that single precision, where the optimizers run, makes 1 or infinite.
    fails_with(
        &args(&TINY, &["--optimizer", "adam", "--beta2", "0.99999999"]),
        "invalid --beta2 0.99999999",
    );
    fails_with(
        &args(&TINY, &["--wd", "1e39"]),
        "invalid --wd 1e39: it is inf in single precision",
    );
    // bench measures beside raw burn's plain SGD.
    let bench = [
        "bench",
        "policies",
        "--device",
        "flex",
        "--batches",
        "2",
        "--optimizer",
        "adam",
    ];
    fails_with(
        &bench,
        "--optimizer applies to `ember train` and `ember compare`",
    );
}

#[test]
fn a_diverged_one_cycle_run_is_told_to_resume_with_a_lower_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let ck = ck.to_str().unwrap();
    // TINY's network on 20 batches: one cycle up to 100 diverges after a few.
    let mut tiny = TINY.to_vec();
    let at = tiny.iter().position(|a| *a == "--batches").unwrap();
    tiny[at + 1] = "20";
    let run = [
        "--lr-schedule",
        "onecycle:100",
        "--checkpoint",
        ck,
        "--checkpoint-every",
        "1",
    ];
    let out = ember(&args(&tiny, &run));
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{stdout}");
    assert!(stderr.contains("diverged"), "{stderr}");
    // One cycle ignores --lr: the way back is a lower cycle, which a resume may change.
    assert!(
        stdout.contains(&format!(
            "--resume {ck} --lr-schedule onecycle:R (this run had --lr-schedule onecycle:100)"
        )),
        "{stdout}"
    );
    let again = ["--lr-schedule", "onecycle:0.01", "--resume", ck];
    let resumed = ember(&args(&tiny, &again));
    let (stdout, stderr) = text(&resumed);
    assert!(
        stdout.contains("resuming with --lr-schedule onecycle:0.01"),
        "{stdout}\n{stderr}"
    );
}

#[test]
fn a_recipe_trains_and_the_trace_records_each_batchs_rate() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.csv");
    let stdout = succeeds(&args(
        &TINY,
        &[
            "--epochs",
            "2",
            "--optimizer",
            "adamw",
            "--wd",
            "0.05",
            "--lr",
            "0.01",
            "--lr-schedule",
            "cosine:warmup=2",
            "--clip-norm",
            "1",
            "--metrics",
            trace.to_str().unwrap(),
        ],
    ));
    let first = stdout.lines().find(|l| l.starts_with("training")).unwrap();
    assert!(
        first.contains("adamw(beta1=0.9, beta2=0.999, eps=1e-8, wd=0.05), schedule cosine:warmup=2, clip norm 1"),
        "{first}"
    );
    let rows = std::fs::read_to_string(&trace).unwrap();
    let header: Vec<&str> = rows.lines().next().unwrap().split(',').collect();
    let column = header
        .iter()
        .position(|c| *c == "lr")
        .expect("an lr column");
    let rates: Vec<f64> = rows
        .lines()
        .skip(1)
        .map(|row| row.split(',').nth(column).unwrap().parse().unwrap())
        .collect();
    // 2 epochs of 4: warm-up 0.005, 0.01, then the cosine over the 6 steps left.
    assert_eq!(rates.len(), 8);
    assert_eq!(&rates[..3], &[0.005, 0.01, 0.01]);
    let cosine = |t: f64| 0.01 * (1.0 + (std::f64::consts::PI * t / 6.0).cos()) / 2.0;
    for (t, rate) in rates[2..].iter().enumerate() {
        assert!((rate - cosine(t as f64)).abs() < 1e-15, "{rates:?}");
    }
}

#[test]
fn a_run_with_a_schedule_over_the_run_resumes_with_its_epochs_only() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let ck = ck.to_str().unwrap();
    let recipe = [
        "--lr-schedule",
        "poly:2",
        "--epochs",
        "1",
        "--checkpoint",
        ck,
    ];
    succeeds(&args(&TINY, &recipe));
    // More epochs would give every later step another rate than the run that wrote it.
    let err = fails_with(
        &args(
            &TINY,
            &["--lr-schedule", "poly:2", "--epochs", "2", "--resume", ck],
        ),
        "--epochs 1",
    );
    assert!(err.contains("this one has --epochs 2"), "{err}");
    let err = fails_with(
        &args(&TINY, &["--epochs", "2", "--resume", ck]),
        "--lr-schedule poly:2",
    );
    assert!(err.contains("this one has no --lr-schedule"), "{err}");
}

#[test]
fn train_help_lists_every_recipe_flag() {
    let help = succeeds(&["train", "--help"]);
    for flag in [
        "--optimizer",
        "--momentum",
        "--nesterov",
        "--wd",
        "--beta1",
        "--beta2",
        "--eps",
        "--lr-schedule",
        "--clip-norm",
        "--clip-value",
        "--accumulate",
    ] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
    assert!(!help.contains("(SGD)"), "{help}");
}

#[test]
fn a_validation_split_is_held_out_and_watched() {
    let dir = tempfile::tempdir().unwrap();
    // Two classes, the sign of the first feature, 200 rows.
    let csv = dir.path().join("table.csv");
    let rows: Vec<String> = (0..200)
        .map(|i| {
            let a = ((i * 37 % 101) as f32 / 50.0) - 1.0;
            format!("{a},{},{}", (i % 7) as f32 / 7.0, u8::from(a > 0.0))
        })
        .collect();
    std::fs::write(&csv, format!("a,b,label\n{}\n", rows.join("\n"))).unwrap();
    let data = format!("csv:{}", csv.display());
    let run = |more: &[&str]| {
        let mut args = vec![
            "train",
            "--device",
            "flex",
            "--data",
            &data,
            "--classes",
            "2",
        ];
        args.extend_from_slice(&["--model", "mlp:16", "--lr", "0.5", "--batch-size", "20"]);
        args.extend_from_slice(more);
        args.iter().map(|a| a.to_string()).collect::<Vec<String>>()
    };
    let watched = run(&[
        "--valid-split",
        "0.25",
        "--epochs",
        "10",
        "--early-stop",
        "valid_loss:20",
    ]);
    let argv: Vec<&str> = watched.iter().map(String::as_str).collect();
    let out = succeeds(&argv);
    assert!(out.contains("150 train, 50 valid examples"), "{out}");
    let last = out.lines().rfind(|l| l.contains("valid_acc")).unwrap();
    assert!(last.contains("valid_loss "), "{last}");
    let acc: f64 = last.split("valid_acc ").nth(1).unwrap()[..6]
        .parse()
        .unwrap();
    assert!(acc > 0.8, "held-out examples of a separable table: {last}");
    // The same seed, the same split: the run is reproducible to the printed digit.
    let again = succeeds(&argv);
    let valid = |out: &str| -> Vec<String> {
        out.lines()
            .filter(|l| l.contains("valid_acc"))
            .map(String::from)
            .collect()
    };
    assert_eq!(valid(&again), valid(&out));
    for (more, needle) in [
        (&["--valid-split", "1.5"][..], "invalid --valid-split 1.5"),
        (
            &["--valid-split", "0.001"][..],
            "holds out 0, leaving a part empty",
        ),
        (
            &["--early-stop", "valid_acc:2"][..],
            "this run's epochs have loss, train_acc",
        ),
    ] {
        let bad = run(more);
        fails_with(&bad.iter().map(String::as_str).collect::<Vec<_>>(), needle);
    }
    fails_with(
        &args(&TINY, &["--valid-split", "0.2"]),
        "--valid-split applies to",
    );
}

#[test]
fn accumulated_batches_train_as_one_batch_as_large_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let data = super::metrics::table(dir.path());
    let run = |batch: &str, accumulate: &str, save: &str| {
        let save = dir.path().join(save);
        let stdout = succeeds(&[
            "train",
            "--device",
            "flex",
            "--data",
            &data,
            "--classes",
            "3",
            "--model",
            "mlp:16",
            "--epochs",
            "2",
            "--lr",
            "0.5",
            "--momentum",
            "0.9",
            "--batch-size",
            batch,
            "--accumulate",
            accumulate,
            "--save",
            save.to_str().unwrap(),
        ]);
        (stdout, values(&save))
    };
    // 240 rows: 12 batches of 20 an epoch, in 3 updates of 4, or 12 of 20 in updates of 5, 5
    // and 2, as batches of 100 cut 240.
    for (accumulate, large) in [("4", "80"), ("5", "100")] {
        let (stdout, accumulated) = run("20", accumulate, "accumulated.st");
        let first = stdout.lines().find(|l| l.starts_with("training")).unwrap();
        assert!(
            first.contains(&format!("{accumulate} batches an update")),
            "{first}"
        );
        let (_, one) = run(large, "1", "one.st");
        let difference = max_difference(&accumulated, &one);
        eprintln!("--accumulate {accumulate} x 20 against {large}: {difference:e}");
        assert!(
            difference < 1e-6,
            "{accumulate} x 20 against {large}: {difference}"
        );
        let (_, small) = run("20", "1", "small.st");
        assert!(max_difference(&small, &one) > 1e-3);
    }
}
