//! Checkpoints are checked, locked and complete: a file changed after it was written or a
//! position edited out of place is refused on resume, a second run on the same directory is
//! refused at start, and a run ends with a checkpoint even when `--checkpoint-every` is longer
//! than the run. b70e607 resumed from the first two silently, let the second run collide
//! mid-way, and left no checkpoint in the last case.

mod common;

use std::path::{Path, PathBuf};

use common::cli::{TINY, args, checkpoints, fails_with, strs, succeeds};

/// A run of `epochs` epochs of 4 batches that keeps its checkpoints in `ck`, with `more`
/// flags.
fn run(ck: &Path, epochs: &str, more: &[&str]) -> Vec<String> {
    let base = args(
        &TINY,
        &["--epochs", epochs, "--checkpoint", ck.to_str().unwrap()],
    );
    args(&base, more).iter().map(|a| a.to_string()).collect()
}

/// The newest checkpoint in `ck`.
fn newest(ck: &Path) -> PathBuf {
    checkpoints(ck).pop().expect("a checkpoint")
}

#[test]
fn a_checkpoint_file_changed_after_it_was_written_is_refused_on_resume() {
    // The trace is named as a file of the checkpoint, not a parameter file (hostile pass).
    for (file, parameter_file) in [("model.bpk", true), ("trace.jsonl", false)] {
        let dir = tempfile::tempdir().unwrap();
        let ck = dir.path().join("ck");
        succeeds(&strs(&run(&ck, "1", &[])));
        let changed = newest(&ck).join(file);
        let mut bytes = std::fs::read(&changed).unwrap();
        let at = bytes.len() - 5;
        bytes[at] ^= 0x10;
        bytes[at - 40] ^= 0x01;
        std::fs::write(&changed, bytes).unwrap();
        let resume = run(&ck, "2", &["--resume", ck.to_str().unwrap()]);
        let stderr = fails_with(&strs(&resume), file);
        assert!(
            stderr.contains("the file changed after it was written")
                && stderr.contains("parameter file") == parameter_file,
            "{stderr}"
        );
    }
}

#[test]
fn a_position_edited_out_of_place_is_refused_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    succeeds(&strs(&run(&ck, "2", &[])));
    let state = newest(&ck).join("state.json");
    let text = std::fs::read_to_string(&state).unwrap();
    let resume = run(&ck, "3", &["--resume", ck.to_str().unwrap()]);
    // state.json's own checksum: one flipped bit in the run's flags was refused as another
    // run's (third hostile pass); the checkpoint before is taken, saying why.
    std::fs::write(&state, text.replace("--features", "--feateres")).unwrap();
    let stdout = succeeds(&strs(&resume));
    assert!(
        stdout.contains("state.json: its checksum is") && stdout.contains("step-0000000004"),
        "{stdout}"
    );
    // Where it records none (an older checkpoint), the position is checked against the trace.
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    succeeds(&strs(&run(&ck, "1", &[])));
    let state = newest(&ck).join("state.json");
    let text = std::fs::read_to_string(&state).unwrap();
    let mut older: serde_json::Value = serde_json::from_str(&text).unwrap();
    older["checksums"]
        .as_object_mut()
        .unwrap()
        .remove("state.json");
    older["next_batch"] = 999.into();
    std::fs::write(&state, serde_json::to_string_pretty(&older).unwrap()).unwrap();
    let resume = run(&ck, "2", &["--resume", ck.to_str().unwrap()]);
    let stderr = fails_with(&strs(&resume), "checkpoint position");
    assert!(
        stderr.contains("next batch 999") && stderr.contains("records 4 batches"),
        "{stderr}"
    );
}

/// The per-step seed in `state.json` is covered by no checksum: an edited one was taken in
/// silence, and the run's own seed used (issue 62). Another seed is refused, naming both.
#[test]
fn a_seed_edited_in_a_checkpoint_is_refused_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    succeeds(&strs(&run(&ck, "1", &["--seed", "3"])));
    let state = newest(&ck).join("state.json");
    let text = std::fs::read_to_string(&state).unwrap();
    let edited = text.replace("\"seed\": 3,", "\"seed\": 7,");
    assert_ne!(text, edited, "{text}");
    let resume = run(&ck, "2", &["--seed", "3", "--resume", ck.to_str().unwrap()]);
    // state.json's own checksum finds the edit first.
    std::fs::write(&state, &edited).unwrap();
    fails_with(&strs(&resume), "state.json: its checksum is");
    // Where that checksum is gone too, the seed itself is compared.
    let mut json: serde_json::Value = serde_json::from_str(&edited).unwrap();
    json["checksums"]
        .as_object_mut()
        .unwrap()
        .remove("state.json");
    std::fs::write(&state, json.to_string()).unwrap();
    fails_with(&strs(&resume), "invalid seed 3: ");
    let stderr = fails_with(&strs(&resume), "records seed 7");
    assert!(stderr.contains("state.json was edited"), "{stderr}");
}

