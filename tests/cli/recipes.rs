//! `ember train`'s recipe flags: the optimizer and its options, `--lr-schedule` (each batch's
//! rate in the trace), clipping, and their bad values. The numerics are checked against PyTorch
//! in `tests/framework/recipes.rs`; a killed run with a recipe resumes to the same bits in
//! `tests/safety/resume.rs`.

use super::common::cli::{TINY, args, fails_with, succeeds};

#[test]
fn bad_recipe_values_are_errors_naming_the_flag() {
    let cases: [(&[&str], &str); 14] = [
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
    ];
    for (more, needle) in cases {
        fails_with(&args(&TINY, more), needle);
    }
    // A warm-up as long as the run: TINY has 4 batches.
    fails_with(
        &args(&TINY, &["--lr-schedule", "cosine:warmup=4"]),
        "shorter than the run's 4 steps",
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
    ] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
    assert!(!help.contains("(SGD)"), "{help}");
}
