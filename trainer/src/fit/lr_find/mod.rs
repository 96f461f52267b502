//! The learning-rate finder, PyTorch Lightning's `Tuner.lr_find`: [`Fit::lr_find`] trains a
//! copy of the network at a rate that rises every batch ([`LrSweep`]: from `min_lr` to
//! `max_lr`, exponentially by default), smooths the loss, stops once it blows up, and suggests
//! the rate where the smoothed loss falls fastest ([`Suggestion`]). The network given is handed
//! back untrained ([`LrFinding::net`]).
//!
//! ```
//! use burn::prelude::*;
//! use ember::{Activation, Block, Dense, Init, L2Loss, Optimizer, Sequential};
//! use ember_datasets::Synthetic;
//! use ember_trainer::fit::{Fit, LrSweep, SyntheticEpochs};
//!
//! let device = Device::flex().autodiff();
//! let net: Sequential = Sequential::new()
//!     .add(Dense::new(8).activation(Activation::Relu))
//!     .add(Dense::new(1))
//!     .initialize(Init::default(), &device);
//! let optimizer = Optimizer::new(&net, "sgd", 0.01).unwrap();
//! let mut data = SyntheticEpochs::new(Synthetic::regression(16, 4, 0.01, 0), 10);
//! // 30 rates from 1e-4 to 10: three epochs of the data's 10 batches.
//! let sweep = LrSweep::new(1e-4, 10.0, 30);
//! let found = Fit::new(net, L2Loss, optimizer, &device)
//!     .lr_find(&mut data, sweep)
//!     .unwrap();
//! assert_eq!(found.points[0].lr, 1e-4);
//! if let Some(lr) = found.suggestion.lr() {
//!     assert!((1e-4..=10.0).contains(&lr));
//! }
//! // found.net is the network as given, ready for a run at the suggested rate.
//! ```

mod finding;
mod suggestion;
mod sweep;
#[cfg(test)]
mod tests;

use std::cell::RefCell;
use std::rc::Rc;

use ember::{Block, Error, Loss, Result};

use super::callback::{Action, Callback};
use super::source::BatchSource;
use super::{Fit, infer};
use crate::target::Target;
use crate::trace::BatchRecord;

pub use finding::LrFinding;
pub use suggestion::{LrPoint, Suggestion, SweepEnd};
pub use sweep::{LrSweep, SweepMode};

/// The curve as it grows: smoothing and the divergence check, batch by batch.
struct Curve {
    sweep: LrSweep,
    points: Vec<LrPoint>,
    average: f64,
    best: f64,
    ended: Option<SweepEnd>,
}

impl Curve {
    fn new(sweep: LrSweep) -> Self {
        Self {
            sweep,
            points: Vec::new(),
            average: 0.0,
            best: f64::INFINITY,
            ended: None,
        }
    }

    /// Adds a batch's loss at `lr`; sets `ended` where the sweep ends with it.
    fn push(&mut self, lr: f64, loss: f32) {
        if !loss.is_finite() {
            self.ended = Some(SweepEnd::NonFiniteLoss { lr, value: loss });
            return;
        }
        let beta = self.sweep.beta;
        self.average = beta * self.average + (1.0 - beta) * f64::from(loss);
        let smoothed = self.average / (1.0 - beta.powi(self.points.len() as i32 + 1));
        self.points.push(LrPoint {
            lr,
            loss: f64::from(loss),
            smoothed,
        });
        if let Some(threshold) = self.sweep.early_stop_threshold
            && self.points.len() > 1
            && smoothed > threshold * self.best
        {
            self.ended = Some(SweepEnd::Diverged {
                lr,
                smoothed,
                best: self.best,
                threshold,
            });
        }
        self.best = self.best.min(smoothed);
        if self.ended.is_none() && self.points.len() >= self.sweep.steps {
            self.ended = Some(SweepEnd::Finished);
        }
    }
}

/// The callback that grows the curve at every batch's end and stops the sweep.
struct Watch(Rc<RefCell<Curve>>);

impl Callback for Watch {
    fn batch_end(&mut self, batch: &BatchRecord) -> Result<Action> {
        let mut curve = self.0.borrow_mut();
        if curve.ended.is_some() {
            return Ok(Action::stop("the sweep has ended"));
        }
        let lr = batch
            .lr
            .unwrap_or_else(|| curve.sweep.rate(curve.points.len()));
        curve.push(lr, batch.loss);
        Ok(match &curve.ended {
            Some(end) => Action::stop(format!("learning-rate sweep: {end}")),
            None => Action::go_on(),
        })
    }
}

