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

pub mod activation;
pub mod block;
pub mod conv;
pub mod cpu;
pub mod cuda;
pub mod data_parallel;
mod deferred;
pub mod dense;
pub mod device;
pub mod device_list;
pub mod dropout;
pub mod embedding;
pub mod engine;
pub mod error;
pub mod exchange;
pub mod flatten;
pub mod init;
pub mod loss;
pub mod ndtensor;
pub mod norm;
pub mod onnx;
pub mod optimizer;
pub mod output;
pub mod params;
pub mod pool;
pub mod random;
pub mod sequential;

pub use activation::Activation;
pub use block::Block;
pub use conv::{Conv1D, Conv2D, Pair};
pub use data_parallel::Replicas;
pub use dense::Dense;
pub use device::{DeviceName, PickedDevice};
pub use device_list::{DeviceList, DeviceSpec};
pub use dropout::Dropout;
pub use embedding::Embedding;
pub use engine::{Computed, Engine, Handle, Host};
pub use error::{Error, Result, StepAt};
pub use flatten::Flatten;
pub use init::Init;
pub use loss::{L1Loss, L2Loss, Loss, SoftmaxCrossEntropyLoss};
pub use ndtensor::NdTensor;
pub use norm::{BatchNorm, LayerNorm};
pub use optimizer::{Optimizer, OptimizerKind};
pub use params::{ParamDict, ParamInfo, load_parameters, save_parameters};
pub use pool::{AvgPool2D, GlobalAvgPool2D, MaxPool2D};
pub use sequential::{Layer, NoBlock, Sequential};
