//! A checkpoint's state files are checked as state, not only by their checksums: a file of
//! another run, with the checksums recomputed as a hand edit would, passed every check, and
//! Adam's moments of another network were dropped in silence, the run going on with fresh
//! ones (hostile pass, issue 62); a network file of another network failed with burn's debug
//! text.

use std::path::Path;

use ember_trainer::checkpoint::Checkpoint;

use crate::common::cli::{TINY, args, fails_with, strs, succeeds};

/// `ember train` as [`TINY`], with `hidden` units, Adam, `epochs` epochs and `more`.
fn adam(hidden: &str, epochs: &str, more: &[&str]) -> Vec<String> {
    let tiny = &TINY[..TINY.len() - 1];
    let base = args(tiny, &[hidden, "--optimizer", "adam", "--epochs", epochs]);
    args(&base, more).iter().map(|a| a.to_string()).collect()
}

/// Writes the checksums of the checkpoint `step` anew over its files as they are now, as a
/// hand edit that knows the format would.
fn reseal(step: &Path) {
    let mut position = Checkpoint::open(step).unwrap().position;
    for file in ["model.bpk", "optimizer.bpk"] {
        let bytes = std::fs::read(step.join(file)).unwrap();
        position
            .checksums
            .insert(file.to_string(), crc32fast::hash(&bytes));
    }
    position.checksums.remove("state.json");
    let without = serde_json::to_string_pretty(&position).unwrap();
    position.checksums.insert(
        "state.json".to_string(),
        crc32fast::hash(without.as_bytes()),
    );
    let text = serde_json::to_string_pretty(&position).unwrap();
    std::fs::write(step.join("state.json"), text).unwrap();
    Checkpoint::open(step).unwrap();
}

#[test]
fn another_runs_optimizer_state_is_found_and_the_checkpoint_before_it_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let (ours, theirs) = (dir.path().join("ours"), dir.path().join("theirs"));
    let path = |p: &Path| p.to_str().unwrap().to_string();
    succeeds(&strs(&adam("4", "2", &["--checkpoint", &path(&ours)])));
    succeeds(&strs(&adam("6", "1", &["--checkpoint", &path(&theirs)])));
    let newest = ours.join("step-0000000008");
    for (case, state) in [
        // The same optimizer over another network: other parameter ids, other shapes.
        (
            "another run's",
            std::fs::read(theirs.join("step-0000000004/optimizer.bpk")).unwrap(),
        ),
        // Bytes that are no state file at all.
        ("garbage", vec![7u8; 300]),
    ] {
        std::fs::write(newest.join("optimizer.bpk"), &state).unwrap();
        reseal(&newest);
        let said = match case {
            "garbage" => "it is no state file ember can read",
            _ => {
                "belongs to no parameter of model.bpk beside it: it is another network's \
                  optimizer state"
            }
        };
        // Found before anything resumed, so the resume falls back to the sound step before.
        let resume = adam(
            "4",
            "3",
            &["--checkpoint", &path(&ours), "--resume", &path(&ours)],
        );
        let stdout = succeeds(&strs(&resume));
        assert!(
            stdout.contains("step-0000000008 is damaged") && stdout.contains(said),
            "{case}: {stdout}"
        );
        assert!(
            stdout.contains("resuming from") && stdout.contains("step-0000000004"),
            "{case}: {stdout}"
        );
        // The damaged one is kept aside; put it back for the next case.
        let aside = ours.join("damaged-step-0000000008");
        assert!(aside.is_dir(), "{case}");
        std::fs::remove_dir_all(&ours).unwrap();
        succeeds(&strs(&adam("4", "2", &["--checkpoint", &path(&ours)])));
    }
}

#[test]
fn a_network_file_of_another_network_is_named_shape_by_shape() {
    let dir = tempfile::tempdir().unwrap();
    let theirs = dir.path().join("theirs");
    let path = theirs.to_str().unwrap();
    succeeds(&strs(&adam("6", "1", &["--checkpoint", path])));
    // Its record edited to claim this run's network, its files left whole and consistent.
    let step = theirs.join("step-0000000004");
    let state = std::fs::read_to_string(step.join("state.json")).unwrap();
    std::fs::write(step.join("state.json"), state.replace("mlp:6", "mlp:4")).unwrap();
    reseal(&step);
    let stderr = fails_with(
        &strs(&adam("4", "2", &["--resume", path])),
        "does not match the network",
    );
    assert!(
        stderr.contains(
            "mis-shaped: 0.weight is [8, 6] in the checkpoint but [8, 4] in this run's network"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("ShapeMismatch"), "{stderr}");
}