/// A `state.json` without checksums (an ember from before they were recorded, or an edit
/// that dropped them) resumed in silence with its files unverified (issue 62): it still
/// resumes, saying which files go unverified.
#[test]
fn a_checkpoint_without_checksums_resumes_saying_its_files_are_unverified() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    succeeds(&strs(&run(&ck, "1", &[])));
    let state = newest(&ck).join("state.json");
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    let checksums = json["checksums"].as_object_mut().expect("checksums");
    assert!(checksums.remove("model.bpk").is_some(), "{checksums:?}");
    checksums.remove("trace.jsonl");
    // An edit that drops its own checksum too, as an older ember wrote none.
    assert!(checksums.remove("state.json").is_some(), "{checksums:?}");
    std::fs::write(&state, json.to_string()).unwrap();
    let resume = run(&ck, "2", &["--resume", ck.to_str().unwrap()]);
    let out = common::cli::ember(&strs(&resume));
    let (stdout, stderr) = common::cli::text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stderr.contains("records no checksum for model.bpk, trace.jsonl")
            && stderr.contains("read unverified"),
        "{stderr}"
    );
}

#[test]
fn a_second_run_on_the_same_checkpoint_directory_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    std::fs::create_dir(&ck).unwrap();
    // A run in progress holds the directory: here, a process of this test's own.
    let mut holder = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    // Its pid and the time it started, as ember writes them (field 22 of /proc/PID/stat).
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", holder.id())).unwrap();
    let started = stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .nth(19)
        .unwrap()
        .to_string();
    std::fs::write(ck.join("lock"), format!("{} {started}", holder.id())).unwrap();
    let save = dir.path().join("m.safetensors");
    let args = run(&ck, "2", &["--save", save.to_str().unwrap()]);
    let stderr = fails_with(&strs(&args), &format!("another run (pid {})", holder.id()));
    assert!(stderr.contains(ck.to_str().unwrap()), "{stderr}");
    holder.kill().unwrap();
    holder.wait().unwrap();
    // Once it has ended, its lock is taken over.
    succeeds(&strs(&args));
    assert!(save.exists());
}

#[test]
fn a_run_shorter_than_checkpoint_every_still_ends_with_a_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    succeeds(&strs(&run(&ck, "2", &["--checkpoint-every", "1000"])));
    assert_eq!(newest(&ck).file_name().unwrap(), "step-0000000008");
}

/// A name the run's checkpoints would take, held by something not ember's (a dangling symlink,
/// a file, a user's directory), is refused at the start, before any training, and left as it
/// was: b70e607 skipped such a checkpoint in silence (exit 0, nothing written).
#[test]
fn a_checkpoint_name_held_by_something_else_is_refused_at_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    std::fs::create_dir(&ck).unwrap();
    let save = dir.path().join("m.safetensors");
    let name = ck.join("step-0000000002");
    let holders: [(&str, &dyn Fn()); 3] = [
        ("a symbolic link", &|| {
            std::os::unix::fs::symlink(dir.path().join("nowhere"), &name).unwrap()
        }),
        ("a regular file", &|| std::fs::write(&name, "mine").unwrap()),
        ("a directory that holds none", &|| {
            std::fs::create_dir(&name).unwrap();
            std::fs::write(name.join("notes.txt"), "mine").unwrap();
        }),
    ];
    for (what, make) in holders {
        make();
        let more = ["--checkpoint-every", "2", "--save", save.to_str().unwrap()];
        let stderr = fails_with(&strs(&run(&ck, "1", &more)), "step-0000000002");
        assert!(stderr.contains(what), "{stderr}");
        assert!(!save.exists(), "trained although refused");
        let meta = std::fs::symlink_metadata(&name).unwrap();
        if meta.is_dir() {
            assert_eq!(std::fs::read(name.join("notes.txt")).unwrap(), b"mine");
            std::fs::remove_dir_all(&name).unwrap();
        } else {
            std::fs::remove_file(&name).unwrap();
        }
    }
}

/// A run that does not resume is refused a directory that holds another run's checkpoints
/// (its own, which pruning would then remove, would mix with them).
#[test]
fn a_fresh_run_is_refused_a_directory_with_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    succeeds(&strs(&run(&ck, "1", &[])));
    let stderr = fails_with(&strs(&run(&ck, "1", &[])), "checkpoints of another run");
    assert!(stderr.contains("--resume"), "{stderr}");
    assert_eq!(newest(&ck).file_name().unwrap(), "step-0000000004");
}

