//! d2l's MLP on Fashion-MNIST (`train_ch3` with Flatten, Dense(256, relu), Dense(10)), trained
//! with `fit` under the t/t+2 policy, with a test accuracy line per epoch.
//!
//! ```text
//! cargo run --release --example fashion_mnist -- [DIR] [DEVICE] [EPOCHS]
//! ```
//!
//! DIR defaults to Debian's `/usr/share/datasets/fashion-mnist`
//! (`apt-get install dataset-fashion-mnist`); DEVICE to `flex`; EPOCHS to 10.

use anyhow::Context;
use ember::{
    Activation, Block, Dense, DeviceName, Init, Sequential, SoftmaxCrossEntropyLoss, Trainer,
};
use ember_datasets::{DataLoader, fashion_mnist};
use ember_trainer::evaluate::accuracy;
use ember_trainer::fit::{FitOptions, Progress, fit};
use ember_trainer::policy::Window;
use ember_trainer::trace::EpochRecord;

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

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = args
        .next()
        .unwrap_or_else(|| fashion_mnist::DEFAULT_DIR.into());
    let name: DeviceName = args.next().as_deref().unwrap_or("flex").parse()?;
    let epochs: usize = match args.next() {
        Some(n) => n
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .with_context(|| format!("invalid EPOCHS {n:?}: expected a positive number"))?,
        None => 10,
    };
    let picked = name.resolve()?;
    println!("device: {}", picked.reason);
    let eval_device = picked.device.clone();
    let device = eval_device.clone().autodiff();
    device.seed(0);

    let (train, test) = fashion_mnist::load(&dir)?;
    println!("{dir}: {} train, {} test images", train.len(), test.len());

    // net = nn.Sequential(); net.add(nn.Dense(256, activation='relu'), nn.Dense(10))
    // net.initialize(init.Normal(sigma=0.01))    (Dense flattens 28x28 images, as Gluon's does)
    let net: Sequential = Sequential::new()
        .add(Dense::new(256).activation(Activation::Relu))
        .add(Dense::new(10))
        .initialize(Init::Normal(0.01), &device);
    // loss = gluon.loss.SoftmaxCrossEntropyLoss()
    // trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1})
    let trainer = Trainer::new(&net, "sgd", 0.1)?;
    // train_iter, test_iter = d2l.load_data_fashion_mnist(batch_size=256)
    let mut train_iter = DataLoader::new(train, 256)?.shuffle(0).prefetch(4);
    let train_eval = train_iter.rebatched(1024)?;
    let test_iter = DataLoader::new(test, 1024)?;
    let (d1, d2) = (eval_device.clone(), eval_device);
    let options = FitOptions::epochs(epochs)
        .evaluate("train_acc", move |net: &Sequential| {
            accuracy(net, &train_eval, &d1)
        })
        .evaluate("test_acc", move |net: &Sequential| {
            accuracy(net, &test_iter, &d2)
        });

    // d2l.train_ch3(net, train_iter, test_iter, loss, num_epochs, trainer)
    let run = fit(
        net,
        SoftmaxCrossEntropyLoss,
        trainer,
        &device,
        &mut train_iter,
        &mut Window(2),
        &options,
        &mut EpochLines,
    )?;
    let total: f64 = run.trace.epochs.iter().map(|e| e.time).sum();
    let last = &run.trace.epochs[run.trace.epochs.len() - 1];
    println!(
        "{epochs} epochs in {total:.2} sec of training; final test accuracy {:.3}",
        last.metrics["test_acc"]
    );
    Ok(())
}
