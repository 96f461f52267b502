//! Evaluation metrics, Gluon's `mx.metric.EvalMetric`: a [`Metric`] takes a batch's outputs
//! and targets ([`Metric::update`]), gives its value over every batch since the last reset
//! ([`Metric::get`]), and starts again ([`Metric::reset`]).
//!
//! **A metric adds no barrier.** `update` only issues device work: each metric sums its counts
//! or errors on the device, and `get` reads them back once. `Fit` calls `get` at the epoch's
//! end, where the loop waits anyway, so a run under `--sync none` stays under none with
//! metrics on.
//!
//! Built in, by the names `--eval` takes ([`MetricKind`]): `acc`, `topK` (`top5`), `ce`,
//! `f1` (macro), `mse`, `mae`. A metric of one's own, in a few lines:
//!
//! ```
//! use burn::tensor::Tensor;
//! use ember_trainer::metric::{Goal, Metric, Truth, read_floats};
//!
//! /// The largest absolute output seen, a check that logits stay tame.
//! #[derive(Default)]
//! struct MaxLogit(Option<Tensor<1>>);
//!
//! impl Metric for MaxLogit {
//!     fn name(&self) -> String {
//!         "max_logit".to_string()
//!     }
//!     fn goal(&self) -> Goal {
//!         Goal::Min
//!     }
//!     fn update(&mut self, outputs: &Tensor<2>, _truth: Truth<'_>) -> ember::Result<()> {
//!         let batch = outputs.clone().abs().max().reshape([1]);
//!         self.0 = Some(match self.0.take() {
//!             Some(seen) => seen.max_pair(batch),
//!             None => batch,
//!         });
//!         Ok(())
//!     }
//!     fn get(&self) -> ember::Result<f64> {
//!         Ok(match &self.0 {
//!             Some(seen) => read_floats(seen.clone(), "the largest logit")?[0],
//!             None => f64::NAN,
//!         })
//!     }
//!     fn reset(&mut self) {
//!         self.0 = None;
//!     }
//!     fn fresh(&self) -> Box<dyn Metric> {
//!         Box::new(Self::default())
//!     }
//! }
//! ```

mod classification;
mod eval_metric;
mod perplexity;
mod regression;

use std::fmt;
use std::str::FromStr;

use ember::{Error, Result};

pub use classification::{Accuracy, CrossEntropy, MacroF1, TopK};
pub use eval_metric::{Goal, Metric, Truth, read_floats, read_ints};
pub use perplexity::Perplexity;
pub use regression::{MeanAbsoluteError, MeanSquaredError};

/// The built-in metrics, by the names `--eval` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    /// `acc`: the share of examples whose largest output is their label.
    Accuracy,
    /// `topK`: the share whose label is among the K largest outputs.
    TopK(usize),
    /// `ce`: the mean cross-entropy of the softmax of the outputs.
    CrossEntropy,
    /// `f1`: the macro F1 score.
    MacroF1,
    /// `mse`: the mean squared error over every output.
    MeanSquaredError,
    /// `mae`: the mean absolute error over every output.
    MeanAbsoluteError,
    /// `perplexity`: a language model's, over every token of its sequences.
    Perplexity,
}

/// What `--eval`'s errors list.
pub const METRIC_NAMES: &str = "acc, topK (top5, …), ce, f1, mse, mae, perplexity";

impl MetricKind {
    /// A metric of this kind, with nothing counted.
    pub fn build(self) -> Box<dyn Metric> {
        match self {
            Self::Accuracy => Box::new(Accuracy::default()),
            Self::TopK(k) => Box::new(TopK::new(k)),
            Self::CrossEntropy => Box::new(CrossEntropy::default()),
            Self::MacroF1 => Box::new(MacroF1::default()),
            Self::MeanSquaredError => Box::new(MeanSquaredError::default()),
            Self::MeanAbsoluteError => Box::new(MeanAbsoluteError::default()),
            Self::Perplexity => Box::new(Perplexity::default()),
        }
    }

