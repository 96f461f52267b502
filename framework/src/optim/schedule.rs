//! Learning-rate schedules, stepped every batch: [`LrSchedule`], a user's own, and
//! [`Schedule`], the built-in ones, each with PyTorch's or Gluon's formula.
//!
//! A schedule is a pure function of where the step stands ([`ScheduleAt`]): the same step
//! gets the same rate in a resumed run, so a checkpoint needs no state of its own for it.
//!
//! ```
//! use ember::optim::{LrSchedule, Schedule, ScheduleAt};
//!
//! let cosine: Schedule = "cosine".parse().unwrap();
//! let at = |step| ScheduleAt { step, epoch: 0, total: 100 };
//! assert_eq!(cosine.rate(0.1, at(0)), 0.1);
//! assert!((cosine.rate(0.1, at(50)) - 0.05).abs() < 1e-12);
//!
//! // A user's own: halve the rate after step 1000.
//! #[derive(Debug)]
//! struct Halve;
//! impl LrSchedule for Halve {
//!     fn rate(&self, base: f64, at: ScheduleAt) -> f64 {
//!         if at.step < 1000 { base } else { base / 2.0 }
//!     }
//! }
//! assert_eq!(Halve.rate(0.1, at(1000)), 0.05);
//! ```

use std::f64::consts::PI;
use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result, number as short};

/// Where a step stands, all a schedule is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduleAt {
    /// The step, from 0: the optimizer updates done before it.
    pub step: u64,
    /// Its epoch, from 0.
    pub epoch: usize,
    /// The run's total steps (epochs × batches per epoch).
    pub total: u64,
}

/// A learning-rate schedule: the rate of the step at `at`, from the optimizer's `base` rate.
pub trait LrSchedule: fmt::Debug + Send {
    /// The rate of the step at `at`.
    fn rate(&self, base: f64, at: ScheduleAt) -> f64;

    /// Checks the schedule against a run of `total` steps before it starts (a warm-up longer
    /// than the run is an error).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] naming the schedule.
    fn check(&self, total: u64) -> Result<()> {
        let _ = total;
        Ok(())
    }

    /// Whether the rates depend on the run's total steps ([`ScheduleAt::total`]); a schedule
    /// that does not can run on data whose length is unknown.
    fn spans_run(&self) -> bool {
        true
    }

    /// The schedule as an error names it: the built-in ones as `--lr-schedule` spells them,
    /// a user's own in its `Debug` form.
    fn describe(&self) -> String {
        format!("{self:?}")
    }
}

/// The built-in schedules, as `--lr-schedule` spells them.
#[derive(Debug, Clone, PartialEq)]
pub enum Schedule {
    /// `constant`: the base rate throughout.
    Constant,
    /// `cosine[:warmup=N]`: from the base rate to 0 over the run, step t of T at
    /// `base·(1+cos(πt/T))/2`, as PyTorch's `CosineAnnealingLR(T_max=T)` stepped per batch.
    /// With a warm-up of N steps, step t < N runs at `base·(t+1)/N` (PyTorch's
    /// `LinearLR(1/N, 1, N-1)`), and the cosine covers the T−N steps after it.
    Cosine {
        /// Warm-up steps.
        warmup: u64,
    },
    /// `step:EVERY:FACTOR`: the rate is multiplied by FACTOR every EVERY epochs (PyTorch's
    /// `StepLR` stepped per epoch; Gluon's `FactorScheduler` counts updates instead).
    Step {
        /// Epochs between two reductions.
        every: usize,
        /// The factor, in (0, 1].
        factor: f64,
    },
    /// `multistep:E1,E2,…:FACTOR`: multiplied by FACTOR at the start of each listed epoch
    /// (Gluon's `MultiFactorScheduler`, PyTorch's `MultiStepLR`).
    MultiStep {
        /// The epochs, increasing.
        milestones: Vec<usize>,
        /// The factor, in (0, 1].
        factor: f64,
    },
    /// `poly:POWER`: `base·(1−t/T)^POWER` (Gluon's `PolyScheduler`, PyTorch's `PolynomialLR`).
    Poly {
        /// The power.
        power: f64,
    },
    /// `onecycle:MAX_LR`: PyTorch's `OneCycleLR(max_lr, total_steps=T)` with its defaults
    /// (30 % rising, cosine annealing, start at MAX_LR/25, end at MAX_LR/25/10⁴). It sets
    /// the rate itself: the base rate is not used. Unlike PyTorch's, it does not cycle the
    /// momentum.
    OneCycle {
        /// The highest rate.
        max_lr: f64,
    },
}

