//! `Sequential`: Gluon's `nn.Sequential`, built by chaining `add`.
//!
//! It holds built-in layers ([`Dense`], [`Activation`]), nested `Sequential`s and blocks of the
//! user's own type `U` alike. Children are named by index, as in Gluon and PyTorch: `0.weight`,
//! and for a nested one `2.0.weight`.
//!
//! ```
//! use burn::prelude::*;
//! use ember::{Activation, Block, Dense, Init, Sequential};
//!
//! // net = nn.Sequential()
//! // net.add(nn.Dense(2048, activation='relu'), nn.Dense(512, activation='relu'), nn.Dense(1))
//! let net: Sequential = Sequential::new()
//!     .add(Dense::new(2048).activation(Activation::Relu))
//!     .add(Dense::new(512).activation(Activation::Relu))
//!     .add(Dense::new(1));
//! // net.initialize()
//! let device = Device::flex();
//! let net = net.initialize(Init::default(), &device);
//! let y = net.forward(Tensor::zeros([4, 512], &device)).unwrap();
//! assert_eq!(y.dims(), [4, 1]);
//! assert_eq!(net.collect_params().names(), ["0.weight", "0.bias", "1.weight", "1.bias", "2.weight", "2.bias"]);
//! assert_eq!(net.collect_params().get("0.weight").unwrap().shape, [2048, 512]);
//! ```

use std::fmt;

use burn::module::{
    Content, Devices, Module, ModuleDisplay, ModuleDisplayDefault, ModuleMapper, ModuleVisitor,
};
use burn::tensor::{Device, Tensor};

use crate::activation::Activation;
use crate::block::{Block, ParamDict};
use crate::dense::Dense;
use crate::error::Result;
use crate::init::Init;

/// A chain of blocks applied in order.
///
/// `U` is the type of the user's own blocks; a network of built-in layers only leaves it at
/// its default, [`NoBlock`]. Several user block types go into one enum that derives `Module`
/// and implements [`Block`].
#[derive(Debug, Clone)]
pub struct Sequential<U: Block = NoBlock> {
    layers: Vec<Layer<U>>,
}

/// One child of a [`Sequential`].
// A Dense is larger than an Activation; boxing it would cost an indirection on every forward
// for a few hundred bytes saved per layer.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Layer<U: Block = NoBlock> {
    /// A fully connected layer.
    Dense(Dense),
    /// An activation added as its own block.
    Activation(Activation),
    /// A nested chain.
    Sequential(Sequential<U>),
    /// A user's own block.
    Block(U),
}

impl<U: Block> Default for Sequential<U> {
    fn default() -> Self {
        Self::new()
    }
}

impl<U: Block> Sequential<U> {
    /// An empty chain (`nn.Sequential()`).
    pub fn new() -> Self {
        Self { layers: Vec::new() }
    }

    /// Appends a built-in layer or a nested `Sequential` (`net.add(…)`). Named after Gluon's
    /// `add`, which the book's code calls, not after `std::ops::Add`.
    #[allow(clippy::should_implement_trait)]
    pub fn add(mut self, layer: impl Into<Layer<U>>) -> Self {
        self.layers.push(layer.into());
        self
    }

    /// Appends a block of the user's own type.
    pub fn add_block(mut self, block: U) -> Self {
        self.layers.push(Layer::Block(block));
        self
    }

    /// The children, in order.
    pub fn layers(&self) -> &[Layer<U>] {
        &self.layers
    }

    /// Number of children.
    pub fn len(&self) -> usize {
        self.layers.len()
    }

    /// Whether the chain is empty.
    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }

    /// Runs an input of any rank: it is flattened to `[batch, rest]` first, as Gluon's Dense
    /// does by default.
    ///
    /// # Shapes
    /// - `x`: `[batch, d1, d2, …]`
    /// - output: `[batch, out_features]`
    pub fn forward_nd<const D: usize>(&self, x: Tensor<D>) -> Result<Tensor<2>> {
        let dims = x.dims();
        let batch = dims.first().copied().unwrap_or(1);
        let rest = dims.iter().skip(1).product::<usize>();
        self.forward(x.reshape([batch, rest]))
    }
}

