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

/// `base` times `scale`, unless that is 0 in single precision, which training computes in: a
/// rate cut to nothing would train nothing, so it stays as it was (`None`).
pub(super) fn scaled(base: f64, scale: f64) -> Option<f64> {
    let next = base * scale;
    ((next as f32) > 0.0).then_some(next)
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
                    "the schedule {schedule:?} gave it for step {step} (epoch {epoch}); a rate \
                     must be a finite number, 0 or more"
                ),
            });
        }
        Ok(rate)
    }
}