/// `--resume DIR/step-N` goes on from that checkpoint (b70e607 started over and nested new
/// checkpoints inside it); newer ones in DIR are refused rather than overwritten, unless the
/// run writes its checkpoints elsewhere.
#[test]
fn resume_takes_a_step_directory() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    succeeds(&strs(&run(&ck, "2", &["--checkpoint-every", "2"])));
    let step = ck.join("step-0000000006");
    assert!(step.is_dir());
    let base = args(
        &TINY,
        &["--epochs", "2", "--resume", step.to_str().unwrap()],
    );
    let stderr = fails_with(&base, "step-0000000008");
    assert!(stderr.contains("goes on from step 6"), "{stderr}");
    let other = dir.path().join("other");
    let more = ["--checkpoint", other.to_str().unwrap()];
    let stdout = succeeds(&args(&base, &more));
    assert!(
        stdout.contains("resuming from") && stdout.contains("step-0000000006"),
        "{stdout}"
    );
    assert!(stdout.contains("epoch 2, batch 2"), "{stdout}");
    assert_eq!(newest(&other).file_name().unwrap(), "step-0000000008");
    assert!(
        std::fs::read_dir(&step)
            .unwrap()
            .flatten()
            .all(|e| !e.path().is_dir())
    );
}

/// Each file of the newest checkpoint missing or changed: the resume falls back to the one
/// before, saying why, and keeps the damaged one aside (b70e607 failed on a missing
/// `model.bpk` with a bare "No such file", and fell back in silence on a missing `state.json`).
#[test]
fn a_damaged_newest_checkpoint_falls_back_to_the_one_before() {
    for (file, change) in [
        ("model.bpk", "remove"),
        ("optimizer.bpk", "remove"),
        ("trace.jsonl", "remove"),
        ("state.json", "remove"),
        ("model.bpk", "flip"),
        ("state.json", "garble"),
        // A second signal while a checkpoint's directory was renamed into place left it empty.
        ("it is empty", "empty"),
        // Other valid JSON: was found only after "resuming from", with no fall back (issue 62).
        ("state.json", "edit"),
        // An epoch past the trace's: it was trusted ("has done 99 epoch(s)", the second pass).
        ("state.json", "epoch"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let ck = dir.path().join("ck");
        succeeds(&strs(&run(&ck, "2", &[])));
        let damaged = ck.join("step-0000000008").join(file);
        match change {
            "remove" => std::fs::remove_file(&damaged).unwrap(),
            "empty" => {
                let step = ck.join("step-0000000008");
                std::fs::remove_dir_all(&step).unwrap();
                std::fs::create_dir(&step).unwrap();
            }
            "flip" => {
                let mut bytes = std::fs::read(&damaged).unwrap();
                let at = bytes.len() - 5;
                bytes[at] ^= 0x10;
                std::fs::write(&damaged, bytes).unwrap();
            }
            "epoch" => {
                let state = std::fs::read_to_string(&damaged).unwrap();
                let at = state.find("\"epoch\"").unwrap();
                let rest = &state[at..];
                let end = rest.find(',').unwrap();
                let edited = format!("{}\"epoch\": 99{}", &state[..at], &rest[end..]);
                std::fs::write(&damaged, edited).unwrap();
            }
            "edit" => {
                let state = std::fs::read_to_string(&damaged).unwrap();
                let at = state.find("\"next_batch\"").unwrap();
                let edited = format!("{}\"next_batch\": 3,{}", &state[..at], {
                    let rest = &state[at..];
                    &rest[rest.find(',').unwrap() + 1..]
                });
                std::fs::write(&damaged, edited).unwrap();
            }
            _ => std::fs::write(&damaged, "{").unwrap(),
        }
        // An edit of state.json meets its own checksum first.
        let case_file = match change {
            "edit" | "epoch" => "state.json: its checksum is",
            _ => file,
        };
        let stdout = succeeds(&strs(&run(&ck, "3", &["--resume", ck.to_str().unwrap()])));
        let case = format!("{file} {change}: {stdout}");
        // An empty one holds nothing to keep: it goes (a double SIGINT left one beside two
        // full ones for good, issue 62); any other is kept aside.
        let (said, kept) = match change {
            "empty" => ("step-0000000008 was empty", false),
            _ => ("step-0000000008 is damaged", true),
        };
        assert!(stdout.contains(said), "{case}");
        assert!(stdout.contains(case_file), "{case}");
        assert!(
            stdout.contains("resuming from") && stdout.contains("step-0000000004"),
            "{case}"
        );
        assert_eq!(ck.join("damaged-step-0000000008").is_dir(), kept, "{case}");
        assert_eq!(
            newest(&ck).file_name().unwrap(),
            "step-0000000012",
            "{case}"
        );
    }
}

/// Rotation removes a checkpoint's own files only: a user's file in a `step-N` directory (an
/// export beside the model, a copy) survives it, in the directory renamed `kept-step-N`, and
/// the run and its resumes go on. Before, rotation removed the whole directory, the user's
/// files with it.
#[test]
fn rotation_never_deletes_a_users_file_in_a_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    succeeds(&strs(&run(&ck, "2", &[])));
    std::fs::write(ck.join("step-0000000004/model.onnx"), "the user's export").unwrap();
    succeeds(&strs(&run(&ck, "4", &["--resume", ck.to_str().unwrap()])));
    let kept = ck.join("kept-step-0000000004");
    let left: Vec<_> = std::fs::read_dir(&kept)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["model.onnx"], "only the user's file stays");
    assert_eq!(
        std::fs::read_to_string(kept.join("model.onnx")).unwrap(),
        "the user's export"
    );
    // Rotation went on around it: the last two checkpoints, and a resume from the newest.
    let names: Vec<_> = checkpoints(&ck)
        .iter()
        .map(|c| c.file_name().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["step-0000000012", "step-0000000016"]);
    let stdout = succeeds(&strs(&run(&ck, "5", &["--resume", ck.to_str().unwrap()])));
    assert!(stdout.contains("step-0000000016"), "{stdout}");
}

