//! What the epoch-level callbacks watch: a metric's column, which way it improves, its patience
//! ([`Watched`]); and the built-in callbacks on it, [`EarlyStopping`] and [`ReduceLrOnPlateau`].

use std::fmt;
use std::str::FromStr;

use ember::{Error, Result};

use super::callback::{Action, Callback};
use crate::metric::{Goal, goal_of};
use crate::trace::EpochRecord;

/// A metric of the epochs' records, by its column: `loss` (the mean training loss) or a
/// metric's (`test_acc`, `train_acc`, `valid_ce`).
#[derive(Debug, Clone, PartialEq)]
pub struct Watched {
    /// The column.
    pub metric: String,
    /// Which way it improves.
    pub goal: Goal,
    /// Epochs without improvement before acting.
    pub patience: usize,
    /// The smallest change that counts as an improvement.
    pub min_delta: f64,
    best: Option<(f64, usize)>,
    waited: usize,
}

impl Watched {
    /// Watches `metric` with `patience` and `min_delta`, improving the way its name says
    /// ([`goal_of`]: accuracies, top-K and F1 up, losses and errors down).
    pub fn new(metric: &str, patience: usize, min_delta: f64) -> Self {
        let goal = goal_of(metric);
        Self {
            metric: metric.to_string(),
            goal,
            patience,
            min_delta,
            best: None,
            waited: 0,
        }
    }

    /// The metric's value in `epoch`.
    fn value(&self, epoch: &EpochRecord) -> Result<f64> {
        if self.metric == "loss" {
            return Ok(epoch.mean_loss);
        }
        epoch.metrics.get(&self.metric).copied().ok_or_else(|| {
            let mut known: Vec<&str> = epoch.metrics.keys().map(String::as_str).collect();
            known.insert(0, "loss");
            Error::InvalidValue {
                name: "watched metric",
                value: self.metric.clone(),
                reason: format!("the run's epochs have {}", known.join(", ")),
            }
        })
    }

    /// The same, improving the other way where `goal` says: for a metric of one's own whose
    /// name [`goal_of`] cannot read ([`crate::metric::Metric::goal`] says).
    #[must_use]
    pub fn with_goal(mut self, goal: Goal) -> Self {
        self.goal = goal;
        self
    }

    /// Takes `epoch`: whether its value improves on the best so far by more than
    /// `min_delta` (the first finite value does; NaN and infinities never do), which then
    /// becomes the best. An epoch that does not improve counts toward the patience, the first
    /// ones too: a run whose metric starts as NaN waits its patience for a finite value.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] when the epoch has no such metric, listing those it has.
    pub fn improves(&mut self, epoch: &EpochRecord) -> Result<bool> {
        let value = self.value(epoch)?;
        let better = match self.best {
            _ if !value.is_finite() => false,
            None => true,
            Some((best, _)) => match self.goal {
                Goal::Max => value > best + self.min_delta,
                Goal::Min => value < best - self.min_delta,
            },
        };
        if better {
            self.best = Some((value, epoch.epoch));
            self.waited = 0;
        } else {
            self.waited += 1;
        }
        Ok(better)
    }

    /// The best value so far, and its epoch (0-based).
    pub fn best(&self) -> Option<(f64, usize)> {
        self.best
    }

    /// Takes `epoch`: whether `bad` epochs without improvement have now passed, with the
    /// reason.
    fn ran_out(&mut self, epoch: &EpochRecord, bad: usize) -> Result<Option<String>> {
        if self.improves(epoch)? || self.waited < bad {
            return Ok(None);
        }
        self.waited = 0;
        let value = self.value(epoch)?;
        let (best, at) = self.best.unwrap_or((value, epoch.epoch));
        Ok(Some(format!(
            "{} has not improved by more than {} for {bad} epoch(s) (best {best:.4} after epoch {})",
            self.metric,
            self.min_delta,
            at + 1
        )))
    }
}

