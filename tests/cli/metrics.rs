//! `ember train --eval`: the metrics each epoch reports on the training batches and on the held
//! out sets, in the printed lines and the epochs' CSV, and their bad values; and `--save-best`,
//! which keeps the parameters of the epoch best on one of them. Each metric's numerics are
//! checked against PyTorch in trainer/src/metric/tests.rs.

use std::collections::BTreeMap;
use std::path::Path;

use super::common::cli::{TINY, args, checkpoints, csv_rows, fails_with, strs, succeeds};

/// Three classes of a table of 240 rows, the class the sign pattern of two features.
pub fn table(dir: &Path) -> String {
    let csv = dir.join("table.csv");
    let rows: Vec<String> = (0..240)
        .map(|i| {
            let a = ((i * 37 % 101) as f32 / 50.0) - 1.0;
            let b = ((i * 53 % 97) as f32 / 48.0) - 1.0;
            let class = if a < -0.3 {
                0
            } else if b < 0.0 {
                1
            } else {
                2
            };
            format!("{a},{b},{class}")
        })
        .collect();
    std::fs::write(&csv, format!("a,b,label\n{}\n", rows.join("\n"))).unwrap();
    format!("csv:{}", csv.display())
}

fn number(row: &BTreeMap<String, String>, column: &str) -> f64 {
    row.get(column)
        .unwrap_or_else(|| panic!("no column {column} in {row:?}"))
        .parse()
        .unwrap_or_else(|_| panic!("{column} is not a number in {row:?}"))
}

/// `ember train` on `data` (a table of three classes) with a quarter held out, at rate `lr`.
fn on_table(data: &str, lr: &str) -> Vec<String> {
    let base = [
        "train",
        "--device",
        "flex",
        "--data",
        data,
        "--classes",
        "3",
        "--model",
        "mlp:16",
        "--batch-size",
        "20",
        "--valid-split",
        "0.25",
        "--lr",
        lr,
    ];
    base.map(String::from).to_vec()
}

#[test]
fn eval_metrics_are_reported_on_every_set_and_can_be_watched() {
    let dir = tempfile::tempdir().unwrap();
    let data = table(dir.path());
    let trace = dir.path().join("run.csv");
    let mut run = on_table(&data, "0.5");
    run.extend(
        [
            "--epochs",
            "10",
            "--eval",
            "acc,top2,ce,f1",
            "--early-stop",
            "valid_f1:20",
            "--metrics",
            trace.to_str().unwrap(),
        ]
        .map(String::from),
    );
    let out = succeeds(&strs(&run));
    let last = out.lines().rfind(|l| l.contains("train loss")).unwrap();
    for column in [
        "train_top2",
        "train_ce",
        "train_f1",
        "valid_acc",
        "valid_ce",
        "valid_loss",
    ] {
        assert!(last.contains(&format!("{column} ")), "{column} in {last}");
    }
    let rows = csv_rows(&dir.path().join("run.epochs.csv"));
    assert_eq!(rows.len(), 10);
    for row in &rows {
        for set in ["train", "valid"] {
            let acc = number(row, &format!("{set}_acc"));
            let top2 = number(row, &format!("{set}_top2"));
            let f1 = number(row, &format!("{set}_f1"));
            assert!(
                acc <= top2 && top2 <= 1.0,
                "{set}: top-2 counts the top-1 too: {row:?}"
            );
            assert!((0.0..=1.0).contains(&f1), "{row:?}");
        }
        // The loss is the softmax cross-entropy: on the same held-out examples, the metric
        // and the loss are one number, summed two ways.
        let (ce, loss) = (number(row, "valid_ce"), number(row, "valid_loss"));
        assert!(
            (ce - loss).abs() < 1e-4 * loss.max(1.0),
            "{ce} against {loss}"
        );
    }
    assert!(number(&rows[9], "valid_acc") > 0.8, "{:?}", rows[9]);
    // Off, nothing is counted: no column, and the rest of the run the same.
    let off: Vec<String> = run
        .iter()
        .map(|a| match a.as_str() {
            "acc,top2,ce,f1" => "none".to_string(),
            "valid_f1:20" => "valid_loss:20".to_string(),
            a if a == trace.to_str().unwrap() => dir.path().join("off.csv").display().to_string(),
            _ => a.clone(),
        })
        .collect();
    succeeds(&strs(&off));
    let rows_off = csv_rows(&dir.path().join("off.epochs.csv"));
    assert!(
        rows_off[0].keys().all(|k| !k.ends_with("_acc")),
        "{:?}",
        rows_off[0]
    );
    assert_eq!(
        number(&rows_off[9], "valid_loss"),
        number(&rows[9], "valid_loss")
    );
    // A metric the run does not count cannot be watched.
    let mut unwatched = run.clone();
    let at = unwatched.iter().position(|a| a == "valid_f1:20").unwrap();
    unwatched[at] = "valid_top5:2".to_string();
    fails_with(
        &strs(&unwatched),
        "invalid --early-stop metric \"valid_top5\": this run's epochs have loss, train_acc, \
         train_top2, train_ce, train_f1, valid_acc",
    );
    for (eval, needle) in [
        (
            "mse",
            "invalid --eval mse: it needs values to regress, and --data csv:",
        ),
        ("accuracy", "expected acc, topK (top5, …), ce, f1, mse, mae"),
        ("acc,acc", "acc: it is named twice"),
        ("top0", "topK needs a whole K from 1 up to the classes"),
        ("top4", "invalid --eval top4: --data csv:"),
    ] {
        let mut bad = run.clone();
        let at = bad.iter().position(|a| a == "acc,top2,ce,f1").unwrap();
        bad[at] = eval.to_string();
        let at = bad.iter().position(|a| a == "valid_f1:20").unwrap();
        bad[at] = "loss:5".to_string();
        fails_with(&strs(&bad), needle);
    }
}

