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
    /// The product of the callbacks' cuts made since the last epoch's record took it
    /// ([`Rates::take_made`]): 1 where none was.
    pub(super) made: f64,
}

/// The first step of epochs `from..epochs` (of a run of `total` steps) whose rate, from
/// `base` under `schedule`, is 0 or vanishes in single precision ([`ember::optim::vanishes`]):
/// its epoch, its number from 0, and its rate. Every step counts: a step schedule's factor cut
/// every rate of the third epoch to 1e-62, poly:1e30 every rate after the first to 0.0, and a
/// cosine from 1e-37 its last ones to 3.8e-39, each exit 0 (hostile passes).
pub(super) fn vanishing_step(
    schedule: &dyn LrSchedule,
    base: f64,
    total: u64,
    (from, epochs): (usize, usize),
) -> Option<(usize, u64, f64)> {
    let per_epoch = total / epochs.max(1) as u64;
    (from..epochs).find_map(|epoch| {
        let first = epoch as u64 * per_epoch;
        (first..(first + per_epoch).max(first + 1)).find_map(|step| {
            let rate = schedule.rate(base, ScheduleAt { step, epoch, total });
            (rate < ember::optim::SMALLEST).then_some((epoch, step, rate))
        })
    })
}

/// Refuses `schedule` where from `base` it makes a step of epochs `from..epochs` (of a run of
/// `total` steps) train nothing ([`vanishing_step`]).
///
/// # Errors
/// [`Error::InvalidValue`] naming the rate, the schedule and the first such epoch.
pub(super) fn refuse_underflow(
    schedule: &dyn LrSchedule,
    base: f64,
    total: u64,
    epochs: (usize, usize),
) -> Result<()> {
    match vanishing_step(schedule, base, total, epochs) {
        None => Ok(()),
        Some((epoch, step, rate)) => Err(Error::InvalidValue {
            name: "learning rate",
            value: ember::error::number(rate),
            reason: format!(
                "the schedule {} makes the rate of step {} (epoch {}) this, which single \
                 precision makes 0 (below about 1.2e-38): that step would train nothing",
                schedule.describe(),
                step + 1,
                epoch + 1
            ),
        }),
    }
}

/// `base` times `scale` (a callback's cut), where the steps after it still train: the new
/// rate is finite and not below single precision's smallest normal number (0, a negative or
/// NaN factor included), and, under `schedule`, no step of epochs `from..epochs` trains
/// nothing ([`vanishing_step`]). Otherwise what would vanish, in words: a plateau's cut beside a step
/// schedule took the rate to 6.25e-39 (hostile pass). A resume replays the cuts of the epochs
/// done through it too, each with the epochs after it, as the run made them.
pub(super) fn cut(
    base: f64,
    scale: f64,
    schedule: Option<&dyn LrSchedule>,
    total: u64,
    epochs: (usize, usize),
) -> std::result::Result<f64, String> {
    let next = base * scale;
    if !(next.is_finite() && next >= ember::optim::SMALLEST) {
        return Err(format!("the rate {}", ember::error::number(next)));
    }
    match schedule.and_then(|schedule| {
        vanishing_step(schedule, next, total, epochs).map(|found| (schedule, found))
    }) {
        Some((schedule, (epoch, step, rate))) => Err(format!(
            "the rate of step {} (epoch {}) {}, under --lr-schedule {}",
            step + 1,
            epoch + 1,
            ember::error::number(rate),
            schedule.describe()
        )),
        None => Ok(next),
    }
}

impl Rates<'_> {
    /// Makes [`cut`] of the base rate, under the run's schedule, and returns the new rate; or
    /// leaves the rate as it is and says what would vanish.
    pub(super) fn cut(
        &mut self,
        scale: f64,
        epochs: (usize, usize),
    ) -> std::result::Result<f64, String> {
        let next = cut(
            self.base,
            scale,
            self.schedule.as_deref(),
            self.total,
            epochs,
        )?;
        self.base = next;
        self.made *= scale;
        Ok(next)
    }

    /// The product of the cuts made since the last call (1 where none was), for the epoch's
    /// record: a resume replays the cuts the run made, whatever rate it is given.
    pub(super) fn take_made(&mut self) -> f64 {
        std::mem::replace(&mut self.made, 1.0)
    }

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
