//! A state carried from batch to batch (`Fit::carry`, d2l's sequential partitioning): each
//! batch starts from the state the batch before it ended in, detached, under every policy and
//! on an asynchronous device; each epoch starts from none; a resume inside an epoch goes on
//! from the checkpoint's state to the unbroken run's bits.

use std::sync::{Arc, Mutex};

use burn::module::{ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::prelude::*;
use ember::{Block, Init, Loss, Optimizer, SequenceCrossEntropyLoss};
use ember_datasets::text::{Partition, Subsequences};
use ember_trainer::checkpoint::{Checkpoint, Checkpointing, Entry, scan};
use ember_trainer::fit::{BatchSource, Fit, Target};
use ember_trainer::policy::{NoSync, SyncPolicy, Window};

use super::sequence_model::char_lstm::CharModel;

const VOCABULARY: usize = 11;
const EPOCHS: usize = 2;

/// A corpus with structure to learn, long enough for 7 batches of 4 × 6 per epoch.
fn corpus() -> Vec<usize> {
    (0..180).map(|i| (i * i / 7 + i / 3) % VOCABULARY).collect()
}

fn data() -> Subsequences {
    Subsequences::new(corpus(), 4, 6, Partition::Sequential, 0).unwrap()
}

fn network(device: &Device) -> CharModel {
    device.seed(1);
    CharModel::new(VOCABULARY, 12).initialize(Init::Xavier, device)
}

fn values(t: &Tensor<3>) -> Vec<f32> {
    t.clone()
        .into_data()
        .convert::<f32>()
        .try_to_vec::<f32>()
        .unwrap()
}

/// Every parameter's values, in visiting order.
struct Flatten(Vec<f32>);

impl ModuleVisitor for Flatten {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let values = param.val().into_data().convert::<f32>().try_to_vec::<f32>();
        self.0.extend(values.unwrap());
    }
}

fn flat(net: &CharModel) -> Vec<f32> {
    let mut visitor = Flatten(Vec::new());
    net.visit(&mut visitor);
    visitor.0
}

/// What each forward pass started from and ended in, in the order they ran.
type Seen = Arc<Mutex<Vec<(Option<Vec<Vec<f32>>>, Vec<Vec<f32>>)>>>;

fn fit_carried(
    net: CharModel,
    device: &Device,
    policy: impl SyncPolicy + 'static,
    seen: Option<Seen>,
) -> Fit<'static, CharModel, SequenceCrossEntropyLoss> {
    let optimizer = Optimizer::new(&net, "sgd", 0.5).unwrap();
    Fit::new(net, SequenceCrossEntropyLoss, optimizer, device)
        .policy(policy)
        .epochs(EPOCHS)
        .warmup(false)
        .carry(move |net: &CharModel, x, state: Option<Vec<Tensor<3>>>| {
            let before = state.as_ref().map(|s| s.iter().map(values).collect());
            let (y, state) = net.scores(x, state);
            if let Some(seen) = &seen {
                let after = state.iter().map(values).collect();
                seen.lock().unwrap().push((before, after));
            }
            (y.into(), state)
        })
}

fn policies() -> Vec<(&'static str, Box<dyn SyncPolicy>)> {
    vec![
        ("barrier", Box::new(Window(1))),
        ("t+2", Box::new(Window(2))),
        ("none", Box::new(NoSync)),
    ]
}

fn each_batch_goes_on_from_the_last(device: &Device) {
    let per_epoch = data().epoch(0).len();
    assert!(per_epoch >= 5, "{per_epoch} batches");
    for (name, policy) in policies() {
        let seen: Seen = Arc::default();
        let device = device.clone().autodiff();
        fit_carried(network(&device), &device, policy, Some(seen.clone()))
            .run(&mut data())
            .unwrap();
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), EPOCHS * per_epoch, "{name}");
        for (step, (before, _)) in seen.iter().enumerate() {
            let batch = step % per_epoch;
            match (batch, before) {
                // Each epoch starts from the network's initial state (a leak across epochs
                // fails here).
                (0, None) => {}
                (0, Some(_)) => panic!("{name}: step {step} starts an epoch from a state"),
                (_, None) => panic!("{name}: step {step} starts from no state"),
                // Bit for bit what the step before ended in: not zeros, not an older one.
                (_, Some(before)) => assert_eq!(before, &seen[step - 1].1, "{name}: step {step}"),
            }
        }
        // The states move: equal ones would pass the check above whatever was carried.
        assert_ne!(seen[1].1, seen[2].1, "{name}");
    }
}

#[test]
fn each_batch_starts_from_the_state_the_last_ended_in_on_flex() {
    each_batch_goes_on_from_the_last(&Device::flex());
}

#[test]
fn each_batch_starts_from_the_state_the_last_ended_in_on_wgpu() {
    each_batch_goes_on_from_the_last(&super::common::wgpu());
}

