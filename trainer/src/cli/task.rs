//! What the data of `ember train` asks of the loop: the chapter's synthetic epochs, class
//! labels or values to regress, with the loss they call for and the memory they need.

use anyhow::bail;
use ember_datasets::Examples;
use ember_datasets::csv::{CsvOptions, Label, read_csv};
use ember_datasets::npy::read_npy_pair;
use ember_trainer::memory::available_bytes;

use super::flags::Flag;
use super::list;
use super::model::ModelSpec;
use super::workload::{DataSpec, Workload};

/// What the data asks of the loop: the chapter's synthetic epochs, class labels, or values.
pub enum Task {
    Synthetic,
    Classify {
        train: Examples,
        test: Option<Examples>,
    },
    Regress {
        train: Examples,
    },
}

impl Task {
    pub fn load(data: &DataSpec, classes: Option<usize>) -> anyhow::Result<Self> {
        let examples = match data {
            DataSpec::Synthetic => return Ok(Task::Synthetic),
            DataSpec::FashionMnist(dir) => {
                let (train, test) = ember_datasets::fashion_mnist::load(dir)?;
                refuse_empty(&train, "training", data)?;
                refuse_empty(&test, "test", data)?;
                // Found now, not by a panic in the evaluation after a whole epoch of training.
                if test.shape() != train.shape() {
                    bail!(
                        "invalid --data {data}: its test images have shape {:?} and its \
                         training images {:?}; one network takes one shape",
                        test.shape(),
                        train.shape()
                    );
                }
                return Ok(Task::Classify {
                    train,
                    test: Some(test),
                });
            }
            DataSpec::Csv(path) => {
                let mut options = CsvOptions::new(Label::Last);
                options.classes = classes;
                read_csv(path, &options)?
            }
            DataSpec::Npy(x, y) => read_npy_pair(x, y, classes)?,
        };
        refuse_empty(&examples, "training", data)?;
        Ok(match classes {
            Some(_) => Task::Classify {
                train: examples,
                test: None,
            },
            None => Task::Regress { train: examples },
        })
    }

    /// The network for this data: `--model`, or the chapter's MLP (`--hidden`) on synthetic
    /// data and d2l's mlp:256 on other data.
    pub fn model(
        &self,
        given: Option<ModelSpec>,
        workload: &Workload,
    ) -> anyhow::Result<ModelSpec> {
        if given.is_some() && workload.gave(&Flag::HIDDEN) {
            bail!(
                "{} is ignored when --model is given: put the sizes in --model mlp:H1,H2,…",
                Flag::HIDDEN
            );
        }
        Ok(given.unwrap_or_else(|| match self {
            Task::Synthetic => ModelSpec::Mlp(workload.hidden.clone()),
            _ => ModelSpec::Mlp(vec![256]),
        }))
    }

    /// The shape of one example (without the batch axis) and the network's number of outputs.
    pub fn example_and_outputs(&self, workload: &Workload) -> (Vec<usize>, usize) {
        match self {
            Task::Synthetic => (vec![workload.features], 1),
            Task::Classify { train, .. } => (train.shape().to_vec(), train.classes().unwrap_or(1)),
            Task::Regress { train } => (train.shape().to_vec(), train.outputs()),
        }
    }

    /// Refuses sizes whose parameters, one batch's data and activations, or the run's trace
    /// cannot fit in this machine's memory, before anything is allocated; names the flag at
    /// fault: the one that, made small, lets the run fit.
    pub fn check_memory(
        &self,
        workload: &Workload,
        model: &ModelSpec,
        epochs: usize,
    ) -> anyhow::Result<()> {
        let Some(available) = available_bytes() else {
            return Ok(());
        };
        let available = u128::from(available);
        let need = |w: &Workload, m: &ModelSpec, epochs: usize| self.memory(w, m, epochs);
        let total = |n: &Need| n.params.saturating_add(n.batch).saturating_add(n.trace);
        let needed = need(workload, model, epochs);
        if total(&needed) <= available {
            return Ok(());
        }
        // Each flag in turn made as small as it goes: the first one that lets the run fit is
        // at fault.
        let small = |change: &Shrink| {
            let (mut w, mut m, mut e) = (workload.clone(), model.clone(), epochs);
            change(&mut w, &mut m, &mut e);
            total(&need(&w, &m, e)) <= available
        };
        let synthetic = self.is_synthetic();
        let hidden = match model {
            ModelSpec::Mlp(hidden) if synthetic && workload.gave(&Flag::HIDDEN) => {
                format!("{} {}", Flag::HIDDEN, list::join(hidden))
            }
            _ => format!("--model {model}"),
        };
        // A flag of the workload, where this data reads it.
        let sized =
            |flag: &Flag, value: usize| flag.read_by(synthetic).then(|| format!("{flag} {value}"));
        let candidates: Vec<(Option<String>, &Shrink)> = vec![
            (sized(&Flag::FEATURES, workload.features), &|w, _, _| {
                w.features = 1
            }),
            (Some(hidden), &|_, m, _| *m = ModelSpec::Mlp(vec![1])),
            (sized(&Flag::BATCH_SIZE, workload.batch_size), &|w, _, _| {
                w.batch_size = 1
            }),
            (sized(&Flag::BATCHES, workload.batches), &|w, _, _| {
                w.batches = 1
            }),
            (Some(format!("--epochs {epochs}")), &|_, _, e| *e = 1),
        ];
        let flag = candidates
            .into_iter()
            .filter_map(|(flag, change)| Some((flag?, change)))
            .find(|(_, change)| small(change))
            .map_or_else(
                || "these sizes together are".to_string(),
                |(flag, _)| format!("{flag} is"),
            );
        bail!(
            "{flag} too large for this machine: training needs about {} ({} of parameters, \
             gradients and optimizer state, {} for one batch and its activations, {} for the \
             trace of every batch), and {} of memory is available",
            bytes(total(&needed)),
            bytes(needed.params),
            bytes(needed.batch),
            bytes(needed.trace),
            bytes(available)
        );
    }

