//! Checkpoints written from code: with one after every step, the bytes their traces take grow
//! with the run, not with its square, and each checkpoint still holds exactly its own records
//! and resumes to the bit; a copy of a live run's directory is not that run's.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;

use burn::prelude::*;
use ember::{L2Loss, Optimizer};
use ember_datasets::Synthetic;
use ember_trainer::checkpoint::{Checkpoint, Checkpointing, Entry, scan};
use ember_trainer::fit::{Fit, SyntheticEpochs};

use super::callbacks::network;
use crate::common::params::flat;

#[test]
fn a_checkpoint_every_step_writes_bytes_that_grow_with_the_run_and_each_resumes() {
    let device = Device::flex().autodiff();
    let net = network(&device);
    let dir = tempfile::tempdir().unwrap();
    let mut checkpointing = Checkpointing::new(dir.path()).every(1);
    checkpointing.keep = 1000;
    let data = || SyntheticEpochs::new(Synthetic::chapter(4, 3, 0), 30);
    let fit = || {
        Fit::new(
            net.clone(),
            L2Loss,
            Optimizer::new(&net, "sgd", 0.01).unwrap(),
            &device,
        )
    };
    let whole = fit()
        .epochs(2)
        .checkpoint(checkpointing)
        .run(&mut data())
        .unwrap();
    let checkpoints: Vec<Checkpoint> = scan(dir.path())
        .unwrap()
        .into_iter()
        .map(|(_, entry)| match entry {
            Entry::Sound(checkpoint) => checkpoint,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(checkpoints.len(), 60);
    // Each holds the records of its own steps, though later ones appended to its file.
    let mut files = BTreeMap::new();
    for checkpoint in &checkpoints {
        let trace = checkpoint.trace().unwrap();
        assert_eq!(trace.batches.len() as u64, checkpoint.position.steps);
        let meta = std::fs::metadata(checkpoint.dir.join("trace.jsonl")).unwrap();
        files.insert((meta.dev(), meta.ino()), meta.len());
    }
    // What the traces take on disk: the last checkpoint's trace twice (the two logs), where
    // a file each took the sum of every checkpoint's, 30 times as much here.
    let last = checkpoints[59].position.trace_bytes.unwrap();
    let taken: u64 = files.values().sum();
    assert!(
        taken <= 2 * last,
        "{} files take {taken} bytes for a trace of {last}",
        files.len()
    );
    // The first checkpoint, its log grown by 59 checkpoints since, resumes to the same bits.
    let resumed = fit()
        .epochs(2)
        .resume(checkpoints[0].clone())
        .run(&mut data())
        .unwrap();
    assert_eq!(flat(&resumed.net), flat(&whole.net));
    assert_eq!(resumed.trace.batches.len(), 60);
}

/// A live run's checkpoint directory, copied with its `lock`, is the copy's to write: the lock
/// names the directory it was taken for. 041bf38 refused the copy as held by that run.
#[test]
fn a_copy_of_a_live_runs_directory_is_not_held_by_that_run() {
    let dir = tempfile::tempdir().unwrap();
    let (live, copy) = (dir.path().join("live"), dir.path().join("copy"));
    let mut holder = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let started = ember::io::proc_stat(holder.id()).unwrap()[19].clone();
    std::fs::create_dir(&live).unwrap();
    let meta = std::fs::metadata(&live).unwrap();
    let lock = format!("{} {started} {}:{}", holder.id(), meta.dev(), meta.ino());
    std::fs::write(live.join("lock"), &lock).unwrap();
    std::fs::create_dir(&copy).unwrap();
    std::fs::write(copy.join("lock"), &lock).unwrap();
    let held = Checkpointing::new(&live).prepare(None);
    let copied = Checkpointing::new(&copy).prepare(None);
    holder.kill().unwrap();
    holder.wait().unwrap();
    let err = held.unwrap_err().to_string();
    assert!(
        err.contains(&format!("another run (pid {})", holder.id())),
        "{err}"
    );
    copied.unwrap();
    let mine = std::fs::read_to_string(copy.join("lock")).unwrap();
    assert!(
        mine.starts_with(&format!("{} ", std::process::id())),
        "{mine}"
    );
}
