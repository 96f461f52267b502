//! # ember-trainer
//!
//! The training loop of ember and the sync policies it enforces, the per-batch trace, the
//! comparisons and plots, and the `ember` CLI.
//!
//! The shortest complete program with a model of one's own: a user-defined block, a built-in
//! loss, a data loader, and the t/t+2 policy, with test accuracy after each epoch.
//!
//! ```
//! use burn::prelude::*;
//! use burn::nn::{Linear, LinearConfig};
//! use ember::{Block, NdTensor, SoftmaxCrossEntropyLoss, Trainer};
//! use ember_datasets::{DataLoader, Examples};
//! use ember_trainer::evaluate::accuracy;
//! use ember_trainer::fit::{FitOptions, fit};
//! use ember_trainer::policy::Window;
//!
//! /// Two linear layers with a residual connection.
//! #[derive(Module, Debug)]
//! struct Residual {
//!     inner: Linear,
//!     out: Linear,
//! }
//!
//! impl Block for Residual {
//!     fn forward(&self, x: NdTensor) -> NdTensor {
//!         let x: Tensor<2> = x.rank();
//!         let h = x.clone() + burn::tensor::activation::relu(self.inner.forward(x));
//!         self.out.forward(h).into()
//!     }
//! }
//!
//! // Two classes: is the first feature positive?
//! let xs: Vec<f32> = (0..400).map(|i| ((i * 37 % 101) as f32 / 50.0) - 1.0).collect();
//! let labels: Vec<usize> = xs.chunks(4).map(|row| usize::from(row[0] > 0.0)).collect();
//! let data = Examples::classification(xs, 4, labels, 2).unwrap();
//!
//! let device = Device::flex().autodiff();
//! let net = Residual {
//!     inner: LinearConfig::new(4, 4).init(&device),
//!     out: LinearConfig::new(4, 2).init(&device),
//! };
//! let trainer = Trainer::new(&net, "sgd", 0.5).unwrap();
//! let mut loader = DataLoader::new(data, 10).unwrap().shuffle(0);
//! let test = loader.rebatched(100).unwrap();
//! let options = FitOptions::epochs(5)
//!     .evaluate("acc", move |net: &Residual| accuracy(net, &test, &Device::flex()));
//! let run = fit(net, SoftmaxCrossEntropyLoss, trainer, &device, &mut loader, &mut Window(2), &options, &mut ())
//!     .unwrap();
//! let last = &run.trace.epochs[4];
//! assert!(last.metrics["acc"] > 0.9, "{last:?}");
//! ```
#![warn(missing_docs)]

pub mod baseline;
pub mod compare;
pub mod evaluate;
pub mod fit;
pub mod memory;
pub mod plot;
pub mod policy;
pub mod trace;
