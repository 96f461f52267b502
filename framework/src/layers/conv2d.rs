//! `Conv2D`: Gluon's 2-D convolution over burn-nn's `Conv2d`, with the number of input channels
//! taken from the first input.

use std::fmt;

use burn::nn::PaddingConfig2d;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::tensor::Device;

use super::activation::Activation;
use super::conv::Pair;
use super::conv::{
    ConvOptions, Convolution, conv_builders, describe, infer_conv, initialize_conv,
    known_in_channels,
};
use crate::block::Block;
use crate::deferred::{Deferred, layer_module};
use crate::error::Result;
use crate::init::Init;
use crate::ndtensor::NdTensor;

/// A 2-D convolution: `nn.Conv2D(channels, kernel_size, strides, padding, dilation, groups,
/// use_bias, activation)`.
///
/// The weight is `(channels, in_channels / groups, kh, kw)`, the layout of Gluon, PyTorch and
/// burn alike.
#[derive(Debug, Clone)]
pub struct Conv2D {
    options: ConvOptions<Pair>,
    conv: Deferred<Conv2d>,
}

impl Conv2D {
    /// `nn.Conv2D(channels, kernel_size)`, with strides 1, no padding, one group, a bias and
    /// no activation; the input channels are inferred.
    pub fn new(channels: usize, kernel_size: impl Into<Pair>) -> Self {
        Self {
            options: ConvOptions::new(channels, kernel_size.into(), Pair([1, 1]), Pair([0, 0])),
            conv: Deferred::new("Conv2D"),
        }
    }

    conv_builders!(Pair, impl Into<Pair>);

    /// The burn layer inside, once created.
    pub fn conv(&self) -> Option<&Conv2d> {
        self.conv.get()
    }

    /// The input channels, once known.
    pub fn known_in_channels(&self) -> Option<usize> {
        known_in_channels(self)
    }
}

impl Block for Conv2D {
    /// # Shapes
    /// - input: `[batch, in_channels, height, width]`
    /// - output: `[batch, channels, out_height, out_width]`, with
    ///   `out = ⌊(in + 2·padding − dilation·(kernel − 1) − 1) / strides⌋ + 1`
    fn forward(&self, x: NdTensor) -> NdTensor {
        let conv = self.conv.module(self);
        let x = x.rank::<4>();
        let bias = conv.bias.as_ref().map(|b| b.val());
        let product = |x, w, options| burn::tensor::module::conv2d(x, w, None, options);
        self.options
            .forward(x, &conv.weight.val(), bias.as_ref(), product, |x| {
                conv.forward(x)
            })
            .into()
    }

    fn infer(self, x: NdTensor) -> Result<(Self, NdTensor)> {
        infer_conv(self, x)
    }

    fn initialize(self, init: Init, device: &Device) -> Self {
        initialize_conv(self, init, device)
    }
}

impl Convolution for Conv2D {
    type Size = Pair;
    type Inner = Conv2d;
    const RANK: usize = 4;
    const LAYOUT: &'static str = "[batch, channels, height, width]";

    fn options(&self) -> &ConvOptions<Pair> {
        &self.options
    }

    fn inner(&self) -> &Deferred<Conv2d> {
        &self.conv
    }

    fn deferred(&mut self) -> &mut Deferred<Conv2d> {
        &mut self.conv
    }

    fn in_channels_of(conv: &Conv2d) -> usize {
        conv.weight.lazy_shape().as_slice()[1] * conv.groups
    }

    fn build(&self, in_channels: usize, device: &Device) -> Conv2d {
        let o = &self.options;
        let [ph, pw] = o.padding.0;
        Conv2dConfig::new([in_channels, o.channels], o.kernel_size.0)
            .with_stride(o.strides.0)
            .with_dilation(o.dilation.0)
            .with_groups(o.groups)
            .with_padding(PaddingConfig2d::Explicit(ph, pw, ph, pw))
            .with_bias(o.use_bias)
            .init(device)
    }
}

impl fmt::Display for Conv2D {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        describe(f, "Conv2D", self.known_in_channels(), &self.options)
    }
}

layer_module!(Conv2D, conv);
