//! What a sweep gives: its points, why it ended, and the suggested rate.

use std::fmt;

use super::sweep::SweepMode;
use crate::signals::Signal;

/// One batch of the sweep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LrPoint {
    /// Its learning rate.
    pub lr: f64,
    /// Its loss.
    pub loss: f64,
    /// The smoothed loss up to it, bias-corrected.
    pub smoothed: f64,
}

/// Why the sweep ended.
#[derive(Debug, Clone, PartialEq)]
pub enum SweepEnd {
    /// Every step ran.
    Finished,
    /// The smoothed loss passed `threshold` × its best, at rate `lr`.
    Diverged {
        /// The rate of the point that passed it (the last point).
        lr: f64,
        /// Its smoothed loss.
        smoothed: f64,
        /// The best smoothed loss before it.
        best: f64,
        /// The sweep's threshold.
        threshold: f64,
    },
    /// A loss came back NaN or infinite, at rate `lr`: that batch is not among the points.
    NonFiniteLoss {
        /// The rate of that batch.
        lr: f64,
        /// Its loss.
        value: f32,
    },
    /// The data gave fewer batches than the sweep's steps.
    DataEnded {
        /// The batches it gave.
        steps: usize,
    },
    /// A signal stopped it ([`crate::signals`]).
    Stopped(Signal),
}

impl fmt::Display for SweepEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SweepEnd::Finished => write!(f, "every step ran"),
            SweepEnd::Diverged {
                lr,
                smoothed,
                best,
                threshold,
            } => write!(
                f,
                "the loss blew up at lr {lr:.3e}: smoothed {smoothed:.4} > {threshold} x the best \
                 {best:.4}"
            ),
            SweepEnd::NonFiniteLoss { lr, value } => {
                write!(f, "the loss became {value} at lr {lr:.3e}")
            }
            SweepEnd::DataEnded { steps } => write!(f, "the data ran out after {steps} batches"),
            SweepEnd::Stopped(signal) => write!(f, "stopped by {signal}"),
        }
    }
}

/// The suggested rate, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub enum Suggestion {
    /// The rate of the point where the smoothed loss falls fastest.
    At {
        /// The rate.
        lr: f64,
        /// Its point's index in [`LrFinding::points`].
        index: usize,
        /// The slope there: per decade of rate in exponential mode, per unit in linear mode.
        slope: f64,
    },
    /// Fewer than 2 finite points are left once the first `skip_begin` and last `skip_end`
    /// are passed over.
    TooFewPoints {
        /// The points the sweep had.
        points: usize,
    },
    /// The smoothed loss never fell between the skipped ends.
    NeverFell,
    /// The sweep was cut short (a signal, the data's end) before the smoothed loss turned (10 %
    /// above its lowest): the rates where it turns were never tried.
    CutShort {
        /// The steps it ran.
        ran: usize,
        /// The steps it was to run.
        of: usize,
    },
}

impl Suggestion {
    /// The suggested rate, if any.
    pub fn lr(&self) -> Option<f64> {
        match self {
            Suggestion::At { lr, .. } => Some(*lr),
            _ => None,
        }
    }

    /// Lightning's `suggestion(skip_begin, skip_end)` on `points`: the steepest negative
    /// slope of the smoothed loss, NumPy's `gradient` (second-order central differences,
    /// first-order at the ends) over the points' rates, on a log10 axis in exponential mode.
    /// Lightning 2.5 takes the slope over the rates themselves in exponential mode too, which
    /// divides each slope by its rate and pulls the suggestion to the smallest rates
    /// (Lightning issue #21141); per decade is the slope the log-axis plot shows.
    pub fn of(points: &[LrPoint], mode: SweepMode, skip_begin: usize, skip_end: usize) -> Self {
        let end = points.len().saturating_sub(skip_end);
        let kept: Vec<usize> = (skip_begin..end)
            .filter(|&i| points[i].smoothed.is_finite())
            .collect();
        if kept.len() < 2 {
            return Suggestion::TooFewPoints {
                points: points.len(),
            };
        }
        let x: Vec<f64> = kept
            .iter()
            .map(|&i| match mode {
                SweepMode::Exponential => points[i].lr.log10(),
                SweepMode::Linear => points[i].lr,
            })
            .collect();
        let y: Vec<f64> = kept.iter().map(|&i| points[i].smoothed).collect();
        let slopes = gradient(&y, &x);
        let (at, slope) = slopes
            .iter()
            .copied()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .expect("two points or more");
        if slope.is_nan() || slope >= 0.0 {
            return Suggestion::NeverFell;
        }
        Suggestion::At {
            lr: points[kept[at]].lr,
            index: kept[at],
            slope,
        }
    }
}

impl fmt::Display for Suggestion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Suggestion::At { lr, .. } => write!(f, "{lr:.3e}"),
            Suggestion::TooFewPoints { points } => write!(
                f,
                "only {points} points: too few once the first and last are passed over (more \
                 steps, or more data)"
            ),
            Suggestion::NeverFell => write!(
                f,
                "the smoothed loss never fell (a lower min_lr, or more steps)"
            ),
            Suggestion::CutShort { ran, of } => write!(
                f,
                "the sweep ran {ran} of its {of} steps, and its smoothed loss had not turned \
                 (10 % above its lowest): the rates past its minimum were never tried (run the \
                 whole sweep, or fewer --steps)"
            ),
        }
    }
}

/// NumPy's `gradient(y, x)`: second-order central differences inside, first-order at the ends.
pub(super) fn gradient(y: &[f64], x: &[f64]) -> Vec<f64> {
    let n = y.len();
    (0..n)
        .map(|i| match i {
            0 => (y[1] - y[0]) / (x[1] - x[0]),
            _ if i == n - 1 => (y[i] - y[i - 1]) / (x[i] - x[i - 1]),
            _ => {
                let (a, b) = (x[i] - x[i - 1], x[i + 1] - x[i]);
                (a * a * y[i + 1] - b * b * y[i - 1] + (b * b - a * a) * y[i]) / (a * b * (a + b))
            }
        })
        .collect()
}
