//! What Gluon's convolutions share ([`Conv2D`](super::conv2d::Conv2D) and
//! [`Conv1D`](super::conv1d::Conv1D), each in its own file): the options, their builders and
//! the forward pass they choose (`options.rs`), sizes along the window's axes (`pair.rs`), input
//! channels taken from the first input, and the window's output size.
//!
//! d2l's LeNet, line for line:
//!
//! ```
//! use burn::prelude::*;
//! use ember::{Activation, AvgPool2D, Block, Conv2D, Dense, Init, Sequential};
//!
//! let device = Device::flex();
//! let net: Sequential = Sequential::new()
//!     .add(Conv2D::new(6, 5).padding(2).activation(Activation::Sigmoid))
//!     .add(AvgPool2D::new(2).strides(2))
//!     .add(Conv2D::new(16, 5).activation(Activation::Sigmoid))
//!     .add(AvgPool2D::new(2).strides(2))
//!     .add(Dense::new(120).activation(Activation::Sigmoid))
//!     .add(Dense::new(84).activation(Activation::Sigmoid))
//!     .add(Dense::new(10));
//! let net = net
//!     .initialize(Init::Xavier, &device)
//!     .infer_shape(Tensor::<4>::zeros([1, 1, 28, 28], &device))
//!     .unwrap();
//! assert_eq!(net.collect_params().get("0.weight").unwrap().shape, [6, 1, 5, 5]);
//! assert_eq!(net.collect_params().get("4.weight").unwrap().shape, [120, 400]);
//! let y = net.forward(Tensor::<4>::zeros([2, 1, 28, 28], &device).into());
//! assert_eq!(y.dims(), [2, 10]);
//! ```

use std::fmt;

use burn::tensor::Device;

use crate::block::Block;
use crate::deferred::Deferred;
use crate::error::{Error, Result};
use crate::init::Init;
use crate::ndtensor::NdTensor;

mod options;
mod pair;

pub(crate) use options::{ConvOptions, conv_builders};
pub(crate) use pair::Axes;
pub use pair::Pair;

/// The output length of a window sliding over `input` (PyTorch's and Gluon's formula).
///
/// # Errors
/// [`Error::Shape`] naming `layer` when the window does not fit once.
pub(crate) fn window_output(
    layer: &dyn fmt::Display,
    dims: &[usize],
    axis: usize,
    kernel: usize,
    stride: usize,
    padding: usize,
    dilation: usize,
) -> Result<usize> {
    let span = dilation * (kernel - 1) + 1;
    let padded = dims[axis] + 2 * padding;
    if stride == 0 || kernel == 0 || padded < span {
        return Err(Error::Shape {
            what: layer.to_string(),
            expected: format!(
                "with axis {axis} of at least {} (window {span}, padding {padding} each side)",
                span.saturating_sub(2 * padding)
            ),
            got: dims.to_vec(),
        });
    }
    Ok((padded - span) / stride + 1)
}

/// Checks the rank of a layer's input and returns its channels (axis 1), refusing a channel
/// count that `groups` does not divide.
pub(crate) fn input_channels(
    layer: &dyn fmt::Display,
    dims: &[usize],
    rank: usize,
    layout: &str,
    groups: usize,
    channels: usize,
) -> Result<usize> {
    if dims.len() != rank {
        return Err(Error::Shape {
            what: layer.to_string(),
            expected: layout.to_string(),
            got: dims.to_vec(),
        });
    }
    let in_channels = dims[1];
    if in_channels == 0 || !in_channels.is_multiple_of(groups) || !channels.is_multiple_of(groups) {
        return Err(Error::Shape {
            what: format!("{layer} with {groups} groups"),
            expected: format!("input channels divisible by {groups}"),
            got: dims.to_vec(),
        });
    }
    Ok(in_channels)
}

/// What differs between the convolutions; [`infer_conv`] and [`initialize_conv`] do the rest.
pub(crate) trait Convolution: Block + Clone + fmt::Display {
    type Size: Axes;
    type Inner: burn::module::Module;
    /// The input's rank: batch, channels, and one axis per window dimension.
    const RANK: usize;
    /// The input's axes, in words, for messages.
    const LAYOUT: &'static str;

    fn options(&self) -> &ConvOptions<Self::Size>;
    fn inner(&self) -> &Deferred<Self::Inner>;
    fn deferred(&mut self) -> &mut Deferred<Self::Inner>;
    /// The input channels of a created burn layer.
    fn in_channels_of(inner: &Self::Inner) -> usize;
    fn build(&self, in_channels: usize, device: &Device) -> Self::Inner;
}

