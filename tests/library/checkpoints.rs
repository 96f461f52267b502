//! Checkpoints written from code: with one after every step, the bytes their traces take grow
//! with the run, not with its square, and each checkpoint still holds exactly its own records
//! and resumes to the bit.

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