impl<U: Block> Block for Sequential<U> {
    fn forward(&self, x: Tensor<2>) -> Result<Tensor<2>> {
        self.layers.iter().try_fold(x, |x, layer| layer.forward(x))
    }

    fn initialize(self, init: Init, device: &Device) -> Self {
        Self {
            layers: self
                .layers
                .into_iter()
                .map(|layer| layer.initialize(init, device))
                .collect(),
        }
    }

    fn collect_params(&self) -> ParamDict {
        let mut dict = ParamDict::default();
        for (index, layer) in self.layers.iter().enumerate() {
            dict.params
                .extend(layer.collect_params().prefixed(&index.to_string()).params);
        }
        dict
    }
}

impl<U: Block> Block for Layer<U> {
    fn forward(&self, x: Tensor<2>) -> Result<Tensor<2>> {
        match self {
            Layer::Dense(dense) => dense.forward(x),
            Layer::Activation(activation) => activation.forward(x),
            Layer::Sequential(sequential) => sequential.forward(x),
            Layer::Block(block) => block.forward(x),
        }
    }

    fn initialize(self, init: Init, device: &Device) -> Self {
        match self {
            Layer::Dense(dense) => Layer::Dense(dense.initialize(init, device)),
            Layer::Activation(activation) => Layer::Activation(activation),
            Layer::Sequential(sequential) => Layer::Sequential(sequential.initialize(init, device)),
            Layer::Block(block) => Layer::Block(block.initialize(init, device)),
        }
    }

    fn collect_params(&self) -> ParamDict {
        match self {
            Layer::Dense(dense) => dense.collect_params(),
            Layer::Activation(activation) => activation.collect_params(),
            Layer::Sequential(sequential) => sequential.collect_params(),
            Layer::Block(block) => block.collect_params(),
        }
    }
}

impl<U: Block> From<Dense> for Layer<U> {
    fn from(dense: Dense) -> Self {
        Layer::Dense(dense)
    }
}

impl<U: Block> From<Activation> for Layer<U> {
    fn from(activation: Activation) -> Self {
        Layer::Activation(activation)
    }
}

impl<U: Block> From<Sequential<U>> for Layer<U> {
    fn from(sequential: Sequential<U>) -> Self {
        Layer::Sequential(sequential)
    }
}

// Children are entered under their index only: no field or variant name enters the path, so
// burn's own paths (and the safetensors names built from them) are Gluon's `0.weight`.
impl<U: Block> Module for Sequential<U> {
    fn collect_devices(&self, devices: Devices) -> Devices {
        self.layers
            .iter()
            .fold(devices, |devices, layer| layer.collect_devices(devices))
    }
    fn fork(self, device: &Device) -> Self {
        self.map_layers(|layer| layer.fork(device))
    }
    fn to_device(self, device: &Device) -> Self {
        self.map_layers(|layer| layer.to_device(device))
    }
    fn train(self) -> Self {
        self.map_layers(Module::train)
    }
    fn valid(&self) -> Self {
        Self {
            layers: self.layers.iter().map(Module::valid).collect(),
        }
    }
    fn materialize(self) -> Self {
        self.map_layers(Module::materialize)
    }
    fn visit<V: ModuleVisitor>(&self, visitor: &mut V) {
        for (index, layer) in self.layers.iter().enumerate() {
            let name = index.to_string();
            visitor.enter_module(&name, "Sequential");
            layer.visit(visitor);
            visitor.exit_module(&name, "Sequential");
        }
    }
    fn map<M: ModuleMapper>(self, mapper: &mut M) -> Self {
        Self {
            layers: self
                .layers
                .into_iter()
                .enumerate()
                .map(|(index, layer)| {
                    let name = index.to_string();
                    mapper.enter_module(&name, "Sequential");
                    let layer = layer.map(mapper);
                    mapper.exit_module(&name, "Sequential");
                    layer
                })
                .collect(),
        }
    }
}

impl<U: Block> Sequential<U> {
    fn map_layers(self, f: impl FnMut(Layer<U>) -> Layer<U>) -> Self {
        Self {
            layers: self.layers.into_iter().map(f).collect(),
        }
    }
}

