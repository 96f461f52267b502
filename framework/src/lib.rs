//! # ember
//!
//! A Gluon-like layer on [burn](https://burn.dev): `Block`s over tensors of any rank,
//! `Sequential`, Gluon's layers (`Dense`, `Conv2D`, pooling, `BatchNorm`, `Dropout`, …) with
//! deferred input sizes, Gluon's initializers and losses, and an `Optimizer` (Gluon's `Trainer`) with
//! `step(batch_size)`. The d2l chapter's code maps to it line for line:
//!
//! ```
//! use burn::prelude::*;
//! use burn::tensor::Distribution;
//! use ember::{Activation, Block, Dense, Init, L2Loss, Loss, Sequential, Optimizer};
//!
//! let device = Device::flex().autodiff();
//! // net = nn.Sequential()
//! // net.add(nn.Dense(2048, activation='relu'), nn.Dense(512, activation='relu'), nn.Dense(1))
//! let net: Sequential = Sequential::new()
//!     .add(Dense::new(2048).activation(Activation::Relu))
//!     .add(Dense::new(512).activation(Activation::Relu))
//!     .add(Dense::new(1));
//! // net.initialize()
//! let net = net.initialize(Init::default(), &device);
//! let x = Tensor::<2>::random([16, 512], Distribution::Normal(0.0, 1.0), &device);
//! let y = Tensor::<2>::ones([16, 1], &device);
//! // Gluon's first forward pass: every deferred input size is taken from X
//! let mut net = net.infer_shape(x.clone()).unwrap();
//! // trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.01})
//! let mut trainer = Optimizer::new(&net, "sgd", 0.01).unwrap();
//! // loss = gluon.loss.L2Loss()
//! let loss = L2Loss;
//! // with autograd.record(): l = loss(y, net(X))
//! let l = loss.forward(net.forward(x.into()).rank(), y).unwrap();
//! // l.backward(); trainer.step(X.shape[0])
//! net = trainer.step(net, l.backward(), 16).unwrap();
//! assert_eq!(net.collect_params().total(), 512 * 2048 + 2048 + 2048 * 512 + 512 + 512 + 1);
//! ```
#![warn(missing_docs)]

// The crate by concept, from the bottom up: each folder imports only from the lines above it.
pub mod block;
pub(crate) mod block_on;
pub mod deferred;
pub mod device;
pub mod engine;
pub mod error;
pub mod hybrid;
pub mod init;
pub mod io;
pub mod kernels;
pub mod layers;
pub mod loss;
pub mod models;
pub mod ndtensor;
pub mod onnx;
pub mod optim;
pub mod parallel;
pub mod params;
pub mod precision;
pub mod random;
pub(crate) mod running_statistics;
pub mod summary;

pub use block::Block;
pub use device::{Capabilities, DeviceList, DeviceName, DeviceSpec, PickedDevice};
pub use engine::{Computed, Engine, Handle, Host};
pub use error::{Error, Result, StepAt};
pub use init::Init;
pub use io::safetensors::{load_parameters, save_parameters};
// Every layer, `Pair`, `Sequential` and `Layer`: `layers`' own list says which.
pub use layers::*;
pub use loss::{L1Loss, L2Loss, Loss, SequenceCrossEntropyLoss, SoftmaxCrossEntropyLoss};
pub use ndtensor::NdTensor;
pub use onnx::Export;
pub use optim::{Optimizer, OptimizerKind};
pub use parallel::Replicas;
pub use params::{ParamDict, ParamInfo};
pub use precision::{Precision, autocast};
pub use summary::{Summary, SummaryRow};
