//! Each step's learning rate: the optimizer's, scaled by the callbacks, or what a schedule
//! makes of it.

use ember::optim::{LrSchedule, ScheduleAt};
use ember::{Error, Result};

/// Each step's learning rate: `base`, the optimizer's, or what `schedule` makes of it over a
/// run of `total` steps. The frontend computes it as it issues the step, so that the trace
/// records it and a resumed run gives the same step the same rate.
pub(super) struct Rates<'a> {
    pub(super) base: f64,
    pub(super) schedule: Option<Box<dyn LrSchedule + 'a>>,
    pub(super) total: u64,
}

/// `base` times `scale`, unless that vanishes in single precision, which training computes in
/// ([`ember::optim::vanishes`]): a rate cut to nothing would train nothing, so it stays as it
/// was (`None`).
pub(super) fn scaled(base: f64, scale: f64) -> Option<f64> {
    let next = base * scale;
    (!ember::optim::vanishes(next)).then_some(next)
}

/// Refuses `schedule` where its rate from `base`, above 0, vanishes in single precision
/// ([`ember::optim::vanishes`]) at the start of one of `epochs` epochs of `per_epoch` steps, of
/// a run of `total`: those epochs would train nothing (a step schedule's factor cut the rate to
/// 1e-62 by the third epoch, and the run exited 0).
///
/// # Errors
/// [`Error::InvalidValue`] naming the rate, the schedule and the first such epoch.
pub(super) fn refuse_underflow(
    schedule: &dyn LrSchedule,
    base: f64,
    total: u64,
    epochs: usize,
) -> Result<()> {
    let per_epoch = total / epochs.max(1) as u64;
    for epoch in 0..epochs {
        let at = ScheduleAt {
            step: epoch as u64 * per_epoch,
            epoch,
            total,
        };
        let rate = schedule.rate(base, at);
        if rate > 0.0 && ember::optim::vanishes(rate) {
            return Err(Error::InvalidValue {
                name: "learning rate",
                value: ember::error::number(rate),
                reason: format!(
                    "the schedule {} makes the rate of {base} this at the start of epoch {}, \
                     which single precision makes 0: from there the run would train nothing",
                    schedule.describe(),
                    epoch + 1
                ),
            });
        }
    }
    Ok(())
}

impl Rates<'_> {
    /// The rate of optimizer step `step` (from 0: a batch, or with accumulation a group of
    /// batches), in epoch `epoch`.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for a schedule (a user's own) that gives a rate that is not a
    /// finite number, 0 or more, naming the schedule and the step.
    pub(super) fn of(&self, step: u64, epoch: usize) -> Result<f64> {
        let Some(schedule) = &self.schedule else {
            return Ok(self.base);
        };
        let at = ScheduleAt {
            step,
            epoch,
            total: self.total,
        };
        let rate = schedule.rate(self.base, at);
        if !(rate.is_finite() && rate >= 0.0) {
            return Err(Error::InvalidValue {
                name: "learning rate",
                value: rate.to_string(),
                reason: format!(
                    "the schedule {} gave it for step {step} (epoch {epoch}); a rate must be \
                     a finite number, 0 or more",
                    schedule.describe()
                ),
            });
        }
        Ok(rate)
    }
}