/// The name `lock` in a checkpoint directory is ember's: a user's file there, or a link, is
/// refused and left as it was (the lock was written over it, or through the link into the
/// file it names); an output at it, or at a name checkpoints take, is refused too; and a run
/// that fails before training gives the lock back.
#[test]
fn the_lock_never_writes_over_a_users_file_and_goes_with_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    std::fs::create_dir(&ck).unwrap();
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "mine").unwrap();
    std::fs::write(ck.join("lock"), "mine").unwrap();
    fails_with(&strs(&run(&ck, "1", &[])), "another kind than ember's lock");
    std::fs::remove_file(ck.join("lock")).unwrap();
    std::os::unix::fs::symlink(&notes, ck.join("lock")).unwrap();
    fails_with(
        &strs(&run(&ck, "1", &[])),
        "where ember keeps its lock file",
    );
    assert_eq!(std::fs::read(&notes).unwrap(), b"mine");
    std::fs::remove_file(ck.join("lock")).unwrap();
    for name in ["lock", "step-0000000004"] {
        let save = ck.join(name);
        fails_with(
            &strs(&run(&ck, "1", &["--save", save.to_str().unwrap()])),
            "--save",
        );
    }
    // A run refused on its data, after its checkpoint directory was taken: the lock goes.
    let missing = dir.path().join("missing.csv");
    let data = format!("csv:{}", missing.display());
    let args = [
        "train",
        "--device",
        "flex",
        "--data",
        &data,
        "--classes",
        "2",
        "--checkpoint",
        ck.to_str().unwrap(),
    ];
    fails_with(&args, "missing.csv");
    assert!(!ck.join("lock").exists(), "the lock stayed");
}

/// A resume with fewer --epochs than the checkpoint has done trains nothing: refused (it
/// exited 0), and a state.json whose step is not its name's is damaged, so the resume falls
/// back.
#[test]
fn a_resume_with_fewer_epochs_is_refused_one_with_as_many_writes_its_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let (first, again) = (dir.path().join("first.st"), dir.path().join("again.st"));
    succeeds(&strs(&run(&ck, "2", &["--save", first.to_str().unwrap()])));
    let resume = ["--resume", ck.to_str().unwrap()];
    fails_with(
        &strs(&run(&ck, "1", &resume)),
        "has done 2 epoch(s) already; give 2 or more",
    );
    // A run killed after its last checkpoint, before `--save`, gets its file from the resume:
    // it was refused, and the network trained reached no file (hostile pass).
    let save = ["--save", again.to_str().unwrap()];
    let stdout = succeeds(&strs(&run(&ck, "2", &[&resume[..], &save].concat())));
    assert!(stdout.contains("nothing more to train"), "{stdout}");
    assert_eq!(
        std::fs::read(&again).unwrap(),
        std::fs::read(&first).unwrap()
    );
    let state = ck.join("step-0000000008").join("state.json");
    let text = std::fs::read_to_string(&state).unwrap();
    std::fs::write(&state, text.replace("\"steps\": 8", "\"steps\": 7")).unwrap();
    let stdout = succeeds(&strs(&run(&ck, "3", &resume)));
    assert!(stdout.contains("its state.json says step 7"), "{stdout}");
    assert!(stdout.contains("step-0000000004"), "{stdout}");
}