/// d2l's `train_epoch_ch8` with sequential partitioning, written out: the state from the batch
/// before, detached, and none at an epoch's start.
fn by_hand(mut net: CharModel, device: &Device) -> Vec<f32> {
    let mut data = data();
    let mut optimizer = Optimizer::new(&net, "sgd", 0.5).unwrap();
    for epoch in 0..EPOCHS {
        let mut state: Option<Vec<Tensor<3>>> = None;
        for batch in data.batches(epoch) {
            let batch = batch.unwrap();
            let x = batch.x_on(device).unwrap();
            let y = <SequenceCrossEntropyLoss as Loss>::Target::upload(&batch, device).unwrap();
            let (pred, next) = net.scores(x, state);
            state = Some(next.into_iter().map(Tensor::detach).collect());
            let loss = SequenceCrossEntropyLoss.forward(pred, y).unwrap();
            let grads = GradientsParams::from_grads(loss.backward(), &net);
            optimizer.set_learning_rate(0.5);
            net = optimizer.step_params(net, grads, batch.len()).unwrap();
        }
    }
    flat(&net)
}

#[test]
fn training_with_a_carried_state_is_d2ls_loop_under_every_policy() {
    let device = Device::flex().autodiff();
    // One network, sized once, for every run: the generator `network` seeds is the process's,
    // and this binary's other tests draw from it on their threads, so a second `network` and
    // sizing need not give the same weights.
    let first = data().batches(0).next().unwrap().unwrap();
    let untrained = network(&device)
        .infer_shape(first.x_on(&device).unwrap())
        .unwrap();
    let expected = by_hand(untrained.clone(), &device);
    for (name, policy) in policies() {
        let run = fit_carried(untrained.clone(), &device, policy, None)
            .run(&mut data())
            .unwrap();
        assert_eq!(flat(&run.net), expected, "{name}");
    }
    // The state matters: the same run starting every batch from zeros ends elsewhere.
    let net = untrained;
    let optimizer = Optimizer::new(&net, "sgd", 0.5).unwrap();
    let stateless = Fit::new(net, SequenceCrossEntropyLoss, optimizer, &device)
        .epochs(EPOCHS)
        .warmup(false)
        .run(&mut data())
        .unwrap();
    assert_ne!(flat(&stateless.net), expected);
}

#[test]
fn a_resume_inside_an_epoch_goes_on_from_the_checkpoints_state() {
    let device = Device::flex().autodiff();
    let dir = tempfile::tempdir().unwrap();
    let mut checkpointing = Checkpointing::new(dir.path()).every(3);
    checkpointing.keep = 100;
    let unbroken = fit_carried(network(&device), &device, NoSync, None)
        .checkpoint(checkpointing)
        .run(&mut data())
        .unwrap();
    let per_epoch = data().epoch(0).len();
    // Step 3 is inside the first epoch, 3 * k past the first epoch's end inside the second.
    let inside: Vec<Checkpoint> = scan(dir.path())
        .unwrap()
        .into_iter()
        .filter_map(|(_, entry)| match entry {
            Entry::Sound(checkpoint) => Some(checkpoint),
            _ => None,
        })
        .filter(|c| c.position.next_batch > 0)
        .collect();
    assert!(
        inside.len() >= 2,
        "{} checkpoints inside an epoch",
        inside.len()
    );
    for checkpoint in inside {
        let saved = checkpoint
            .position
            .carried
            .as_ref()
            .expect("a carried state");
        // h and c, each [layers, batch, hidden].
        assert_eq!(saved.tensors.len(), 2);
        assert_eq!(saved.tensors[0].shape, vec![1, 4, 12]);
        assert!(checkpoint.position.next_batch < per_epoch);
        let resumed = fit_carried(network(&device), &device, Window(2), None)
            .resume(Checkpoint::open(&checkpoint.dir).unwrap())
            .run(&mut data())
            .unwrap();
        assert_eq!(
            flat(&resumed.net),
            flat(&unbroken.net),
            "resumed from {}",
            checkpoint.dir.display()
        );
    }
}

#[test]
fn a_carried_state_needs_batches_of_one_size() {
    // Batches of 4 rows, then one of 2: it cannot go on from the first's state.
    struct Uneven(Subsequences);
    impl BatchSource for Uneven {
        fn batches(
            &mut self,
            epoch: usize,
        ) -> Box<dyn Iterator<Item = ember::Result<ember_datasets::Batch>> + '_> {
            let mut batches = self.0.epoch(epoch as u64);
            batches[1] = batches[1].split(2).unwrap().swap_remove(0);
            Box::new(batches.into_iter().map(Ok))
        }
    }
    let device = Device::flex().autodiff();
    let err = fit_carried(network(&device), &device, Window(1), None)
        .run(&mut Uneven(data()))
        .err()
        .expect("a batch of another size");
    let text = err.to_string();
    assert!(
        text.contains("of 2 examples") && text.contains("of 4"),
        "{text}"
    );
}
