//! The sweep's rates: from `min_lr` to `max_lr`, exponentially or linearly, one a batch.

use ember::optim::{LrSchedule, ScheduleAt};
use ember::{Error, Result};

/// How the rate rises from `min_lr` to `max_lr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepMode {
    /// Step i of n at `min·(max/min)^(i/(n−1))`: evenly spaced on a log axis (the default).
    Exponential,
    /// Step i of n at `min + (max−min)·i/(n−1)`.
    Linear,
}

/// The sweep: its rates, when it stops, and how the suggestion reads the curve. The defaults
/// are Lightning's `lr_find`: 100 rates from 1e-8 to 1, exponential, a stop once the smoothed
/// loss passes 4 × its best, smoothing β = 0.98, and a suggestion that skips the first 10
/// points and the last.
///
/// Two differences from Lightning, both deliberate: step i gets `min·(max/min)^(i/(n−1))`, so
/// the n rates are evenly spaced and run from `min_lr` to `max_lr` exactly (Lightning's
/// scheduler jumps from step 0 to the rung at 2/n, leaving a gap at the start); and the
/// smoothed loss is bias-corrected by the points smoothed so far, `1 − β^(i+1)` for point i
/// from 0, so that the first smoothed loss is the first loss (Lightning divides by
/// `1 − β^(global_step+1)` with the step's own update already counted, which halves it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LrSweep {
    /// The first rate, above 0.
    pub min_lr: f64,
    /// The last rate, above `min_lr`.
    pub max_lr: f64,
    /// Rates to try: one batch each, at least 2.
    pub steps: usize,
    /// How the rate rises.
    pub mode: SweepMode,
    /// Stop once the smoothed loss exceeds this many times the best so far (Lightning's
    /// `early_stop_threshold`, above 1); `None` runs every step.
    pub early_stop_threshold: Option<f64>,
    /// The smoothing: `avg ← β·avg + (1−β)·loss`, in [0, 1); 0 smooths nothing.
    pub beta: f64,
    /// Points the suggestion passes over at the start (the curve is flat and noisy there).
    pub skip_begin: usize,
    /// Points the suggestion passes over at the end (the one that diverged).
    pub skip_end: usize,
}

impl Default for LrSweep {
    fn default() -> Self {
        Self {
            min_lr: 1e-8,
            max_lr: 1.0,
            steps: 100,
            mode: SweepMode::Exponential,
            early_stop_threshold: Some(4.0),
            beta: 0.98,
            skip_begin: 10,
            skip_end: 1,
        }
    }
}

impl LrSweep {
    /// `steps` rates from `min_lr` to `max_lr`, exponentially, with Lightning's other defaults.
    pub fn new(min_lr: f64, max_lr: f64, steps: usize) -> Self {
        Self {
            min_lr,
            max_lr,
            steps,
            ..Self::default()
        }
    }

    /// The same sweep with `mode`.
    pub fn mode(self, mode: SweepMode) -> Self {
        Self { mode, ..self }
    }

    /// The same sweep stopping at `threshold` × the best smoothed loss (`None`: never).
    pub fn early_stop_threshold(self, threshold: Option<f64>) -> Self {
        Self {
            early_stop_threshold: threshold,
            ..self
        }
    }

    /// The rate of step `step` (from 0); `max_lr` from the last step on.
    pub fn rate(&self, step: usize) -> f64 {
        let last = self.steps.saturating_sub(1).max(1);
        if step >= last {
            return self.max_lr;
        }
        let t = step as f64 / last as f64;
        match self.mode {
            SweepMode::Exponential => self.min_lr * (self.max_lr / self.min_lr).powf(t),
            SweepMode::Linear => self.min_lr + (self.max_lr - self.min_lr) * t,
        }
    }

    /// Checks every value before any work.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] naming the field and its value.
    pub fn check(&self) -> Result<()> {
        let invalid = |name: &'static str, value: String, reason: &str| {
            Err(Error::InvalidValue {
                name,
                value,
                reason: reason.to_string(),
            })
        };
        ember::optim::positive("min_lr", self.min_lr)?;
        ember::optim::positive("max_lr", self.max_lr)?;
        if self.max_lr <= self.min_lr {
            return invalid(
                "max_lr",
                self.max_lr.to_string(),
                &format!("must be a finite number above min_lr {}", self.min_lr),
            );
        }
        if self.steps < 2 {
            return invalid(
                "steps",
                self.steps.to_string(),
                "a sweep needs at least 2 rates",
            );
        }
        if let Some(threshold) = self.early_stop_threshold
            && (threshold.is_nan() || threshold <= 1.0)
        {
            return invalid(
                "early_stop_threshold",
                threshold.to_string(),
                "must be above 1 (the best smoothed loss times it), or None for no stop",
            );
        }
        if !(0.0..1.0).contains(&self.beta) {
            return invalid("beta", self.beta.to_string(), "must lie in [0, 1)");
        }
        Ok(())
    }
}

/// The sweep as a schedule: the rate of each step, whatever the optimizer's own.
impl LrSchedule for LrSweep {
    fn rate(&self, _base: f64, at: ScheduleAt) -> f64 {
        LrSweep::rate(self, usize::try_from(at.step).unwrap_or(usize::MAX))
    }

    fn spans_run(&self) -> bool {
        false
    }
}
