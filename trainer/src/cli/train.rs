//! `ember train`: the chapter's MLP on the chapter's synthetic data, or a model of `--model`
//! on Fashion-MNIST, a CSV table or NumPy arrays.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::{Context, bail};
use burn::tensor::Device;
use clap::Args;
use ember::{Block, Init, L2Loss, Loss, Sequential, SoftmaxCrossEntropyLoss, Trainer};
use ember_datasets::csv::{CsvOptions, Label, read_csv};
use ember_datasets::npy::read_npy_pair;
use ember_datasets::{DataLoader, Examples};
use ember_trainer::evaluate::accuracy;
use ember_trainer::fit::Target;
use ember_trainer::fit::{FitOptions, FitRun, Progress, fit};
use ember_trainer::policy::{PolicySpec, SyncPolicy};
use ember_trainer::trace::EpochRecord;
use indicatif::{ProgressBar, ProgressStyle};

use super::model::ModelSpec;
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
    sync: String,
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
    model: Option<String>,
    /// The loss: `l2` (synthetic data, regression targets) or `softmax-ce` (class labels).
    #[arg(long)]
    loss: Option<String>,
    /// Save the parameters (safetensors) here at the end.
    #[arg(long)]
    save: Option<PathBuf>,
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
            println!("batch {done}, time {elapsed:.4} sec");
        }
    }

    fn epoch_done(&mut self, r: &EpochRecord) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
            bar.reset();
            bar.set_length(self.batches as u64);
        }
        println!(
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
        if let Some(pool) = r.peak_pool_mb {
            println!("epoch {}: peak device pool: {pool:.1} MB", r.epoch + 1);
        }
        if !r.metrics.is_empty() {
            let metrics: Vec<String> = r
                .metrics
                .iter()
                .map(|(k, v)| format!("{k} {v:.4}"))
                .collect();
            println!(
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
        Ok(match classes {
            Some(_) => Task::Classify {
                train: examples,
                test: None,
            },
            None => Task::Regress { train: examples },
        })
    }

    /// The loss this data trains with.
    fn loss(&self) -> &'static str {
        match self {
            Task::Classify { .. } => "softmax-ce",
            Task::Synthetic | Task::Regress { .. } => "l2",
        }
    }
}

pub fn run(args: TrainArgs) -> anyhow::Result<()> {
    let workload = Workload::try_from(args.workload)?;
    let mut policy = args.sync.parse::<PolicySpec>()?.build();
    let epochs = positive("epochs", args.epochs)?;
    let model = args
        .model
        .as_deref()
        .map(str::parse::<ModelSpec>)
        .transpose()?;
    if model.is_some() && workload.synthetic_flags.contains(&"--hidden") {
        bail!("--hidden is ignored when --model is given: put the sizes in --model mlp:H1,H2,…");
    }
    let task = Task::load(&workload.data, workload.classes)?;
    if let Some(loss) = args.loss.as_deref()
        && loss != task.loss()
    {
        bail!(
            "invalid --loss {loss:?}: this data trains with {}",
            task.loss()
        );
    }
    let picked = workload.device.resolve()?;
    println!("device: {}", picked.reason);
    let device = picked.device.clone().autodiff();
    // --seed fixes the weights' initialization as well as the data.
    picked.device.seed(workload.seed);
    device.seed(workload.seed);
    let outputs = Outputs {
        metrics: args.metrics,
        save: args.save,
        load: args.load,
    };

    if let Task::Synthetic = task {
        let model = model.unwrap_or(ModelSpec::Mlp(workload.hidden.clone()));
        return train_synthetic(
            &workload,
            &model,
            policy.as_mut(),
            epochs,
            &device,
            &outputs,
        );
    }
    // d2l's MLP unless --model says otherwise.
    let model = model.unwrap_or(ModelSpec::Mlp(vec![256]));
    let run = ExamplesRun {
        workload: &workload,
        model: &model,
        policy: policy.as_mut(),
        epochs,
        device: &picked.device,
        outputs: &outputs,
    };
    match task {
        Task::Synthetic => unreachable!("trained above"),
        Task::Classify { train, test } => {
            let classes = train.classes().unwrap_or(1);
            let net = model.build(classes, model.init(), &device);
            run.train(net, SoftmaxCrossEntropyLoss, train, test)
        }
        Task::Regress { train } => {
            let net = model.build(train.outputs(), Init::default(), &device);
            run.train(net, L2Loss, train, None)
        }
    }
}