macro_rules! each_layer {
    ($layer:expr, $inner:ident => $body:expr) => {
        match $layer {
            Layer::Dense($inner) => Layer::Dense($body),
            Layer::Activation($inner) => Layer::Activation($body),
            Layer::Sequential($inner) => Layer::Sequential($body),
            Layer::Block($inner) => Layer::Block($body),
        }
    };
}

impl<U: Block> Module for Layer<U> {
    fn collect_devices(&self, devices: Devices) -> Devices {
        match self {
            Layer::Dense(inner) => inner.collect_devices(devices),
            Layer::Activation(inner) => inner.collect_devices(devices),
            Layer::Sequential(inner) => inner.collect_devices(devices),
            Layer::Block(inner) => inner.collect_devices(devices),
        }
    }
    fn fork(self, device: &Device) -> Self {
        each_layer!(self, inner => inner.fork(device))
    }
    fn to_device(self, device: &Device) -> Self {
        each_layer!(self, inner => inner.to_device(device))
    }
    fn train(self) -> Self {
        each_layer!(self, inner => inner.train())
    }
    fn valid(&self) -> Self {
        each_layer!(self, inner => inner.valid())
    }
    fn materialize(self) -> Self {
        each_layer!(self, inner => inner.materialize())
    }
    fn visit<V: ModuleVisitor>(&self, visitor: &mut V) {
        match self {
            Layer::Dense(inner) => inner.visit(visitor),
            Layer::Activation(inner) => inner.visit(visitor),
            Layer::Sequential(inner) => inner.visit(visitor),
            Layer::Block(inner) => inner.visit(visitor),
        }
    }
    fn map<M: ModuleMapper>(self, mapper: &mut M) -> Self {
        each_layer!(self, inner => inner.map(mapper))
    }
}

impl<U: Block> fmt::Display for Sequential<U> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sequential(")?;
        for (index, layer) in self.layers.iter().enumerate() {
            if index > 0 {
                write!(f, ", ")?;
            }
            match layer {
                Layer::Dense(dense) => write!(f, "{dense}")?,
                Layer::Activation(activation) => write!(f, "Activation({activation})")?,
                Layer::Sequential(sequential) => write!(f, "{sequential}")?,
                Layer::Block(block) => write!(f, "{}", block.format(Default::default()))?,
            }
        }
        write!(f, ")")
    }
}

impl<U: Block> ModuleDisplayDefault for Sequential<U> {
    fn content(&self, content: Content) -> Option<Content> {
        content.add_formatted(self).optional()
    }
}

impl<U: Block> ModuleDisplay for Sequential<U> {}

impl<U: Block> ModuleDisplayDefault for Layer<U> {
    fn content(&self, content: Content) -> Option<Content> {
        match self {
            Layer::Dense(inner) => inner.content(content),
            Layer::Activation(inner) => inner.content(content),
            Layer::Sequential(inner) => inner.content(content),
            Layer::Block(inner) => inner.content(content),
        }
    }
}

impl<U: Block> ModuleDisplay for Layer<U> {}

/// The user-block type of a `Sequential` that has none. It has no values.
#[derive(Debug, Clone)]
pub enum NoBlock {}

impl Block for NoBlock {
    fn forward(&self, _x: Tensor<2>) -> Result<Tensor<2>> {
        match *self {}
    }
}

impl Module for NoBlock {
    fn collect_devices(&self, _devices: Devices) -> Devices {
        match *self {}
    }
    fn fork(self, _device: &Device) -> Self {
        match self {}
    }
    fn to_device(self, _device: &Device) -> Self {
        match self {}
    }
    fn train(self) -> Self {
        match self {}
    }
    fn valid(&self) -> Self {
        match *self {}
    }
    fn materialize(self) -> Self {
        match self {}
    }
    fn visit<V: ModuleVisitor>(&self, _visitor: &mut V) {
        match *self {}
    }
    fn map<M: ModuleMapper>(self, _mapper: &mut M) -> Self {
        match self {}
    }
}

impl ModuleDisplayDefault for NoBlock {
    fn content(&self, _content: Content) -> Option<Content> {
        match *self {}
    }
}

impl ModuleDisplay for NoBlock {}
