//! The learning-rate finder as a library: `Fit::lr_find` sweeps a copy and hands the network
//! back untouched, its rates rise exponentially over several epochs of the data, a rate that
//! is too high ends the sweep at once, and the suggestion lies on the part of the curve that
//! fell.

use burn::prelude::*;
use ember::{Activation, BatchNorm, Block, Dense, Init, L2Loss, Optimizer, Sequential};
use ember_datasets::Synthetic;
use ember_trainer::fit::{
    Fit, LrFinding, LrSweep, Progress, Suggestion, SweepEnd, SyntheticEpochs,
};

use super::common::params::flat;

/// A small regression MLP, its sizes resolved, the same weights whatever else runs.
fn network(device: &Device) -> Sequential {
    device.seed(11);
    Sequential::new()
        .add(Dense::new(16).activation(Activation::Relu))
        .add(Dense::new(1))
        .initialize(Init::Xavier, device)
        .infer_shape(Tensor::<2>::zeros([1, 6], device))
        .unwrap()
}

/// Counts the batches issued.
#[derive(Default)]
struct Issued(usize);

impl Progress for Issued {
    fn issued(&mut self, _epoch: usize, _batch: usize, _elapsed: f64) {
        self.0 += 1;
    }
}

/// `sweep` over 7 batches an epoch of 32 examples of 6 features, with plain SGD; with the
/// number of batches issued.
fn find_counting(net: Sequential, sweep: LrSweep) -> (LrFinding<Sequential>, usize) {
    let device = Device::flex().autodiff();
    let optimizer = Optimizer::new(&net, "sgd", 0.01).unwrap();
    let mut data = SyntheticEpochs::new(Synthetic::regression(32, 6, 0.01, 4), 7);
    let mut issued = Issued::default();
    let found = Fit::new(net, L2Loss, optimizer, &device)
        .progress(&mut issued)
        .lr_find(&mut data, sweep)
        .unwrap();
    (found, issued.0)
}

fn find(net: Sequential, sweep: LrSweep) -> LrFinding<Sequential> {
    find_counting(net, sweep).0
}

#[test]
fn the_network_comes_back_untouched_while_its_copy_trained() {
    let device = Device::flex().autodiff();
    let net = network(&device);
    let before = flat(&net);
    let found = find(net, LrSweep::new(1e-4, 0.5, 30).early_stop_threshold(None));
    assert_eq!(flat(&found.net), before, "lr_find changed the network");
    assert_eq!(found.optimizer.learning_rate(), 0.01);
    // The copy did train: its loss at the end is well below its loss at the start.
    let (first, last) = (found.points[0], found.points[29]);
    assert!(
        last.loss < 0.5 * first.loss,
        "the copy did not learn: {first:?} to {last:?}"
    );
}

/// A BatchNorm's running statistics are state the sweep trains too: the network handed back
/// keeps its own (a clone's would be the copy's).
#[test]
fn the_network_comes_back_with_its_own_running_statistics() {
    let device = Device::flex().autodiff();
    device.seed(11);
    let net: Sequential = Sequential::new()
        .add(Dense::new(16))
        .add(BatchNorm::new())
        .add(Activation::Relu)
        .add(Dense::new(1))
        .initialize(Init::Xavier, &device)
        .infer_shape(Tensor::<2>::zeros([1, 6], &device))
        .unwrap();
    // `valid()` takes in every update burn still holds per thread.
    let before = flat(&net.valid());
    let found = find(net, LrSweep::new(1e-4, 0.5, 10).early_stop_threshold(None));
    assert_eq!(found.points.len(), 10);
    assert_eq!(
        flat(&found.net.valid()),
        before,
        "the sweep trained the running statistics handed back"
    );
}

#[test]
fn the_rates_rise_exponentially_from_min_to_max_over_several_epochs() {
    let device = Device::flex().autodiff();
    let found = find(
        network(&device),
        LrSweep::new(1e-5, 1e-1, 30).early_stop_threshold(None),
    );
    // 30 steps from 7 batches an epoch: five epochs, the last one cut short.
    assert_eq!(found.ended, SweepEnd::Finished);
    assert_eq!(found.points.len(), 30);
    assert_eq!(found.points[0].lr, 1e-5);
    assert_eq!(found.points[29].lr, 1e-1);
    // 4 decades in 29 steps: each rate is 10^(4/29) times the one before.
    let ratio = 10f64.powf(4.0 / 29.0);
    for pair in found.points.windows(2) {
        let step = pair[1].lr / pair[0].lr;
        assert!((step / ratio - 1.0).abs() < 1e-9, "{step} against {ratio}");
    }
}

#[test]
fn a_rate_too_high_ends_the_sweep_where_the_loss_blows_up() {
    let device = Device::flex().autodiff();
    let sweep = LrSweep::new(1e-4, 1e4, 100);
    let (found, issued) = find_counting(network(&device), sweep);
    // Under the barrier, the batch that blew up was the last one issued.
    assert_eq!(
        issued,
        found.points.len() + usize::from(matches!(found.ended, SweepEnd::NonFiniteLoss { .. }))
    );
    let stopped_at = match found.ended {
        SweepEnd::Diverged {
            lr,
            smoothed,
            best,
            threshold,
        } => {
            assert!(smoothed > threshold * best);
            assert_eq!(found.points.last().unwrap().lr, lr);
            lr
        }
        SweepEnd::NonFiniteLoss { lr, .. } => lr,
        other => panic!("the sweep to 1e4 did not blow up: {other:?}"),
    };
    assert!(found.points.len() < 100, "{} points", found.points.len());
    assert!(stopped_at < 1e4);
    // The suggestion lies in the swept range, past the skipped start, below the blow-up, and
    // where the smoothed loss falls.
    let Suggestion::At { lr, index, slope } = found.suggestion else {
        panic!("no suggestion: {:?}", found.suggestion);
    };
    assert!(index >= sweep.skip_begin && index < found.points.len() - 1);
    assert!(
        (1e-4..stopped_at).contains(&lr),
        "{lr} outside [1e-4, {stopped_at})"
    );
    assert!(slope < 0.0);
    // Lightning's suggestion with other skips gives another point of the same curve.
    assert!(found.suggest(0, 0).lr().is_some());
}

#[test]
fn a_sweep_refused_before_any_work_names_its_value() {
    let device = Device::flex().autodiff();
    let net = network(&device);
    let optimizer = Optimizer::new(&net, "sgd", 0.01).unwrap();
    let mut data = SyntheticEpochs::new(Synthetic::regression(32, 6, 0.01, 4), 7);
    let error = Fit::new(net, L2Loss, optimizer, &device)
        .lr_find(&mut data, LrSweep::new(1.0, 0.1, 50))
        .err()
        .expect("max_lr below min_lr");
    let message = error.to_string();
    assert!(
        message.contains("max_lr") && message.contains("0.1"),
        "{message}"
    );
}

#[test]
fn a_sweep_refuses_accumulation_which_would_give_several_batches_one_rate() {
    let device = Device::flex().autodiff();
    let net = network(&device);
    let optimizer = Optimizer::new(&net, "sgd", 0.01).unwrap();
    let mut data = SyntheticEpochs::new(Synthetic::regression(32, 6, 0.01, 4), 7);
    let Err(err) = Fit::new(net, L2Loss, optimizer, &device)
        .accumulate(4)
        .lr_find(&mut data, LrSweep::new(1e-4, 0.5, 30))
    else {
        panic!("a sweep with --accumulate 4 ran");
    };
    assert!(err.to_string().contains("accumulate"), "{err}");
}
