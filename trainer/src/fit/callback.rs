//! Callbacks, Gluon's estimator event handlers: a [`Callback`] hears the run begin and end, each
//! epoch begin and end, and each batch begin and end, and answers the ends with an [`Action`]:
//! stop the run, or scale the learning rate. Built in: [`super::EarlyStopping`] and
//! [`super::ReduceLrOnPlateau`] (at epochs' ends), and the learning-rate finder's divergence
//! check ([`super::Fit::lr_find`], at batches' ends).
//!
//! A callback reads records only, never a tensor, so it adds no barrier:
//! - `batch_end` comes when the frontend learns that the batch is done, with its loss: under a
//!   barrier right after the batch, under `--sync none` when the loop next waits (at the
//!   latest at the epoch's end). Batches end in the order they were issued. A batch's end
//!   comes after later batches began, as far as the policy let the frontend run ahead.
//! - `epoch_end` comes where the epoch's metrics were read.
//!
//! An epoch-level callback's state is a function of the epochs' records, so a resumed run
//! replays the checkpoint's epochs through it ([`Callback::replay`]) and goes on as the
//! uninterrupted run would. Batch-level actions are not kept: a resumed run's rate is the
//! optimizer's as the epochs' callbacks scaled it, without a batch's scaling, and a run that
//! a batch's end stopped trains on when resumed.
//!
//! A callback of one's own, in a few lines:
//!
//! ```
//! use ember_trainer::fit::{Action, Callback};
//! use ember_trainer::trace::{BatchRecord, EpochRecord};
//!
//! /// Stops once the training loss is below a target, and counts the batches above 1.
//! #[derive(Default)]
//! struct GoodEnough {
//!     target: f64,
//!     high: usize,
//! }
//!
//! impl Callback for GoodEnough {
//!     fn batch_end(&mut self, batch: &BatchRecord) -> ember::Result<Action> {
//!         self.high += usize::from(batch.loss > 1.0);
//!         Ok(Action::go_on())
//!     }
//!
//!     fn epoch_end(&mut self, epoch: &EpochRecord) -> ember::Result<Action> {
//!         Ok(match epoch.mean_loss < self.target {
//!             true => Action::stop(format!("loss {} is below {}", epoch.mean_loss, self.target)),
//!             false => Action::go_on(),
//!         })
//!     }
//! }
//! ```

use ember::Result;

use crate::trace::{BatchRecord, EpochRecord, Trace};

/// What a callback asks for after an epoch or a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Action {
    /// Stop the run, saying why: after this epoch, or, from a batch's end, once the batches in
    /// flight are done (the run's checkpoint, where it keeps them, is then written there, in
    /// the middle of the epoch, as a signal's is).
    pub stop: Option<String>,
    /// Multiply the learning rate (the base the schedule starts from) by this, saying why: for
    /// the batches issued after it.
    pub scale_lr: Option<(f64, String)>,
}

impl Action {
    /// Nothing to do.
    pub fn go_on() -> Self {
        Self {
            stop: None,
            scale_lr: None,
        }
    }

    /// Stop the run, saying why.
    pub fn stop(why: impl Into<String>) -> Self {
        Self {
            stop: Some(why.into()),
            ..Self::go_on()
        }
    }
}

/// Called by `Fit` as the run goes: every method has a default that does nothing, so a
/// callback writes only the events it wants (Gluon's `TrainBegin`, `EpochBegin`, `BatchBegin`,
/// `BatchEnd`, `EpochEnd`, `TrainEnd`).
///
/// Every method's error stops the run, as a step's would.
pub trait Callback {
    /// The run begins (a resumed one too, after [`Callback::replay`]), with the trace so far.
    fn train_begin(&mut self, trace: &Trace) -> Result<()> {
        let _ = trace;
        Ok(())
    }

    /// Epoch `epoch` (from 0) begins.
    fn epoch_begin(&mut self, epoch: usize) -> Result<()> {
        let _ = epoch;
        Ok(())
    }

    /// Batch `batch` of epoch `epoch` (both from 0) is about to be issued, at learning rate
    /// `lr`.
    fn batch_begin(&mut self, epoch: usize, batch: usize, lr: f64) -> Result<()> {
        let _ = (epoch, batch, lr);
        Ok(())
    }

    /// A batch is done: its record, with its loss and its times (its device-pool sample is
    /// read later, where the loop waits anyway: reading it here would wait behind the batches
    /// issued since).
    fn batch_end(&mut self, batch: &BatchRecord) -> Result<Action> {
        let _ = batch;
        Ok(Action::go_on())
    }

    /// The epoch just ended, with its metrics.
    fn epoch_end(&mut self, epoch: &EpochRecord) -> Result<Action> {
        let _ = epoch;
        Ok(Action::go_on())
    }

    /// The run ended without an error (at its last epoch, stopped by a callback or by a
    /// signal), with its whole trace.
    fn train_end(&mut self, trace: &Trace) -> Result<()> {
        let _ = trace;
        Ok(())
    }

    /// A resumed run's earlier epochs, from its checkpoint, to rebuild the callback's state.
    /// By default each goes through [`Callback::epoch_end`], and `Fit` applies the learning
    /// rate's scalings again.
    ///
    /// # Errors
    /// As [`Callback::epoch_end`].
    fn replay(&mut self, epochs: &[EpochRecord]) -> Result<Vec<Action>> {
        epochs.iter().map(|e| self.epoch_end(e)).collect()
    }
}