/// Where `ember train` writes and reads parameters and traces.
struct Outputs {
    metrics: Option<PathBuf>,
    save: Option<PathBuf>,
    load: Option<PathBuf>,
}

/// The chapter's workload: synthetic batches, L2 loss, the book's progress lines.
fn train_synthetic(
    workload: &Workload,
    model: &ModelSpec,
    policy: &mut dyn SyncPolicy,
    epochs: usize,
    device: &Device,
    outputs: &Outputs,
) -> anyhow::Result<()> {
    println!(
        "training {} batches x {} of {} features, model {model}, policy {}, {} epoch(s)",
        workload.batches,
        workload.batch_size,
        workload.features,
        policy.name(),
        epochs
    );
    let bar = std::io::stdout().is_terminal().then(|| {
        ProgressBar::new(workload.batches as u64).with_style(
            ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} issued ({elapsed})")
                .expect("valid template"),
        )
    });
    let mut progress = BookLines {
        bar,
        batches: workload.batches,
    };
    let mut net = model.build(1, Init::default(), device);
    if let Some(path) = &outputs.load {
        let example = workload.data()?.batch(0);
        let x = ember::NdTensor::from_host(&example.x, &example.x_shape, device)?;
        net = net.infer_shape(x)?.load_parameters(path, device)?;
    }
    let run = workload.fit(net, device, policy, epochs, &mut progress)?;
    finish(&run, outputs)
}

/// Writes the trace and the parameters, as asked.
fn finish(run: &FitRun<Sequential>, outputs: &Outputs) -> anyhow::Result<()> {
    if let Some(path) = &outputs.metrics {
        let written = run
            .trace
            .write(path)
            .with_context(|| format!("writing metrics to {}", path.display()))?;
        for file in written {
            println!("metrics: {}", file.display());
        }
    }
    if let Some(path) = &outputs.save {
        run.net.save_parameters(path)?;
        println!("parameters saved to {}", path.display());
    }
    println!("parameters: {}", run.net.collect_params().total());
    Ok(())
}

/// Training on examples held in memory (Fashion-MNIST, CSV, NPY), d2l's `train_ch3`/`train_ch6`:
/// shuffled minibatches, SGD at the workload's rate, and after each epoch the accuracy on the
/// training and test sets for class labels.
struct ExamplesRun<'a> {
    workload: &'a Workload,
    model: &'a ModelSpec,
    policy: &'a mut dyn SyncPolicy,
    epochs: usize,
    /// The device without autodiff, for evaluation.
    device: &'a Device,
    outputs: &'a Outputs,
}

impl ExamplesRun<'_> {
    fn train<L>(
        self,
        net: Sequential,
        loss: L,
        train: Examples,
        test: Option<Examples>,
    ) -> anyhow::Result<()>
    where
        L: Loss + Send + 'static,
        L::Target: Target,
    {
        let w = self.workload;
        println!(
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
            let x = ember::NdTensor::from_host(&example.x, &example.x_shape, &device)?;
            net = net.infer_shape(x)?.load_parameters(path, &device)?;
        }
        let trainer = Trainer::new(&net, "sgd", w.lr)?;
        let mut options = FitOptions::epochs(self.epochs);
        if loader.examples().classes().is_some() {
            let train_eval = loader.rebatched(1024)?;
            let d = self.device.clone();
            options = options.evaluate("train_acc", move |net: &Sequential| {
                accuracy(net, &train_eval, &d)
            });
        }
        if let Some(test) = test {
            let test_eval = DataLoader::new(test, 1024)?;
            let d = self.device.clone();
            options = options.evaluate("test_acc", move |net: &Sequential| {
                accuracy(net, &test_eval, &d)
            });
        }
        let mut progress = BookLines {
            bar: None,
            batches: loader.num_batches(),
        };
        let run = fit(
            net,
            loss,
            trainer,
            &device,
            &mut loader,
            self.policy,
            &options,
            &mut progress,
        )?;
        finish(&run, self.outputs)
    }
}
