//! A convolution's options, in Gluon's names, their builders (the same methods on
//! [`Conv1D`](crate::Conv1D) and [`Conv2D`](crate::Conv2D)), and the forward pass they
//! choose: ember's CPU kernels, autocast, or burn's layer.

use burn::tensor::Tensor;
use burn::tensor::ops::ConvOptions as BurnConvOptions;

use super::pair::Axes;
use crate::layers::activation::Activation;

/// Options shared by both convolutions, in Gluon's names.
#[derive(Debug, Clone)]
pub(crate) struct ConvOptions<S> {
    pub(crate) channels: usize,
    pub(crate) kernel_size: S,
    pub(crate) strides: S,
    pub(crate) padding: S,
    pub(crate) dilation: S,
    pub(crate) groups: usize,
    pub(crate) use_bias: bool,
    pub(crate) activation: Option<Activation>,
    pub(crate) in_channels: Option<usize>,
}

impl<S: Axes> ConvOptions<S> {
    /// The convolution's forward pass, with its bias and activation: on ember's CPU kernels
    /// where they apply ([`Self::cpu`]), else under autocast ([`Self::autocast`], with
    /// `product` burn's `conv1d` or `conv2d` without bias), else `layer`, burn's module with its
    /// bias, then the activation.
    pub(crate) fn forward<const D: usize, const N: usize>(
        &self,
        x: Tensor<D>,
        weight: &Tensor<D>,
        bias: Option<&Tensor<1>>,
        product: impl FnOnce(Tensor<D>, Tensor<D>, BurnConvOptions<N>) -> Tensor<D>,
        layer: impl FnOnce(Tensor<D>) -> Tensor<D>,
    ) -> Tensor<D> {
        if let Some(y) = self.cpu(&x, weight, bias) {
            return y;
        }
        if let Some(y) = self.autocast(&x, weight, bias, product) {
            return y;
        }
        let y = layer(x);
        match self.activation {
            Some(activation) => activation.apply(y),
            None => y,
        }
    }

    /// The convolution with its bias and activation on ember's CPU kernels, its product in the
    /// thread's precision, or `None` for burn's path (under autocast: where oneDNN does not
    /// multiply bf16, [`crate::kernels::Status::bf16`]).
    fn cpu<const D: usize>(
        &self,
        x: &Tensor<D>,
        weight: &Tensor<D>,
        bias: Option<&Tensor<1>>,
    ) -> Option<Tensor<D>> {
        let window = crate::kernels::Window {
            kernel: self.kernel_size.axes(),
            strides: self.strides.axes(),
            padding: self.padding.axes(),
            dilation: self.dilation.axes(),
        };
        crate::kernels::conv(
            x,
            weight,
            bias,
            self.groups,
            window,
            self.activation.map(Activation::eltwise),
            crate::precision::current(),
        )
    }

    /// Under [`crate::autocast`], the convolution with its bias and activation, its product
    /// (`conv`: burn's `conv1d` or `conv2d` with these options, no bias) in the thread's
    /// precision and the rest in f32; `None` in f32.
    fn autocast<const D: usize, const N: usize>(
        &self,
        x: &Tensor<D>,
        weight: &Tensor<D>,
        bias: Option<&Tensor<1>>,
        conv: impl FnOnce(Tensor<D>, Tensor<D>, BurnConvOptions<N>) -> Tensor<D>,
    ) -> Option<Tensor<D>> {
        if crate::precision::current() == crate::Precision::F32 {
            return None;
        }
        let axes = |size: S| -> [usize; N] { std::array::from_fn(|i| size.axes()[i]) };
        let options = BurnConvOptions::new(
            axes(self.strides),
            axes(self.padding),
            axes(self.dilation),
            self.groups,
        );
        let lowered = |t: &Tensor<D>| crate::precision::lowered(t.clone());
        let y = crate::precision::raised(conv(lowered(x), lowered(weight), options));
        // The bias in f32, one value a channel (axis 1).
        let y = match bias {
            Some(b) => {
                let mut shape = [1; D];
                shape[1] = b.dims()[0];
                y + b.clone().reshape(shape)
            }
            None => y,
        };
        Some(match self.activation {
            Some(activation) => activation.apply(y),
            None => y,
        })
    }
}

impl<S: Copy> ConvOptions<S> {
    pub(crate) fn new(channels: usize, kernel_size: S, one: S, zero: S) -> Self {
        Self {
            channels,
            kernel_size,
            strides: one,
            padding: zero,
            dilation: one,
            groups: 1,
            use_bias: true,
            activation: None,
            in_channels: None,
        }
    }
}

macro_rules! conv_builders {
    ($size:ty) => {
        conv_builders!($size, $size);
    };
    ($size:ty, $arg:ty) => {
        /// `strides=`: the step of the window (default 1).
        pub fn strides(mut self, strides: $arg) -> Self {
            self.options.strides = strides.into();
            self
        }

        /// `padding=`: zeros added on each side of each spatial axis (default 0).
        pub fn padding(mut self, padding: $arg) -> Self {
            self.options.padding = padding.into();
            self
        }

        /// `dilation=`: the spacing between the window's taps (default 1).
        pub fn dilation(mut self, dilation: $arg) -> Self {
            self.options.dilation = dilation.into();
            self
        }

        /// `groups=`: split the channels into this many independent groups (default 1).
        pub fn groups(mut self, groups: usize) -> Self {
            self.options.groups = groups;
            self
        }

        /// `use_bias=False` drops the bias.
        pub fn use_bias(mut self, use_bias: bool) -> Self {
            self.options.use_bias = use_bias;
            self
        }

        /// `activation='relu'` and friends, applied to the output.
        pub fn activation(mut self, activation: Activation) -> Self {
            self.options.activation = Some(activation);
            self
        }

        /// Gluon's optional `in_channels`: declares the input channels, so that `initialize`
        /// creates the parameters at once instead of deferring them.
        pub fn in_channels(mut self, in_channels: usize) -> Self {
            self.options.in_channels = Some(in_channels);
            self
        }

        /// The number of output channels.
        pub fn channels(&self) -> usize {
            self.options.channels
        }

        pub(crate) fn activation_fn(&self) -> Option<Activation> {
            self.options.activation
        }
    };
}
pub(crate) use conv_builders;
