//! Data sets named where they matter: empty training and test sets are errors naming the data,
//! and `ember compare` describes the data it ran on.

use super::common::cli::{fails_with, succeeds};
use super::common::fashion::{fashion_like, write_idx_gz};

#[test]
fn empty_training_and_test_sets_are_errors_naming_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("empty.csv");
    std::fs::write(&csv, "a,b,label\n").unwrap();
    let data = format!("csv:{}", csv.display());
    let err = fails_with(
        &[
            "train",
            "--device",
            "flex",
            "--data",
            &data,
            "--classes",
            "2",
        ],
        "training set has no examples",
    );
    assert!(err.contains("empty.csv"), "{err}");

    fashion_like(dir.path(), "train", 20, 1);
    write_idx_gz(
        &dir.path().join("t10k-images-idx3-ubyte.gz"),
        &[0, 28, 28],
        &[],
    );
    write_idx_gz(&dir.path().join("t10k-labels-idx1-ubyte.gz"), &[0], &[]);
    let data = format!("fashion-mnist:{}", dir.path().display());
    let err = fails_with(
        &["train", "--device", "flex", "--data", &data],
        "test set has no examples",
    );
    assert!(err.contains(&dir.path().display().to_string()), "{err}");
}

#[test]
fn compare_on_fashion_mnist_describes_that_data_in_its_summary() {
    let dir = tempfile::tempdir().unwrap();
    fashion_like(dir.path(), "train", 128, 1);
    fashion_like(dir.path(), "t10k", 32, 2);
    let out = dir.path().join("out");
    let data = format!("fashion-mnist:{}", dir.path().display());
    succeeds(&[
        "compare",
        "--device",
        "flex",
        "--data",
        &data,
        "--batch-size",
        "64",
        "--policies",
        "barrier",
        "--repeat",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(summary.contains("fashion-mnist:"), "{summary}");
    assert!(!summary.contains("features"), "{summary}");
}