impl<'a, B, L> Fit<'a, B, L>
where
    B: Block + 'static,
    L: Loss + Send + Sync + 'static,
    L::Target: Target,
{
    /// Lightning's `lr_find`: trains a copy of the network and of the optimizer for
    /// `sweep.steps` batches of `data` (over as many epochs as that takes), step i at
    /// `sweep.rate(i)`, and returns the curve of loss against rate, the suggested rate and the
    /// network and optimizer as given, untouched.
    ///
    /// The sweep runs under a barrier (`Window(1)`, whatever [`Fit::policy`] says): each
    /// batch's loss is read before the next batch is issued, so that a loss that blows up
    /// stops the sweep at once, not a queue of batches later. Only its own divergence check
    /// runs: the Fit's callbacks, evaluations, training metrics, checkpoints,
    /// [`Fit::save_best`], [`Fit::rescue`] and schedule play no part. Replicas, the seed,
    /// warm-up and progress apply.
    ///
    /// A loss that comes back NaN or infinite ends the sweep ([`SweepEnd::NonFiniteLoss`]),
    /// as a smoothed loss beyond `early_stop_threshold` × its best does.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for a sweep that [`LrSweep::check`] refuses, for data without
    /// a batch, or for a Fit set to resume; any error of the data or of a step other than a
    /// non-finite loss.
    pub fn lr_find(mut self, data: &mut dyn BatchSource, sweep: LrSweep) -> Result<LrFinding<B>> {
        sweep.check()?;
        if let Some(checkpoint) = &self.resume {
            return Err(Error::InvalidValue {
                name: "resume",
                value: checkpoint.dir.display().to_string(),
                reason: "the learning-rate finder sweeps from the network given; resume the \
                         run itself instead"
                    .to_string(),
            });
        }
        let Some(first) = data.batches(0).next().transpose()? else {
            return Err(Error::InvalidValue {
                name: "data",
                value: "no batches".to_string(),
                reason: "the learning-rate finder needs batches to sweep over".to_string(),
            });
        };
        if self.accumulate > 1 {
            return Err(Error::InvalidValue {
                name: "accumulate",
                value: self.accumulate.to_string(),
                reason: "the sweep takes one batch at each rate, and an update of several \
                         batches would give them one; sweep with batches as large as an update"
                    .to_string(),
            });
        }
        // The copy starts from the very parameters handed back, with running statistics of
        // its own (a clone's are shared: the sweep would train the BatchNorm of the network
        // handed back).
        let net = infer(self.net, &first, &self.replicas)?;
        self.net = net.valid().train();
        let optimizer = self.optimizer.clone();
        self.epochs = match data.batches_per_epoch() {
            Some(per_epoch) if per_epoch > 0 => sweep.steps.div_ceil(per_epoch),
            // Each epoch gives a batch at least, and the callback stops at the last step.
            _ => sweep.steps,
        };
        let curve = Rc::new(RefCell::new(Curve::new(sweep)));
        self.policy = Box::new(crate::policy::Window(1));
        self.evaluations.clear();
        self.metrics = Some(Vec::new());
        self.checkpointing = None;
        self.rescue = None;
        self.best = None;
        self.schedule = Some(Box::new(sweep));
        self.callbacks = vec![Box::new(Watch(Rc::clone(&curve)))];
        let outcome = self.run(data);
        let mut curve = std::mem::replace(&mut *curve.borrow_mut(), Curve::new(sweep));
        let ended = match outcome {
            Ok(_) if curve.ended.is_some() => curve.ended.take(),
            Ok(run) => Some(match run.stopped {
                Some(signal) => SweepEnd::Stopped(signal),
                None => SweepEnd::DataEnded {
                    steps: curve.points.len(),
                },
            }),
            Err(error) if error.diverged() => curve.ended.take().or_else(|| {
                let value = match error.root() {
                    Error::NonFiniteLoss { value, .. }
                    | Error::NonFiniteAfterUpdate { value, .. } => *value,
                    _ => f32::NAN,
                };
                Some(SweepEnd::NonFiniteLoss {
                    lr: sweep.rate(curve.points.len()),
                    value,
                })
            }),
            Err(error) => return Err(error),
        };
        // A sweep cut short suggests nothing until its smoothed loss has turned, 10 % above its
        // lowest: the steepest fall of a curve that has not turned (or only wanders, at rates
        // too low to train) says nothing of where it turns.
        // Past the first points, as the suggestion passes over them: the smoothed loss starts
        // at the first batch's, which may be low by chance.
        let lowest = curve
            .points
            .iter()
            .skip(sweep.skip_begin)
            .map(|p| p.smoothed)
            .fold(f64::INFINITY, f64::min);
        let turned = curve
            .points
            .last()
            .is_some_and(|p| p.smoothed > 1.1 * lowest);
        let suggestion = match &ended {
            Some(SweepEnd::Stopped(_) | SweepEnd::DataEnded { .. }) if !turned => {
                Suggestion::CutShort {
                    ran: curve.points.len(),
                    of: sweep.steps,
                }
            }
            _ => Suggestion::of(&curve.points, sweep.mode, sweep.skip_begin, sweep.skip_end),
        };
        Ok(LrFinding {
            net,
            optimizer,
            points: curve.points,
            suggestion,
            ended: ended.unwrap_or(SweepEnd::Finished),
            sweep,
        })
    }
}
