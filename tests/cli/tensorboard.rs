//! `--tensorboard DIR`: the event files read back by TensorBoard's own reader (PyPI's
//! `tensorboard`, in the virtual environment scripts/install-tensorboard-check.sh makes), value
//! for value against the CSV trace of the same run. A record whose CRC or framing were wrong
//! would be dropped by that reader, and the values would not match.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::common;
use super::common::cli::{TINY, args, csv_rows, fails_with, succeeds};

/// The Python that has `tensorboard`.
fn python() -> PathBuf {
    let path = std::env::var_os("EMBER_TENSORBOARD_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap())
                .join(".cache/ember/tensorboard-venv/bin/python")
        });
    assert!(
        path.exists(),
        "{} not found: these tests need TensorBoard's reader; run \
         scripts/install-tensorboard-check.sh (.ci/run does)",
        path.display()
    );
    path
}

/// The scalars TensorBoard reads in `dir`: tag → [(step, value)].
fn read(dir: &Path) -> BTreeMap<String, Vec<(i64, f32)>> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/tensorboard/read.py");
    let output = Command::new(python())
        .arg(script)
        .arg(dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "read.py failed:\n{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["file_version"], 2.0, "{json}");
    json["scalars"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(tag, points)| {
            let points = points
                .as_array()
                .unwrap()
                .iter()
                .map(|p| (p[0].as_i64().unwrap(), p[1].as_f64().unwrap() as f32))
                .collect();
            (tag.clone(), points)
        })
        .collect()
}

/// `column` of every row, as the f32 TensorBoard keeps.
fn column(rows: &[BTreeMap<String, String>], column: &str) -> Vec<f32> {
    rows.iter()
        .map(|r| r[column].parse::<f64>().unwrap() as f32)
        .collect()
}

/// The values of `tag`, checking that its steps are `steps`.
fn values(scalars: &BTreeMap<String, Vec<(i64, f32)>>, tag: &str, steps: &[i64]) -> Vec<f32> {
    let points = scalars
        .get(tag)
        .unwrap_or_else(|| panic!("no {tag} in {:?}", scalars.keys()));
    let got: Vec<i64> = points.iter().map(|p| p.0).collect();
    assert_eq!(got, steps, "{tag}'s steps");
    points.iter().map(|p| p.1).collect()
}

fn event_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

#[test]
fn tensorboard_reads_the_runs_scalars_as_the_csv_trace_has_them() {
    let dir = tempfile::tempdir().unwrap();
    let data = common::fashion::fashion_data(dir.path(), 160, 40);
    let logs = dir.path().join("runs");
    let csv = dir.path().join("run.csv");
    let run = |csv: &Path| {
        succeeds(&[
            "train",
            "--device",
            "flex",
            "--data",
            &data,
            "--model",
            "mlp:16",
            "--batch-size",
            "32",
            "--epochs",
            "3",
            "--lr",
            "0.2",
            "--lr-schedule",
            "cosine",
            "--sync",
            "t+2",
            "--metrics",
            csv.to_str().unwrap(),
            "--tensorboard",
            logs.to_str().unwrap(),
        ])
    };
    let stdout = run(&csv);
    assert!(stdout.contains("tensorboard --logdir"), "{stdout}");
    let scalars = read(&logs);
    let batches = csv_rows(&csv);
    let steps: Vec<i64> = (1..=batches.len() as i64).collect();
    assert_eq!(steps.len(), 3 * 5);
    assert_eq!(
        values(&scalars, "batch/loss", &steps),
        column(&batches, "loss")
    );
    let lr = values(&scalars, "batch/lr", &steps);
    assert_eq!(lr, column(&batches, "lr"));
    assert!(lr[0] > lr[14], "the cosine schedule decays: {lr:?}");
    assert_eq!(
        values(&scalars, "batch/in_flight", &steps),
        column(&batches, "depth")
    );
    let epochs = csv_rows(&dir.path().join("run.epochs.csv"));
    for (tag, name) in [
        ("epoch/mean_loss", "mean_loss"),
        ("epoch/time_per_epoch", "time"),
        ("epoch/peak_growth_mb", "peak_growth_mb"),
        ("epoch/test_acc", "test_acc"),
        ("epoch/train_acc", "train_acc"),
    ] {
        assert_eq!(
            values(&scalars, tag, &[1, 2, 3]),
            column(&epochs, name),
            "{tag}"
        );
    }

    // A second run into the same directory writes a file of its own; the first is kept.
    let first = event_files(&logs);
    assert_eq!(first.len(), 1);
    let before = std::fs::read(&first[0]).unwrap();
    run(&dir.path().join("again.csv"));
    let files = event_files(&logs);
    assert_eq!(files.len(), 2, "{files:?}");
    assert_eq!(std::fs::read(&first[0]).unwrap(), before);
}

#[test]
fn tensorboard_never_writes_over_a_file_or_into_the_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "kept\n").unwrap();
    fails_with(
        &args(&TINY, &["--tensorboard", file.to_str().unwrap()]),
        "invalid --tensorboard",
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "kept\n");
    // Another output's path, or the checkpoints' directory: refused before anything is made.
    let ck = dir.path().join("ck");
    let ck = ck.to_str().unwrap();
    fails_with(
        &args(&TINY, &["--checkpoint", ck, "--tensorboard", ck]),
        "--tensorboard",
    );
    let save = dir.path().join("m.st");
    let save = save.to_str().unwrap();
    fails_with(
        &args(&TINY, &["--save", save, "--tensorboard", save]),
        "are the same file",
    );
    assert!(!Path::new(ck).exists() && !Path::new(save).exists());
}
