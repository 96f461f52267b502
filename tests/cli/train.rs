//! `ember train` and `ember bench policies` on synthetic data: the book's lines, the metrics
//! files, a diverging run, and bad values.

use super::common::cli::{fails_with, succeeds};

#[test]
fn train_prints_the_books_lines_and_writes_metrics() {
    let dir = tempfile::tempdir().unwrap();
    // `.JSONL` is JSON Lines too (it was written as CSV, beside a `.epochs.csv`, hostile pass).
    for (metrics, extra) in [
        ("trace.csv", "trace.epochs.csv"),
        ("trace.jsonl", "trace.jsonl"),
        ("TRACE.JSONL", "TRACE.JSONL"),
    ] {
        let path = dir.path().join(metrics);
        let stdout = succeeds(&[
            "train",
            "--device",
            "flex",
            "--sync",
            "t+2",
            "--batches",
            "50",
            "--batch-size",
            "16",
            "--hidden",
            "32,16",
            "--features",
            "8",
            "--epochs",
            "2",
            "--metrics",
            path.to_str().unwrap(),
        ]);
        assert!(stdout.contains("batch 50, time "), "{stdout}");
        assert!(stdout.contains("time per epoch: "), "{stdout}");
        assert!(stdout.contains("increased memory: "), "{stdout}");
        assert!(stdout.contains("policy window:2"), "{stdout}");
        let written = std::fs::read_to_string(dir.path().join(extra)).unwrap();
        if metrics.ends_with(".csv") {
            let rows = std::fs::read_to_string(&path).unwrap();
            assert_eq!(
                rows.lines().count(),
                1 + 100,
                "header + 2 epochs x 50 batches"
            );
            assert!(
                rows.starts_with("policy,epoch,batch,issue_start,issue_end,done"),
                "{rows}"
            );
            assert_eq!(written.lines().count(), 1 + 2);
        } else {
            let kinds: Vec<serde_json::Value> = written
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            assert_eq!(kinds.iter().filter(|v| v["kind"] == "batch").count(), 100);
            assert_eq!(kinds.iter().filter(|v| v["kind"] == "epoch").count(), 2);
        }
    }
}

#[test]
fn bad_values_are_clear_errors_with_a_nonzero_exit() {
    let bound = "a remote device's bound is 0.001 s to 86400 s (a day)";
    let cases: [(&[&str], &str); 9] = [
        // Named as given: 1e30 was "not a number of seconds", and 1e-40 was named 0.
        (
            &["--remote-timeout", "1e30", "devices"],
            "invalid --remote-timeout 1e30: ",
        ),
        (&["--remote-timeout", "1e-40", "devices"], bound),
        (&["train", "--sync", "sometimes"], "window:K"),
        (&["train", "--sync", "window:0"], "window:0"),
        (&["train", "--batch-size", "0"], "--batch-size 0"),
        (&["train", "--device", "tpu"], "unknown device 'tpu'"),
        (&["train", "--lr", "-1"], "--lr -1"),
        (&["train", "--hidden", "2048,x"], "--hidden"),
        (&["train", "--data", "imagenet"], "--data"),
    ];
    for (args, needle) in cases {
        fails_with(args, needle);
    }
}

#[test]
fn a_diverging_run_stops_with_the_batch_named() {
    let stderr = fails_with(
        &[
            "train",
            "--device",
            "flex",
            "--lr",
            "1e30",
            "--batches",
            "20",
            "--batch-size",
            "16",
            "--hidden",
            "16",
            "--features",
            "8",
        ],
        "loss is",
    );
    assert!(stderr.contains("batch "), "{stderr}");
}

#[test]
fn bench_policies_runs_each_configuration_and_prints_the_ratios() {
    let stdout = succeeds(&[
        "bench",
        "policies",
        "--device",
        "flex",
        "--batches",
        "4",
        "--batch-size",
        "16",
        "--hidden",
        "16",
        "--features",
        "8",
        "--repeat",
        "2",
    ]);
    // Two rounds of four configurations, each its own line.
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("round ")).count(),
        8,
        "{stdout}"
    );
    for line in [
        "ratio window:2 / none throughput: ",
        "ratio barrier / raw burn time: ",
    ] {
        let value = stdout
            .lines()
            .find_map(|l| l.strip_prefix(line))
            .unwrap_or_else(|| panic!("{line:?} missing:\n{stdout}"));
        let ratio: f64 = value.split_whitespace().next().unwrap().parse().unwrap();
        assert!(ratio.is_finite() && ratio > 0.0, "{line}{value}");
    }
}
