//! d2l's `train_ch3`/`train_ch6` for the Fashion-MNIST examples: the data from a directory,
//! SGD, `fit` under the t/t+2 policy, and d2l's line per epoch with train and test accuracy.

use anyhow::Context;
use burn::tensor::Device;
use ember::{Block, Optimizer, SoftmaxCrossEntropyLoss};
use ember_datasets::{DataLoader, fashion_mnist};
use ember_trainer::fit::{Fit, FitRun, Progress};
use ember_trainer::metric::MetricKind;
use ember_trainer::policy::Window;
use ember_trainer::trace::EpochRecord;

/// `[DIR] [DEVICE] [EPOCHS]` from the command line, with these defaults.
pub struct Args {
    pub dir: String,
    /// The chosen device with autodiff, its seed fixed at 0.
    pub device: Device,
    pub epochs: usize,
}

pub fn args(default_epochs: usize) -> anyhow::Result<Args> {
    let mut args = std::env::args().skip(1);
    let dir = args
        .next()
        .unwrap_or_else(|| fashion_mnist::DEFAULT_DIR.into());
    let name: ember::DeviceName = args.next().as_deref().unwrap_or("flex").parse()?;
    let epochs = match args.next() {
        Some(n) => n
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .with_context(|| format!("invalid EPOCHS {n:?}: expected a positive number"))?,
        None => default_epochs,
    };
    let picked = name.resolve()?;
    println!("device: {}", picked.reason);
    let device = picked.device.autodiff();
    device.seed(0);
    Ok(Args {
        dir,
        device,
        epochs,
    })
}

/// Prints d2l's per-epoch line as each epoch ends.
struct EpochLines;

impl Progress for EpochLines {
    fn epoch_done(&mut self, r: &EpochRecord) {
        println!(
            "epoch {:2}: loss {:.4}, train acc {:.3}, test acc {:.3}, {:.2} sec",
            r.epoch + 1,
            r.mean_loss,
            r.metrics["train_acc"],
            r.metrics["test_acc"],
            r.time
        );
    }
}

/// Trains `net` (initialized on `device`, an autodiff device) on Fashion-MNIST in `dir`.
pub fn train<B: Block + 'static>(
    net: B,
    dir: &str,
    device: &Device,
    epochs: usize,
    lr: f64,
    batch_size: usize,
) -> anyhow::Result<FitRun<B>> {
    let eval_device = device.clone().inner();
    let (train, test) = fashion_mnist::load(dir)?;
    println!(
        "{dir}: {} train, {} test images of shape {:?}",
        train.len(),
        test.len(),
        train.shape()
    );
    let trainer = Optimizer::new(&net, "sgd", lr)?;
    let mut train_iter = DataLoader::new(train, batch_size)?.shuffle(0).prefetch(4);
    let test_iter = DataLoader::new(test, 1024)?;
    // train_acc is d2l's: counted on the training batches as the steps go (Fit's default).
    let run = Fit::new(net, SoftmaxCrossEntropyLoss, trainer, device)
        .policy(Window(2))
        .epochs(epochs)
        .evaluate_metrics(
            "test",
            test_iter,
            [MetricKind::Accuracy.build()],
            &eval_device,
        )
        .progress(&mut EpochLines)
        .run(&mut train_iter)?;
    let total: f64 = run.trace.epochs.iter().map(|e| e.time).sum();
    let last = &run.trace.epochs[run.trace.epochs.len() - 1];
    println!(
        "{epochs} epochs in {total:.2} sec of training ({:.2} sec per epoch); final test accuracy {:.3}",
        total / epochs as f64,
        last.metrics["test_acc"]
    );
    Ok(run)
}
