//! `ember train --data text:fortunes --model lstm:H`: d2l's character language model from the
//! command line, its perplexity per epoch, the state carried from batch to batch kept in
//! checkpoints, and the flags it cannot take refused by name.

use crate::common::cli::{args, csv_rows, fails_with, succeeds};

/// A small language model on the first 20,000 characters of Debian's fortunes, on flex.
const TEXT: [&str; 11] = [
    "train",
    "--device",
    "flex",
    "--data",
    "text:fortunes,tokens=20000,steps=20",
    "--batch-size",
    "16",
    "--optimizer",
    "adam",
    "--lr",
    "0.01",
];

#[test]
fn a_language_model_learns_the_fortunes_and_reports_perplexity() {
    let dir = tempfile::tempdir().unwrap();
    let metrics = dir.path().join("lm.csv");
    let out = succeeds(&args(
        &TEXT,
        &[
            "--model",
            "gru:24",
            "--epochs",
            "3",
            "--valid-split",
            "0.1",
            "--metrics",
            metrics.to_str().unwrap(),
        ],
    ));
    assert!(
        out.contains("a vocabulary of 28") && out.contains("sequential partitioning"),
        "{out}"
    );
    let rows = csv_rows(&dir.path().join("lm.epochs.csv"));
    let epochs: Vec<std::collections::BTreeMap<&str, f64>> = rows
        .iter()
        .map(|row| {
            let cells = row
                .iter()
                .filter_map(|(k, v)| Some((k.as_str(), v.parse().ok()?)));
            cells.collect()
        })
        .collect();
    assert_eq!(epochs.len(), 3);
    for epoch in &epochs {
        // The steps' perplexity is exp of their mean loss per token.
        let (loss, train) = (epoch["mean_loss"], epoch["train_perplexity"]);
        assert!((train - loss.exp()).abs() < 1e-3 * train, "{epoch:?}");
        let (valid_loss, valid) = (epoch["valid_loss"], epoch["valid_perplexity"]);
        assert!((valid - valid_loss.exp()).abs() < 1e-9 * valid, "{epoch:?}");
    }
    // Below the 28 of a uniform guess, and falling on the held-out text.
    let valid: Vec<f64> = epochs.iter().map(|e| e["valid_perplexity"]).collect();
    assert!(
        valid[0] < 28.0 && valid.windows(2).all(|w| w[1] < w[0]),
        "{valid:?}"
    );
}

/// The causal Transformer in the recurrent layer's place learns too.
#[test]
fn a_transformer_language_model_learns_the_fortunes() {
    let dir = tempfile::tempdir().unwrap();
    let metrics = dir.path().join("lm.csv");
    let model = "transformer:layers=1,heads=2,dim=16";
    let more = ["--model", model, "--epochs", "3", "--valid-split", "0.1"];
    succeeds(&args(
        &args(&TEXT, &more),
        &["--metrics", metrics.to_str().unwrap()],
    ));
    let rows = csv_rows(&dir.path().join("lm.epochs.csv"));
    let valid: Vec<f64> = rows
        .iter()
        .map(|r| r["valid_perplexity"].parse().unwrap())
        .collect();
    assert!(
        valid[0] < 28.0 && valid.windows(2).all(|w| w[1] < w[0]),
        "{valid:?}"
    );
}

