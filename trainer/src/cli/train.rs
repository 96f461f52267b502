//! `ember train`: the chapter's MLP on the chapter's synthetic data, or a model of `--model`
//! on Fashion-MNIST, a CSV table or NumPy arrays.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::{Context, bail};
use burn::tensor::Device;
use clap::Args;
use ember::output;
use ember::{
    Block, DeviceName, Init, L2Loss, Loss, Replicas, Sequential, SoftmaxCrossEntropyLoss, Trainer,
};
use ember_datasets::csv::{CsvOptions, Label, read_csv};
use ember_datasets::npy::read_npy_pair;
use ember_datasets::{DataLoader, Examples};
use ember_trainer::checkpoint::{Checkpoint, Checkpointing};
use ember_trainer::evaluate::accuracy;
use ember_trainer::fit::{Fit, FitRun, Progress, Target};
use ember_trainer::memory::available_bytes;
use ember_trainer::policy::SyncPolicy;
use ember_trainer::signals;
use ember_trainer::trace::{EpochRecord, Trace};
use indicatif::{ProgressBar, ProgressStyle};

use super::list;
use super::model::ModelSpec;
use super::policy_spec::PolicySpec;
use super::workload::{DataSpec, Workload, WorkloadArgs, positive};

const POLICY_HELP: &str = "\
How far the frontend may run ahead of the backend:
  barrier     batch t starts after batch t-1 finished (wait_to_read on every loss)
  t+2         batch t starts after batch t-2 finished (the chapter's exercise 2)
  window:K    batch t starts after batch t-K finished (barrier = window:1)
  none        no wait until the end of the epoch (waitall): queued batches pile up
  every:N     a full barrier before every N-th batch (Keras' steps_per_execution)
  memory:MB   wait for the oldest batch while the process grew by more than MB";

/// Options of `ember train`.
#[derive(Debug, Args)]
pub struct TrainArgs {
    #[command(flatten)]
    workload: WorkloadArgs,
    /// Sync policy.
    #[arg(long, default_value = "barrier", long_help = POLICY_HELP)]
    sync: PolicySpec,
    /// Epochs.
    #[arg(long, default_value_t = 1)]
    epochs: usize,
    /// Write the per-batch trace here: `*.jsonl` for JSON Lines, CSV otherwise (epochs go to
    /// `<stem>.epochs.csv` beside it).
    #[arg(long)]
    metrics: Option<PathBuf>,
    /// The network: `mlp:H1,H2,…` (Dense(H, relu) layers, then the output layer), `lenet`
    /// (d2l's LeNet: sigmoid, average pooling) or `lenet-relu` (ReLU, max pooling). Defaults
    /// to --hidden on synthetic data and to d2l's mlp:256 on other data.
    #[arg(long)]
    model: Option<ModelSpec>,
    /// The loss: `l2` for values to regress (synthetic data, csv and npy data without
    /// --classes) or `softmax-ce` for class labels. Defaults to the one the data's targets
    /// call for.
    #[arg(long, value_enum)]
    loss: Option<LossName>,
    /// Save the parameters (safetensors) here at the end. Written first, before --metrics.
    #[arg(long)]
    save: Option<PathBuf>,
    /// Keep checkpoints in this directory (parameters, optimizer state, position, trace), so
    /// that a killed or interrupted run can go on with --resume. Written at the end of each
    /// epoch, or as --checkpoint-every says; the last two are kept.
    #[arg(long)]
    checkpoint: Option<PathBuf>,
    /// Write a checkpoint after every N batches rather than at the end of each epoch.
    #[arg(long)]
    checkpoint_every: Option<usize>,
    /// Go on from the newest complete checkpoint in this directory, with the same flags as
    /// the run that wrote it (--epochs may grow); checkpoints keep going there unless
    /// --checkpoint names another directory.
    #[arg(long)]
    resume: Option<PathBuf>,
    /// Start from the parameters (safetensors) in this file.
    #[arg(long)]
    load: Option<PathBuf>,
}

/// The book's progress lines, or a bar on a terminal.
struct BookLines {
    bar: Option<ProgressBar>,
    batches: usize,
}

impl Progress for BookLines {
    fn issued(&mut self, epoch: usize, batch: usize, elapsed: f64) {
        let done = batch + 1;
        if let Some(bar) = &self.bar {
            bar.set_message(format!("epoch {}", epoch + 1));
            bar.set_position(done as u64);
        } else if done.is_multiple_of(50) {
            say!("batch {done}, time {elapsed:.4} sec");
        }
    }

    fn epoch_done(&mut self, r: &EpochRecord) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
            bar.reset();
            bar.set_length(self.batches as u64);
        }
        say!(
            "epoch {}: time per epoch: {:.4} sec (issued in {:.4} sec), increased memory: {:.1} MB \
             (peak growth {:.1} MB), mean loss {:.6}, max in flight {}",
            r.epoch + 1,
            r.time,
            r.issue_time,
            r.increased_mb,
            r.peak_growth_mb,
            r.mean_loss,
            r.max_depth
        );
        if !r.device_time.is_empty() {
            let devices: Vec<String> = r
                .device_time
                .iter()
                .enumerate()
                .map(|(device, time)| format!("device {device} {time:.4} sec"))
                .collect();
            say!(
                "epoch {}: per-device completion, mean from issue: {}",
                r.epoch + 1,
                devices.join(", ")
            );
        }
        if let Some(pool) = r.peak_pool_mb {
            say!("epoch {}: peak device pool: {pool:.1} MB", r.epoch + 1);
        }
        if !r.metrics.is_empty() {
            let metrics: Vec<String> = r
                .metrics
                .iter()
                .map(|(k, v)| format!("{k} {v:.4}"))
                .collect();
            say!(
                "epoch {}: train loss {:.4}, {}",
                r.epoch + 1,
                r.mean_loss,
                metrics.join(", ")
            );
        }
    }
}

