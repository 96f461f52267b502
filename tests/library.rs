//! ember as a library: `fit` with a Block, a Loss and a SyncPolicy that are all the user's own,
//! on flex and on wgpu (lavapipe in CI).

mod common;

#[path = "library/accumulate.rs"]
mod accumulate;
#[path = "library/callbacks.rs"]
mod callbacks;
#[path = "library/carried_state.rs"]
mod carried_state;
#[path = "library/checkpoint_states.rs"]
mod checkpoint_states;
#[path = "library/checkpoints.rs"]
mod checkpoints;
#[path = "library/hybridize.rs"]
mod hybridize;
#[path = "library/lr_find.rs"]
mod lr_find;
#[path = "library/precision.rs"]
mod precision;
#[path = "library/run_spec.rs"]
mod run_spec;
#[path = "library/schedules.rs"]
mod schedules;
#[path = "library/sequence_model.rs"]
mod sequence_model;

use burn::nn::{Linear, LinearConfig};
use burn::prelude::*;
use burn::tensor::activation::relu;
use ember::{Block, Error, Init, Loss, NdTensor, Optimizer, Result};
use ember_datasets::Synthetic;
use ember_trainer::fit::{Fit, SyntheticEpochs};
use ember_trainer::plot::{TimelineFigure, render};
use ember_trainer::policy::{InFlight, PolicyKind, SyncPolicy};
use ember_trainer::trace::Trace;

/// A user's module: a residual MLP, not built from ember's layers.
#[derive(Module, Debug)]
struct Residual {
    input: Linear,
    hidden: Linear,
    output: Linear,
}

impl Block for Residual {
    fn forward(&self, x: NdTensor) -> NdTensor {
        let h = relu(self.input.forward(x.rank::<2>()));
        let h = h.clone() + relu(self.hidden.forward(h));
        self.output.forward(h).into()
    }
}

/// A user's loss: mean squared error per example, refusing a target of the wrong shape.
struct Mse;

impl Loss for Mse {
    type Target = Tensor<2>;

    fn forward(&self, pred: Tensor<2>, target: Tensor<2>) -> Result<Tensor<1>> {
        if pred.dims() != target.dims() {
            return Err(Error::Shape {
                what: "Mse target".into(),
                expected: format!("{:?}", pred.dims()),
                got: target.dims().to_vec(),
            });
        }
        let d = pred - target;
        Ok((d.clone() * d).mean_dim(1).squeeze_dim(1))
    }
}

/// A user's policy: a barrier before every third batch, at most two in flight otherwise; it
/// records every loss it observed.
#[derive(Default)]
struct Thirds {
    seen: Vec<(usize, f32)>,
}

impl SyncPolicy for Thirds {
    fn kind(&self) -> PolicyKind {
        PolicyKind::Custom("thirds".into())
    }

    fn before_issue(&mut self, batch: usize, flight: &mut InFlight) -> Result<()> {
        if batch > 0 && batch.is_multiple_of(3) {
            flight.wait_all()?;
            self.seen.extend(flight.last_observed());
            Ok(())
        } else {
            flight.wait_while_longer_than(2)
        }
    }
}

const BATCHES: usize = 12;

fn train(device: &Device) -> (Trace, Thirds, f64) {
    let eval_device = device.clone();
    let device = device.clone().autodiff();
    device.seed(3);
    let net = Residual {
        input: LinearConfig::new(16, 32).init(&device),
        hidden: LinearConfig::new(32, 32).init(&device),
        output: LinearConfig::new(32, 1).init(&device),
    }
    .initialize(Init::Xavier, &device);
    let trainer = Optimizer::new(&net, "adam", 0.01).unwrap();
    let data = Synthetic::regression(32, 16, 0.01, 5);
    let held_out = data.batch(10_000);
    let mut batches = SyntheticEpochs::new(data, BATCHES);
    let val_mse = move |net: &Residual, device: &Device| -> Result<f64> {
        let x = held_out.x_on(device)?;
        let y = NdTensor::from_host(&held_out.y, &held_out.y_shape, device)?.into_rank()?;
        Ok(f64::from(
            Mse.forward(net.forward(x).into_rank()?, y)?
                .mean()
                .into_scalar::<f32>(),
        ))
    };
    let untrained = val_mse(&net, &device).unwrap();
    let mut policy = Thirds::default();
    let run = Fit::new(net, Mse, trainer, &device)
        .policy(&mut policy)
        .epochs(3)
        .evaluate("val_mse", move |net: &Residual| val_mse(net, &eval_device))
        .run(&mut batches)
        .unwrap();
    (run.trace, policy, untrained)
}