    /// Whether it needs class labels (otherwise values of the outputs' shape).
    pub fn needs_labels(self) -> bool {
        !matches!(
            self,
            Self::MeanSquaredError | Self::MeanAbsoluteError | Self::Perplexity
        )
    }

    /// Whether it takes a language model's sequences of tokens.
    pub fn takes_sequences(self) -> bool {
        self == Self::Perplexity
    }

    /// Which way it improves.
    pub fn goal(self) -> Goal {
        match self {
            Self::Accuracy | Self::TopK(_) | Self::MacroF1 => Goal::Max,
            _ => Goal::Min,
        }
    }

    /// A comma-separated list, `acc,top5,ce`, each once.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] naming the first unknown or repeated name.
    pub fn parse_list(list: &str) -> Result<Vec<Self>> {
        let mut kinds: Vec<Self> = Vec::new();
        for name in list.split(',').map(str::trim) {
            let kind: Self = name.parse()?;
            if kinds.contains(&kind) {
                return Err(Error::InvalidValue {
                    name: "metric",
                    value: name.to_string(),
                    reason: "it is named twice".to_string(),
                });
            }
            kinds.push(kind);
        }
        Ok(kinds)
    }
}

impl FromStr for MetricKind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let invalid = |reason: String| Error::InvalidValue {
            name: "metric",
            value: s.to_string(),
            reason,
        };
        Ok(match s {
            "acc" => Self::Accuracy,
            "ce" => Self::CrossEntropy,
            "f1" => Self::MacroF1,
            "mse" => Self::MeanSquaredError,
            "mae" => Self::MeanAbsoluteError,
            "perplexity" => Self::Perplexity,
            "" => return Err(invalid(format!("an empty name: expected {METRIC_NAMES}"))),
            _ => match s.strip_prefix("top") {
                Some(k) if k.bytes().all(|b| b.is_ascii_digit()) => match k.parse::<usize>() {
                    Ok(k) if k >= 1 => Self::TopK(k),
                    _ => {
                        return Err(invalid(
                            "topK needs a whole K from 1 up to the classes".to_string(),
                        ));
                    }
                },
                Some(_) => {
                    return Err(invalid(
                        "topK needs a whole K from 1 up to the classes".to_string(),
                    ));
                }
                None => return Err(invalid(format!("expected {METRIC_NAMES}"))),
            },
        })
    }
}

impl fmt::Display for MetricKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Accuracy => f.write_str("acc"),
            Self::TopK(k) => write!(f, "top{k}"),
            Self::CrossEntropy => f.write_str("ce"),
            Self::MacroF1 => f.write_str("f1"),
            Self::MeanSquaredError => f.write_str("mse"),
            Self::MeanAbsoluteError => f.write_str("mae"),
            Self::Perplexity => f.write_str("perplexity"),
        }
    }
}

/// The set of the training batches, as the epoch records' columns name it (`train_acc`).
pub const TRAIN: &str = "train";
/// The validation share (`--valid-split`).
pub const VALID: &str = "valid";
/// The test set.
pub const TEST: &str = "test";

/// The epoch records' column of metric `name` on `set`: `test_acc`.
pub fn column(set: &str, name: &str) -> String {
    format!("{set}_{name}")
}

/// Which way the epoch records' column `column` improves: a built-in metric's way after its
/// set's prefix (`train_`, `test_`, `valid_`), down for losses, and otherwise up where the
/// name says accuracy or F1.
pub fn goal_of(column: &str) -> Goal {
    let name = column
        .split_once('_')
        .filter(|(set, _)| [TRAIN, VALID, TEST].contains(set))
        .map_or(column, |(_, name)| name);
    match name.parse::<MetricKind>() {
        Ok(kind) => kind.goal(),
        Err(_) if name.contains("acc") || name.contains("f1") => Goal::Max,
        Err(_) => Goal::Min,
    }
}

#[cfg(test)]
mod tests;
