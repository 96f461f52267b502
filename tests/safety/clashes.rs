//! No output is one of the run's inputs: every output flag against every input kind, by the
//! same path, another spelling, a symbolic link and a hard link, is refused before any work,
//! naming both, and the input is left as it was. Before 2026-11-25 only `export --out` equal
//! to `--load` by name was refused: `--metrics data.csv` overwrote the data with exit 0.

use std::path::{Path, PathBuf};

use common::cli::{TINY, args, fails_with, succeeds};
use common::npy::write_npy;

use crate::common;

/// The ways of naming `file` again: itself, with `./` inside, a symbolic link, a hard link.
fn aliases(file: &Path) -> Vec<(PathBuf, &'static str)> {
    let dir = file.parent().unwrap();
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    let symlink = dir.join(format!("symlink-to-{name}"));
    let hard = dir.join(format!("hard-link-to-{name}"));
    let _ = std::fs::remove_file(&symlink);
    let _ = std::fs::remove_file(&hard);
    std::os::unix::fs::symlink(file, &symlink).unwrap();
    std::fs::hard_link(file, &hard).unwrap();
    vec![
        (file.to_path_buf(), "the same path"),
        (dir.join(".").join(&name), "another spelling"),
        (symlink, "a symbolic link"),
        (hard, "a hard link"),
    ]
}

fn refused(command: &[&str], input_flag: &str, output_flag: &str, input: &Path) {
    let before = std::fs::read(input).unwrap();
    let stderr = fails_with(command, "is the same file as");
    assert!(
        stderr.contains(input_flag) && stderr.contains(output_flag),
        "{command:?}: {stderr}"
    );
    assert_eq!(
        std::fs::read(input).unwrap(),
        before,
        "{command:?} changed its input"
    );
}

/// A run's inputs, each with the words that name it in a refusal.
type Inputs<'a> = Vec<(PathBuf, &'a str)>;

#[test]
fn no_train_output_is_one_of_its_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("data.csv");
    std::fs::write(&csv, "1,2,0\n3,4,1\n5,6,0\n7,8,1\n").unwrap();
    let (x, y) = (dir.path().join("X.npy"), dir.path().join("Y.npy"));
    write_npy(&x, &[4, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    write_npy(&y, &[4], &[0.0, 1.0, 0.0, 1.0]);
    let params = dir.path().join("m.st");
    succeeds(&args(&TINY, &["--save", params.to_str().unwrap()]));

    let csv_data = format!("csv:{}", csv.display());
    let npy_data = format!("npy:{},{}", x.display(), y.display());
    // Each run's data flags and other flags, and its inputs.
    let runs: Vec<(Vec<String>, Inputs)> = vec![
        (
            vec![
                "--data".into(),
                csv_data.clone(),
                "--classes".into(),
                "2".into(),
            ],
            vec![(csv.clone(), "--data csv:")],
        ),
        (
            vec![
                "--data".into(),
                npy_data.clone(),
                "--classes".into(),
                "2".into(),
            ],
            vec![(x.clone(), "its features"), (y.clone(), "its targets")],
        ),
        (
            vec!["--load".into(), params.to_str().unwrap().into()],
            vec![(params.clone(), "--load")],
        ),
    ];
    for (flags, inputs) in &runs {
        for (input, input_flag) in inputs {
            for (alias, how) in aliases(input) {
                let alias = alias.to_str().unwrap().to_string();
                for output_flag in ["--save", "--metrics"] {
                    let mut command: Vec<&str> = TINY.to_vec();
                    if flags[0] == "--data" {
                        // Synthetic-only flags would be refused with other data.
                        command = vec!["train", "--device", "flex", "--batch-size", "2"];
                    }
                    command.extend(flags.iter().map(String::as_str));
                    command.extend([output_flag, alias.as_str()]);
                    refused(&command, input_flag, output_flag, input);
                    let _ = how;
                }
            }
        }
    }
    // The metrics' second file, k.epochs.csv, is an output too.
    let epochs = dir.path().join("k.epochs.csv");
    std::fs::write(&epochs, "1,2,0\n3,4,1\n").unwrap();
    let data = format!("csv:{}", epochs.display());
    let metrics = dir.path().join("k.csv");
    let command = [
        "train",
        "--device",
        "flex",
        "--batch-size",
        "2",
        "--data",
        &data,
        "--classes",
        "2",
        "--metrics",
        metrics.to_str().unwrap(),
    ];
    refused(&command, "--data", "its epochs", &epochs);
}

#[test]
fn no_output_is_a_file_of_the_checkpoint_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let ck_arg = ck.to_str().unwrap();
    succeeds(&args(&TINY, &["--checkpoint", ck_arg]));
    let trace = ck.join("step-0000000004").join("trace.jsonl");
    for output_flag in ["--save", "--metrics"] {
        let command = args(
            &TINY,
            &[
                "--resume",
                ck_arg,
                "--epochs",
                "2",
                output_flag,
                trace.to_str().unwrap(),
            ],
        );
        refused(&command, "the checkpoint resumed", output_flag, &trace);
    }
}

#[test]
fn export_and_compare_outputs_are_not_their_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let params = dir.path().join("m.st");
    let p = params.to_str().unwrap();
    succeeds(&args(&TINY, &["--save", p]));
    for (alias, _) in aliases(&params) {
        let command = ["export", "--load", p, "--out", alias.to_str().unwrap()];
        refused(&command, "--load", "--out", &params);
    }
    // compare writes trace.csv into --out: here that is the data.
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let csv = out.join("trace.csv");
    std::fs::write(&csv, "1,2,0\n3,4,1\n").unwrap();
    let data = format!("csv:{}", csv.display());
    let command = [
        "compare",
        "--device",
        "flex",
        "--data",
        &data,
        "--classes",
        "2",
        "--batch-size",
        "2",
        "--out",
        out.to_str().unwrap(),
    ];
    refused(&command, "--data", "--out", &csv);
}