pub(crate) fn known_in_channels<C: Convolution>(layer: &C) -> Option<usize> {
    layer
        .inner()
        .get()
        .map(C::in_channels_of)
        .or(layer.options().in_channels)
}

/// Checks the input against the layer (rank, channels, groups, every window), creates the
/// burn layer if its size was deferred, and runs it.
pub(crate) fn infer_conv<C: Convolution>(mut layer: C, x: NdTensor) -> Result<(C, NdTensor)> {
    let dims = x.dims();
    let o = layer.options();
    let in_channels = input_channels(&layer, &dims, C::RANK, C::LAYOUT, o.groups, o.channels)?;
    let (k, s) = (o.kernel_size.axes(), o.strides.axes());
    let (p, d) = (o.padding.axes(), o.dilation.axes());
    for axis in 0..k.len() {
        window_output(&layer, &dims, axis + 2, k[axis], s[axis], p[axis], d[axis])?;
    }
    check_channels(&layer, known_in_channels(&layer), in_channels)?;
    let copy = layer.clone();
    layer.deferred().resolve(&copy, &x.device(), |device| {
        Ok(copy.build(in_channels, device))
    })?;
    let y = layer.forward(x);
    Ok((layer, y))
}

pub(crate) fn initialize_conv<C: Convolution>(mut layer: C, init: Init, device: &Device) -> C {
    let declared = layer.options().in_channels.map(|in_channels| {
        let copy = layer.clone();
        move |device: &Device| copy.build(in_channels, device)
    });
    layer.deferred().initialize(init, device, declared);
    layer
}

pub(crate) fn check_channels(
    layer: &dyn fmt::Display,
    known: Option<usize>,
    got: usize,
) -> Result<()> {
    match known {
        Some(expected) if expected != got => Err(Error::FeatureMismatch {
            layer: format!("{layer} (input channels)"),
            expected,
            got,
        }),
        _ => Ok(()),
    }
}

pub(crate) fn describe<S: fmt::Display>(
    f: &mut fmt::Formatter<'_>,
    kind: &str,
    in_channels: Option<usize>,
    o: &ConvOptions<S>,
) -> fmt::Result {
    match in_channels {
        Some(n) => write!(f, "{kind}({n} -> {}", o.channels)?,
        None => write!(f, "{kind}(? -> {}", o.channels)?,
    }
    write!(f, ", kernel_size={}", o.kernel_size)?;
    if o.groups != 1 {
        write!(f, ", groups={}", o.groups)?;
    }
    if let Some(activation) = o.activation {
        write!(f, ", {activation}")?;
    }
    write!(f, ")")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Conv1D, Conv2D};
    use burn::tensor::Tensor;

    #[test]
    fn input_channels_are_inferred_and_a_later_mismatch_is_an_error() {
        let device = Device::flex();
        let conv = Conv2D::new(4, 3)
            .padding(1)
            .initialize(Init::default(), &device)
            .infer_shape(Tensor::<4>::zeros([1, 3, 8, 8], &device))
            .unwrap();
        assert_eq!(conv.known_in_channels(), Some(3));
        assert_eq!(
            conv.collect_params().get("weight").unwrap().shape,
            [4, 3, 3, 3]
        );
        let err = conv
            .infer_shape(Tensor::<4>::zeros([1, 5, 8, 8], &device))
            .unwrap_err();
        assert!(err.to_string().contains("5 features"), "{err}");
    }

    #[test]
    fn a_wrong_rank_or_a_window_larger_than_the_input_is_an_error_naming_the_layer() {
        let device = Device::flex();
        let conv = || Conv2D::new(4, 5).initialize(Init::default(), &device);
        let err = conv()
            .infer_shape(Tensor::<2>::zeros([1, 3], &device))
            .unwrap_err();
        assert!(err.to_string().contains("Conv2D"), "{err}");
        let err = conv()
            .infer_shape(Tensor::<4>::zeros([1, 1, 3, 3], &device))
            .unwrap_err();
        assert!(err.to_string().contains("window 5"), "{err}");
        let err = Conv1D::new(4, 1)
            .groups(3)
            .initialize(Init::default(), &device)
            .infer_shape(Tensor::<3>::zeros([1, 4, 3], &device))
            .unwrap_err();
        assert!(err.to_string().contains("divisible by 3"), "{err}");
    }
}