#[test]
fn regression_metrics_count_the_steps_own_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.csv");
    let path = trace.to_str().unwrap();
    succeeds(&args(
        &TINY,
        &["--epochs", "2", "--eval", "mse,mae", "--metrics", path],
    ));
    for row in csv_rows(&dir.path().join("t.epochs.csv")) {
        // L2Loss is half the squared error, on the very outputs the metric counts.
        let (mse, loss) = (number(&row, "train_mse"), number(&row, "mean_loss"));
        assert!(
            (mse - 2.0 * loss).abs() < 1e-5 * mse.max(1.0),
            "{mse} against 2 x {loss}"
        );
        assert!(number(&row, "train_mae") > 0.0, "{row:?}");
    }
    fails_with(
        &args(&TINY, &["--eval", "acc"]),
        "invalid --eval acc: it needs class labels, and --data synthetic has values to regress",
    );
}

/// The training metrics' columns of `ember train --metrics` run with `more`, epoch by epoch,
/// then each batch's learning rate, as the CSV files hold them.
fn train_metrics(dir: &Path, base: &[&str], more: &[&str], name: &str) -> Vec<Vec<String>> {
    let trace = dir.join(format!("{name}.csv"));
    succeeds(&args(
        &args(base, more),
        &["--metrics", trace.to_str().unwrap()],
    ));
    let mut rows: Vec<Vec<String>> = csv_rows(&dir.join(format!("{name}.epochs.csv")))
        .into_iter()
        .map(|row| {
            (row.into_iter())
                .filter(|(column, _)| column.starts_with("train_"))
                .map(|(column, value)| format!("{column} {value}"))
                .collect()
        })
        .collect();
    rows.push(
        csv_rows(&trace)
            .into_iter()
            .map(|row| row["lr"].clone())
            .collect(),
    );
    rows
}

#[test]
fn a_checkpoint_inside_an_epoch_or_a_resume_from_it_leaves_the_metrics_to_the_bit() {
    // The steps' outputs reach the metrics in chunks, and a checkpoint takes the chunk so far:
    // summed on the device per chunk, the sums rounded otherwise than a run without it
    // (train_mae 0.8591418… against 0.8591419… in the second epoch). And the rates a resumed
    // run read back from its checkpoint's trace were a bit off (0.009972609476841369 where
    // 0.009972609476841367 was written) where serde_json did not round-trip floats.
    let dir = tempfile::tempdir().unwrap();
    let data = table(dir.path());
    let regress = [
        "train",
        "--device",
        "flex",
        "--batches",
        "10",
        "--batch-size",
        "32",
        "--features",
        "8",
        "--hidden",
        "4",
        "--eval",
        "mae,mse",
        "--lr-schedule",
        "cosine",
    ];
    let classes = [
        "train",
        "--device",
        "flex",
        "--data",
        &data,
        "--classes",
        "3",
        "--model",
        "mlp:16",
        "--batch-size",
        "20",
        "--optimizer",
        "adam",
        "--eval",
        "ce,acc",
    ];
    // A resume to fewer epochs is refused: under cosine, whose rates depend on the run's
    // length; without a schedule, as it has trained past them.
    let cosine = "but not under --lr-schedule cosine";
    let inside = "is inside epoch 2 already; give 2 or more";
    for (base, every, refused) in [(&regress[..], "3", cosine), (&classes[..], "5", inside)] {
        let plain = train_metrics(dir.path(), base, &["--epochs", "2"], "plain");
        assert_eq!(plain.len(), 3);
        let ck = dir.path().join("ck");
        let ck = ck.to_str().unwrap();
        let _ = std::fs::remove_dir_all(ck);
        let checkpointed = &[
            "--epochs",
            "2",
            "--checkpoint",
            ck,
            "--checkpoint-every",
            every,
        ];
        let with = train_metrics(dir.path(), base, checkpointed, "with");
        assert_eq!(with, plain, "a run with --checkpoint-every {every}");
        // The newest but one is inside the second epoch: its resume goes on from the sums.
        let steps = checkpoints(Path::new(ck));
        let from = steps[steps.len() - 2].to_str().unwrap();
        let ck2 = dir.path().join("ck2");
        let _ = std::fs::remove_dir_all(&ck2);
        let resumed = &[
            "--epochs",
            "2",
            "--resume",
            from,
            "--checkpoint",
            ck2.to_str().unwrap(),
        ];
        let resumed = train_metrics(dir.path(), base, resumed, "resumed");
        assert_eq!(resumed, plain, "resumed from {from}");
        // Inside epoch 2, it has trained past a run of 1 epoch (it saved those parameters as
        // the 1-epoch run's, exit 0).
        let ck3 = dir.path().join("ck3");
        let one = [
            "--epochs",
            "1",
            "--resume",
            from,
            "--checkpoint",
            ck3.to_str().unwrap(),
        ];
        fails_with(&args(base, &one), refused);
    }
}

