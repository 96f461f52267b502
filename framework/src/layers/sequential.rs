//! `Sequential`: Gluon's `nn.Sequential`, built by chaining `add`.
//!
//! It holds ember's layers ([`Dense`], [`Conv2D`](crate::Conv2D), [`BatchNorm`](crate::BatchNorm),
//! …), nested `Sequential`s and blocks of the user's own type `U` alike. Children are named by index, as in Gluon and PyTorch: `0.weight`,
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
//! // The one explicit step that gives every deferred layer its input size:
//! let net = net.infer_shape(Tensor::<2>::zeros([1, 512], &device)).unwrap();
//! let y = net.forward(Tensor::<2>::zeros([4, 512], &device).into());
//! assert_eq!(y.dims(), [4, 1]);
//! assert_eq!(net.collect_params().names(), ["0.weight", "0.bias", "1.weight", "1.bias", "2.weight", "2.bias"]);
//! assert_eq!(net.collect_params().get("0.weight").unwrap().shape, [2048, 512]);
//! ```

use std::fmt;

use burn::module::{
    Content, Devices, Module, ModuleDisplay, ModuleDisplayDefault, ModuleMapper, ModuleVisitor,
};
use burn::tensor::Device;

use crate::block::Block;
use crate::error::Result;
use crate::init::Init;
use crate::ndtensor::NdTensor;

/// A chain of blocks applied in order.
///
/// `U` is the type of the user's own blocks; a network of built-in layers only leaves it at
/// its default, [`NoBlock`]. Several user block types go into one enum that derives `Module`
/// and implements [`Block`].
#[derive(Debug, Clone)]
pub struct Sequential<U: Block = NoBlock> {
    layers: Vec<Layer<U>>,
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

    /// The children, in order, taken out of the chain.
    pub fn into_layers(self) -> Vec<Layer<U>> {
        self.layers
    }

    /// Number of children.
    pub fn len(&self) -> usize {
        self.layers.len()
    }

    /// Whether the chain is empty.
    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }

    fn map_layers(self, f: impl FnMut(Layer<U>) -> Layer<U>) -> Self {
        Self {
            layers: self.layers.into_iter().map(f).collect(),
        }
    }
}

impl Sequential {
    /// This chain of built-in layers as a chain that may also hold blocks of one's own type
    /// `U`, as one network type for both: `models::mlp(&[256], 10).with_blocks::<Residual>()`
    /// has the same children, parameters and names.
    pub fn with_blocks<U: Block>(self) -> Sequential<U> {
        Sequential {
            layers: self.layers.into_iter().map(Layer::with_blocks).collect(),
        }
    }
}

impl<U: Block> Block for Sequential<U> {
    /// # Shapes
    /// - input: what the first child takes
    /// - output: what the last child gives
    fn forward(&self, x: NdTensor) -> NdTensor {
        self.layers.iter().fold(x, |x, layer| layer.forward(x))
    }

    /// Passes the example through each child in turn: each takes its input size from the
    /// output of the one before it.
    fn infer(self, x: NdTensor) -> Result<(Self, NdTensor)> {
        let mut layers = Vec::with_capacity(self.layers.len());
        let mut x = x;
        for (index, layer) in self.layers.into_iter().enumerate() {
            let (layer, y) = layer.infer(x).map_err(|err| err.at_child(index))?;
            layers.push(layer);
            x = y;
        }
        Ok((Self { layers }, x))
    }

