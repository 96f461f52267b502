//! `--eval`: which metrics each epoch reports, on which sets, and the columns they make, which
//! `--early-stop` and `--reduce-lr-on-plateau` may watch.

use crate::fit::Watched;
use crate::metric::{self, Metric, MetricKind, TEST, TRAIN, VALID};
use anyhow::bail;

use super::task::Task;
use super::workload::DataSpec;

/// The metrics `--eval` named, in its order.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalList(pub Vec<MetricKind>);

impl std::str::FromStr for EvalList {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        if s == "none" {
            return Ok(Self(Vec::new()));
        }
        MetricKind::parse_list(s).map(Self).map_err(|e| match e {
            // clap names the whole value: name the part only where it is a part.
            ember::Error::InvalidValue { value, reason, .. } if value != s && !value.is_empty() => {
                anyhow::anyhow!("{value}: {reason}")
            }
            ember::Error::InvalidValue { reason, .. } if reason.contains("expected") => {
                anyhow::anyhow!("{reason}, or none")
            }
            ember::Error::InvalidValue { reason, .. } => anyhow::anyhow!(reason),
            e => e.into(),
        })
    }
}

impl EvalList {
    /// As a checkpoint records it, for a resume to match: the names sorted (an order is no
    /// other run), comma separated, or `none`.
    pub fn recorded(&self) -> String {
        let mut names: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        names.sort();
        match names.is_empty() {
            true => "none".to_string(),
            false => names.join(","),
        }
    }

    /// The list `--eval` gave, or the default for `task`'s targets, checked against them.
    pub fn for_task(given: Option<Self>, task: &Task, data: &DataSpec) -> anyhow::Result<Self> {
        let labels = matches!(task, Task::Classify { .. });
        let text = matches!(task, Task::Text(_));
        let Some(given) = given else {
            return Ok(Self(match (labels, text) {
                (true, _) => vec![MetricKind::Accuracy],
                (_, true) => vec![MetricKind::Perplexity],
                _ => Vec::new(),
            }));
        };
        if let Some(wrong) = given.0.iter().find(|k| k.takes_sequences() != text) {
            match text {
                true => bail!(
                    "invalid --eval {wrong}: --data {data} is text, whose language model has \
                     perplexity (or none)"
                ),
                false => bail!("invalid --eval {wrong}: it needs text (--data text:…)"),
            }
        }
        if let Some(wrong) = (given.0.iter()).find(|k| !text && k.needs_labels() != labels) {
            let (needs, has) = match labels {
                true => ("values to regress", "class labels"),
                false => ("class labels", "values to regress"),
            };
            bail!("invalid --eval {wrong}: it needs {needs}, and --data {data} has {has}");
        }
        if let Task::Classify { train, .. } = task
            && let Some(classes) = train.classes()
            && let Some(k) = given.0.iter().find_map(|k| match k {
                MetricKind::TopK(k) if *k > classes => Some(*k),
                _ => None,
            })
        {
            bail!("invalid --eval top{k}: --data {data} has {classes} classes, fewer than {k}");
        }
        Ok(given)
    }

    /// New metrics of the list's kinds.
    pub fn build(&self) -> Vec<Box<dyn Metric>> {
        self.0.iter().map(|k| k.build()).collect()
    }

    /// The epoch columns a run with these metrics has: `loss`, each metric on the training
    /// batches and on the sets the run evaluates, and `valid_loss` with a validation share.
    pub fn columns(&self, test: bool, valid: bool) -> Vec<String> {
        let mut columns = vec!["loss".to_string()];
        for (set, on) in [(TRAIN, true), (TEST, test), (VALID, valid)] {
            if on {
                columns.extend(self.0.iter().map(|k| metric::column(set, &k.to_string())));
            }
        }
        if valid {
            columns.push(metric::column(VALID, "loss"));
        }
        columns
    }
}

/// A metric `flag` watches must be one of the run's epoch columns.
pub fn check_watched(flag: &str, watched: &Watched, columns: &[String]) -> anyhow::Result<()> {
    if !columns.contains(&watched.metric) {
        bail!(
            "invalid {flag} metric {:?}: this run's epochs have {}",
            watched.metric,
            columns.join(", ")
        );
    }
    Ok(())
}