fn check(trace: &Trace, policy: &Thirds, untrained: f64) {
    assert_eq!(trace.batches.len(), 3 * BATCHES);
    assert!(
        trace
            .batches
            .iter()
            .all(|b| b.policy == PolicyKind::Custom("thirds".into()))
    );
    for epoch in 0..3 {
        let batches: Vec<_> = trace.batches.iter().filter(|b| b.epoch == epoch).collect();
        for b in &batches {
            assert!(b.loss.is_finite() && b.done >= b.issue_start, "{b:?}");
            let earlier = &batches[..b.batch];
            if b.batch > 0 && b.batch % 3 == 0 {
                // The user's barrier: every earlier batch finished before this one was issued.
                let latest = earlier.iter().map(|p| p.done).fold(f64::MIN, f64::max);
                assert!(
                    b.issue_start >= latest,
                    "batch {} of epoch {epoch} started early",
                    b.batch
                );
            } else if b.batch >= 3 {
                // The user's window: batch t-3 finished before t was issued.
                assert!(b.issue_start >= earlier[b.batch - 3].done, "{b:?}");
            }
        }
    }
    // The policy saw, at each barrier, the loss of the batch just before it.
    assert_eq!(policy.seen.len(), 3 * ((BATCHES - 1) / 3));
    for (batch, loss) in &policy.seen {
        assert_eq!(batch % 3, 2, "{:?}", policy.seen);
        let recorded = trace
            .batches
            .iter()
            .find(|b| b.batch == *batch && b.loss == *loss);
        assert!(
            recorded.is_some(),
            "the loss {loss} of batch {batch} is not in the trace"
        );
    }
    // The user's loss trained the user's block: the held-out error fell well below the
    // untrained network's.
    let val: Vec<f64> = trace.epochs.iter().map(|e| e.metrics["val_mse"]).collect();
    assert!(
        val[2] < 0.25 * untrained,
        "validation MSE: untrained {untrained}, per epoch {val:?}"
    );
    // The same trace files and plots as the CLI's.
    let dir = tempfile::tempdir().unwrap();
    let written = trace.write(&dir.path().join("trace.csv")).unwrap();
    assert_eq!(written.len(), 2);
    let csv = std::fs::read_to_string(&written[0]).unwrap();
    assert_eq!(csv.lines().count(), 1 + 3 * BATCHES);
    // A trace from fit draws as it is.
    let files = render(
        &TimelineFigure {
            traces: &[trace],
            subtitle: "user policy",
        },
        dir.path(),
        "timeline",
    )
    .unwrap();
    let svg = std::fs::read_to_string(
        files
            .iter()
            .find(|f| f.extension().unwrap() == "svg")
            .unwrap(),
    )
    .unwrap();
    assert!(svg.contains("thirds"));
}

#[test]
fn user_block_loss_and_policy_on_flex() {
    let (trace, policy, untrained) = train(&Device::flex());
    check(&trace, &policy, untrained);
}

#[test]
fn user_block_loss_and_policy_on_wgpu() {
    let (trace, policy, untrained) = train(&common::wgpu());
    check(&trace, &policy, untrained);
}

