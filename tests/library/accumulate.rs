//! Gradient accumulation (`Fit::accumulate`): N batches of b make the update of one batch of
//! N·b under SGD with momentum, an epoch's shorter last group too; checkpoints wait for a
//! group's last batch, and a run resumed from one in the middle of an epoch forms the same
//! groups, gives the same rates and reports the same training metrics (their sums so far are
//! in the checkpoint).

use burn::prelude::*;
use ember::SoftmaxCrossEntropyLoss;
use ember::{Activation, Block, Dense, Init, Optimizer, OptimizerKind, Sequential};
use ember_datasets::{DataLoader, Examples};
use ember_trainer::checkpoint::{Checkpoint, Checkpointing};
use ember_trainer::fit::{Fit, FitRun};
use ember_trainer::metric::MetricKind;

use super::common::cli::checkpoints;
use super::common::params::{flat, max_difference};

/// 96 examples of 4 features in 3 classes.
fn examples() -> Examples {
    let x: Vec<f32> = (0..96 * 4).map(|i| (i as f32 * 0.37).sin()).collect();
    let labels: Vec<usize> = (0..96).map(|i| (i * 7 % 11) % 3).collect();
    Examples::classification(x, 4, labels, 3).unwrap()
}

fn network(device: &Device) -> Sequential {
    Sequential::new()
        .add(Dense::new(8).activation(Activation::Relu))
        .add(Dense::new(3))
        .initialize(Init::default(), device)
        .infer_shape(Tensor::<2>::zeros([1, 4], device))
        .unwrap()
}

/// Two epochs of `net` with batches of `batch`, `accumulate` to an update, SGD with momentum,
/// the same shuffled order of examples whatever the batch; `configure` adds the rest.
fn train(
    net: &Sequential,
    batch: usize,
    accumulate: usize,
    configure: impl FnOnce(
        Fit<'static, Sequential, SoftmaxCrossEntropyLoss>,
    ) -> Fit<'static, Sequential, SoftmaxCrossEntropyLoss>,
) -> FitRun<Sequential> {
    let device = Device::flex().autodiff();
    let kind = OptimizerKind::sgd().with_momentum(0.9).unwrap();
    let optimizer = Optimizer::new(net, kind, 0.2).unwrap();
    let fit = Fit::new(net.clone(), SoftmaxCrossEntropyLoss, optimizer, &device)
        .epochs(2)
        .accumulate(accumulate);
    let mut data = DataLoader::new(examples(), batch).unwrap().shuffle(7);
    configure(fit).run(&mut data).unwrap()
}

#[test]
fn accumulated_batches_make_the_update_of_one_batch_as_large() {
    let net = network(&Device::flex().autodiff());
    // 12 batches of 8 an epoch: 3 groups of 4, or groups of 5, 5 and a shorter 2 (40, 40, 16
    // examples, as batches of 40 cut 96).
    for (batch, accumulate, large) in [(8, 4, 32), (8, 5, 40)] {
        let accumulated = train(&net, batch, accumulate, |fit| fit);
        let one = train(&net, large, 1, |fit| fit);
        assert_eq!(accumulated.trace.batches.len(), 24);
        let difference = max_difference(&flat(&accumulated.net), &flat(&one.net));
        eprintln!("{accumulate} x {batch} against {large}: max difference {difference:e}");
        assert!(
            difference < 1e-6,
            "{accumulate} x {batch} against {large}: {difference}"
        );
        // Not so because the runs barely move: the small batches alone go elsewhere.
        let apart = max_difference(
            &flat(&train(&net, batch, 1, |fit| fit).net),
            &flat(&one.net),
        );
        assert!(apart > 1e-3, "{apart}");
    }
}

#[test]
fn a_checkpoint_holds_whole_updates_and_a_resume_forms_the_same_groups() {
    let net = network(&Device::flex().autodiff());
    let dir = tempfile::tempdir().unwrap();
    let schedule = || "cosine:warmup=2".parse::<ember::optim::Schedule>().unwrap();
    let metrics = || {
        let kinds = MetricKind::parse_list("acc,top2,ce,f1").unwrap();
        kinds.into_iter().map(MetricKind::build).collect::<Vec<_>>()
    };
    let mut every = Checkpointing::new(dir.path()).every(5);
    every.keep = 100;
    let whole = train(&net, 8, 4, |fit| {
        fit.lr_schedule(schedule())
            .metrics(metrics())
            .checkpoint(every)
    });
    // Groups end at batches 4, 8, 12 of each epoch: each multiple of 5 is checkpointed at the
    // end of its group (5 at 8, 10 at 12, 15 at 16, 20, and the run's end).
    let written: Vec<Checkpoint> = checkpoints(dir.path())
        .iter()
        .map(|d| Checkpoint::open(d).unwrap())
        .collect();
    let steps: Vec<u64> = written.iter().map(|c| c.position.steps).collect();
    assert_eq!(steps, [8, 12, 16, 20, 24]);
    // The schedule counts updates: 6 in the run, the 2 of warm-up, then the cosine over 4;
    // the 4 batches of a group share their update's rate.
    let rates: Vec<f64> = whole.trace.batches.iter().map(|b| b.lr.unwrap()).collect();
    assert_eq!(&rates[..8], &[0.1, 0.1, 0.1, 0.1, 0.2, 0.2, 0.2, 0.2]);
    assert!(rates[20] < rates[16] && rates[16] < rates[8], "{rates:?}");
    // In the middle of epoch 1 (batch 8) and of epoch 2 (batch 4).
    for from in [&written[0], &written[2]] {
        let resume_at = from.position.steps;
        let resumed_epoch = from.position.epoch;
        let from = from.clone();
        // Its checkpoints as the whole run's: each reads the metrics' sums, which sets where
        // their float sums are cut.
        let again = tempfile::tempdir().unwrap();
        let resumed = train(&net, 8, 4, |fit| {
            fit.lr_schedule(schedule())
                .metrics(metrics())
                .checkpoint(Checkpointing::new(again.path()).every(5))
                .resume(from)
        });
        assert_eq!(
            flat(&resumed.net),
            flat(&whole.net),
            "resumed at {resume_at}"
        );
        let resumed_rates: Vec<f64> = resumed
            .trace
            .batches
            .iter()
            .map(|b| b.lr.unwrap())
            .collect();
        assert_eq!(resumed_rates, rates);
        // The epochs the resumed run counted, from the one it resumed in the middle of. (An
        // epoch before it comes back from the checkpoint's trace.jsonl, whose floats serde_json
        // reads back to within an ulp, not exactly: a flaw of the trace's storage, not of the
        // metrics' sums, left for serde_json's `float_roundtrip`.)
        let columns = |run: &FitRun<Sequential>| -> Vec<_> {
            let epochs = &run.trace.epochs[resumed_epoch..];
            epochs.iter().map(|e| e.metrics.clone()).collect()
        };
        assert_eq!(columns(&resumed), columns(&whole), "resumed at {resume_at}");
    }
}
