//! `Conv1D`: Gluon's 1-D convolution over burn-nn's `Conv1d`, with the number of input channels
//! taken from the first input.

use std::fmt;

use burn::nn::PaddingConfig1d;
use burn::nn::conv::{Conv1d, Conv1dConfig};
use burn::tensor::Device;

use super::activation::Activation;
use super::conv::{
    ConvOptions, Convolution, conv_builders, describe, infer_conv, initialize_conv,
    known_in_channels,
};
use crate::block::Block;
use crate::deferred::{Deferred, layer_module};
use crate::error::Result;
use crate::init::Init;
use crate::ndtensor::NdTensor;

/// A 1-D convolution: `nn.Conv1D(channels, kernel_size, strides, padding, dilation, groups,
/// use_bias, activation)`. The weight is `(channels, in_channels / groups, k)`.
#[derive(Debug, Clone)]
pub struct Conv1D {
    options: ConvOptions<usize>,
    conv: Deferred<Conv1d>,
}

impl Conv1D {
    /// `nn.Conv1D(channels, kernel_size)`, with strides 1, no padding, one group, a bias and
    /// no activation; the input channels are inferred.
    pub fn new(channels: usize, kernel_size: usize) -> Self {
        Self {
            options: ConvOptions::new(channels, kernel_size, 1, 0),
            conv: Deferred::new("Conv1D"),
        }
    }

    conv_builders!(usize);

    /// The burn layer inside, once created.
    pub fn conv(&self) -> Option<&Conv1d> {
        self.conv.get()
    }

    /// The input channels, once known.
    pub fn known_in_channels(&self) -> Option<usize> {
        known_in_channels(self)
    }
}

impl Block for Conv1D {
    /// # Shapes
    /// - input: `[batch, in_channels, width]`
    /// - output: `[batch, channels, out_width]`, with
    ///   `out = ⌊(in + 2·padding − dilation·(kernel − 1) − 1) / strides⌋ + 1`
    fn forward(&self, x: NdTensor) -> NdTensor {
        let conv = self.conv.module(self);
        let x = x.rank::<3>();
        let bias = conv.bias.as_ref().map(|b| b.val());
        let product = |x, w, options| burn::tensor::module::conv1d(x, w, None, options);
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

impl Convolution for Conv1D {
    type Size = usize;
    type Inner = Conv1d;
    const RANK: usize = 3;
    const LAYOUT: &'static str = "[batch, channels, width]";

    fn options(&self) -> &ConvOptions<usize> {
        &self.options
    }

    fn inner(&self) -> &Deferred<Conv1d> {
        &self.conv
    }

    fn deferred(&mut self) -> &mut Deferred<Conv1d> {
        &mut self.conv
    }

    fn in_channels_of(conv: &Conv1d) -> usize {
        conv.weight.lazy_shape().as_slice()[1] * conv.groups
    }

    fn build(&self, in_channels: usize, device: &Device) -> Conv1d {
        let o = &self.options;
        Conv1dConfig::new(in_channels, o.channels, o.kernel_size)
            .with_stride(o.strides)
            .with_dilation(o.dilation)
            .with_groups(o.groups)
            .with_padding(PaddingConfig1d::Explicit(o.padding, o.padding))
            .with_bias(o.use_bias)
            .init(device)
    }
}

impl fmt::Display for Conv1D {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        describe(f, "Conv1D", self.known_in_channels(), &self.options)
    }
}

layer_module!(Conv1D, conv);
