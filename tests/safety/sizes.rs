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

/// A budget above the machine's memory is a bound that bounds nothing: said as such, not as
/// what "training needs" (issue 62).
#[test]
fn a_budget_above_the_machines_memory_is_refused_as_a_budget() {
    for sync in ["auto:99999999", "memory:99999999"] {
        let stderr = fails_with(
            &args(&crate::common::cli::TINY, &["--sync", sync]),
            &format!("invalid --sync {sync}: its budget, 100.0 TB, is more than this machine's"),
        );
        assert!(!stderr.contains("training needs"), "{stderr}");
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

/// `summary` and `export` build the network before anything else: sizes it cannot hold are
/// errors naming where they came from (the flags, or `--load`'s metadata), as `train`'s are.
/// Before, each of these aborted ("memory allocation … failed") or panicked ("capacity
/// overflow", a NaN initializer's `unwrap` for `--features 0`).
#[test]
fn summary_and_export_refuse_networks_too_large_for_memory() {
    for flags in [
        &["--model", "mlp:99999999999"][..],
        &["--model", "resnet", "--input", "3,100000,100000"],
        &["--model", "mlp:8", "--outputs", "4294967297"],
        &["--model", "mlp:8", "--input", "18446744073709551615"],
    ] {
        let stderr = fails_with(&args(&["summary"], flags), "too large for this machine");
        assert!(
            stderr.contains("--model, --input and --outputs"),
            "{stderr}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.safetensors");
    let good = good.to_str().unwrap();
    let tiny = ["--device", "flex", "--batches", "2", "--batch-size", "8"];
    super::common::cli::succeeds(&args(
        &args(&["train"], &tiny),
        &["--features", "4", "--hidden", "3", "--save", good],
    ));
    let out = dir.path().join("m.onnx");
    let out = out.to_str().unwrap();
    // The metadata `train --save` wrote, edited to a network no machine holds.
    for (key, value) in [
        ("ember.model", "mlp:99999999999"),
        ("ember.input", "18446744073709551615"),
    ] {
        let edited = dir.path().join("edited.safetensors");
        std::fs::write(&edited, with_metadata(good, key, value)).unwrap();
        let stderr = fails_with(
            &["export", "--load", edited.to_str().unwrap(), "--out", out],
            "too large for this machine",
        );
        assert!(stderr.contains("edited.safetensors's metadata"), "{stderr}");
    }
    fails_with(
        &["export", "--load", good, "--out", out, "--features", "0"],
        "invalid --features 0: must be at least 1",
    );
    assert!(!std::path::Path::new(out).exists());
}

/// The safetensors file at `path` with its metadata's `key` set to `value`.
fn with_metadata(path: &str, key: &str, value: &str) -> Vec<u8> {
    let bytes = std::fs::read(path).unwrap();
    let length = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + length]).unwrap();
    header["__metadata__"][key] = value.into();
    let header = serde_json::to_vec(&header).unwrap();
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend(header);
    file.extend(&bytes[8 + length..]);
    file
}
