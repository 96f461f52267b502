//! `ember compare` as a user runs it: every file, readable plots, tables that agree with the
//! trace, and clear errors that leave nothing behind.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Output};

fn ember(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(args)
        .output()
        .expect("running ember")
}

/// Rows of a CSV written by ember (no quoting needed: numbers and policy names).
fn read_csv(path: &Path) -> Vec<HashMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<String> = lines.next().unwrap().split(',').map(String::from).collect();
    lines
        .map(|line| {
            let cells: Vec<&str> = line.split(',').collect();
            assert_eq!(
                cells.len(),
                header.len(),
                "ragged row in {}: {line}",
                path.display()
            );
            header
                .iter()
                .cloned()
                .zip(cells.into_iter().map(String::from))
                .collect()
        })
        .collect()
}

fn num(row: &HashMap<String, String>, key: &str) -> f64 {
    row[key]
        .parse()
        .unwrap_or_else(|_| panic!("{key} = {:?} is not a number", row[key]))
}

fn compare_writes_everything(device: &str, batches: usize) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("plots");
    let batches_arg = batches.to_string();
    let run = ember(&[
        "compare",
        "--device",
        device,
        "--batches",
        &batches_arg,
        "--batch-size",
        "32",
        "--features",
        "16",
        "--hidden",
        "64,32",
        "--out",
        out.to_str().unwrap(),
        "--sweep",
        "1,2",
    ]);
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("] none, round 1"),
        "progress names the policy:\n{stdout}"
    );

    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "memory.png",
            "memory.svg",
            "summary.csv",
            "summary.md",
            "sweep.png",
            "sweep.svg",
            "time.png",
            "time.svg",
            "timeline.png",
            "timeline.svg",
            "trace.csv",
        ],
        "exactly the promised files, no leftovers"
    );

    for plot in ["time", "memory", "timeline", "sweep"] {
        let png = image::open(out.join(format!("{plot}.png"))).unwrap();
        assert_eq!((png.width(), png.height()), (1200, 750), "{plot}.png");
        let svg = std::fs::read_to_string(out.join(format!("{plot}.svg"))).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "{plot}.svg"
        );
        let needed: &[&str] = match plot {
            "time" => &["barrier", "window:2", "none", "seconds", "sync policy"],
            "memory" => &[
                "barrier",
                "window:2",
                "none",
                "batch (issue order)",
                "MB: RSS growth",
            ],
            "timeline" => &["barrier", "window:2", "none", "wall time", "batches"],
            _ => &[
                "k=1 (barrier)",
                "k=2",
                "none",
                "peak memory growth (MB)",
                "time per epoch (s)",
            ],
        };
        for text in needed {
            assert!(svg.contains(text), "{plot}.svg lacks {text:?}");
        }
    }

    let trace = read_csv(&out.join("trace.csv"));
    let summary = read_csv(&out.join("summary.csv"));
    let policies: Vec<&str> = summary.iter().map(|r| r["policy"].as_str()).collect();
    assert_eq!(
        policies,
        ["barrier", "window:2", "none"],
        "the sweep reuses barrier and window:2"
    );
    for row in &summary {
        let policy = &row["policy"];
        let mine: Vec<&HashMap<String, String>> =
            trace.iter().filter(|b| &b["policy"] == policy).collect();
        assert_eq!(mine.len(), batches, "one trace row per batch of {policy}");
        let first_issue = mine
            .iter()
            .map(|b| num(b, "issue_start"))
            .fold(f64::INFINITY, f64::min);
        let last_issue = mine.iter().map(|b| num(b, "issue_end")).fold(0.0, f64::max);
        let last_done = mine.iter().map(|b| num(b, "done")).fold(0.0, f64::max);
        let time = num(row, "time_per_epoch");
        let issue = num(row, "issue_time");
        assert!(
            time >= last_done - first_issue - 1e-6,
            "{policy}: epoch {time} shorter than its batches"
        );
        assert!(
            (issue - (last_issue - first_issue)).abs() < 0.01,
            "{policy}: issue time {issue}"
        );
        assert!(
            (num(row, "batches_per_s") - batches as f64 / time).abs()
                < 1e-6 * batches as f64 / time
        );
        let final_loss = num(mine.last().unwrap(), "loss");
        assert!(
            (num(row, "final_loss") - final_loss).abs() < 1e-6,
            "{policy}: final loss"
        );
        if device == "wgpu" {
            assert!(
                !row["peak_pool_mb"].is_empty(),
                "wgpu reports its device pool"
            );
        } else {
            assert!(row["peak_pool_mb"].is_empty(), "flex has no device pool");
        }
    }
    // One round: each policy's throughput over none's in it.
    let none = summary.iter().find(|r| r["policy"] == "none").unwrap();
    for row in &summary {
        assert_eq!(row["reference"], "none");
        let ratio = num(row, "batches_per_s") / num(none, "batches_per_s");
        assert!(
            (num(row, "relative_throughput") - ratio).abs() < 1e-6 * ratio,
            "{row:?}"
        );
    }
    let markdown = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        markdown.contains("batches/s ÷ none's, by round"),
        "{markdown}"
    );
    assert!(
        markdown.contains("| barrier |") && markdown.contains("time per epoch (s)"),
        "{markdown}"
    );
}

