//! A sync policy of one's own, plugged into `fit`, with its trace written and plotted beside
//! the built-in barrier and no-sync policies.
//!
//! ```text
//! cargo run --release --example custom_policy -- [DEVICE] [OUT_DIR]
//! ```
//!
//! `PrintOrTen` lets the frontend run ahead, but puts a barrier before every 10th batch, and
//! waits whenever the loss must be printed (every 25 batches): the pattern of a training loop
//! that logs its loss, where the print itself is the blocker. OUT_DIR (default
//! `custom-policy-out`) receives `trace.csv`, `timeline.png|svg` and `memory.png|svg`.

use std::path::PathBuf;

use burn::tensor::Device;
use ember::{Activation, Block, Dense, DeviceName, Init, L2Loss, Optimizer, Result, Sequential};
use ember_datasets::Synthetic;
use ember_trainer::fit::{Fit, SyntheticEpochs};
use ember_trainer::plot::{MemoryFigure, TimelineFigure, render};
use ember_trainer::policy::{InFlight, NoSync, PolicyKind, SyncPolicy, Window};
use ember_trainer::trace::Trace;

/// A barrier before every `barrier_every`-th batch, and a wait for the previous batch whenever
/// its loss is to be printed (every `print_every` batches).
struct PrintOrTen {
    barrier_every: usize,
    print_every: usize,
}

impl SyncPolicy for PrintOrTen {
    fn kind(&self) -> PolicyKind {
        PolicyKind::Custom(format!(
            "print:{}+every:{}",
            self.print_every, self.barrier_every
        ))
    }

    fn before_issue(&mut self, batch: usize, flight: &mut InFlight) -> Result<()> {
        if batch > 0 && batch.is_multiple_of(self.print_every) {
            // Printing batch t-1's loss needs its value: wait for it (and so for all before it).
            flight.wait_through(batch - 1)?;
            if let Some((done, loss)) = flight.last_observed() {
                println!("  batch {done}: loss {loss:.4}");
            }
            Ok(())
        } else if batch.is_multiple_of(self.barrier_every) {
            flight.wait_all()
        } else {
            Ok(())
        }
    }
}

/// Trains a fresh copy of the chapter's MLP (smaller) for one epoch of 100 batches.
fn train(device: &Device, policy: &mut dyn SyncPolicy) -> anyhow::Result<Trace> {
    device.seed(0);
    let net: Sequential = Sequential::new()
        .add(Dense::new(512).activation(Activation::Relu))
        .add(Dense::new(128).activation(Activation::Relu))
        .add(Dense::new(1))
        .initialize(Init::default(), device);
    let trainer = Optimizer::new(&net, "sgd", 0.01)?;
    let mut data = SyntheticEpochs::new(Synthetic::chapter(256, 512, 0), 100);
    println!("policy {}", policy.kind());
    let run = Fit::new(net, L2Loss, trainer, device)
        .policy(policy)
        .run(&mut data)?;
    let e = &run.trace.epochs[0];
    println!(
        "  time per epoch {:.3} sec, issued in {:.3} sec, max in flight {}, peak memory growth {:.1} MB",
        e.time, e.issue_time, e.max_depth, e.peak_growth_mb
    );
    Ok(run.trace)
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let name: DeviceName = args.next().as_deref().unwrap_or("auto").parse()?;
    let out = PathBuf::from(args.next().unwrap_or_else(|| "custom-policy-out".into()));
    let picked = name.resolve()?;
    println!("device: {}", picked.reason);
    let device = picked.device.autodiff();

    let mut mine = PrintOrTen {
        barrier_every: 10,
        print_every: 25,
    };
    let policies: [&mut dyn SyncPolicy; 3] = [&mut mine, &mut Window(1), &mut NoSync];
    let mut runs: Vec<Trace> = Vec::new();
    for policy in policies {
        runs.push(train(&device, policy)?);
    }

    // The user's policy obeyed its own rule: batch 10k started after every earlier batch had
    // finished.
    for b in &runs[0].batches {
        if b.batch > 0 && b.batch % 10 == 0 {
            let latest_done = runs[0].batches[..b.batch]
                .iter()
                .map(|p| p.done)
                .fold(f64::NEG_INFINITY, f64::max);
            anyhow::ensure!(
                b.issue_start >= latest_done,
                "batch {} was issued before its predecessors finished",
                b.batch
            );
        }
    }

    std::fs::create_dir_all(&out)?;
    let mut all = Trace::default();
    for run in &runs {
        all.extend(run.clone());
    }
    for file in all.write(&out.join("trace.csv"))? {
        println!("wrote {}", file.display());
    }
    let refs: Vec<&Trace> = runs.iter().collect();
    let subtitle = format!(
        "100 batches of 256 x 512, MLP 512-128-1, on {}",
        picked.name.as_str()
    );
    let timeline = TimelineFigure {
        traces: &refs,
        subtitle: &subtitle,
    };
    let memory = MemoryFigure {
        traces: &refs,
        subtitle: &subtitle,
    };
    for file in render(&timeline, &out, "timeline")
        .and_then(|mut files| {
            files.extend(render(&memory, &out, "memory")?);
            Ok(files)
        })
        .map_err(anyhow::Error::msg)?
    {
        println!("wrote {}", file.display());
    }
    Ok(())
}