impl Schedule {
    /// The forms `--lr-schedule` takes.
    pub const FORMS: &'static str = "constant, cosine, cosine:warmup=N, step:EVERY:FACTOR, \
                                     multistep:E1,E2,...:FACTOR, poly:POWER or onecycle:MAX_LR";
}

impl LrSchedule for Schedule {
    fn rate(&self, base: f64, at: ScheduleAt) -> f64 {
        let (t, total) = (at.step as f64, at.total.max(1) as f64);
        match self {
            Schedule::Constant => base,
            Schedule::Cosine { warmup } => {
                let warmup = *warmup as f64;
                if t < warmup {
                    return base * (t + 1.0) / warmup;
                }
                let span = (total - warmup).max(1.0);
                base * (1.0 + (PI * ((t - warmup) / span).min(1.0)).cos()) / 2.0
            }
            Schedule::Step { every, factor } => base * factor.powi((at.epoch / every) as i32),
            Schedule::MultiStep { milestones, factor } => {
                let passed = milestones.iter().filter(|&&m| m <= at.epoch).count();
                base * factor.powi(passed as i32)
            }
            Schedule::Poly { power } => base * (1.0 - (t / total).min(1.0)).powf(*power),
            Schedule::OneCycle { max_lr } => one_cycle(*max_lr, t, total),
        }
    }

    fn spans_run(&self) -> bool {
        !matches!(
            self,
            Schedule::Constant | Schedule::Step { .. } | Schedule::MultiStep { .. }
        )
    }

    fn describe(&self) -> String {
        self.to_string()
    }

    fn check(&self, total: u64) -> Result<()> {
        if let Schedule::Cosine { warmup } = self
            && *warmup >= total
        {
            return Err(invalid(
                &self.to_string(),
                format!("the warm-up must be shorter than the run's {total} steps"),
            ));
        }
        if let Schedule::OneCycle { .. } = self
            && total < 2
        {
            return Err(invalid(
                &self.to_string(),
                format!("one cycle needs at least 2 steps; the run has {total}"),
            ));
        }
        Ok(())
    }
}

/// PyTorch's `OneCycleLR` with two phases and cosine annealing: from MAX/25 up to MAX over
/// the first 30 % of the steps (ending at step `0.3·T − 1`), then down to MAX/25/10⁴ at step
/// T − 1.
fn one_cycle(max_lr: f64, t: f64, total: f64) -> f64 {
    let initial = max_lr / 25.0;
    let last = initial / 1e4;
    let peak = 0.3 * total - 1.0;
    let anneal = |from: f64, to: f64, pct: f64| to + (from - to) / 2.0 * ((PI * pct).cos() + 1.0);
    if t <= peak {
        anneal(initial, max_lr, t / peak)
    } else {
        anneal(max_lr, last, ((t - peak) / (total - 1.0 - peak)).min(1.0))
    }
}

fn invalid(spec: &str, reason: impl Into<String>) -> Error {
    Error::InvalidValue {
        name: "learning-rate schedule",
        value: spec.to_string(),
        reason: reason.into(),
    }
}

/// A number of a schedule's spec: `what` names it in the error.
fn number<T: FromStr>(spec: &str, what: &str, text: &str) -> Result<T> {
    text.trim()
        .parse()
        .map_err(|_| invalid(spec, format!("{what} {text:?} is not a number")))
}

/// A factor in (0, 1].
fn factor(spec: &str, text: &str) -> Result<f64> {
    // 0 in single precision (1e-50) cut every rate after the first step to 0: those epochs
    // trained nothing, exit 0.
    let factor = positive(spec, "the factor", text)?;
    if factor > 1.0 {
        return Err(invalid(
            spec,
            format!("the factor {text} must lie in (0, 1]"),
        ));
    }
    Ok(factor)
}

/// A finite number above 0, in single precision too ([`super::positive::positive`]).
fn positive(spec: &str, what: &str, text: &str) -> Result<f64> {
    let value: f64 = number(spec, what, text)?;
    super::positive("the schedule's value", value).map_err(|e| match e {
        Error::InvalidValue { reason, .. } => invalid(spec, format!("{what} {text} {reason}")),
        e => e,
    })
}

/// A count of epochs, at least 1.
fn epochs(spec: &str, what: &str, text: &str) -> Result<usize> {
    match number::<usize>(spec, what, text) {
        Ok(0) | Err(_) => Err(invalid(
            spec,
            format!("{what} {text:?} must be a whole number of epochs, at least 1"),
        )),
        Ok(n) => Ok(n),
    }
}

