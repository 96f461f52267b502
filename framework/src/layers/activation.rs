//! Activations: used inside `Dense(units).activation(…)`, or added as a block of their own
//! (Gluon's `nn.Activation('relu')`), where, as in PyTorch, they take an index in the
//! `Sequential` but hold no parameter.
//!
//! ```
//! use burn::prelude::*;
//! use ember::{Activation, Block};
//! let x = Tensor::<2>::from_floats([[-1.0, 2.0]], &Device::flex());
//! let y: Tensor<2> = Activation::Relu.forward(x.into()).rank();
//! assert_eq!(y.into_data().try_to_vec::<f32>().unwrap(), vec![0.0, 2.0]);
//! ```

use std::fmt;
use std::str::FromStr;

use burn::module::{
    Content, Devices, Module, ModuleDisplay, ModuleDisplayDefault, ModuleMapper, ModuleVisitor,
};
use burn::tensor::{Device, Tensor};

use crate::block::Block;
use crate::error::{Error, Result};
use crate::kernels::{self, Eltwise};
use crate::ndtensor::{NdTensor, nd_map};

/// An element-wise activation function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// max(x, 0)
    Relu,
    /// 1 / (1 + e^−x)
    Sigmoid,
    /// tanh(x)
    Tanh,
    /// Gluon's `softrelu`: log(1 + eˣ) (PyTorch's `Softplus`).
    SoftRelu,
    /// GELU with the exact erf form, x·Φ(x) (Gluon's and PyTorch's default).
    Gelu,
}

impl Activation {
    /// Applies the function to a tensor of any rank (on the CPU through oneDNN where
    /// [`crate::kernels`] runs it, else with burn's kernels).
    pub fn apply<const D: usize>(self, x: Tensor<D>) -> Tensor<D> {
        kernels::activation(self.eltwise(), x)
    }

    /// The kernels' name for it.
    pub(crate) fn eltwise(self) -> Eltwise {
        match self {
            Activation::Relu => Eltwise::Relu,
            Activation::Sigmoid => Eltwise::Logistic,
            Activation::Tanh => Eltwise::Tanh,
            Activation::SoftRelu => Eltwise::SoftRelu,
            Activation::Gelu => Eltwise::GeluErf,
        }
    }

    /// Gluon's name for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Activation::Relu => "relu",
            Activation::Sigmoid => "sigmoid",
            Activation::Tanh => "tanh",
            Activation::SoftRelu => "softrelu",
            Activation::Gelu => "gelu",
        }
    }
}

impl fmt::Display for Activation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Activation {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "relu" => Ok(Activation::Relu),
            "sigmoid" => Ok(Activation::Sigmoid),
            "tanh" => Ok(Activation::Tanh),
            "softrelu" => Ok(Activation::SoftRelu),
            "gelu" => Ok(Activation::Gelu),
            _ => Err(Error::InvalidValue {
                name: "activation",
                value: s.to_string(),
                reason: "expected relu, sigmoid, tanh, softrelu or gelu".to_string(),
            }),
        }
    }
}

impl Block for Activation {
    /// # Shapes
    /// Any input; the output has its shape.
    fn forward(&self, x: NdTensor) -> NdTensor {
        nd_map!(x, t => self.apply(t))
    }

    fn infer(self, x: NdTensor) -> Result<(Self, NdTensor)> {
        Ok((self, self.forward(x)))
    }

    fn initialize(self, _init: crate::Init, _device: &Device) -> Self {
        self
    }
}

// An activation holds no parameter: every module operation leaves it as it is.
impl Module for Activation {
    fn collect_devices(&self, devices: Devices) -> Devices {
        devices
    }
    fn fork(self, _device: &Device) -> Self {
        self
    }
    fn to_device(self, _device: &Device) -> Self {
        self
    }
    fn train(self) -> Self {
        self
    }
    fn valid(&self) -> Self {
        *self
    }
    fn materialize(self) -> Self {
        self
    }
    fn visit<V: ModuleVisitor>(&self, _visitor: &mut V) {}
    fn map<M: ModuleMapper>(self, _mapper: &mut M) -> Self {
        self
    }
}

impl ModuleDisplayDefault for Activation {
    fn content(&self, content: Content) -> Option<Content> {
        content
            .add_formatted(&format!("Activation({self})"))
            .optional()
    }
}

impl ModuleDisplay for Activation {}