#[test]
fn labels_beyond_the_network_outputs_are_an_error_naming_them() {
    use ember::{Dense, Sequential, SoftmaxCrossEntropyLoss};
    use ember_datasets::{DataLoader, Examples};
    let device = Device::flex().autodiff();
    // Five classes in the data, but a network with three outputs.
    let data =
        Examples::classification(vec![0.5; 20], 2, vec![0, 1, 2, 4, 1, 0, 2, 1, 0, 3], 5).unwrap();
    let net: Sequential = Sequential::new()
        .add(Dense::new(3))
        .initialize(Init::default(), &device);
    let trainer = Optimizer::new(&net, "sgd", 0.1).unwrap();
    let mut loader = DataLoader::new(data, 5).unwrap();
    let err = Fit::new(net, SoftmaxCrossEntropyLoss, trainer, &device)
        .policy(ember_trainer::policy::Window(1))
        .epochs(1)
        .run(&mut loader)
        .err()
        .expect("labels 3 and 4 cannot index 3 outputs");
    // The step's own error crosses the engine with its variant, the batch as a typed field.
    let ember::Error::Step { at, source } = &err else {
        panic!("expected the step's error with its batch, got {err:?}");
    };
    assert_eq!((at.epoch, at.batch), (0, 0), "{err}");
    assert!(
        matches!(
            **source,
            ember::Error::InvalidValue {
                name: "class label",
                ..
            }
        ),
        "{err:?}"
    );
    let err = err.to_string();
    assert!(
        err.contains("class label 4") && err.contains("3 outputs"),
        "{err}"
    );
}

/// `train_acc` comes from the forward passes the steps already made (d2l's `train_ch3`), not
/// from a second pass after the epoch: with one batch per epoch, epoch e's training accuracy is
/// the accuracy of the network as epoch e − 1 left it.
#[test]
fn training_accuracy_is_accumulated_from_the_steps_forward_passes() {
    use ember::{Activation, Dense, Sequential, SoftmaxCrossEntropyLoss};
    use ember_datasets::{DataLoader, Examples};
    use ember_trainer::evaluate::accuracy;
    let device = Device::flex().autodiff();
    // 60 examples of 4 features; the class is the largest of the first three.
    let mut state = 7u64;
    let x: Vec<f32> = (0..60 * 4)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            4.0 * ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5)
        })
        .collect();
    let labels: Vec<usize> = x
        .chunks(4)
        .map(|row| (0..3).max_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap())
        .collect();
    let data = Examples::classification(x, 4, labels, 3).unwrap();
    let loader = DataLoader::new(data, 60).unwrap();
    let example = loader.examples().batch(&[0]);
    let net: Sequential = Sequential::new()
        .add(Dense::new(16).activation(Activation::Relu))
        .add(Dense::new(3))
        .initialize(Init::Xavier, &device)
        .infer_shape(example.x_on(&device).unwrap())
        .unwrap();
    let untrained = accuracy(&net.valid(), &loader, &Device::flex()).unwrap();
    let trainer = Optimizer::new(&net, "sgd", 0.5).unwrap();
    let eval = loader.rebatched(60).unwrap();
    let run = Fit::new(net, SoftmaxCrossEntropyLoss, trainer, &device)
        .epochs(6)
        .evaluate("acc_after", move |net: &Sequential| {
            accuracy(net, &eval, &Device::flex())
        })
        .run(&mut loader.clone())
        .unwrap();
    let metric =
        |name: &str| -> Vec<f64> { run.trace.epochs.iter().map(|e| e.metrics[name]).collect() };
    let (train_acc, after) = (metric("train_acc"), metric("acc_after"));
    let mut before = vec![untrained];
    before.extend_from_slice(&after[..after.len() - 1]);
    assert_eq!(train_acc, before, "accuracy after each epoch: {after:?}");
    // The accuracy moves from epoch to epoch, so a second pass (train_acc == acc_after) fails.
    assert!(
        after.windows(2).any(|w| w[0] != w[1]) && train_acc != after,
        "train_acc {train_acc:?}, after {after:?}"
    );
}
