//! # ember-trainer
//!
//! The training loop of ember and the sync policies it enforces, the per-batch trace, the
//! comparisons and plots, and the `ember` CLI.
//!
//! The shortest complete program with a convolutional model of one's own: ember's layers and a
//! user-defined block in one `Sequential`, a built-in loss, a data loader, and the t/t+2
//! policy, with accuracy after each epoch.
//!
//! ```
//! use burn::prelude::*;
//! use burn::nn::PaddingConfig2d;
//! use burn::nn::conv::{Conv2d, Conv2dConfig};
//! use burn::tensor::activation::relu;
//! use ember::{Activation, Block, Conv2D, Dense, Init, MaxPool2D, NdTensor, Sequential};
//! use ember::{SoftmaxCrossEntropyLoss, Optimizer};
//! use ember_datasets::{DataLoader, Examples};
//! use ember_trainer::evaluate::accuracy;
//! use ember_trainer::fit::Fit;
//! use ember_trainer::policy::Window;
//!
//! /// y = x + relu(conv(x)) on [N, C, H, W]: a block of the user's own, from burn's Conv2d.
//! #[derive(Module, Debug)]
//! struct Residual {
//!     conv: Conv2d,
//! }
//!
//! impl Block for Residual {
//!     fn forward(&self, x: NdTensor) -> NdTensor {
//!         let x: Tensor<4> = x.rank();
//!         (x.clone() + relu(self.conv.forward(x))).into()
//!     }
//! }
//!
//! // 1×6×6 images in two classes: is the top half the bright one?
//! let (mut pixels, mut labels) = (Vec::new(), Vec::new());
//! for i in 0..120 {
//!     labels.push(i % 2);
//!     for row in 0..6 {
//!         for col in 0..6 {
//!             let bright = (row < 3) == (i % 2 == 1);
//!             let noise = ((i * 7 + row * 5 + col * 3) % 11) as f32 / 40.0;
//!             pixels.push(if bright { 0.7 } else { 0.2 } + noise);
//!         }
//!     }
//! }
//! let data = Examples::classification(pixels, 36, labels, 2)
//!     .unwrap()
//!     .with_shape(&[1, 6, 6])
//!     .unwrap();
//!
//! let device = Device::flex().autodiff();
//! let same = PaddingConfig2d::Explicit(1, 1, 1, 1);
//! let net: Sequential<Residual> = Sequential::new()
//!     .add(Conv2D::new(4, 3).padding(1).activation(Activation::Relu))
//!     .add_block(Residual { conv: Conv2dConfig::new([4, 4], [3, 3]).with_padding(same).init(&device) })
//!     .add(MaxPool2D::new(2))
//!     .add(Dense::new(2))
//!     .initialize(Init::Xavier, &device);
//! let trainer = Optimizer::new(&net, "sgd", 0.1).unwrap();
//! let mut loader = DataLoader::new(data, 10).unwrap().shuffle(0);
//! let test = loader.rebatched(120).unwrap();
//! // Input sizes (the first Conv2D's channels, the Dense's 36 features) come from the first batch.
//! let run = Fit::new(net, SoftmaxCrossEntropyLoss, trainer, &device)
//!     .policy(Window(2))
//!     .epochs(5)
//!     .evaluate("acc", move |net: &Sequential<Residual>| accuracy(net, &test, &Device::flex()))
//!     .run(&mut loader)
//!     .unwrap();
//! let last = &run.trace.epochs[4];
//! assert!(last.metrics["acc"] > 0.9, "{last:?}");
//! assert_eq!(run.net.collect_params().get("0.weight").unwrap().shape, [4, 1, 3, 3]);
//! ```
#![warn(missing_docs)]

pub mod baseline;
pub mod chapter;
pub mod checkpoint;
pub mod evaluate;
pub mod fit;
pub mod memory;
pub mod metric;
pub mod plot;
pub mod policy;
pub mod profile;
pub mod run;
pub mod signals;
pub mod summary;
mod target;
pub mod tensorboard;
pub mod trace;
