//! Callbacks at the end of every epoch: early stopping on an evaluation's plateau, the same
//! stop in a run resumed from a checkpoint (the callback's state replayed from the trace), and
//! the learning rate reduced on a plateau, as the trace's `lr` column shows, and a resume with
//! another rate making the cuts the run made.

use std::cell::Cell;
use std::rc::Rc;

use burn::prelude::*;
use ember::{Block, Dense, Init, L2Loss, Optimizer, Sequential};
use ember_datasets::Synthetic;
use ember_trainer::checkpoint::{Checkpoint, Checkpointing};
use ember_trainer::fit::{
    Action, Callback, EarlyStopping, Fit, FitRun, ReduceLrOnPlateau, SyntheticEpochs,
};
use ember_trainer::trace::BatchRecord;

/// The validation accuracy of each epoch, in turn: it stops improving after epoch 2.
const ACCS: [f64; 10] = [0.5, 0.6, 0.6, 0.55, 0.6, 0.7, 0.8, 0.9, 0.9, 0.9];

/// The network every run starts from: the same weights whatever other tests draw from the
/// process's generator meanwhile.
pub fn network(device: &Device) -> Sequential {
    Sequential::new()
        .add(Dense::new(1))
        .initialize(Init::default(), device)
        .infer_shape(Tensor::<2>::zeros([1, 3], device))
        .unwrap()
}