/// `METRIC:PATIENCE[:THIRD]`, the third field parsed by `third`.
fn spec<T: FromStr>(what: &'static str, spec: &str, third: T) -> Result<(String, usize, T)> {
    let invalid = |reason: String| Error::InvalidValue {
        name: what,
        value: spec.to_string(),
        reason,
    };
    let parts: Vec<&str> = spec.split(':').collect();
    let (metric, patience, rest) = match parts[..] {
        [m, p] => (m, p, None),
        [m, p, t] => (m, p, Some(t)),
        _ => return Err(invalid("expected METRIC:PATIENCE[:VALUE]".to_string())),
    };
    if metric.is_empty() {
        return Err(invalid("the metric is empty".to_string()));
    }
    let patience = match patience.parse::<usize>() {
        Ok(p) if p > 0 => p,
        Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => {
            return Err(invalid(format!(
                "the patience {patience:?} is too large: at most {} epochs",
                usize::MAX
            )));
        }
        _ => {
            return Err(invalid(format!(
                "the patience {patience:?} must be a whole number of epochs, at least 1"
            )));
        }
    };
    let third = match rest {
        None => third,
        Some(t) => t
            .parse()
            .map_err(|_| invalid(format!("{t:?} is not a number")))?,
    };
    Ok((metric.to_string(), patience, third))
}

/// Stops the run when a metric has not improved by more than `min_delta` for `patience`
/// epochs (Keras' and Lightning's `EarlyStopping`, Gluon's `EarlyStoppingHandler`).
#[derive(Debug, Clone, PartialEq)]
pub struct EarlyStopping(pub Watched);

impl FromStr for EarlyStopping {
    type Err = Error;

    /// `METRIC:PATIENCE[:MIN_DELTA]`: `test_acc:3`, `loss:5:0.001`.
    fn from_str(s: &str) -> Result<Self> {
        let (metric, patience, min_delta) = spec("early stop", s, 0.0_f64)?;
        if !(min_delta.is_finite() && min_delta >= 0.0) {
            return Err(Error::InvalidValue {
                name: "early stop",
                value: s.to_string(),
                reason: "the minimum change must be a finite number, 0 or more".to_string(),
            });
        }
        Ok(Self(Watched::new(&metric, patience, min_delta)))
    }
}

impl fmt::Display for EarlyStopping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = &self.0;
        write!(f, "{}:{}:{}", w.metric, w.patience, w.min_delta)
    }
}

impl Callback for EarlyStopping {
    fn epoch_end(&mut self, epoch: &EpochRecord) -> Result<Action> {
        let patience = self.0.patience;
        Ok(match self.0.ran_out(epoch, patience)? {
            Some(why) => Action::stop(format!("early stop: {why}")),
            None => Action::go_on(),
        })
    }
}

/// Multiplies the learning rate by `factor` when a metric has gone `patience` epochs without
/// improving: PATIENCE means what it means to [`EarlyStopping`], as in Keras, whose
/// `ReduceLROnPlateau` this is (PyTorch's with `patience - 1`, since PyTorch acts after
/// `patience + 1` bad epochs; the mode from the metric's name, the threshold 0, no cooldown).
/// A rate that the factor would make vanish in single precision ([`ember::optim::vanishes`])
/// is kept, and the run says so.
#[derive(Debug, Clone, PartialEq)]
pub struct ReduceLrOnPlateau {
    /// The watched metric.
    pub watched: Watched,
    /// The factor, in (0, 1).
    pub factor: f64,
}

impl FromStr for ReduceLrOnPlateau {
    type Err = Error;

    /// `METRIC:PATIENCE[:FACTOR]`, the factor 0.1 by default, as PyTorch's.
    fn from_str(s: &str) -> Result<Self> {
        let (metric, patience, factor) = spec("reduce-lr-on-plateau", s, 0.1_f64)?;
        if !(factor > 0.0 && factor < 1.0) || ember::optim::vanishes(factor) {
            return Err(Error::InvalidValue {
                name: "reduce-lr-on-plateau",
                value: s.to_string(),
                reason: "the factor must lie in (0, 1), and be at least about 1.2e-38 (below it, \
                         single precision makes it 0 or flushes it to 0)"
                    .to_string(),
            });
        }
        Ok(Self {
            watched: Watched::new(&metric, patience, 0.0),
            factor,
        })
    }
}

impl fmt::Display for ReduceLrOnPlateau {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = &self.watched;
        write!(f, "{}:{}:{}", w.metric, w.patience, self.factor)
    }
}

