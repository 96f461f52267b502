//! Every output of `ember train` has a file of its own, is written whatever fails after
//! training began, and holds the same bytes for the same parameters. Each test fails on
//! b70e607's binary.

mod common;

use common::cli::{TINY, args, ember, fails_with, succeeds, text};

/// Two outputs on one path are refused before any work, where b70e607 wrote the trained
/// parameters and then replaced them with CSV text, exiting 0.
#[test]
fn two_outputs_on_one_path_are_refused_before_training_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let run = |save: &str, metrics: &str, needle: &str| {
        let stderr = fails_with(
            &args(&TINY, &["--save", save, "--metrics", metrics]),
            needle,
        );
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

/// A run that fails after training began (here it diverges: the loss turns infinite a step
/// in) still writes `--metrics`, says so, and exits non-zero; `--save` is not written from
/// parameters that diverged (b70e607 wrote neither; then, until 2026-11-25, it wrote NaN).
#[test]
fn a_run_that_fails_after_training_began_still_writes_its_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("m.safetensors");
    let metrics = dir.path().join("m.csv");
    let (save_arg, metrics_arg) = (save.to_str().unwrap(), metrics.to_str().unwrap());
    let more = ["--lr", "1e30", "--save", save_arg, "--metrics", metrics_arg];
    let out = ember(&args(&TINY, &more));
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{stdout}{stderr}");
    assert!(stderr.contains("training diverged"), "{stderr}");
    assert!(stdout.contains("the run failed after batch"), "{stdout}");
    assert!(
        stderr.contains(&format!("--save {save_arg} not written: the run diverged")),
        "{stderr}"
    );
    assert!(!save.exists());
    let rows = std::fs::read_to_string(&metrics).unwrap();
    assert!(rows.lines().count() >= 2, "{rows}");
}

/// A run that fails after training began for another reason than divergence (here its
/// TensorBoard file outgrows `ulimit -f`) leaves a `--save` that was there before as it was,
/// and writes what it trained beside it, saying where. Before, it wrote a few epochs' training
/// over the file, which may have held a long run's parameters.
#[test]
fn a_failed_run_writes_what_it_trained_beside_an_earlier_save_not_over_it() {
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("m.safetensors");
    let save_arg = save.to_str().unwrap();
    succeeds(&args(&TINY, &["--save", save_arg, "--epochs", "3"]));
    let before = std::fs::read(&save).unwrap();
    let tensorboard = dir.path().join("tb");
    let command = args(
        &TINY,
        &[
            "--epochs",
            "40",
            "--save",
            save_arg,
            "--tensorboard",
            tensorboard.to_str().unwrap(),
        ],
    );
    // `trap '' XFSZ`: a write past the limit fails (EFBIG) rather than killing the process.
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(r#"trap '' XFSZ; ulimit -f 8; exec "$@""#)
        .arg("bash")
        .arg(env!("CARGO_BIN_EXE_ember"))
        .args(&command)
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("the run failed after batch"), "{stdout}");
    assert_eq!(std::fs::read(&save).unwrap(), before, "{stdout}{stderr}");
    let beside = dir.path().join("m.rescued.safetensors");
    assert!(
        stderr.contains(&format!(
            "--save {save_arg} keeps its old content: the run failed, so what it trained goes \
             beside it, to {}",
            beside.display()
        )),
        "{stderr}"
    );
    assert!(
        stdout.contains(&format!("parameters saved to {}", beside.display())),
        "{stdout}"
    );
    assert_ne!(
        std::fs::read(&beside).unwrap(),
        before,
        "the rescued run trained"
    );
}

/// The same parameters saved by several processes give the same bytes (b70e607's files
/// differed in the order of their metadata's keys).
#[test]
fn the_same_parameters_saved_twice_give_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<Vec<u8>> = (0..8)
        .map(|i| {
            let save = dir.path().join(format!("m{i}.safetensors"));
            succeeds(&args(&TINY, &["--save", save.to_str().unwrap()]));
            std::fs::read(&save).unwrap()
        })
        .collect();
    for file in &files[1..] {
        assert!(file == &files[0], "two saves of the same run differ");
    }
}

/// A valid file name of 250 bytes is written (b70e607 refused it: its temporary's name,
/// prefix added, passed the 255-byte limit).
#[test]
fn a_file_name_near_the_limit_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join(format!("{}.safetensors", "m".repeat(238)));
    assert_eq!(save.file_name().unwrap().len(), 250);
    succeeds(&args(&TINY, &["--save", save.to_str().unwrap()]));
    assert!(std::fs::metadata(&save).unwrap().len() > 0);
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert_eq!(left.len(), 1, "{left:?}");
}

/// A read-only output (`chmod 444`) was replaced by the atomic rename, which goes through the
/// directory's permission, not the file's (hostile pass, issue 62): it is refused before
/// training, naming it, and keeps its content; a writable one is replaced as before.
#[test]
fn a_read_only_output_is_refused_and_kept() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let kept = dir.path().join("kept.safetensors");
    std::fs::write(&kept, b"old").unwrap();
    std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o444)).unwrap();
    let stderr = fails_with(
        &args(&TINY, &["--save", kept.to_str().unwrap()]),
        "it is read-only (mode 444)",
    );
    assert!(stderr.contains("kept.safetensors"), "{stderr}");
    assert_eq!(std::fs::read(&kept).unwrap(), b"old");
    std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o644)).unwrap();
    succeeds(&args(&TINY, &["--save", kept.to_str().unwrap()]));
    assert_ne!(std::fs::read(&kept).unwrap(), b"old");
}

/// A run refused before it trains makes no directory and no file: the checks of every value
/// and path come before any output is made. 041bf38 made `--checkpoint`'s and
/// `--tensorboard`'s directories (and, for a schedule that underflows, an event file) first.
#[test]
fn a_run_refused_before_training_makes_no_directory_and_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("new/ck");
    let tb = dir.path().join("new/tb");
    let outputs = [
        "--checkpoint",
        ck.to_str().unwrap(),
        "--tensorboard",
        tb.to_str().unwrap(),
    ];
    for (more, needle) in [
        (
            &["--checkpoint-every", "0"][..],
            "invalid --checkpoint-every 0: checkpoints come after at least one step",
        ),
        (&["--eval", "acc"][..], "invalid --eval acc"),
        (
            &[
                "--lr",
                "1e-37",
                "--lr-schedule",
                "step:1:0.001",
                "--epochs",
                "3",
            ][..],
            "the schedule step:1:0.001 makes the rate of step 5 (epoch 2)",
        ),
    ] {
        fails_with(&args(&args(&TINY, &outputs), more), needle);
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(left.is_empty(), "{more:?} left {left:?}");
    }
    // The same outputs, the run accepted: both directories are made.
    succeeds(&args(&args(&TINY, &outputs), &["--checkpoint-every", "2"]));
    assert!(ck.is_dir() && tb.is_dir());
    // A resume refused (another --seed) past a damaged newest checkpoint moves nothing: it was
    // set aside as `damaged-step-N` before the refusal.
    let names = || {
        let mut names: Vec<_> = std::fs::read_dir(&ck)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        names
    };
    let newest = names()
        .into_iter()
        .rfind(|n| n.to_string_lossy().starts_with("step-"));
    std::fs::write(ck.join(newest.unwrap()).join("state.json"), "{").unwrap();
    let before = names();
    let resume = [
        "--resume",
        ck.to_str().unwrap(),
        "--seed",
        "5",
        "--epochs",
        "2",
    ];
    fails_with(&args(&TINY, &resume), "cannot resume from");
    assert_eq!(names(), before);
}
