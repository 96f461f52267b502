//! 10⁴ mutated files per parser (IDX, gzip, CSV, NPY, safetensors): a value or an error for
//! each, never a panic, an abort, a hang or an allocation the file does not justify. The 10⁶
//! run is `cargo run --release --example fuzz_parsers -- 1000000`.

#[path = "fuzz/parsers.rs"]
mod parsers;

#[global_allocator]
static ALLOC: parsers::PeakAlloc = parsers::PeakAlloc;

/// The largest allocation is counted process-wide: one test at a time measures it.
static MEASURING: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn every_parser_gives_a_value_or_an_error_for_ten_thousand_mutated_files() {
    let _alone = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let reports = parsers::fuzz(dir.path(), 10_000, 2026);
    let mut failures = Vec::new();
    for report in &reports {
        eprintln!("{report:?}");
        assert_eq!(report.inputs, 10_000);
        // Mutations must reach both outcomes, or the fuzzer tests nothing.
        assert!(report.values > 0 && report.errors > 0, "{report:?}");
        failures.extend(
            report
                .failures
                .iter()
                .map(|f| format!("{}: {f}", report.parser)),
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn endless_streams_sparse_giants_and_gzip_bombs_are_refused_at_once_in_bounded_memory() {
    let _alone = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let failures = parsers::hostile(dir.path());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
