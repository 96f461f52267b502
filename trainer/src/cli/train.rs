//! `ember train`: the chapter's MLP on the chapter's synthetic data.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use burn::tensor::Device;
use clap::Args;
use ember::{Block, Init, Sequential, SoftmaxCrossEntropyLoss, Trainer};
use ember_datasets::DataLoader;
use ember_trainer::evaluate::accuracy;
use ember_trainer::fit::{FitOptions, FitRun, Progress, fit};
use ember_trainer::policy::{PolicySpec, SyncPolicy};
use ember_trainer::trace::EpochRecord;
use indicatif::{ProgressBar, ProgressStyle};

use super::workload::{DataSpec, Workload, WorkloadArgs, mlp, positive};

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
    /// The network: `mlp:H1,H2,…` (Dense(H, relu) layers, then the output layer). Defaults to
    /// --hidden on synthetic data and to d2l's mlp:256 on Fashion-MNIST.
    #[arg(long)]
    model: Option<String>,
    /// The loss: `l2` (synthetic data) or `softmax-ce` (Fashion-MNIST).
    #[arg(long)]
    loss: Option<String>,
    /// Save the parameters (safetensors) here at the end.
    #[arg(long)]
    save: Option<PathBuf>,
    /// Start from the parameters (safetensors) in this file.
    #[arg(long)]
    load: Option<PathBuf>,
}

/// `mlp:256,128` → [256, 128].
fn parse_model(model: &str) -> anyhow::Result<Vec<usize>> {
    let sizes = model
        .strip_prefix("mlp:")
        .with_context(|| format!("invalid --model {model:?}: expected mlp:H1,H2,…"))?;
    sizes
        .split(',')
        .map(|h| {
            h.trim()
                .parse::<usize>()
                .ok()
                .filter(|h| *h > 0)
                .with_context(|| format!("invalid --model {model:?}: {h:?} is not a layer size"))
        })
        .collect()
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

pub fn run(args: TrainArgs) -> anyhow::Result<()> {
    let mut workload = Workload::try_from(args.workload)?;
    let mut policy = args.sync.parse::<PolicySpec>()?.build();
    let epochs = positive("epochs", args.epochs)?;
    if let Some(model) = &args.model {
        workload.hidden = parse_model(model)?;
    }
    let loss = args.loss.as_deref();
    let fashion = match &workload.data {
        DataSpec::Synthetic if loss.is_some_and(|l| l != "l2") => {
            bail!(
                "invalid --loss {:?}: synthetic data trains with l2",
                loss.unwrap_or_default()
            )
        }
        DataSpec::Synthetic => None,
        DataSpec::FashionMnist(_) if loss.is_some_and(|l| l != "softmax-ce") => {
            bail!(
                "invalid --loss {:?}: Fashion-MNIST trains with softmax-ce",
                loss.unwrap_or_default()
            )
        }
        DataSpec::FashionMnist(dir) => Some(dir.clone()),
    };
    let picked = workload.device.resolve()?;
    println!("device: {}", picked.reason);
    let device = picked.device.clone().autodiff();
    // --seed fixes the weights' initialization as well as the data.
    picked.device.seed(workload.seed);
    device.seed(workload.seed);

    if let Some(dir) = fashion {
        if args.model.is_none() {
            workload.hidden = vec![256];
        }
        return train_fashion(
            &dir,
            &workload,
            policy.as_mut(),
            epochs,
            &picked.device,
            &args.metrics,
            &args.save,
            &args.load,
        );
    }

    println!(
        "training {} batches x {} of {} features, policy {}, {} epoch(s)",
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
    let mut net = workload.net(&device);
    if let Some(path) = &args.load {
        net = net.load_parameters(path, &device)?;
    }
    let run = workload.fit(net, &device, policy.as_mut(), epochs, &mut progress)?;
    finish(&run, &args.metrics, &args.save)
}

/// Writes the trace and the parameters, as asked.
fn finish(
    run: &FitRun<Sequential>,
    metrics: &Option<PathBuf>,
    save: &Option<PathBuf>,
) -> anyhow::Result<()> {
    if let Some(path) = metrics {
        let written = run
            .trace
            .write(path)
            .with_context(|| format!("writing metrics to {}", path.display()))?;
        for file in written {
            println!("metrics: {}", file.display());
        }
    }
    if let Some(path) = save {
        run.net.save_parameters(path)?;
        println!("parameters saved to {}", path.display());
    }
    println!("parameters: {}", run.net.collect_params().total());
    Ok(())
}

/// d2l's `train_ch3`: an MLP on Fashion-MNIST with softmax cross-entropy, weights N(0, 0.01),
/// train and test accuracy after every epoch.
#[allow(clippy::too_many_arguments)]
fn train_fashion(
    dir: &Path,
    workload: &Workload,
    policy: &mut dyn SyncPolicy,
    epochs: usize,
    eval_device: &Device,
    metrics: &Option<PathBuf>,
    save: &Option<PathBuf>,
    load: &Option<PathBuf>,
) -> anyhow::Result<()> {
    let (train, test) = ember_datasets::fashion_mnist::load(dir)?;
    println!(
        "training on Fashion-MNIST from {}: {} train, {} test examples; mlp {:?}, batch {}, lr {}, policy {}, {epochs} epoch(s)",
        dir.display(),
        train.len(),
        test.len(),
        workload.hidden,
        workload.batch_size,
        workload.lr,
        policy.name()
    );
    let device = eval_device.clone().autodiff();
    let mut net = mlp(&workload.hidden, 10, Init::Normal(0.01), &device);
    if let Some(path) = load {
        net = net.load_parameters(path, &device)?;
    }
    let trainer = Trainer::new(&net, "sgd", workload.lr)?;
    let mut loader = DataLoader::new(train, workload.batch_size)?
        .shuffle(workload.seed)
        .prefetch(4);
    let (train_eval, test_eval) = (loader.rebatched(1024)?, DataLoader::new(test, 1024)?);
    let (d1, d2) = (eval_device.clone(), eval_device.clone());
    let options = FitOptions::epochs(epochs)
        .evaluate("train_acc", move |net: &Sequential| {
            accuracy(net, &train_eval, &d1)
        })
        .evaluate("test_acc", move |net: &Sequential| {
            accuracy(net, &test_eval, &d2)
        });
    let mut progress = BookLines {
        bar: None,
        batches: loader.num_batches(),
    };
    let run = fit(
        net,
        SoftmaxCrossEntropyLoss,
        trainer,
        &device,
        &mut loader,
        policy,
        &options,
        &mut progress,
    )?;
    finish(&run, metrics, save)
}
