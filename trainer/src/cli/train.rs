//! `ember train`: the chapter's MLP on the chapter's synthetic data.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use ember::Block;
use ember_trainer::fit::Progress;
use ember_trainer::policy::PolicySpec;
use ember_trainer::trace::EpochRecord;
use indicatif::{ProgressBar, ProgressStyle};

use super::workload::{Workload, WorkloadArgs, positive};

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
    }
}

pub fn run(args: TrainArgs) -> anyhow::Result<()> {
    let workload = Workload::try_from(args.workload)?;
    let mut policy = args.sync.parse::<PolicySpec>()?.build();
    let epochs = positive("epochs", args.epochs)?;
    let picked = workload.device.resolve()?;
    println!("device: {}", picked.reason);
    let device = picked.device.autodiff();

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
    let run = workload.fit(&device, policy.as_mut(), epochs, &mut progress)?;
    if let Some(path) = &args.metrics {
        let written = run
            .trace
            .write(path)
            .with_context(|| format!("writing metrics to {}", path.display()))?;
        for file in written {
            println!("metrics: {}", file.display());
        }
    }
    println!("parameters: {}", run.net.collect_params().total());
    Ok(())
}
