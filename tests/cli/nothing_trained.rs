//! Values that would train nothing are refused before the run, naming the flag and the value:
//! a softmax over one class, a rate cut that single precision makes 0 or flushes to 0 (below
//! its smallest normal number, about 1.2e-38), a weight decay or a momentum that it makes none
//! at all (issue 62: each ran and exited 0).

use super::common::cli::{TINY, args, fails_with};

#[test]
fn values_that_would_train_nothing_are_refused_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("one-class.csv");
    std::fs::write(&csv, "1,2,0\n3,4,0\n5,6,0\n").unwrap();
    let data = format!("csv:{}", csv.display());
    // 0 classes said "must be at least 1", and 1 is refused too: one rule, one message.
    for classes in ["1", "0"] {
        let flags = ["train", "--data", &data, "--classes", classes];
        let said = format!("invalid --classes {classes}: softmax cross-entropy needs 2 or more");
        fails_with(&flags, &said);
    }
    let cases: [(&[&str], &str); 15] = [
        // Single steps too: a cosine from 1e-37 ended at 3.8e-39, poly:50 at 7e-48, one cycle
        // of 1e-37 began at 4e-39, each exit 0 (third hostile pass).
        (
            &["--lr", "1e-37", "--lr-schedule", "cosine", "--epochs", "2"],
            "the schedule cosine makes the rate of step",
        ),
        (
            &["--lr-schedule", "poly:50", "--epochs", "2"],
            "the schedule poly:50 makes the rate of step 8 (epoch 2)",
        ),
        (
            &["--lr-schedule", "onecycle:1e-37"],
            "the schedule onecycle:1e-37 makes the rate of step 1 (epoch 1)",
        ),
        // Every rate after the first 0.0 (hostile pass of the CUDA build).
        (
            &["--lr-schedule", "poly:1e30", "--epochs", "3"],
            "invalid learning rate 0: the schedule poly:1e30 makes the rate of step 2 (epoch 1)",
        ),
        (
            &["--reduce-lr-on-plateau", "loss:1:1e-50"],
            "at least about 1.2e-38",
        ),
        // Subnormal in single precision: not 0 there, but flushed to 0 by the kernels, and
        // each of these ran to exit 0 (second hostile pass).
        (
            &["--lr", "1e-44"],
            "invalid --lr 1e-44: must be at least about 1.2e-38",
        ),
        (&["--clip-value", "1e-44"], "invalid --clip-value"),
        (&["--clip-norm", "1e-40"], "invalid --clip-norm"),
        (&["--wd", "1e-44"], "flushed to 0 there"),
        (
            &["--lr-schedule", "multistep:1,2:1e-20", "--epochs", "3"],
            "which single precision makes 0 (below about 1.2e-38): that step would train nothing",
        ),
        // A step schedule's factor cut every epoch after the first to a rate of 0 (hostile
        // pass); so did one whose rate reaches 0 in single precision before the run ends.
        (
            &["--lr-schedule", "step:1:1e-50", "--epochs", "3"],
            "the factor 1e-50 must be at least about 1.2e-38",
        ),
        (
            &["--lr-schedule", "multistep:1,2:1e-30", "--epochs", "3"],
            "makes the rate of step 9 (epoch 3) this",
        ),
        (
            &["--wd", "1e-50"],
            "invalid --wd 1e-50: it is 0 in single precision",
        ),
        (&["--momentum", "1e-50"], "invalid --momentum 1e-50"),
        (
            &["--optimizer", "adam", "--eps", "1e-50"],
            "invalid --eps 1e-50",
        ),
    ];
    for (more, needle) in cases {
        fails_with(&args(&TINY, more), needle);
    }
}

/// A plateau that would cut the rate below single precision's smallest normal number (where
/// kernels flush it to 0) leaves it as it is, and says so (it cut 2e-38 to 2e-39, which trained
/// nothing);
/// PATIENCE 1 acts after the first epoch without improvement, as --early-stop's does.
#[test]
fn a_cut_to_nothing_is_not_made_and_patience_counts_as_early_stop_does() {
    let dir = tempfile::tempdir().unwrap();
    let metrics = dir.path().join("m.csv");
    let metrics_arg = metrics.to_str().unwrap();
    // Beside a step schedule the cut must leave every later epoch a rate too: it took the
    // rate to 6.25e-39 by epoch 5, exit 0 (hostile pass).
    let schedule = [
        "--lr-schedule",
        "step:1:0.5",
        "--epochs",
        "7",
        "--lr",
        "1e-36",
    ];
    let cases = [&["--epochs", "4", "--lr", "2e-38"][..], &schedule];
    for (i, more) in cases.iter().enumerate() {
        let ck = dir.path().join(format!("ck{i}"));
        let plateau = [
            "--reduce-lr-on-plateau",
            "loss:1:0.1",
            "--metrics",
            metrics_arg,
        ];
        let run = args(&args(&TINY, more), &plateau);
        let ck_arg = ck.to_str().unwrap();
        let every = ["--checkpoint", ck_arg, "--checkpoint-every", "4"];
        let stdout = super::common::cli::succeeds(&args(&run, &every));
        assert!(
            stdout.contains("not done") && stdout.contains("stays"),
            "{stdout}"
        );
        let every_rate_trains = |run: &str| {
            for row in super::common::cli::csv_rows(&metrics) {
                let lr: f64 = row["lr"].parse().unwrap();
                assert!(lr >= ember::optim::SMALLEST, "{run}, {more:?}: {row:?}");
            }
        };
        every_rate_trains("the run");
        // A resume replays the cuts as the run made them: one it did not make made a resume
        // from the epoch before the last refuse its rate (hostile review).
        let newest = super::common::cli::checkpoints(&ck).pop().unwrap();
        std::fs::remove_dir_all(newest).unwrap();
        super::common::cli::succeeds(&args(&run, &["--resume", ck_arg]));
        every_rate_trains("resumed");
    }
}