impl FromStr for Schedule {
    type Err = Error;

    fn from_str(spec: &str) -> Result<Self> {
        let mut parts = spec.splitn(2, ':');
        let name = parts.next().unwrap_or_default();
        let rest = parts.next();
        let expected = || invalid(spec, format!("expected {}", Schedule::FORMS));
        match (name, rest) {
            ("constant", None) => Ok(Schedule::Constant),
            ("cosine", None) => Ok(Schedule::Cosine { warmup: 0 }),
            ("cosine", Some(option)) => {
                let Some(("warmup", n)) = option.split_once('=') else {
                    return Err(invalid(spec, "expected cosine or cosine:warmup=N"));
                };
                match n.trim().parse::<u64>() {
                    Ok(warmup) if warmup > 0 => Ok(Schedule::Cosine { warmup }),
                    _ => Err(invalid(
                        spec,
                        format!("the warm-up {n:?} must be a whole number of steps, at least 1"),
                    )),
                }
            }
            ("step", Some(rest)) => {
                let (every, f) = rest.split_once(':').ok_or_else(expected)?;
                Ok(Schedule::Step {
                    every: epochs(spec, "the step", every)?,
                    factor: factor(spec, f)?,
                })
            }
            ("multistep", Some(rest)) => {
                let (list, f) = rest.rsplit_once(':').ok_or_else(expected)?;
                let milestones = list
                    .split(',')
                    .map(|m| epochs(spec, "the milestone", m))
                    .collect::<Result<Vec<_>>>()?;
                if !milestones.is_sorted_by(|a, b| a < b) {
                    return Err(invalid(spec, "the milestones must increase"));
                }
                Ok(Schedule::MultiStep {
                    milestones,
                    factor: factor(spec, f)?,
                })
            }
            ("poly", Some(power)) => Ok(Schedule::Poly {
                power: positive(spec, "the power", power)?,
            }),
            ("onecycle", Some(max)) => Ok(Schedule::OneCycle {
                max_lr: positive(spec, "the highest rate", max)?,
            }),
            _ => Err(expected()),
        }
    }
}

/// The spec `--lr-schedule` takes, which parses back to the same schedule (a number past 12
/// digits in exponent form: `step:1:1e-19`, not 0.0000000000000000001).
impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Schedule::Constant => write!(f, "constant"),
            Schedule::Cosine { warmup: 0 } => write!(f, "cosine"),
            Schedule::Cosine { warmup } => write!(f, "cosine:warmup={warmup}"),
            Schedule::Step { every, factor } => write!(f, "step:{every}:{}", short(*factor)),
            Schedule::MultiStep { milestones, factor } => {
                let list: Vec<String> = milestones.iter().map(ToString::to_string).collect();
                write!(f, "multistep:{}:{}", list.join(","), short(*factor))
            }
            Schedule::Poly { power } => write!(f, "poly:{}", short(*power)),
            Schedule::OneCycle { max_lr } => write!(f, "onecycle:{}", short(*max_lr)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_print_back() {
        for spec in [
            "constant",
            "cosine",
            "cosine:warmup=5",
            "step:3:0.5",
            "multistep:2,5,9:0.1",
            "poly:2",
            "onecycle:0.4",
            "step:1:1e-19",
        ] {
            let schedule: Schedule = spec.parse().unwrap();
            assert_eq!(schedule.to_string(), spec);
        }
    }

    #[test]
    fn bad_specs_are_errors_naming_the_value() {
        for (spec, says) in [
            ("cosine:warmup=-1", "\"-1\""),
            ("cosine:warmup=0", "at least 1"),
            ("cosine:cycles=2", "cosine:warmup=N"),
            ("step:0:0.1", "\"0\""),
            ("step:2:1.5", "(0, 1]"),
            ("step:2:nan", "finite number above 0"),
            ("step:1:1e-50", "the smallest normal number"),
            ("step:2", "step:EVERY:FACTOR"),
            ("multistep:5,2:0.1", "increase"),
            ("multistep:2,x:0.1", "\"x\""),
            ("poly:-1", "above 0"),
            ("onecycle:inf", "above 0"),
            ("linear", "expected constant"),
        ] {
            let err = spec.parse::<Schedule>().unwrap_err().to_string();
            assert!(err.contains(spec) && err.contains(says), "{spec}: {err}");
        }
        let warmup: Schedule = "cosine:warmup=10".parse().unwrap();
        let err = warmup.check(10).unwrap_err().to_string();
        assert!(err.contains("10 steps"), "{err}");
        assert!(warmup.check(11).is_ok());
    }
}
