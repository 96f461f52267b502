//! The element-wise functions the kernels apply: the kernels' own names for them, so that a
//! kernel needs no layer's type.

use std::fmt;

use burn::tensor::{Tensor, activation};

/// An element-wise function, as oneDNN's eltwise algorithms name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Eltwise {
    /// max(x, 0)
    Relu,
    /// 1 / (1 + e^−x) (oneDNN's `logistic`)
    Logistic,
    /// tanh(x)
    Tanh,
    /// log(1 + eˣ)
    SoftRelu,
    /// x·Φ(x), with the exact erf form
    GeluErf,
}

impl Eltwise {
    /// burn's own kernels for it: the fallback wherever oneDNN does not run.
    pub(crate) fn burn<const D: usize>(self, x: Tensor<D>) -> Tensor<D> {
        match self {
            Eltwise::Relu => activation::relu(x),
            Eltwise::Logistic => activation::sigmoid(x),
            Eltwise::Tanh => activation::tanh(x),
            Eltwise::SoftRelu => activation::softplus(x, 1.0),
            Eltwise::GeluErf => activation::gelu(x),
        }
    }
}

impl fmt::Display for Eltwise {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Eltwise::Relu => "relu",
            Eltwise::Logistic => "sigmoid",
            Eltwise::Tanh => "tanh",
            Eltwise::SoftRelu => "softrelu",
            Eltwise::GeluErf => "gelu",
        })
    }
}
