//! `--early-stop` and `--reduce-lr-on-plateau`: the run ends or its rate drops saying why, bad
//! specs are refused, and the callbacks are part of what a resume must match.

use super::common::cli::{TINY, args, fails_with, succeeds};

#[test]
fn early_stop_ends_the_run_saying_why_and_bad_specs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.csv");
    // No epoch beats the first by 1000: the patience of 1 ends the run after epoch 2.
    let out = succeeds(&args(
        &TINY,
        &[
            "--epochs",
            "5",
            "--early-stop",
            "loss:1:1000",
            "--metrics",
            trace.to_str().unwrap(),
        ],
    ));
    assert!(
        out.contains("early stop: loss has not improved by more than 1000 for 1 epoch(s) (best"),
        "{out}"
    );
    let epochs = std::fs::read_to_string(dir.path().join("t.epochs.csv")).unwrap();
    assert_eq!(epochs.lines().count(), 1 + 2, "{epochs}");
    fails_with(&args(&TINY, &["--early-stop", "acc:0"]), "--early-stop");
    // A patience past the largest count says so (it said "a whole number").
    fails_with(
        &args(&TINY, &["--early-stop", "loss:99999999999999999999"]),
        "\"99999999999999999999\" is too large: at most",
    );
    fails_with(
        &args(&TINY, &["--early-stop", "test_acc:3"]),
        "invalid --early-stop metric \"test_acc\": this run's epochs have loss",
    );
    fails_with(
        &args(&TINY, &["--reduce-lr-on-plateau", "loss:2:1.5"]),
        "--reduce-lr-on-plateau",
    );
}

#[test]
fn callbacks_are_part_of_what_a_resume_must_match_and_a_stopped_run_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let ck = ck.to_str().unwrap();
    let stop = [
        "--early-stop",
        "loss:1:1000",
        "--epochs",
        "5",
        "--checkpoint",
        ck,
    ];
    succeeds(&args(&TINY, &stop));
    // Stopped after epoch 2; a resume with more epochs replays the stop and trains nothing.
    let out = succeeds(&args(
        &TINY,
        &[
            "--early-stop",
            "loss:1:1000",
            "--epochs",
            "9",
            "--resume",
            ck,
        ],
    ));
    assert!(
        out.contains("before this resume: nothing more to train"),
        "{out}"
    );
    let err = fails_with(
        &args(&TINY, &["--epochs", "9", "--resume", ck]),
        "--early-stop",
    );
    assert!(err.contains("this one has no --early-stop"), "{err}");
    fails_with(
        &args(
            &TINY,
            &[
                "--lr-schedule",
                "onecycle:0.1",
                "--reduce-lr-on-plateau",
                "loss:1",
            ],
        ),
        "--reduce-lr-on-plateau scales --lr, which --lr-schedule onecycle:0.1 ignores",
    );
}