#[test]
fn save_best_keeps_the_best_epochs_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let data = table(dir.path());
    let best = dir.path().join("best.safetensors");
    let trace = dir.path().join("run.csv");
    let base = on_table(&data, "0.8");
    let base = strs(&base);
    let out = succeeds(&args(
        &base,
        &[
            "--epochs",
            "8",
            "--save-best",
            best.to_str().unwrap(),
            "--best-on",
            "valid_acc",
            "--metrics",
            trace.to_str().unwrap(),
        ],
    ));
    let rows = csv_rows(&dir.path().join("run.epochs.csv"));
    // The epoch of the best validation accuracy, the first of equals.
    let mut top = 0;
    for (epoch, row) in rows.iter().enumerate() {
        if number(row, "valid_acc") > number(&rows[top], "valid_acc") {
            top = epoch;
        }
    }
    assert!(
        top + 1 < rows.len(),
        "the test needs a best epoch before the last: {rows:?}"
    );
    let saved = out
        .lines()
        .filter(|l| l.contains("parameters saved to --save-best"))
        .count();
    assert!(saved >= 2, "{out}");
    assert!(
        out.contains(&format!("epoch {}: the best so far", top + 1)),
        "{out}"
    );
    // The same run stopped after that epoch saves the same bytes.
    let until = dir.path().join("until.safetensors");
    let epochs_then = (top + 1).to_string();
    succeeds(&args(
        &base,
        &["--epochs", &epochs_then, "--save", until.to_str().unwrap()],
    ));
    assert_eq!(
        std::fs::read(&best).unwrap(),
        std::fs::read(&until).unwrap()
    );
    // What it will not do: watch nothing, watch a column the run lacks, or write over an input.
    let csv = data.strip_prefix("csv:").unwrap();
    for (more, needle) in [
        (
            [
                "--save-best",
                best.to_str().unwrap(),
                "--best-on",
                "test_acc",
            ],
            "invalid --best-on metric \"test_acc\": this run's epochs have loss, train_acc, \
             valid_acc, valid_loss",
        ),
        (
            ["--save-best", csv, "--best-on", "valid_acc"],
            "--save-best",
        ),
    ] {
        let before = std::fs::read(csv).unwrap();
        fails_with(&args(&base, &more), needle);
        assert_eq!(std::fs::read(csv).unwrap(), before, "the data is as it was");
    }
    fails_with(
        &args(&TINY, &["--save-best", best.to_str().unwrap()]),
        "--save-best needs a metric to watch",
    );
    // Inside the checkpoints' directory, even inside one checkpoint, an output is refused before
    // any work: rotation would delete it, and it would change a checkpoint a resume checks.
    let ck = dir.path().join("ck");
    let ck_arg = ck.to_str().unwrap().to_string();
    // Two epochs, two checkpoints: the older is not the one a resume reads, whose files are
    // refused as its inputs.
    succeeds(&args(&base, &["--epochs", "2", "--checkpoint", &ck_arg]));
    let steps = checkpoints(&ck);
    assert_eq!(steps.len(), 2, "{steps:?}");
    let step = &steps[0];
    let inside = step.join("model.bpk");
    let before = std::fs::read(&inside).unwrap();
    for (flag, path) in [("--save-best", &inside), ("--save", &ck.join("mine.st"))] {
        let mut more = vec![
            "--epochs",
            "3",
            "--resume",
            &ck_arg,
            flag,
            path.to_str().unwrap(),
        ];
        if flag == "--save-best" {
            more.extend(["--best-on", "loss"]);
        }
        fails_with(
            &args(&base, &more),
            &format!("{flag} {} is inside --resume", path.display()),
        );
    }
    assert_eq!(
        std::fs::read(&inside).unwrap(),
        before,
        "the checkpoint is as it was"
    );
    // A trailing slash names a directory: refused before training, naming the flag.
    let slash = format!("{}/", dir.path().join("newdir").display());
    fails_with(
        &args(
            &base,
            &["--epochs", "1", "--save-best", &slash, "--best-on", "loss"],
        ),
        &format!("invalid --save-best {slash}"),
    );
}