#[test]
fn compare_on_flex_writes_every_file() {
    compare_writes_everything("flex", 8);
}

#[test]
fn compare_on_wgpu_writes_every_file() {
    compare_writes_everything("wgpu", 4);
}

#[test]
fn bad_input_is_a_clear_error_that_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"keep me").unwrap();
    let fresh = dir.path().join("fresh");
    let under_file = file.join("sub");
    let small = [
        "--device",
        "flex",
        "--batches",
        "2",
        "--batch-size",
        "4",
        "--features",
        "4",
        "--hidden",
        "4",
    ];
    // `compare` on the small workload with `args`: its output.
    let compare = |args: &[&str]| {
        let mut all = vec!["compare"];
        all.extend(small);
        all.extend(args);
        ember(&all)
    };
    let dotted = format!("{}/./summary.md", fresh.display());
    let cases: [(Vec<&str>, &str); 8] = [
        (
            vec![
                "--out",
                fresh.to_str().unwrap(),
                "--policies",
                "barrier,sometimes",
            ],
            "sometimes",
        ),
        (
            vec!["--out", file.to_str().unwrap()],
            "is a regular file, not a directory",
        ),
        (
            vec!["--out", under_file.to_str().unwrap()],
            "cannot be created",
        ),
        (
            vec!["--out", "/proc/ember-compare-test"],
            "cannot be created",
        ),
        (
            vec!["--out", fresh.to_str().unwrap(), "--sweep", ""],
            "--sweep [<KS>]': \"\": expected a whole number of at least 1",
        ),
        // Two outputs on one new path: --out made it, then called it "a directory" (issue 62).
        (
            vec![
                "--out",
                fresh.to_str().unwrap(),
                "--html",
                fresh.to_str().unwrap(),
            ],
            "(a directory) and --html",
        ),
        (
            vec![
                "--out",
                fresh.to_str().unwrap(),
                "--profile",
                fresh.to_str().unwrap(),
            ],
            "(a directory) and --profile",
        ),
        // One of --out's files by another spelling, --out new: it was written over with the
        // HTML, exit 0 (the second hostile pass).
        (
            vec!["--out", fresh.to_str().unwrap(), "--html", &dotted],
            "(its summary.md) and --html",
        ),
    ];
    for (args, needle) in cases {
        let out = compare(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(
            stderr.contains(needle),
            "{args:?}: expected {needle:?} in:\n{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{args:?}:\n{stderr}");
    }
    assert!(!fresh.exists(), "a refused run creates nothing");
    assert_eq!(std::fs::read(&file).unwrap(), b"keep me");

    // Refused after --out was made (a clash between two outputs, a round count past what the
    // machine counts): the directories it made are removed again (they stayed).
    let nested = dir.path().join("n1/n2/n3");
    let twice = dir.path().join("q.html");
    let later: [(Vec<&str>, &str); 2] = [
        (
            vec![
                "--out",
                nested.to_str().unwrap(),
                "--html",
                twice.to_str().unwrap(),
                "--profile",
                twice.to_str().unwrap(),
            ],
            "are the same file",
        ),
        (
            vec![
                "--out",
                nested.to_str().unwrap(),
                "--repeat",
                "6148914691236517206",
            ],
            "invalid --repeat 6148914691236517206: must be 1 to 1000 rounds",
        ),
    ];
    for (args, needle) in later {
        let out = compare(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(needle),
            "{args:?}:\n{stderr}"
        );
        assert!(!dir.path().join("n1").exists(), "{args:?} left its --out");
    }
    // A policy whose name is longer than a file name may be (`auto:1e-300` prints its budget
    // in full) runs as `train --sync` does: the runs' files are named by their number.
    let out = compare(&[
        "--out",
        fresh.to_str().unwrap(),
        "--policies",
        "auto:1e-300",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