/// `--save /dev/stdout` with stdout redirected to a log would replace the log with the
/// parameters (before 2026-11-25 it did, exit 0): refused, and the log keeps its lines.
#[test]
fn an_output_that_is_the_redirected_stdout_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.txt");
    std::fs::write(&log, "an earlier line\n").unwrap();
    let stdout = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(TINY)
        .args(["--save", "/dev/stdout"])
        .stdout(stdout)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("is the same file as the standard output"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "an earlier line\n");
}

/// `>> data.csv`, `2>> data.csv` and both: an input that is where the command prints is
/// refused, and the error goes to the other stream, or nowhere, never into the input (before,
/// `ember train --data csv:d.csv >> d.csv` appended its lines to the data, exit 0, and the
/// next run failed on a ragged row).
#[test]
fn an_input_that_is_the_redirected_stdout_or_stderr_is_refused_and_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d.csv");
    let rows: String = (0..20)
        .map(|i| format!("0.{i},1.{i},{}\n", i % 2))
        .collect();
    let data_arg = format!("csv:{}", data.display());
    let command = [
        "train",
        "--device",
        "flex",
        "--data",
        &data_arg,
        "--classes",
        "2",
    ];
    for (stdout, stderr) in [(true, false), (false, true), (true, true)] {
        std::fs::write(&data, &rows).unwrap();
        let open = || {
            std::fs::OpenOptions::new()
                .append(true)
                .open(&data)
                .unwrap()
        };
        let mut run = std::process::Command::new(env!("CARGO_BIN_EXE_ember"));
        run.args(command);
        if stdout {
            run.stdout(open());
        }
        if stderr {
            run.stderr(open());
        }
        let out = run.output().unwrap();
        let case = format!("stdout {stdout}, stderr {stderr}");
        assert_eq!(out.status.code(), Some(1), "{case}");
        assert_eq!(std::fs::read_to_string(&data).unwrap(), rows, "{case}");
        // The error is on the stream that is not the input (with both, it is nowhere).
        let printed = match (stdout, stderr) {
            (true, false) => Some(out.stderr),
            (false, true) => Some(out.stdout),
            _ => None,
        };
        if let Some(printed) = printed {
            let printed = String::from_utf8_lossy(&printed);
            assert!(
                printed.contains("is the same file as the standard"),
                "{case}: {printed}"
            );
        }
    }
}

/// An output named as Fashion-MNIST's loader reads a file (`train-images-idx3-ubyte.gz`
/// beside the raw file, which it would be read before) is refused, though no such file is
/// there yet (before, `--save` took the name, and the next run read the parameters as images).
#[test]
fn an_output_that_a_data_directory_would_read_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = common::fashion::fashion_data(dir.path(), 20, 10);
    // The raw files only, as some downloads ship them.
    for file in ember_datasets::fashion_mnist::FILES {
        let gz = dir.path().join(format!("{file}.gz"));
        let mut raw = Vec::new();
        std::io::Read::read_to_end(
            &mut flate2::read::GzDecoder::new(std::fs::File::open(&gz).unwrap()),
            &mut raw,
        )
        .unwrap();
        std::fs::write(dir.path().join(file), raw).unwrap();
        std::fs::remove_file(gz).unwrap();
    }
    let shadow = dir.path().join("train-images-idx3-ubyte.gz");
    let stderr = fails_with(
        &[
            "train",
            "--device",
            "flex",
            "--data",
            &data,
            "--save",
            shadow.to_str().unwrap(),
        ],
        "where it reads train-images-idx3-ubyte.gz",
    );
    assert!(stderr.contains("--save"), "{stderr}");
    assert!(!shadow.exists());
    // A log beside the files, which the loader does not read, may take the run's output.
    let log = dir.path().join("run.log");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ember"))
        .args([
            "train",
            "--device",
            "flex",
            "--data",
            &data,
            "--batch-size",
            "10",
        ])
        .stdout(std::fs::File::create(&log).unwrap())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(std::fs::read_to_string(&log).unwrap().contains("epoch 1"));
}

/// `--checkpoint` inside another run's directory of checkpoints (in one of its `step-N`) was
/// accepted, fresh or resumed, where `--profile` there is refused: one rule now (issue 62).
#[test]
fn checkpoints_inside_another_directory_of_checkpoints_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("q1");
    let ck_arg = ck.to_str().unwrap().to_string();
    let tiny = crate::common::cli::TINY;
    crate::common::cli::succeeds(&crate::common::cli::args(
        &tiny,
        &["--checkpoint", &ck_arg, "--checkpoint-every", "2"],
    ));
    let inner = ck.join("step-0000000004");
    assert!(inner.is_dir());
    let inner_arg = inner.to_str().unwrap().to_string();
    for more in [
        vec!["--checkpoint", inner_arg.as_str()],
        vec![
            "--epochs",
            "2",
            "--resume",
            &ck_arg,
            "--checkpoint",
            &inner_arg,
        ],
    ] {
        crate::common::cli::fails_with(
            &crate::common::cli::args(&tiny, &more),
            "a directory of checkpoints, where they are rotated and checked",
        );
    }
    // Nothing was nested, and the run can go on where it was.
    assert!(!inner.join("step-0000000002").exists());
    crate::common::cli::succeeds(&crate::common::cli::args(
        &tiny,
        &["--epochs", "2", "--resume", &ck_arg],
    ));
}
