//! The kernels' entry points for ember's layers: oneDNN's path where this thread chose it and
//! the library runs, else `None` (or burn's own kernel), for the layer to take burn's path.

use burn::tensor::Tensor;

use crate::precision::Precision;

#[cfg(feature = "onednn")]
use super::choice::{Kernels, chosen};
use super::eltwise::Eltwise;
use super::normalized::Normalized;
#[cfg(feature = "onednn")]
use super::onednn;
use super::window::Window;

/// Whether this thread's layers go to oneDNN, for products in `precision`: bf16 only where
/// oneDNN's instruction set multiplies it (its reference bf16 kernels are slower than f32's).
#[cfg(feature = "onednn")]
fn fast_in(precision: Precision) -> bool {
    matches!(chosen(), Ok(Kernels::OneDnn))
        && onednn::library::runtime().is_ok_and(|rt| precision == Precision::F32 || rt.bf16)
}

/// Whether this thread's f32 layers (activations, pooling, BatchNorm) go to oneDNN.
#[cfg(feature = "onednn")]
pub(super) fn fast() -> bool {
    fast_in(Precision::F32)
}

#[cfg(feature = "onednn")]
fn counted<T>(result: Option<T>) -> Option<T> {
    if result.is_some() {
        super::counters::ran();
    }
    result
}

/// `y` with the activation that a oneDNN primitive did not fuse as a post-op (`fused` false)
/// applied now.
#[cfg(feature = "onednn")]
fn unfused<const D: usize>(
    (y, fused): (Tensor<D>, bool),
    activation: Option<Eltwise>,
) -> Tensor<D> {
    match activation {
        Some(a) if !fused => self::activation(a, y),
        _ => y,
    }
}

/// `activation(x)`: oneDNN's where it runs, else burn's.
pub(crate) fn activation<const D: usize>(activation: Eltwise, x: Tensor<D>) -> Tensor<D> {
    #[cfg(feature = "onednn")]
    if fast()
        && let Some(y) = counted(onednn::eltwise::apply(activation, &x))
    {
        return y;
    }
    activation.burn(x)
}

/// `activation(x·W + b)` for burn's `W [in, out]`, its products in `precision`, or `None` for
/// burn's path.
pub(crate) fn dense(
    x: &Tensor<2>,
    weight: &Tensor<2>,
    bias: Option<&Tensor<1>>,
    activation: Option<Eltwise>,
    precision: Precision,
) -> Option<Tensor<2>> {
    #[cfg(feature = "onednn")]
    if fast_in(precision) {
        return counted(onednn::matmul::dense(
            x, weight, bias, activation, precision,
        ))
        .map(|y| unfused(y, activation));
    }
    let _ = (x, weight, bias, activation, precision);
    None
}

/// `x·W + b` over the last axis of `x` (`[…, in]`) for burn's `W [in, out]`, in f32: oneDNN's
/// product over the positions as rows where it runs, else burn's `linear`. For layers that hold
/// burn's `Linear` inside (attention's projections, the feed-forward network).
pub(crate) fn affine<const D: usize>(
    x: Tensor<D>,
    weight: Tensor<2>,
    bias: Option<Tensor<1>>,
) -> Tensor<D> {
    let dims = x.dims();
    let [i, o] = weight.dims();
    let rows = dims[..D - 1].iter().product::<usize>();
    if let Some(y) = dense(
        &x.clone().reshape([rows, i]),
        &weight,
        bias.as_ref(),
        None,
        Precision::F32,
    ) {
        let mut out = dims;
        out[D - 1] = o;
        return y.reshape(out);
    }
    burn::tensor::module::linear(x, weight, bias)
}

/// `a · b` (or `a · bᵀ` where `transpose_b`) over the last two axes, the first two a batch
/// (attention's heads): oneDNN's batched product where it runs, else burn's `matmul`.
pub(crate) fn matmul_heads(a: Tensor<4>, b: Tensor<4>, transpose_b: bool) -> Tensor<4> {
    #[cfg(feature = "onednn")]
    if fast() {
        let ([d0, d1, m, k], [b0, b1, b2, b3]) = (a.dims(), b.dims());
        let a3 = a.clone().reshape([d0 * d1, m, k]);
        let b3 = b.clone().reshape([b0 * b1, b2, b3]);
        if let Some(y) = counted(onednn::batched::batched_matmul(&a3, &b3, transpose_b)) {
            let [_, m, n] = y.dims();
            return y.reshape([d0, d1, m, n]);
        }
    }
    match transpose_b {
        true => a.matmul(b.swap_dims(2, 3)),
        false => a.matmul(b),
    }
}