    /// The bytes a run needs, part by part.
    fn memory(&self, workload: &Workload, model: &ModelSpec, epochs: usize) -> Need {
        let (example, outputs) = self.example_and_outputs(workload);
        let need = model.footprint(&example, outputs, workload.batch_size);
        let batches = match self {
            Task::Synthetic => workload.batches,
            Task::Classify { train, .. } | Task::Regress { train } => {
                train.len().div_ceil(workload.batch_size)
            }
        };
        let record = std::mem::size_of::<ember_trainer::trace::BatchRecord>() as u128;
        Need {
            // Parameters, their gradients and the optimizer's copy: three times the parameters.
            params: need.parameters.saturating_mul(3 * 4),
            // The batch, and activations kept for the backward pass with their gradients.
            batch: need.activations.saturating_mul(2 * 4),
            // One record per batch of every epoch, kept in memory until the run ends.
            trace: (batches as u128)
                .saturating_mul(epochs as u128)
                .saturating_mul(record),
        }
    }

    fn is_synthetic(&self) -> bool {
        matches!(self, Task::Synthetic)
    }

    /// The loss this data's targets call for.
    pub fn loss(&self) -> LossName {
        match self {
            Task::Classify { .. } => LossName::SoftmaxCe,
            Task::Synthetic | Task::Regress { .. } => LossName::L2,
        }
    }

    /// The targets, in a few words.
    fn targets(&self) -> &'static str {
        match self {
            Task::Classify { .. } => "class labels",
            Task::Synthetic | Task::Regress { .. } => "values to regress",
        }
    }
}

/// One flag of a run made as small as it goes, on copies of the run's settings.
type Shrink = dyn Fn(&mut Workload, &mut ModelSpec, &mut usize);

/// The memory a run needs, in bytes.
struct Need {
    params: u128,
    batch: u128,
    trace: u128,
}

/// The losses `--loss` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LossName {
    /// ½(ŷ − y)², Gluon's `L2Loss`.
    L2,
    /// Softmax cross-entropy over class labels.
    SoftmaxCe,
}

impl std::fmt::Display for LossName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LossName::L2 => "l2",
            LossName::SoftmaxCe => "softmax-ce",
        })
    }
}

/// `--loss` that the data's targets cannot train with: the error names both.
pub fn wrong_loss(loss: LossName, task: &Task, data: &DataSpec) -> anyhow::Error {
    anyhow::anyhow!(
        "invalid --loss {loss}: --data {data} has {}, which train with --loss {}{}",
        task.targets(),
        task.loss(),
        match task {
            Task::Regress { .. } => " (--classes N makes csv and npy targets class labels)",
            _ => "",
        }
    )
}

/// An empty set of examples trains nothing and measures nothing: an error naming the data.
fn refuse_empty(examples: &Examples, set: &str, data: &DataSpec) -> anyhow::Result<()> {
    if examples.is_empty() {
        bail!("invalid --data {data}: its {set} set has no examples");
    }
    Ok(())
}

/// A byte count for people: `16.8 MB`, `12.3 GB`, `4.1 TB`.
fn bytes(n: u128) -> String {
    let n = n as f64;
    if n >= 1e12 {
        format!("{:.1} TB", n / 1e12)
    } else if n >= 1e9 {
        format!("{:.1} GB", n / 1e9)
    } else {
        format!("{:.1} MB", n / 1e6)
    }
}