/// What the data asks of the loop: the chapter's synthetic epochs, class labels, or values.
enum Task {
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
    fn load(data: &DataSpec, classes: Option<usize>) -> anyhow::Result<Self> {
        let examples = match data {
            DataSpec::Synthetic => return Ok(Task::Synthetic),
            DataSpec::FashionMnist(dir) => {
                let (train, test) = ember_datasets::fashion_mnist::load(dir)?;
                refuse_empty(&train, "training", data)?;
                refuse_empty(&test, "test", data)?;
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

    /// Refuses sizes whose parameters, or one batch's data and activations, cannot fit in
    /// this machine's memory, before anything is allocated; names the flag at fault.
    fn check_memory(&self, workload: &Workload, model: &ModelSpec) -> anyhow::Result<()> {
        let (example, outputs) = match self {
            Task::Synthetic => (vec![workload.features], 1),
            Task::Classify { train, .. } => (train.shape().to_vec(), train.classes().unwrap_or(1)),
            Task::Regress { train } => (train.shape().to_vec(), train.outputs()),
        };
        let Some(available) = available_bytes() else {
            return Ok(());
        };
        let need = model.footprint(&example, outputs, workload.batch_size);
        let one = model.footprint(&example, outputs, 1);
        // Parameters, their gradients and the optimizer's copy: three times the parameters.
        let params = need.parameters.saturating_mul(3 * 4);
        // The batch, and activations kept for the backward pass with their gradients.
        let batch = need.activations.saturating_mul(2 * 4);
        let available = u128::from(available);
        if params.saturating_add(batch) <= available {
            return Ok(());
        }
        // The model is at fault when it does not fit even with one example per batch.
        let flag = if params.saturating_add(one.activations.saturating_mul(2 * 4)) > available {
            match model {
                ModelSpec::Mlp(_) if workload.synthetic_flags.contains(&"--hidden") => {
                    format!("--hidden {}", list::join(&workload.hidden))
                }
                ModelSpec::Mlp(hidden) if self.is_synthetic() => format!(
                    "--hidden {} with --features {}",
                    list::join(hidden),
                    workload.features
                ),
                _ => format!("--model {model}"),
            }
        } else {
            format!("--batch-size {}", workload.batch_size)
        };
        bail!(
            "{flag} is too large for this machine: training needs about {} ({} of parameters, \
             gradients and optimizer state, {} for one batch and its activations), and {} of \
             memory is available",
            bytes(params.saturating_add(batch)),
            bytes(params),
            bytes(batch),
            bytes(available)
        );
    }

    fn is_synthetic(&self) -> bool {
        matches!(self, Task::Synthetic)
    }

    /// The loss this data's targets call for.
    fn loss(&self) -> LossName {
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

pub fn run(args: TrainArgs) -> anyhow::Result<()> {
    let workload = Workload::try_from(args.workload)?;
    let policy = args.sync.build();
    let epochs = positive("epochs", args.epochs)?;
    let model = args.model;
    if model.is_some() && workload.synthetic_flags.contains(&"--hidden") {
        bail!("--hidden is ignored when --model is given: put the sizes in --model mlp:H1,H2,…");
    }
    // Every output is checked before any work starts.
    let outputs = Outputs::check(
        args.load,
        args.save,
        args.metrics,
        args.checkpoint,
        args.checkpoint_every,
        args.resume,
    )?;
    let task = Task::load(&workload.data, workload.classes)?;
    let loss = args.loss.unwrap_or(task.loss());
    if loss != task.loss() {
        return Err(wrong_loss(loss, &task, &workload.data));
    }
    let model = model.unwrap_or(match task {
        Task::Synthetic => ModelSpec::Mlp(workload.hidden.clone()),
        // d2l's MLP unless --model says otherwise.
        _ => ModelSpec::Mlp(vec![256]),
    });
    task.check_memory(&workload, &model)?;
    let picked = workload.open_devices()?;
    for (index, device) in picked.iter().enumerate() {
        match picked.len() {
            1 => say!("device: {}", device.reason),
            _ => say!("device {index}: {}", device.reason),
        }
        // --seed fixes the weights' initialization as well as the data.
        device.device.seed(workload.seed);
        device.device.clone().autodiff().seed(workload.seed);
    }
    let main = &picked[0];
    let device = main.device.clone().autodiff();
    let replicas = Replicas::new(picked.iter().map(|p| p.device.clone().autodiff()).collect())?;
    let run = Run {
        workload: &workload,
        model: &model,
        policy,
        epochs,
        device: &main.device,
        device_name: main.name,
        replicas,
        outputs: &outputs,
    };
    match (loss, task) {
        (LossName::L2, Task::Synthetic) => run.synthetic(),
        (LossName::SoftmaxCe, Task::Classify { train, test }) => {
            let classes = train.classes().unwrap_or(1);
            let net = model.build(classes, model.init(), &device);
            run.examples(net, SoftmaxCrossEntropyLoss, train, test)
        }
        (LossName::L2, Task::Regress { train }) => {
            let net = model.build(train.outputs(), Init::default(), &device);
            run.examples(net, L2Loss, train, None)
        }
        (loss, task) => Err(wrong_loss(loss, &task, &workload.data)),
    }
}

/// `--loss` that the data's targets cannot train with: the error names both.
fn wrong_loss(loss: LossName, task: &Task, data: &DataSpec) -> anyhow::Error {
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

/// A byte count for people: `12.3 GB`, `4.1 TB`.
fn bytes(n: u128) -> String {
    let n = n as f64;
    if n >= 1e12 {
        format!("{:.1} TB", n / 1e12)
    } else {
        format!("{:.1} GB", n / 1e9)
    }
}

/// Where `ember train` writes and reads parameters, traces and checkpoints; checked before
/// any work starts.
struct Outputs {
    save: Option<PathBuf>,
    metrics: Option<PathBuf>,
    load: Option<PathBuf>,
    checkpoint: Option<Checkpointing>,
    resume: Option<Checkpoint>,
}

impl Outputs {
    /// Checks every output path (a regular file, or new in a writable directory), prepares the
    /// checkpoint directory, and finds the checkpoint to resume from.
    fn check(
        load: Option<PathBuf>,
        save: Option<PathBuf>,
        metrics: Option<PathBuf>,
        checkpoint: Option<PathBuf>,
        every: Option<usize>,
        resume: Option<PathBuf>,
    ) -> anyhow::Result<Self> {
        if let Some(path) = &save {
            output::check(path).with_context(|| format!("invalid --save {}", path.display()))?;
        }
        if let Some(path) = &metrics {
            for file in Trace::paths(path) {
                output::check(&file)
                    .with_context(|| format!("invalid --metrics {}", path.display()))?;
            }
        }
        if let Some(dir) = &resume
            && !dir.is_dir()
        {
            bail!(
                "invalid --resume {}: no such directory of checkpoints",
                dir.display()
            );
        }
        let checkpoint = match checkpoint.or_else(|| resume.clone()) {
            Some(dir) => {
                let mut checkpointing = Checkpointing::new(dir);
                checkpointing.every = every;
                checkpointing
                    .prepare()
                    .with_context(|| "invalid --checkpoint".to_string())?;
                Some(checkpointing)
            }
            None if every.is_some() => {
                bail!("--checkpoint-every needs --checkpoint DIR (or --resume DIR)")
            }
            None => None,
        };
        let resume = match &resume {
            Some(dir) => {
                let found = Checkpoint::latest(dir)?;
                if found.is_none() {
                    say!(
                        "no complete checkpoint in {} yet: starting from the beginning",
                        dir.display()
                    );
                }
                found
            }
            None => None,
        };
        Ok(Self {
            save,
            metrics,
            load,
            checkpoint,
            resume,
        })
    }
}

/// One `ember train` run: the workload, the model, the policy, and where things go.
struct Run<'a> {
    workload: &'a Workload,
    model: &'a ModelSpec,
    policy: Box<dyn SyncPolicy>,
    epochs: usize,
    /// The main device without autodiff, for evaluation.
    device: &'a Device,
    /// What `--device` (or `--devices`' first entry) resolved to.
    device_name: DeviceName,
    /// The devices each step is split across (the main device alone without `--devices`).
    replicas: Replicas,
    outputs: &'a Outputs,
}

impl Run<'_> {
    /// The chapter's workload: synthetic batches, L2 loss, the book's progress lines.
    fn synthetic(self) -> anyhow::Result<()> {
        let w = self.workload;
        say!(
            "training {} batches x {} of {} features, model {}, policy {}, {} epoch(s)",
            w.batches,
            w.batch_size,
            w.features,
            self.model,
            self.policy.name(),
            self.epochs
        );
        let bar = std::io::stdout().is_terminal().then(|| {
            ProgressBar::new(w.batches as u64).with_style(
                ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} issued ({elapsed})")
                    .expect("valid template"),
            )
        });
        let progress = BookLines {
            bar,
            batches: w.batches,
        };
        let device = self.device.clone().autodiff();
        let mut net = self.model.build(1, Init::default(), &device);
        if let Some(path) = &self.outputs.load {
            let example = w.data()?.batch(0);
            let x = example.x_on(&device)?;
            net = net.infer_shape(x)?.load_parameters(path, &device)?;
        }
        let (fit, mut data) = w.fit(net, &device)?;
        let outputs = self.outputs;
        let run = self.configure(fit, progress)?.run(&mut data)?;
        finish(run, outputs)
    }

    /// Training on examples held in memory (Fashion-MNIST, CSV, NPY), d2l's
    /// `train_ch3`/`train_ch6`: shuffled minibatches, SGD at the workload's rate, and after
    /// each epoch, for class labels, the training accuracy its steps accumulated (`fit` does
    /// that) and the accuracy on the test set.
    fn examples<L>(
        self,
        net: Sequential,
        loss: L,
        train: Examples,
        test: Option<Examples>,
    ) -> anyhow::Result<()>
    where
        L: Loss + Send + Sync + 'static,
        L::Target: Target,
    {
        let w = self.workload;
        say!(
            "training on {}: {} train{} examples of shape {:?}; {}, batch {}, lr {}, policy {}, {} epoch(s)",
            w.data,
            train.len(),
            test.as_ref()
                .map(|t| format!(", {} test", t.len()))
                .unwrap_or_default(),
            train.shape(),
            self.model,
            w.batch_size,
            w.lr,
            self.policy.name(),
            self.epochs
        );
        let device = self.device.clone().autodiff();
        let mut loader = DataLoader::new(train, w.batch_size)?
            .shuffle(w.seed)
            .prefetch(4);
        let mut net = net;
        if let Some(path) = &self.outputs.load {
            let example = loader.examples().batch(&[0]);
            let x = example.x_on(&device)?;
            net = net.infer_shape(x)?.load_parameters(path, &device)?;
        }
        let trainer = Trainer::new(&net, "sgd", w.lr)?;
        let mut fit = Fit::new(net, loss, trainer, &device);
        if let Some(test) = test {
            let test_eval = DataLoader::new(test, 1024)?;
            let d = self.device.clone();
            fit = fit.evaluate("test_acc", move |net: &Sequential| {
                accuracy(net, &test_eval, &d)
            });
        }
        let progress = BookLines {
            bar: None,
            batches: loader.num_batches(),
        };
        let outputs = self.outputs;
        let run = self.configure(fit, progress)?.run(&mut loader)?;
        finish(run, outputs)
    }

    /// The settings every run of `ember train` shares: policy, epochs, progress, the per-step
    /// seed, checkpoints and resume.
    fn configure<'f, L>(
        self,
        fit: Fit<'f, Sequential, L>,
        progress: BookLines,
    ) -> anyhow::Result<Fit<'f, Sequential, L>>
    where
        L: Loss + Send + Sync + 'static,
        L::Target: Target,
    {
        signals::install()?;
        let description = self.description();
        let mut fit = fit
            .replicas(self.replicas)
            .policy(self.policy)
            .epochs(self.epochs)
            .progress(progress)
            .seed(self.workload.seed);
        if let Some(checkpointing) = &self.outputs.checkpoint {
            fit = fit.checkpoint(checkpointing.clone().describe(description.clone()));
        }
        if let Some(checkpoint) = &self.outputs.resume {
            // A flag only the checkpoint's run had (--devices where this run has --device).
            if let Some((flag, value)) = checkpoint
                .description()
                .iter()
                .find(|(flag, _)| !description.contains_key(*flag))
            {
                bail!(
                    "cannot resume from {}: it was written by a run with {flag} {value}, and \
                     this one has no {flag}; resume with the flags of that run",
                    checkpoint.dir.display()
                );
            }
            for (flag, value) in &description {
                let before = checkpoint.description().get(flag);
                if before != Some(value) {
                    bail!(
                        "cannot resume from {}: it was written by a run with {flag} {}, and \
                         this one has {flag} {value}; resume with the flags of that run",
                        checkpoint.dir.display(),
                        before.map(String::as_str).unwrap_or("(not given)")
                    );
                }
            }
            say!(
                "resuming from {}: epoch {}, batch {}",
                checkpoint.dir.display(),
                checkpoint.position.epoch + 1,
                checkpoint.position.next_batch
            );
            fit = fit.resume(checkpoint.clone());
        }
        Ok(fit)
    }

    /// What makes two runs the same run, flag by flag: what a resume must match. --epochs may
    /// grow and --sync changes no result, so neither is here.
    fn description(&self) -> BTreeMap<String, String> {
        let w = self.workload;
        let mut flags = BTreeMap::from([
            ("--data".to_string(), w.data.to_string()),
            ("--model".to_string(), self.model.to_string()),
            ("--batch-size".to_string(), w.batch_size.to_string()),
            ("--lr".to_string(), w.lr.to_string()),
            ("--seed".to_string(), w.seed.to_string()),
        ]);
        let (flag, devices) = match &w.devices {
            Some(list) => ("--devices", list.to_string()),
            None => ("--device", self.device_name.to_string()),
        };
        flags.insert(flag.to_string(), devices);
        if w.data == DataSpec::Synthetic {
            flags.insert("--batches".to_string(), w.batches.to_string());
            flags.insert("--features".to_string(), w.features.to_string());
        }
        flags
    }
}

/// Writes the parameters first, then the trace: a failure writing one never keeps the other
/// from being written. A run stopped by a signal writes its trace so far and no parameters
/// (its checkpoint holds them), and ends with the signal's exit status.
fn finish(run: FitRun<Sequential>, outputs: &Outputs) -> anyhow::Result<()> {
    let mut failures = Vec::new();
    if let Some(path) = &outputs.save
        && run.stopped.is_none()
    {
        match run.net.save_parameters(path) {
            Ok(()) => say!("parameters saved to {}", path.display()),
            Err(e) => failures.push(format!("--save {}: {e}", path.display())),
        }
    }
    if let Some(path) = &outputs.metrics {
        match run.trace.write(path) {
            Ok(written) => {
                for file in written {
                    say!("metrics: {}", file.display());
                }
            }
            Err(e) => failures.push(format!("--metrics {}: {e}", path.display())),
        }
    }
    if let Some(signal) = run.stopped {
        let resume = match &outputs.checkpoint {
            Some(c) => format!("; go on with --resume {}", c.dir.display()),
            None => String::new(),
        };
        say!(
            "stopped by {signal} after batch {} of epoch {}{resume}",
            run.trace.batches.last().map_or(0, |b| b.batch + 1),
            run.trace.batches.last().map_or(0, |b| b.epoch + 1)
        );
        return Err(super::Interrupted(signal).into());
    }
    say!("parameters: {}", run.net.collect_params().total());
    match failures.len() {
        0 => Ok(()),
        _ => bail!("{}", failures.join("\n")),
    }
}