/// A run of `net` for up to `epochs` epochs of 3 batches, its `val_acc` taken from `ACCS`
/// from epoch `from` on, with `configure`'s settings.
fn run(
    net: &Sequential,
    epochs: usize,
    from: usize,
    configure: impl FnOnce(Fit<'static, Sequential, L2Loss>) -> Fit<'static, Sequential, L2Loss>,
) -> FitRun<Sequential> {
    let device = Device::flex().autodiff();
    let net = net.clone();
    let optimizer = Optimizer::new(&net, "sgd", 0.01).unwrap();
    let next = Rc::new(Cell::new(from));
    let fit = Fit::new(net, L2Loss, optimizer, &device)
        .epochs(epochs)
        .evaluate("val_acc", move |_: &Sequential| {
            let epoch = next.get();
            next.set(epoch + 1);
            Ok(ACCS[epoch])
        });
    configure(fit)
        .run(&mut SyntheticEpochs::new(Synthetic::chapter(4, 3, 0), 3))
        .unwrap()
}

#[test]
fn early_stopping_ends_the_run_at_the_patiences_end_and_a_resume_ends_there_too() {
    let net = network(&Device::flex().autodiff());
    let stop = || "val_acc:2".parse::<EarlyStopping>().unwrap();
    let whole = run(&net, 10, 0, |fit| fit.callback(stop()));
    // Best 0.6 after epoch 2; epochs 3 and 4 do not beat it.
    assert_eq!(whole.trace.epochs.len(), 4);
    let why = whole.ended_early.clone().unwrap();
    assert!(
        why.contains("val_acc") && why.contains("after epoch 2"),
        "{why}"
    );

    // Three epochs, then a resume that may go to ten: the callback's state comes back from the
    // checkpoint's epochs, so it stops where the whole run stopped.
    let dir = tempfile::tempdir().unwrap();
    run(&net, 3, 0, |fit| {
        fit.callback(stop())
            .checkpoint(Checkpointing::new(dir.path()))
    });
    let last = Checkpoint::latest(dir.path()).unwrap().unwrap();
    let resumed = run(&net, 10, 3, |fit| fit.callback(stop()).resume(last));
    assert_eq!(resumed.trace.epochs.len(), 4);
    assert!(resumed.ended_early.is_some());
    let saved = |run: &FitRun<Sequential>, name: &str| {
        let path = dir.path().join(name);
        run.net.save_parameters(&path).unwrap();
        std::fs::read(path).unwrap()
    };
    let losses = |run: &FitRun<Sequential>| -> Vec<u32> {
        run.trace.batches.iter().map(|b| b.loss.to_bits()).collect()
    };
    assert_eq!(
        losses(&resumed),
        losses(&whole),
        "the same steps, to the bit"
    );
    assert_eq!(saved(&resumed, "resumed.st"), saved(&whole, "whole.st"));
}

#[test]
fn reduce_lr_on_plateau_scales_the_rate_of_the_steps_after_it() {
    let reduce = "val_acc:3:0.5".parse::<ReduceLrOnPlateau>().unwrap();
    let net = network(&Device::flex().autodiff());
    let run = run(&net, 6, 0, |fit| fit.callback(reduce));
    let rates: Vec<f64> = run.trace.batches.iter().map(|b| b.lr.unwrap()).collect();
    // Epochs 3, 4 and 5 (0.6, 0.55, 0.6) do not beat 0.6: 3 bad epochs, as Keras counts
    // them (and --early-stop), so epoch 6 runs at half the rate.
    assert_eq!(&rates[..15], &[0.01; 15]);
    assert_eq!(&rates[15..], &[0.005; 3]);
    assert!(run.ended_early.is_none());
}

/// A resume replays the cuts the run made, not the ones its callbacks asked for: from 1.6e-38
/// a cut by 0.8 is made once (1.28e-38) and then not (1.02e-38 is below single precision's
/// smallest normal number). Resumed with a rate of 1, the run goes on at 0.8, where replaying
/// the asks made it 0.64 (hostile pass: 0.512 after three asks).
#[test]
fn a_resume_with_another_rate_makes_the_cuts_the_run_made() {
    let device = Device::flex().autodiff();
    let net = network(&device);
    let dir = tempfile::tempdir().unwrap();
    let fit = |lr: f64, epochs: usize, from: usize| {
        let optimizer = Optimizer::new(&net, "sgd", lr).unwrap();
        let next = Rc::new(Cell::new(from));
        Fit::new(net.clone(), L2Loss, optimizer, &device)
            .epochs(epochs)
            .evaluate("val_acc", move |_: &Sequential| {
                let epoch = next.get();
                next.set(epoch + 1);
                Ok(ACCS[epoch])
            })
            .callback("val_acc:1:0.8".parse::<ReduceLrOnPlateau>().unwrap())
    };
    let data = || SyntheticEpochs::new(Synthetic::chapter(4, 3, 0), 3);
    let first = fit(1.6e-38, 4, 0)
        .checkpoint(Checkpointing::new(dir.path()))
        .run(&mut data())
        .unwrap();
    // Epochs 3 and 4 (0.6, 0.55) do not beat 0.6: two asks; the first is made.
    let rates: Vec<f64> = first.trace.batches.iter().map(|b| b.lr.unwrap()).collect();
    assert_eq!(rates[11], 1.6e-38 * 0.8, "{rates:?}");
    let made: Vec<_> = first.trace.epochs.iter().map(|e| e.lr_scale).collect();
    assert_eq!(made, [Some(1.0), Some(1.0), Some(0.8), Some(1.0)]);
    let last = Checkpoint::latest(dir.path()).unwrap().unwrap();
    let resumed = fit(1.0, 5, 4).resume(last).run(&mut data()).unwrap();
    let fifth: Vec<f64> = resumed
        .trace
        .batches
        .iter()
        .filter(|b| b.epoch == 4)
        .map(|b| b.lr.unwrap())
        .collect();
    assert_eq!(fifth, [0.8; 3]);
}

/// Stops the run at the end of the first batch it sees.
struct StopAtABatchsEnd;

impl Callback for StopAtABatchsEnd {
    fn batch_end(&mut self, _: &BatchRecord) -> ember::Result<Action> {
        Ok(Action::stop("a batch's end asked to stop"))
    }
}

/// A run stopped by a batch's end has no later step to find that its last update diverged.
/// With one update at a rate of 1e30 the parameters are finite (about 1e30) but give an
/// infinite loss: the stop's checkpoint held them, and the run ended as a sound one. Now the
/// stop checks the last update first, as an epoch's end does: the run fails naming the
/// divergence, and no checkpoint is written. At a sound rate, the same stop writes its
/// checkpoint and ends the run well.
#[test]
fn a_stop_at_a_batchs_end_checks_the_last_update_before_its_checkpoint() {
    let device = Device::flex().autodiff();
    let net = network(&device);
    for (lr, diverges) in [(1e30, true), (0.01, false)] {
        let dir = tempfile::tempdir().unwrap();
        let optimizer = Optimizer::new(&net, "sgd", lr).unwrap();
        let outcome = Fit::new(net.clone(), L2Loss, optimizer, &device)
            .epochs(2)
            .callback(StopAtABatchsEnd)
            .checkpoint(Checkpointing::new(dir.path()))
            .run(&mut SyntheticEpochs::new(Synthetic::chapter(4, 3, 0), 3));
        let latest = Checkpoint::latest(dir.path()).unwrap();
        match outcome {
            Err(error) => {
                assert!(diverges, "{error}");
                assert!(
                    matches!(error.root(), ember::Error::NonFiniteAfterUpdate { .. }),
                    "{error}"
                );
                assert!(latest.is_none(), "a checkpoint of diverged parameters");
            }
            Ok(run) => {
                assert!(!diverges, "the diverged update was kept");
                assert_eq!(run.trace.batches.len(), 1);
                assert!(run.ended_early.is_some());
                assert!(latest.is_some(), "the stop's checkpoint");
            }
        }
    }
}
