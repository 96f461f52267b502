//! Sizes too large for memory are errors naming the flag at fault, not allocations that abort.

use super::common::cli::{args, fails_with};

#[test]
fn sizes_that_cannot_fit_in_memory_are_errors_naming_the_flag() {
    let base = ["train", "--device", "flex", "--batches", "2"];
    fails_with(
        &args(&base, &["--hidden", "18446744073709551615"]),
        "--hidden 18446744073709551615 is too large",
    );
    fails_with(
        &args(&base, &["--hidden", "1000000000000"]),
        "--hidden 1000000000000 is too large",
    );
    fails_with(
        &args(&base, &["--batch-size", "100000000"]),
        "--batch-size 100000000 is too large",
    );
    // The flag at fault, not the model beside it (b70e607 said "--hidden 8 is too large").
    fails_with(
        &args(&base, &["--features", "4000000000000", "--hidden", "8"]),
        "--features 4000000000000 is too large",
    );
    // The trace of every batch counts (b70e607 started 4·10¹² batches).
    let stderr = fails_with(
        &["train", "--device", "flex", "--batches", "4000000000000"],
        "--batches 4000000000000 is too large",
    );
    assert!(stderr.contains("for the trace of every batch"), "{stderr}");
    // A size past the machine's word is too large, not "not a number".
    fails_with(
        &args(&base, &["--hidden", "99999999999999999999"]),
        "too large: a size is at most",
    );
}

/// What the sync policy lets pile up counts: under `none` every batch of an epoch waits in
/// the queue (b70e607 counted one batch, and aborted with "memory allocation failed" under a
/// memory limit). The error names --sync and suggests a policy that bounds the queue.
#[test]
fn the_queue_a_policy_lets_grow_counts_in_the_memory_check() {
    let base = [
        "train",
        "--device",
        "flex",
        "--batches",
        "100000",
        "--batch-size",
        "4096",
        "--features",
        "4096",
        "--hidden",
        "8",
    ];
    for (sync, depth) in [("none", "100000"), ("window:50000", "50000")] {
        let stderr = fails_with(
            &args(&base, &["--sync", sync]),
            &format!("--sync {sync} (it lets {depth} batches pile up"),
        );
        assert!(stderr.contains("is too large for this machine"), "{stderr}");
        assert!(stderr.contains("--sync memory:MB"), "{stderr}");
        if sync == "none" {
            assert!(stderr.contains("every one of --batches 100000"), "{stderr}");
        }
    }
}

/// A size is blamed on the flag or the file that set it, never on a default (b70e607 said
/// `--model mlp:256 is too large` for `--classes 100000000`).
#[test]
fn a_size_error_names_classes_or_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("d.csv");
    std::fs::write(&csv, "1,2,0\n3,4,1\n").unwrap();
    let data = format!("csv:{}", csv.display());
    let base = [
        "train",
        "--device",
        "flex",
        "--data",
        &data,
        "--batch-size",
        "2",
    ];
    fails_with(
        &args(&base, &["--classes", "100000000000"]),
        "--classes 100000000000 is too large",
    );
}

/// Under `ulimit -v`, the pre-check sees the limit: the chapter's workload with 3000 batches
/// under `none` is refused at the start, naming --sync (b70e607 aborted: "memory allocation
/// of 8388608 bytes failed", exit 134).
#[test]
fn an_address_space_limit_bounds_the_memory_check() {
    let ember = env!("CARGO_BIN_EXE_ember");
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v 4000000; exec {ember} train --device flex --batches 3000 --sync none"
        ))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--sync none (it lets 3000 batches pile up"),
        "{stderr}"
    );
}