impl Callback for ReduceLrOnPlateau {
    fn epoch_end(&mut self, epoch: &EpochRecord) -> Result<Action> {
        let bad = self.watched.patience;
        Ok(match self.watched.ran_out(epoch, bad)? {
            Some(why) => Action {
                stop: None,
                scale_lr: Some((
                    self.factor,
                    format!(
                        "learning rate x {}: {why}",
                        ember::error::number(self.factor)
                    ),
                )),
            },
            None => Action::go_on(),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::policy::PolicyKind;

    fn epoch(epoch: usize, loss: f64, acc: f64) -> EpochRecord {
        EpochRecord {
            policy: PolicyKind::NoSync,
            epoch,
            batches: 1,
            time: 1.0,
            issue_time: 1.0,
            rss_before: 0,
            increased_mb: 0.0,
            peak_growth_mb: 0.0,
            peak_pool_mb: None,
            mean_loss: loss,
            max_depth: 1,
            device_time: Vec::new(),
            allreduce_time: None,
            allreduce_mb: None,
            recording_mb: None,
            lr_scale: None,
            metrics: BTreeMap::from([("test_acc".to_string(), acc)]),
        }
    }

    #[test]
    fn early_stopping_waits_its_patience_from_the_best_epoch() {
        let mut stop: EarlyStopping = "test_acc:2:0.01".parse().unwrap();
        let accs = [0.5, 0.6, 0.605, 0.61, 0.9];
        let actions: Vec<bool> = accs
            .iter()
            .enumerate()
            .map(|(i, &a)| stop.epoch_end(&epoch(i, 1.0, a)).unwrap().stop.is_some())
            .collect();
        // 0.605 and 0.61 are within 0.01 of 0.6: the second of them is the patience's end.
        assert_eq!(actions, [false, false, false, true, false]);
        let mut stop: EarlyStopping = "loss:1".parse().unwrap();
        assert!(stop.epoch_end(&epoch(0, 2.0, 0.0)).unwrap().stop.is_none());
        let why = stop.epoch_end(&epoch(1, 2.5, 0.0)).unwrap().stop.unwrap();
        assert!(why.contains("best 2.0000 after epoch 1"), "{why}");
        let err = stop.epoch_end(&EpochRecord {
            metrics: BTreeMap::new(),
            ..epoch(2, 1.0, 0.0)
        });
        assert!(err.is_ok(), "loss is always there");
        let mut missing: EarlyStopping = "val_f1:1".parse().unwrap();
        let err = missing
            .epoch_end(&epoch(0, 1.0, 0.5))
            .unwrap_err()
            .to_string();
        assert!(err.contains("val_f1") && err.contains("test_acc"), "{err}");
    }

    #[test]
    fn no_value_but_a_finite_one_improves() {
        // A NaN first epoch counts toward the patience, and the first finite value is the best.
        let mut stop: EarlyStopping = "loss:2".parse().unwrap();
        let stops: Vec<bool> = [f64::NAN, 1.0, 1.5, 1.6]
            .iter()
            .enumerate()
            .map(|(i, &loss)| stop.epoch_end(&epoch(i, loss, 0.0)).unwrap().stop.is_some())
            .collect();
        assert_eq!(stops, [false, false, false, true]);
        let mut watched = Watched::new("loss", 1, 0.0);
        assert!(!watched.improves(&epoch(0, f64::INFINITY, 0.0)).unwrap());
        assert!(watched.improves(&epoch(1, 3.0, 0.0)).unwrap());
        assert_eq!(watched.best(), Some((3.0, 1)));
        // A metric of one's own whose name does not say which way it goes.
        let mut auc = Watched::new("test_auc", 1, 0.0).with_goal(Goal::Max);
        let record = |i, value| EpochRecord {
            metrics: BTreeMap::from([("test_auc".to_string(), value)]),
            ..epoch(i, 1.0, 0.0)
        };
        assert!(auc.improves(&record(0, 0.6)).unwrap());
        assert!(auc.improves(&record(1, 0.7)).unwrap());
        assert!(!auc.improves(&record(2, 0.65)).unwrap());
    }

    #[test]
    fn bad_specs_are_errors_naming_the_value() {
        for bad in [
            "acc:0",
            "acc",
            "acc:x",
            ":3",
            "acc:3:nan",
            "acc:3:-1",
            "a:1:2:3",
        ] {
            let err = bad.parse::<EarlyStopping>().unwrap_err().to_string();
            assert!(err.contains(bad), "{err}");
        }
        for bad in ["loss:2:1", "loss:2:0", "loss:0"] {
            assert!(bad.parse::<ReduceLrOnPlateau>().is_err(), "{bad}");
        }
        let reduce: ReduceLrOnPlateau = "loss:2".parse().unwrap();
        assert_eq!(reduce.to_string(), "loss:2:0.1");
    }
}
