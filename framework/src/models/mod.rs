//! Networks by name, built from ember's layers with their input sizes deferred: the ones the
//! `ember` CLI trains (`--model`), the examples and the tests share them from here, and d2l's
//! small ResNet ([`small_resnet`], with its [`Residual`] block).
//!
//! ```
//! use burn::prelude::*;
//! use ember::{Block, Init, models};
//!
//! let device = Device::flex();
//! // d2l 7.6: LeNet on 28×28 images, 10 classes.
//! let net = models::lenet(10).initialize(Init::Xavier, &device);
//! let net = net.infer_shape(Tensor::<4>::zeros([1, 1, 28, 28], &device)).unwrap();
//! assert_eq!(net.collect_params().get("4.weight").unwrap().shape, [120, 400]);
//! // d2l 3.6's MLP: one hidden layer of 256.
//! assert_eq!(models::mlp(&[256], 10).len(), 2);
//! ```

mod resnet;

pub use resnet::{Residual, small_resnet};

use crate::layers::sequential::Layer;
use crate::{Activation, AvgPool2D, Conv2D, Dense, MaxPool2D, Sequential};

/// An MLP: `Dense(h, relu)` for each hidden size, then `Dense(outputs)`.
pub fn mlp(hidden: &[usize], outputs: usize) -> Sequential {
    hidden
        .iter()
        .fold(Sequential::new(), |net, &units| {
            net.add(Dense::new(units).activation(Activation::Relu))
        })
        .add(Dense::new(outputs))
}

/// d2l's LeNet (7.6): sigmoid activations and 2×2 average pooling, as the book has it.
pub fn lenet(outputs: usize) -> Sequential {
    lenet_with(
        Activation::Sigmoid,
        |size| AvgPool2D::new(size).into(),
        outputs,
    )
}

/// LeNet with ReLU and 2×2 max pooling, the modern variant d2l's exercises suggest.
pub fn lenet_relu(outputs: usize) -> Sequential {
    lenet_with(
        Activation::Relu,
        |size| MaxPool2D::new(size).into(),
        outputs,
    )
}

/// LeNet with the given activation and 2×2, stride-2 pooling.
fn lenet_with(activation: Activation, pool: impl Fn(usize) -> Layer, outputs: usize) -> Sequential {
    Sequential::new()
        .add(Conv2D::new(6, 5).padding(2).activation(activation))
        .add(pool(2))
        .add(Conv2D::new(16, 5).activation(activation))
        .add(pool(2))
        .add(Dense::new(120).activation(activation))
        .add(Dense::new(84).activation(activation))
        .add(Dense::new(outputs))
}
