//! Every output of `ember train` has a file of its own: two outputs on one path are refused
//! before any work, where b70e607 wrote the trained parameters and then replaced them with
//! CSV text, exiting 0.

mod common;

#[test]
fn two_outputs_on_one_path_are_refused_before_training_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let run = |save: &str, metrics: &str, needle: &str| {
        let args = [
            "train",
            "--device",
            "flex",
            "--batches",
            "2",
            "--batch-size",
            "8",
            "--features",
            "4",
            "--hidden",
            "3",
            "--save",
            save,
            "--metrics",
            metrics,
        ];
        let stderr = common::cli::fails_with(&args, needle);
        assert!(stderr.contains("are the same file"), "{stderr}");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");
    };
    let both = path("m");
    run(&both, &both, &format!("--save {both} and --metrics {both}"));
    // The same file by another name.
    let dotted = format!("{}/./m", dir.path().display());
    run(&both, &dotted, "are the same file");
    // The metrics' second file, `<stem>.epochs.csv`.
    let (save, metrics) = (path("k.epochs.csv"), path("k.csv"));
    run(
        &save,
        &metrics,
        &format!("--save {save} and --metrics {metrics} (its epochs"),
    );
}
