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
