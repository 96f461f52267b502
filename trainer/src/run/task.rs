//! What the data of `ember train` asks of the loop: the chapter's synthetic epochs, class
//! labels or values to regress, with the loss they call for and the memory they need.

use crate::memory::available_bytes;
use crate::policy::PolicyKind;
use anyhow::bail;
use ember_datasets::Examples;
use ember_datasets::csv::{CsvOptions, Label, read_csv};
use ember_datasets::npy::read_npy_pair;

use super::flags::Flag;
use super::list;
use super::loss_name::LossName;
use super::model::{ModelSpec, bytes};
use super::sequence_model;
use super::text_data::TextTask;
use super::workload::{DataSpec, Workload};

/// What the data asks of the loop: the chapter's synthetic epochs, class labels, or values.
pub enum Task {
    /// The chapter's synthetic batches, drawn anew every epoch: values to regress.
    Synthetic,
    /// Examples with class labels.
    Classify {
        /// The training examples (a validation share is held out of them later).
        train: Examples,
        /// The test set, where the data has one (Fashion-MNIST).
        test: Option<Examples>,
    },
    /// Examples with values to regress.
    Regress {
        /// The training examples.
        train: Examples,
    },
    /// Text, each token's next to predict: a language model.
    Text(TextTask),
}

impl Task {
    /// Reads `data` (synthetic data reads nothing): its examples, labelled as `classes` says.
    ///
    /// # Errors
    /// Data that cannot be read, or that holds no example, named with `--data`.
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
                read_csv(path, &options).map_err(given_classes)?
            }
            DataSpec::Npy(x, y) => read_npy_pair(x, y, classes).map_err(given_classes)?,
            DataSpec::Text(spec) => return text_task(spec),
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
        let model = given.unwrap_or_else(|| match self {
            Task::Synthetic => ModelSpec::Mlp(workload.hidden.clone()),
            Task::Text(_) => ModelSpec::Recurrent(sequence_model::DEFAULT),
            _ => ModelSpec::Mlp(vec![256]),
        });
        let recurrent = matches!(model, ModelSpec::Recurrent(_) | ModelSpec::Transformer(_));
        if recurrent != matches!(self, Task::Text(_)) {
            bail!(
                "--model {model} {}, and --data {} is {}",
                match recurrent {
                    true => "is a language model, which takes text",
                    false => "takes examples, not text",
                },
                workload.data,
                match recurrent {
                    true => "not text: give --data text:fortunes",
                    false => "text: give --model lstm:H (or gru:H, rnn:H)",
                }
            );
        }
        // A convolutional network takes images, [channels, height, width] an example; the
        // synthetic data's examples are vectors.
        if matches!(self, Task::Synthetic) && !matches!(model, ModelSpec::Mlp(_)) {
            bail!(
                "--model {model} takes images ([channels, height, width] an example), and the \
                 synthetic data gives vectors of {} {}: give --data fashion-mnist (or npy \
                 images), or --model mlp:H1,H2,…",
                Flag::FEATURES,
                workload.features
            );
        }
        Ok(model)
    }

    /// The shape of one example (without the batch axis) and the network's number of outputs.
    pub fn example_and_outputs(&self, workload: &Workload) -> (Vec<usize>, usize) {
        match self {
            Task::Synthetic => (vec![workload.features], 1),
            Task::Classify { train, .. } => (train.shape().to_vec(), train.classes().unwrap_or(1)),
            Task::Regress { train } => (train.shape().to_vec(), train.outputs()),
            Task::Text(text) => (vec![text.spec.steps], text.vocab.len()),
        }
    }

    /// Refuses sizes whose parameters, one batch's data and activations, the batches the sync
    /// policy lets pile up, or the run's trace cannot fit in this machine's memory, before
    /// anything is allocated; names the flag at fault: the one that, made small, lets the run
    /// fit (the data's own sizes are named as the data's).
    pub fn check_memory(
        &self,
        workload: &Workload,
        model: &ModelSpec,
        policy: &PolicyKind,
        epochs: usize,
    ) -> anyhow::Result<()> {
        let Some(available) = available_bytes() else {
            return Ok(());
        };
        let available = u128::from(available);
        let (example, outputs) = self.example_and_outputs(workload);
        let run = Sizes {
            workload: workload.clone(),
            model: model.clone(),
            policy: policy.clone(),
            epochs,
            example,
            outputs,
        };
        let needed = self.memory(&run);
        if needed.total() <= available {
            return Ok(());
        }
        // Each flag in turn made as small as it goes: the first one that lets the run fit is
        // at fault.
        let small = |change: &Shrink| {
            let mut smaller = run.clone();
            change(&mut smaller);
            self.memory(&smaller).total() <= available
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
        let classes = workload.classes.map(|n| format!("{} {n}", Flag::CLASSES));
        let data = (!synthetic).then(|| {
            format!(
                "--data {} (examples of shape {:?})",
                workload.data, run.example
            )
        });
        let batches = self.batches(workload);
        // A budget (memory:MB, auto:MB) is a bound, not a need: one above the machine's memory
        // bounds nothing.
        if queue_depth(policy, batches).is_none() && needed.queue > available {
            bail!(
                "invalid --sync {policy}: its budget, {}, is more than this machine's {} of \
                 available memory, so it bounds nothing; give a budget below that, or leave it \
                 out (the memory free at the start)",
                bytes(needed.queue),
                bytes(available)
            );
        }
        let queue = match queue_depth(policy, batches) {
            Some(depth) if *policy == PolicyKind::NoSync && synthetic => format!(
                "--sync {policy} (it lets {depth} batches pile up, every one of {} {})",
                Flag::BATCHES,
                workload.batches
            ),
            Some(depth) => format!("--sync {policy} (it lets {depth} batches pile up)"),
            None => format!("--sync {policy} (its budget)"),
        };
        // Where the queue is most of it, the policy is at fault before any size.
        let queue_first = needed.queue
            > needed
                .params
                .saturating_add(needed.batch)
                .saturating_add(needed.trace);
        let policy_at_fault: (Option<String>, &Shrink) =
            (Some(queue), &|r| r.policy = PolicyKind::Window(1));
        let mut candidates: Vec<(Option<String>, &Shrink)> = vec![
            (sized(&Flag::FEATURES, workload.features), &|r| {
                r.workload.features = 1
            }),
            (classes, &|r| r.outputs = 2),
            (data, &|r| r.example = vec![1]),
            (Some(hidden), &|r| r.model = ModelSpec::Mlp(vec![1])),
            (sized(&Flag::BATCH_SIZE, workload.batch_size), &|r| {
                r.workload.batch_size = 1
            }),
            (sized(&Flag::BATCHES, workload.batches), &|r| {
                r.workload.batches = 1
            }),
            (Some(format!("--epochs {epochs}")), &|r| r.epochs = 1),
        ];
        candidates.insert(if queue_first { 0 } else { 4 }, policy_at_fault);
        let flag = candidates
            .into_iter()
            .filter_map(|(flag, change)| Some((flag?, change)))
            .find(|(_, change)| small(change))
            .map_or_else(
                || "these sizes together are".to_string(),
                |(flag, _)| format!("{flag} is"),
            );
        let advice = match policy {
            PolicyKind::NoSync | PolicyKind::Window(_) | PolicyKind::EveryN(_)
                if needed.queue > needed.batch =>
            {
                "; a policy that bounds the queue (--sync memory:MB, or barrier) fits where \
                 this one does not"
            }
            _ => "",
        };
        bail!(
            "{flag} too large for this machine: training needs about {} ({} of parameters, \
             gradients and optimizer state, {} for one batch and its activations, {} for the \
             batches --sync {policy} lets wait in the queue, {} for the trace of every batch), \
             and {} of memory is available{advice}",
            bytes(needed.total()),
            bytes(needed.params),
            bytes(needed.batch),
            bytes(needed.queue),
            bytes(needed.trace),
            bytes(available)
        );
    }

    /// Batches in one epoch.
    fn batches(&self, workload: &Workload) -> usize {
        match self {
            Task::Synthetic => workload.batches,
            Task::Classify { train, .. } | Task::Regress { train } => {
                train.len().div_ceil(workload.batch_size)
            }
            Task::Text(text) => text.batches(workload.batch_size),
        }
    }

    /// The bytes a run needs, part by part.
    fn memory(&self, run: &Sizes) -> Need {
        let w = &run.workload;
        // Synthetic examples are --features wide: shrinking the flag shrinks them.
        let example = match self {
            Task::Synthetic => vec![w.features],
            _ => run.example.clone(),
        };
        let need = run.model.footprint(&example, run.outputs, w.batch_size);
        let batches = match self {
            Task::Synthetic => w.batches,
            _ => self.batches(w),
        };
        // A batch waiting in the queue holds its examples and targets.
        let example = super::model::values_in(&example);
        let one_batch = example
            .saturating_add(run.outputs as u128)
            .saturating_mul(w.batch_size as u128)
            .saturating_mul(4);
        let queue = match (&run.policy, queue_depth(&run.policy, batches)) {
            (_, Some(depth)) => one_batch.saturating_mul(depth as u128),
            (PolicyKind::MemoryBudget(mb) | PolicyKind::Auto(Some(mb)), None) => (mb * 1e6) as u128,
            _ => one_batch,
        };
        let record = std::mem::size_of::<crate::trace::BatchRecord>() as u128;
        Need {
            // Parameters, their gradients and the optimizer's copy: three times the parameters.
            params: need.parameters.saturating_mul(3 * 4),
            // The batch, and activations kept for the backward pass with their gradients.
            batch: need.activations.saturating_mul(2 * 4),
            queue,
            // One record per batch of every epoch, kept in memory until the run ends.
            trace: (batches as u128)
                .saturating_mul(run.epochs as u128)
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
            Task::Text(_) => LossName::SequenceCe,
        }
    }

    /// The targets, in a few words.
    fn targets(&self) -> &'static str {
        match self {
            Task::Classify { .. } => "class labels",
            Task::Synthetic | Task::Regress { .. } => "values to regress",
            Task::Text(_) => "text, each token's next to predict",
        }
    }
}