/// A convolution with its bias and activation, its product in `precision`, or `None` for
/// burn's path.
pub(crate) fn conv<const D: usize>(
    x: &Tensor<D>,
    weight: &Tensor<D>,
    bias: Option<&Tensor<1>>,
    groups: usize,
    window: Window,
    activation: Option<Eltwise>,
    precision: Precision,
) -> Option<Tensor<D>> {
    #[cfg(feature = "onednn")]
    if fast_in(precision) {
        return counted(onednn::conv::conv(
            x, weight, bias, groups, window, activation, precision,
        ))
        .map(|y| unfused(y, activation));
    }
    let _ = (x, weight, bias, groups, window, activation, precision);
    None
}

/// Max or average pooling (zeros of the padding counted), or `None` for burn's path.
pub(crate) fn pool<const D: usize>(x: &Tensor<D>, max: bool, window: Window) -> Option<Tensor<D>> {
    #[cfg(feature = "onednn")]
    if fast() {
        let kind = if max {
            onednn::pool::Pooling::Max
        } else {
            onednn::pool::Pooling::AvgIncludePad
        };
        return counted(onednn::pool::pool(x, kind, window));
    }
    let _ = (x, max, window);
    None
}

/// Batch normalization with the given statistics (`stats`: mean, variance; inference), or else
/// with the batch's own, which it returns (a training step); `None` for burn's path.
pub(crate) fn batch_norm<const D: usize>(
    x: &Tensor<D>,
    gamma: &Tensor<1>,
    beta: &Tensor<1>,
    stats: Option<(&Tensor<1>, &Tensor<1>)>,
    epsilon: f64,
) -> Option<Normalized<D>> {
    #[cfg(feature = "onednn")]
    if fast() {
        return counted(onednn::batch_norm::batch_norm(
            x, gamma, beta, stats, epsilon,
        ));
    }
    let _ = (x, gamma, beta, stats, epsilon);
    None
}

/// burn's `LayerNorm` over the last axis of `x`, with `gamma` and `beta` (`None` without a
/// shift), or `None` for burn's path.
pub(crate) fn layer_norm<const D: usize>(
    x: &Tensor<D>,
    gamma: &Tensor<1>,
    beta: Option<&Tensor<1>>,
    epsilon: f64,
) -> Option<Tensor<D>> {
    #[cfg(feature = "onednn")]
    if fast() {
        return counted(onednn::layer_norm::layer_norm(x, gamma, beta, epsilon));
    }
    let _ = (x, gamma, beta, epsilon);
    None
}

/// `softmax(x)` over its last axis: oneDNN's where it runs, else burn's.
pub(crate) fn softmax<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    #[cfg(feature = "onednn")]
    if fast()
        && let Some(y) = counted(onednn::softmax::softmax(&x))
    {
        return y;
    }
    burn::tensor::activation::softmax(x, D - 1)
}

/// `x` row-major: a permuted view copied by oneDNN's reorder, its gradient handed back in the
/// view's order, where it runs; else as it is (burn copies a view where an operation needs it).
pub(crate) fn contiguous<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    #[cfg(feature = "onednn")]
    if fast()
        && let Some(y) = counted(onednn::permuted::contiguous(&x))
    {
        return y;
    }
    x
}

/// A recurrence that the kernels run over a whole sequence at once, with PyTorch's equations
/// and gate orders: Elman's with tanh or relu, the LSTM (gates i, f, g, o), the GRU (gates r,
/// z, n, the reset applied after the hidden product).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Recurrence {
    Tanh,
    Relu,
    Lstm,
    Gru,
}

/// One direction's parameters in PyTorch's layout: `weight_ih [gates·hidden, in]`,
/// `weight_hh [gates·hidden, hidden]`, and the biases `[gates·hidden]`.
pub(crate) struct Gates<'a> {
    pub input: &'a Tensor<2>,
    pub hidden: &'a Tensor<2>,
    pub input_bias: Option<&'a Tensor<1>>,
    pub hidden_bias: Option<&'a Tensor<1>>,
}

/// burn's path for one layer: the same function of the same tensors as [`recurrent`], which a
/// backward pass that oneDNN fails to run differentiates instead.
pub(crate) type Reference = std::sync::Arc<
    dyn Fn(&Tensor<3>, &[Tensor<3>], &[Gates<'_>]) -> (Tensor<3>, Vec<Tensor<3>>) + Send + Sync,
>;

/// One layer of `recurrence` over `x [time, batch, in]` in one or two `directions` (forward,
/// then reverse) from `states` (`[h]` or, for the LSTM, `[h, c]`, each `[directions, batch,
/// hidden]`): its outputs `[time, batch, directions·hidden]` and its final states, shaped as
/// `states`; or `None` for burn's path, which `reference` is.
pub(crate) fn recurrent(
    recurrence: Recurrence,
    x: &Tensor<3>,
    states: &[Tensor<3>],
    directions: &[Gates<'_>],
    reference: &Reference,
) -> Option<(Tensor<3>, Vec<Tensor<3>>)> {
    #[cfg(feature = "onednn")]
    if fast() {
        return counted(onednn::rnn::recurrent(
            recurrence, x, states, directions, reference,
        ));
    }
    let _ = (recurrence, x, states, directions, reference);
    None
}
