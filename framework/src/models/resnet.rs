//! d2l's residual block (8.6) and a small ResNet of it. The block is written as a user writes
//! a `Block` of their own from ember's layers: it passes `initialize` and the example of
//! `infer` on to them, and describes itself for ONNX export.

use burn::prelude::*;

use crate::error::Result;
use crate::onnx::{Export, OnnxGraph, Value};
use crate::{
    Activation, BatchNorm, Block, Conv2D, Dense, GlobalAvgPool2D, Init, NdTensor, Sequential,
};

// class Residual(nn.Block):
//     def __init__(self, num_channels, use_1x1conv=False, strides=1, **kwargs):
//         super().__init__(**kwargs)
//         self.conv1 = nn.Conv2D(num_channels, kernel_size=3, padding=1, strides=strides)
//         self.conv2 = nn.Conv2D(num_channels, kernel_size=3, padding=1)
//         self.conv3 = nn.Conv2D(num_channels, kernel_size=1, strides=strides) if use_1x1conv else None
//         self.bn1 = nn.BatchNorm()
//         self.bn2 = nn.BatchNorm()
//
//     def forward(self, X):
//         Y = npx.relu(self.bn1(self.conv1(X)))
//         Y = self.bn2(self.conv2(Y))
//         if self.conv3:
//             X = self.conv3(X)
//         return npx.relu(Y + X)
/// d2l's residual block: two 3×3 convolutions with BatchNorm, and a 1×1 convolution on the
/// shortcut where the shape changes.
#[derive(Module, Debug)]
pub struct Residual {
    conv1: Conv2D,
    conv2: Conv2D,
    conv3: Option<Conv2D>,
    bn1: BatchNorm,
    bn2: BatchNorm,
}

impl Residual {
    /// `num_channels` out; `use_1x1conv` for a shortcut that changes the channels or, with
    /// `strides`, the size.
    pub fn new(num_channels: usize, use_1x1conv: bool, strides: usize) -> Self {
        Self {
            conv1: Conv2D::new(num_channels, 3).padding(1).strides(strides),
            conv2: Conv2D::new(num_channels, 3).padding(1),
            conv3: use_1x1conv.then(|| Conv2D::new(num_channels, 1).strides(strides)),
            bn1: BatchNorm::new(),
            bn2: BatchNorm::new(),
        }
    }
}

impl Block for Residual {
    /// # Shapes
    /// `[batch, channels, height, width]` → `[batch, num_channels, height / strides, width / strides]`
    fn forward(&self, x: NdTensor) -> NdTensor {
        let y = Activation::Relu.forward(self.bn1.forward(self.conv1.forward(x.clone())));
        let y: Tensor<4> = self.bn2.forward(self.conv2.forward(y)).rank();
        let x: Tensor<4> = match &self.conv3 {
            Some(conv3) => conv3.forward(x).rank(),
            None => x.rank(),
        };
        Activation::Relu.apply(y + x).into()
    }

    /// `net.initialize(...)` reaches every child: a block that holds ember layers passes
    /// `init` and `device` on to each of them.
    fn initialize(self, init: Init, device: &Device) -> Self {
        Self {
            conv1: self.conv1.initialize(init, device),
            conv2: self.conv2.initialize(init, device),
            conv3: self.conv3.map(|conv3| conv3.initialize(init, device)),
            bn1: self.bn1.initialize(init, device),
            bn2: self.bn2.initialize(init, device),
        }
    }

    /// Gluon infers each child's input size at the first forward; in ember a block that holds
    /// layers with deferred sizes passes the example through them in `infer`, once.
    fn infer(self, x: NdTensor) -> Result<(Self, NdTensor)> {
        let (conv1, y) = self.conv1.infer(x.clone())?;
        let (bn1, y) = self.bn1.infer(y)?;
        let (conv2, y) = self.conv2.infer(Activation::Relu.forward(y))?;
        let (bn2, _) = self.bn2.infer(y)?;
        let conv3 = match self.conv3 {
            Some(conv3) => Some(conv3.infer(x.clone())?.0),
            None => None,
        };
        let block = Self {
            conv1,
            conv2,
            conv3,
            bn1,
            bn2,
        };
        let y = block.forward(x);
        Ok((block, y))
    }
}

// The ONNX export: an implementation beside the block, as ember's own layers have in `onnx/`.
impl Export for Residual {
    /// For `export`: each child under its field's name, so that the ONNX file's parameters
    /// are named as the safetensors file's (`3.conv1.weight`), joined by ONNX's `Relu` and
    /// `Add`.
    fn describe(&self, g: &mut OnnxGraph, x: Value) -> Result<Value> {
        let y = g.child("conv1", |g| self.conv1.describe(g, x.clone()))?;
        let y = g.child("bn1", |g| self.bn1.describe(g, y))?;
        let y = Activation::Relu.describe(g, y)?;
        let y = g.child("conv2", |g| self.conv2.describe(g, y))?;
        let y = g.child("bn2", |g| self.bn2.describe(g, y))?;
        let x = match &self.conv3 {
            Some(conv3) => g.child("conv3", |g| conv3.describe(g, x))?,
            None => x,
        };
        let sum = g.node("Add", &[&y, &x], &[]);
        Activation::Relu.describe(g, sum)
    }
}

/// A small ResNet for 28×28 images, sized for a CPU (d2l's ResNet-18 has 64 to 512
/// channels). In Gluon:
///
/// ```text
/// net = nn.Sequential()
/// net.add(nn.Conv2D(8, kernel_size=3, padding=1), nn.BatchNorm(), nn.Activation('relu'),
///         Residual(8), Residual(16, use_1x1conv=True, strides=2),
///         nn.GlobalAvgPool2D(), nn.Dense(outputs))
/// ```
pub fn small_resnet(outputs: usize) -> Sequential<Residual> {
    Sequential::new()
        .add(Conv2D::new(8, 3).padding(1))
        .add(BatchNorm::new())
        .add(Activation::Relu)
        .add_block(Residual::new(8, false, 1))
        .add_block(Residual::new(16, true, 2))
        .add(GlobalAvgPool2D::new())
        .add(Dense::new(outputs))
}