/// What sizes a run: its flags, and its data's example shape and outputs.
#[derive(Clone)]
struct Sizes {
    workload: Workload,
    model: ModelSpec,
    policy: PolicyKind,
    epochs: usize,
    example: Vec<usize>,
    outputs: usize,
}

/// One size of a run made as small as it goes, on a copy.
type Shrink = dyn Fn(&mut Sizes);

/// The memory a run needs, in bytes.
struct Need {
    params: u128,
    batch: u128,
    queue: u128,
    trace: u128,
}

impl Need {
    fn total(&self) -> u128 {
        self.params
            .saturating_add(self.batch)
            .saturating_add(self.queue)
            .saturating_add(self.trace)
    }
}

/// How many batches `policy` lets wait in the queue at most, of an epoch of `batches`;
/// `None` for a budget in bytes (`memory:MB`), `auto`, which sizes its window to the memory it
/// finds, or a policy of the user's own.
fn queue_depth(policy: &PolicyKind, batches: usize) -> Option<usize> {
    match policy {
        PolicyKind::Window(k) | PolicyKind::EveryN(k) => Some((*k).min(batches)),
        PolicyKind::NoSync => Some(batches),
        PolicyKind::MemoryBudget(_) | PolicyKind::Auto(_) | PolicyKind::Custom(_) => None,
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

/// A label past `--classes` names the flag that set the classes (the loader knows no flags).
fn given_classes(error: ember_datasets::DatasetError) -> anyhow::Error {
    match &error {
        ember_datasets::DatasetError::Label { classes, .. } => anyhow::anyhow!(
            "{error} (--classes {classes}): give --classes as the number of classes, labels \
             0 to N-1"
        ),
        _ => error.into(),
    }
}

/// Text's task: its corpus read (`--classes` is refused before, as for every data but csv and
/// npy).
fn text_task(spec: &super::text_data::TextSpec) -> anyhow::Result<Task> {
    let (corpus, vocab) = spec.load()?;
    Ok(Task::Text(TextTask {
        spec: spec.clone(),
        corpus,
        vocab,
    }))
}

/// An empty set of examples trains nothing and measures nothing: an error naming the data.
fn refuse_empty(examples: &Examples, set: &str, data: &DataSpec) -> anyhow::Result<()> {
    if examples.is_empty() {
        bail!("invalid --data {data}: its {set} set has no examples");
    }
    Ok(())
}

/// `--valid-split share`'s two parts of `train`, an error naming the flag.
pub fn held_out(train: &Examples, share: f64, seed: u64) -> anyhow::Result<(Examples, Examples)> {
    train.split(share, seed).map_err(|e| match e {
        ember_datasets::DatasetError::InvalidValue {
            name: "validation split",
            value,
            reason,
        } => anyhow::anyhow!("invalid --valid-split {value}: {reason}"),
        e => e.into(),
    })
}