/// A checkpoint in the middle of an epoch holds the carried state: the resumed run's
/// parameters are the unbroken run's, bit for bit, under `--sync none`.
#[test]
fn a_resume_inside_an_epoch_gives_the_unbroken_runs_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let run = [
        "--epochs",
        "2",
        "--sync",
        "none",
        "--model",
        "lstm:16,layers=2",
    ];
    let (whole, resumed) = (path("whole.safetensors"), path("resumed.safetensors"));
    succeeds(&args(&args(&TEXT, &run), &["--save", &whole]));
    let (first, second) = (path("ck"), path("ck2"));
    let every = ["--checkpoint", &first, "--checkpoint-every", "25"];
    succeeds(&args(&args(&TEXT, &run), &every));
    // About 62 batches an epoch: the kept checkpoint that is not the run's end is inside the
    // second.
    let mut steps: Vec<_> = std::fs::read_dir(&first)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("state.json").exists())
        .collect();
    steps.sort();
    let step = steps[0].to_str().unwrap().to_string();
    let state = std::fs::read_to_string(format!("{step}/state.json")).unwrap();
    assert!(state.contains("\"carried\""), "{step}: {state}");
    assert!(!state.contains("\"next_batch\": 0"), "{step}: {state}");
    // The same files cut otherwise are another run: refused, naming --data.
    let other: Vec<&str> = TEXT
        .iter()
        .map(|a| match *a {
            "text:fortunes,tokens=20000,steps=20" => "text:fortunes,tokens=20000,steps=10",
            a => a,
        })
        .collect();
    let resume = ["--resume", step.as_str(), "--checkpoint", &second];
    fails_with(&args(&args(&other, &run), &resume), "--data");
    let more = [
        "--resume",
        &step,
        "--checkpoint",
        &second,
        "--save",
        &resumed,
    ];
    succeeds(&args(&args(&TEXT, &run), &more));
    assert_eq!(
        std::fs::read(&whole).unwrap(),
        std::fs::read(&resumed).unwrap()
    );
}

#[test]
fn what_text_cannot_take_is_refused_by_name() {
    let refused = [
        (vec!["--model", "lstm:0"], "hidden size \"0\""),
        (vec!["--model", "lstm:8,depth=2"], "\"depth=2\""),
        (
            vec!["--model", "transformer:layers=1,heads=3,dim=8"],
            "not divisible by heads=3",
        ),
        (vec!["--model", "mlp:8"], "give --model lstm:H"),
        (vec!["--eval", "acc"], "invalid --eval acc"),
        (
            vec!["--classes", "3"],
            "--classes applies to csv: and npy: data only",
        ),
        (vec!["--loss", "l2"], "invalid --loss l2"),
    ];
    for (more, needle) in refused {
        fails_with(&args(&TEXT, &more), needle);
    }
    let data = "text:fortunes,tokens=20000";
    // Each with `train --device flex` before it, but for --devices.
    let alone: [(&[&str], &str); 6] = [
        (
            &["--data", data, "--model", "rnn:4"],
            "invalid --batch-size 1024",
        ),
        (&["--data", "text:moby-dick"], "\"moby-dick\""),
        (&["--data", "text:fortunes,steps=0"], "steps=0"),
        (&["--batches", "2", "--model", "lstm:8"], "takes text"),
        (&["--batches", "2", "--eval", "perplexity"], "it needs text"),
        (&["--data", "mnist"], "text:fortunes"),
    ];
    for (more, needle) in alone {
        fails_with(&args(&["train", "--device", "flex"], more), needle);
    }
    fails_with(
        &[
            "train",
            "--devices",
            "flex,flex",
            "--data",
            data,
            "--model",
            "rnn:4",
        ],
        "--devices with --data",
    );
    fails_with(
        &["lr-find", "--device", "flex", "--data", data],
        "does not sweep a language model",
    );
    // A Transformer carries no state: its batches split across devices.
    let model = "transformer:layers=1,heads=2,dim=8";
    let devices = [
        "train",
        "--devices",
        "flex,flex",
        "--data",
        data,
        "--model",
        model,
    ];
    succeeds(&args(&devices, &["--batch-size", "16"]));
}

/// `dir=PATH` reads the fortunes from a copy (a machine without Debian's package), and a
/// folder that is not there is named.
#[test]
fn the_fortunes_are_read_from_another_folder_where_dir_names_one() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("fortunes");
    std::fs::create_dir(&copy).unwrap();
    for name in ["computers", "science"] {
        let from = std::path::Path::new("/usr/share/games/fortunes").join(name);
        std::fs::copy(&from, copy.join(name)).unwrap();
    }
    let data = format!("text:fortunes,steps=20,tokens=5000,dir={}", copy.display());
    let train = [
        "train",
        "--device",
        "flex",
        "--model",
        "rnn:4",
        "--batch-size",
        "16",
    ];
    let out = succeeds(&args(&train, &["--data", &data]));
    assert!(
        out.contains("5000 train tokens") && out.contains(&data["text:".len()..]),
        "{out}"
    );
    let missing = dir.path().join("nowhere");
    let data = format!("text:fortunes,dir={}", missing.display());
    fails_with(
        &args(&train, &["--data", &data]),
        &missing.display().to_string(),
    );
}
