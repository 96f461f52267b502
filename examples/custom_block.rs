//! A model and a loss of one's own, trained with `fit` under the book's t/t+2 policy
//! (`Window(2)`), then saved and reloaded.
//!
//! ```text
//! cargo run --release --example custom_block -- [DEVICE]
//! ```
//!
//! - `Residual`: a user-defined Block, `x + fc2(relu(fc1(x)))`, placed in a `Sequential`
//!   between Gluon-style `Dense` layers.
//! - `Huber`: a user-defined Loss (PyTorch's `HuberLoss`), used for training and for a
//!   per-epoch validation metric computed without autodiff.
//! - The parameters go to a safetensors file and into a freshly initialized network, which then
//!   gives the same outputs.

use burn::nn::{Linear, LinearConfig};
use burn::prelude::*;
use burn::tensor::activation::relu;
use ember::{
    Activation, Block, Dense, DeviceName, Error, Init, Loss, NdTensor, Optimizer, Result,
    Sequential,
};
use ember_datasets::{Batch, Synthetic};
use ember_trainer::fit::{Fit, SyntheticEpochs};
use ember_trainer::policy::Window;

/// `x + fc2(relu(fc1(x)))`: a residual MLP block of constant width.
#[derive(Module, Debug)]
struct Residual {
    fc1: Linear,
    fc2: Linear,
}

impl Residual {
    fn new(width: usize, device: &Device) -> Self {
        Self {
            fc1: LinearConfig::new(width, width).init(device),
            fc2: LinearConfig::new(width, width).init(device),
        }
    }
}

impl Block for Residual {
    /// # Shapes
    /// `[batch, width]` in and out.
    fn forward(&self, x: NdTensor) -> NdTensor {
        let x: Tensor<2> = x.rank();
        let h = self.fc2.forward(relu(self.fc1.forward(x.clone())));
        (x + h).into()
    }
}

/// The Huber loss: ½d² where |d| ≤ δ, δ(|d| − ½δ) beyond, averaged over the outputs.
struct Huber {
    delta: f32,
}

impl Loss for Huber {
    type Target = Tensor<2>;

    fn forward(&self, pred: Tensor<2>, target: Tensor<2>) -> Result<Tensor<1>> {
        if pred.dims() != target.dims() {
            return Err(Error::Shape {
                what: "Huber target".into(),
                expected: format!("the prediction's shape {:?}", pred.dims()),
                got: target.dims().to_vec(),
            });
        }
        let d = (pred - target).abs();
        let small = d.clone().clamp_max(self.delta);
        let large = d - small.clone();
        let l = small.powf_scalar(2.0).mul_scalar(0.5) + large.mul_scalar(self.delta);
        Ok(l.mean_dim(1).squeeze_dim(1))
    }
}

/// The network: Dense(64, relu) → Residual(64) → Residual(64) → Dense(1).
fn network(device: &Device) -> Sequential<Residual> {
    Sequential::new()
        .add(Dense::new(64).activation(Activation::Relu))
        .add_block(Residual::new(64, device))
        .add_block(Residual::new(64, device))
        .add(Dense::new(1))
        .initialize(Init::Xavier, device)
}

fn upload(batch: &Batch, device: &Device) -> Result<(NdTensor, Tensor<2>)> {
    let x = batch.x_on(device)?;
    let y = NdTensor::from_host(&batch.y, &batch.y_shape, device)?.into_rank()?;
    Ok((x, y))
}

/// The network's predictions for `x`.
fn predict(net: &Sequential<Residual>, x: &NdTensor) -> Result<Tensor<2>> {
    net.forward(x.clone()).into_rank()
}

fn main() -> anyhow::Result<()> {
    let name: DeviceName = std::env::args()
        .nth(1)
        .as_deref()
        .unwrap_or("auto")
        .parse()?;
    let picked = name.resolve()?;
    println!("device: {}", picked.reason);
    let eval_device = picked.device.clone();
    let device = eval_device.clone().autodiff();
    device.seed(0);

    // y = Xw + b + noise, 32 features; 40 batches of 64 per epoch, new batches every epoch.
    let data = Synthetic::regression(64, 32, 0.01, 7);
    let held_out = data.batch(1_000_000);
    let mut batches = SyntheticEpochs::new(data, 40);

    let net = network(&device);
    let trainer = Optimizer::new(&net, "adam", 0.003)?;
    let loss = Huber { delta: 1.0 };
    let run = Fit::new(net, loss, trainer, &device)
        .policy(Window(2))
        .epochs(6)
        .evaluate("val_huber", move |net: &Sequential<Residual>| {
            let (x, y) = upload(&held_out, &eval_device)?;
            let l = Huber { delta: 1.0 }.forward(predict(net, &x)?, y)?;
            Ok(f64::from(l.mean().into_scalar::<f32>()))
        })
        .run(&mut batches)?;
    for e in &run.trace.epochs {
        println!(
            "epoch {}: train huber {:.5}, val huber {:.5}, {:.3} sec, max in flight {}",
            e.epoch + 1,
            e.mean_loss,
            e.metrics["val_huber"],
            e.time,
            e.max_depth
        );
    }
    let (first, last) = (
        &run.trace.epochs[0],
        &run.trace.epochs[run.trace.epochs.len() - 1],
    );
    anyhow::ensure!(
        last.metrics["val_huber"] < first.metrics["val_huber"],
        "the validation loss did not fall: {first:?} → {last:?}"
    );

    // Save, and reload into a network with different initial weights.
    let path = std::env::temp_dir().join("ember-custom-block.safetensors");
    run.net.save_parameters(&path)?;
    println!("{}", run.net.summary());
    println!("parameters saved to {}", path.display());
    device.seed(1);
    let (x, _) = upload(&Synthetic::regression(8, 32, 0.01, 7).batch(5), &device)?;
    let fresh = network(&device).infer_shape(x.clone())?;
    let values = |t: Tensor<2>| -> anyhow::Result<Vec<f32>> {
        t.into_data()
            .try_to_vec::<f32>()
            .map_err(|e| anyhow::anyhow!("{e:?}"))
    };
    let max_diff = |a: &[f32], b: &[f32]| {
        a.iter()
            .zip(b)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max)
    };
    let trained = values(predict(&run.net, &x)?)?;
    let untrained = values(predict(&fresh, &x)?)?;
    println!(
        "fresh network: max |output difference| over 8 examples = {:e}",
        max_diff(&trained, &untrained)
    );
    let reloaded = fresh.load_parameters(&path, &device)?;
    let max_diff = max_diff(&trained, &values(predict(&reloaded, &x)?)?);
    println!("reloaded:      max |output difference| over 8 examples = {max_diff:e}");
    anyhow::ensure!(
        max_diff == 0.0,
        "the reloaded network differs by {max_diff}"
    );
    Ok(())
}
