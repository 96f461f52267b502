//! The chapter's MLP written straight against burn, with no ember layer: the yardstick for
//! ember's own overhead. Same data, same math (½(ŷ−y)² summed, gradients divided by the batch
//! size, SGD), and a blocking read of every batch's loss, which is the barrier.

use std::time::Instant;

use burn::module::Module;
use burn::nn::{Initializer, Linear, LinearConfig};
use burn::optim::{GradientsParams, SgdConfig};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Tensor};
use ember_datasets::Synthetic;

/// burn's own MLP: Linear + ReLU layers, then Linear to one output.
#[derive(Module, Debug)]
pub struct RawMlp {
    layers: Vec<Linear>,
}

impl RawMlp {
    /// `features → hidden[0] → … → 1`, Gluon's Uniform(0.07) init.
    pub fn new(features: usize, hidden: &[usize], device: &Device) -> Self {
        let mut sizes = vec![features];
        sizes.extend_from_slice(hidden);
        sizes.push(1);
        let layers = sizes
            .windows(2)
            .map(|pair| {
                LinearConfig::new(pair[0], pair[1])
                    .with_initializer(Initializer::Uniform {
                        min: -0.07,
                        max: 0.07,
                    })
                    .init(device)
            })
            .collect();
        Self { layers }
    }

    /// # Shapes
    /// `[batch, features]` → `[batch, 1]`
    pub fn forward(&self, mut x: Tensor<2>) -> Tensor<2> {
        let last = self.layers.len() - 1;
        for (i, layer) in self.layers.iter().enumerate() {
            x = layer.forward(x);
            if i < last {
                x = relu(x);
            }
        }
        x
    }
}

/// Runs one warm-up step on a copy of the network, then trains `batches` batches with a
/// blocking loss read after each, and returns the seconds the measured batches took.
pub fn raw_burn_epoch(
    device: &Device,
    data: &Synthetic,
    batches: usize,
    hidden: &[usize],
    lr: f64,
) -> f64 {
    let device = device.clone().autodiff();
    let mut net = RawMlp::new(data.features(), hidden, &device);
    let mut optim = SgdConfig::new().init();
    let mut step = |net: RawMlp, index: u64| {
        let batch = data.batch(index);
        let size = batch.len() as f64;
        let x = Tensor::<1>::from_floats(batch.x.as_slice(), &device)
            .reshape([batch.len(), data.features()]);
        let y = Tensor::<1>::from_floats(batch.y.as_slice(), &device).reshape(batch.y_shape);
        drop(batch);
        let diff = net.forward(x) - y;
        let loss = (diff.clone() * diff).sum().mul_scalar(0.5 / size);
        let grads = GradientsParams::from_grads(loss.backward(), &net);
        let net = optim.step(lr, net, grads);
        let _ = loss.into_scalar::<f32>();
        net
    };
    // The warm-up step runs on a copy, thrown away: the measured run starts untrained, as
    // ember's does.
    drop(step(net.clone(), 0));
    let start = Instant::now();
    for index in 0..batches as u64 {
        net = step(net, index);
    }
    start.elapsed().as_secs_f64()
}