    fn initialize(self, init: Init, device: &Device) -> Self {
        self.map_layers(|layer| layer.initialize(init, device))
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

impl<U: Block> fmt::Display for Sequential<U> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sequential(")?;
        for (index, layer) in self.layers.iter().enumerate() {
            if index > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{layer}")?;
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

/// The kinds of child a [`Sequential`] holds: ember's layers, listed here once, a nested
/// chain, and a user's block. Every operation on a child dispatches through this list.
macro_rules! layers {
    ($($kind:ident),* $(,)?) => {
        /// One child of a [`Sequential`].
        #[derive(Debug, Clone)]
        pub enum Layer<U: Block = NoBlock> {
            $(
                #[doc = concat!("A [`", stringify!($kind), "`](crate::", stringify!($kind), ").")]
                $kind(super::$kind),
            )*
            /// A nested chain.
            Sequential(Sequential<U>),
            /// A user's own block.
            Block(U),
        }

        impl<U: Block> Layer<U> {
            /// The kind of layer, by its type's name (`Dense`), `Sequential`, or `Block` for
            /// a block of one's own.
            pub fn kind(&self) -> &'static str {
                match self {
                    $(Layer::$kind(_) => stringify!($kind),)*
                    Layer::Sequential(_) => "Sequential",
                    Layer::Block(_) => "Block",
                }
            }
        }

        impl Layer {
            /// The same child, for a chain whose blocks of one's own are of type `U`.
            pub fn with_blocks<U: Block>(self) -> Layer<U> {
                match self {
                    $(Layer::$kind(layer) => Layer::$kind(layer),)*
                    Layer::Sequential(sequential) => Layer::Sequential(sequential.with_blocks()),
                    Layer::Block(never) => match never {},
                }
            }
        }

        $(
            impl<U: Block> From<super::$kind> for Layer<U> {
                fn from(layer: super::$kind) -> Self {
                    Layer::$kind(layer)
                }
            }
        )*

        /// Evaluates `$body` on the child inside, whatever its kind.
        macro_rules! each {
            ($layer:expr, $inner:ident => $body:expr) => {
                match $layer {
                    $(Layer::$kind($inner) => $body,)*
                    Layer::Sequential($inner) => $body,
                    Layer::Block($inner) => $body,
                }
            };
        }

        /// Rebuilds the child from `$body`, which gives the child inside and a value.
        macro_rules! each_map_result {
            ($layer:expr, $inner:ident => $body:expr) => {
                match $layer {
                    $(Layer::$kind($inner) => $body.map(|(l, y)| (Layer::$kind(l), y)),)*
                    Layer::Sequential($inner) => $body.map(|(l, y)| (Layer::Sequential(l), y)),
                    Layer::Block($inner) => $body.map(|(l, y)| (Layer::Block(l), y)),
                }
            };
        }

        /// Rebuilds the child with `$body` of the child inside.
        macro_rules! each_map {
            ($layer:expr, $inner:ident => $body:expr) => {
                match $layer {
                    $(Layer::$kind($inner) => Layer::$kind($body),)*
                    Layer::Sequential($inner) => Layer::Sequential($body),
                    Layer::Block($inner) => Layer::Block($body),
                }
            };
        }
    };
}

with_every_layer!(layers);

// The dispatch over every kind of child, for the ONNX export's `Export for Layer`.
pub(crate) use each;

impl<U: Block> From<Sequential<U>> for Layer<U> {
    fn from(sequential: Sequential<U>) -> Self {
        Layer::Sequential(sequential)
    }
}

impl<U: Block> Block for Layer<U> {
    fn forward(&self, x: NdTensor) -> NdTensor {
        each!(self, inner => inner.forward(x))
    }

    fn infer(self, x: NdTensor) -> Result<(Self, NdTensor)> {
        each_map_result!(self, inner => inner.infer(x))
    }

    fn initialize(self, init: Init, device: &Device) -> Self {
        each_map!(self, inner => inner.initialize(init, device))
    }
}

impl<U: Block> Module for Layer<U> {
    fn collect_devices(&self, devices: Devices) -> Devices {
        each!(self, inner => inner.collect_devices(devices))
    }
    fn fork(self, device: &Device) -> Self {
        each_map!(self, inner => inner.fork(device))
    }
    fn to_device(self, device: &Device) -> Self {
        each_map!(self, inner => inner.to_device(device))
    }
    fn train(self) -> Self {
        each_map!(self, inner => inner.train())
    }
    fn valid(&self) -> Self {
        each_map!(self, inner => inner.valid())
    }
    fn materialize(self) -> Self {
        each_map!(self, inner => inner.materialize())
    }
    fn visit<V: ModuleVisitor>(&self, visitor: &mut V) {
        each!(self, inner => inner.visit(visitor))
    }
    fn map<M: ModuleMapper>(self, mapper: &mut M) -> Self {
        each_map!(self, inner => inner.map(mapper))
    }
}

impl<U: Block> fmt::Display for Layer<U> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Layer::Activation(activation) => write!(f, "Activation({activation})"),
            Layer::Block(block) => write!(f, "{}", block.format(Default::default()).trim()),
            other => {
                each!(other, inner => write!(f, "{}", inner.format(Default::default()).trim()))
            }
        }
    }
}

impl<U: Block> ModuleDisplayDefault for Layer<U> {
    fn content(&self, content: Content) -> Option<Content> {
        each!(self, inner => inner.content(content))
    }
}

impl<U: Block> ModuleDisplay for Layer<U> {}

/// The user-block type of a `Sequential` that has none. It has no values.
#[derive(Debug, Clone)]
pub enum NoBlock {}

impl Block for NoBlock {
    fn forward(&self, _x: NdTensor) -> NdTensor {
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
