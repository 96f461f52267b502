//! burn-flex's gradients, for a backward pass that oneDNN fails to run.
//!
//! burn's autodiff gives a backward pass no way to return an error (`Backward::backward` returns
//! nothing), and a forward pass already ran on oneDNN cannot be taken back. So where a oneDNN
//! primitive fails in a backward pass (a reorder, the activation's gradient, the data or the
//! weight gradient), that gradient is computed by burn-flex's own kernel from the same saved
//! arrays (burn-flex reads the channels-last views as they are), and the failure is recorded
//! as a fallback ([`crate::kernels::counters`]), as one in a forward pass is.

use burn::backend::Flex;
use burn::backend::flex::FlexTensor;
use burn::backend::ops::{ActivationOps, ConvOptions, FloatTensorOps, ModuleOps};
use burn::backend::{IntDType, Scalar};
use burn::tensor::{DType, FloatDType};

use super::primitive::Result;
use crate::kernels::counters;
use crate::kernels::eltwise::Eltwise;
use crate::kernels::window::Window;

/// What oneDNN computes, or, where it fails, what burn-flex computes; the failure is recorded.
pub fn or_flex<T>(onednn: impl FnOnce() -> Result<T>, flex: impl FnOnce() -> T) -> T {
    onednn().unwrap_or_else(|e| {
        counters::fell_back(&format_args!(
            "{e} (in a backward pass: burn-flex computed it)"
        ));
        flex()
    })
}

/// The gradient before `activation`, from the gradient after it and the array its backward
/// pass reads: its output `y` for the activations oneDNN differentiates from the output
/// (`from_output`), else its input.
pub fn activation(
    activation: Eltwise,
    data: &FlexTensor,
    from_output: bool,
    grad: &FlexTensor,
) -> FlexTensor {
    let (data, grad) = (data.clone(), grad.clone());
    let scalar = |v: f64| Scalar::Float(v);
    match (activation, from_output) {
        (Eltwise::Relu, _) => Flex::relu_backward(data, grad),
        (Eltwise::Logistic, true) => Flex::sigmoid_backward(data, grad),
        (Eltwise::Logistic, false) => Flex::sigmoid_backward(Flex::sigmoid(data), grad),
        // d tanh = 1 − tanh²
        (Eltwise::Tanh, output) => {
            let y = if output { data } else { Flex::float_tanh(data) };
            let slope =
                Flex::float_add_scalar(Flex::float_neg(Flex::float_mul(y.clone(), y)), scalar(1.0));
            Flex::float_mul(grad, slope)
        }
        // d softplus(x) = sigmoid(x); from the output y, sigmoid(x) = 1 − e^(−y).
        (Eltwise::SoftRelu, false) => Flex::float_mul(grad, Flex::sigmoid(data)),
        (Eltwise::SoftRelu, true) => {
            let e = Flex::float_exp(Flex::float_neg(data));
            Flex::float_mul(
                grad,
                Flex::float_add_scalar(Flex::float_neg(e), scalar(1.0)),
            )
        }
        (Eltwise::GeluErf, _) => Flex::gelu_backward(data, grad),
    }
}

/// The gradients of `x·W` for burn's `W [in, out]`: of `x`, of `W`, and of a bias; `x` and
/// `W` as the product read them (in bf16 under autocast), the gradients in f32.
pub fn dense_x(w: &FlexTensor, grad: &FlexTensor) -> FlexTensor {
    Flex::linear_x_backward(f32(w), grad.clone())
}

pub fn dense_w(x: &FlexTensor, grad: &FlexTensor) -> FlexTensor {
    Flex::linear_weight_backward(f32(x), grad.clone())
}

/// `t` in f32.
fn f32(t: &FlexTensor) -> FlexTensor {
    match t.dtype() {
        DType::F32 => t.clone(),
        _ => Flex::float_cast(t.clone(), FloatDType::F32),
    }
}

pub fn dense_b(grad: &FlexTensor) -> FlexTensor {
    Flex::linear_bias_backward(grad.clone())
}

/// A convolution of one or two spatial axes (the only ones [`super::conv::conv`] takes).
pub struct Conv<'a> {
    pub x: &'a FlexTensor,
    pub w: &'a FlexTensor,
    pub window: &'a Window,
    pub groups: usize,
}

impl Conv<'_> {
    fn options<const N: usize>(&self) -> ConvOptions<N> {
        let axes = |v: &[usize]| std::array::from_fn(|i| v[i]);
        ConvOptions::new(
            axes(&self.window.strides),
            axes(&self.window.padding),
            axes(&self.window.dilation),
            self.groups,
        )
    }

    /// The input's gradient.
    pub fn x(&self, grad: &FlexTensor) -> FlexTensor {
        let (x, w, g) = (self.x.clone(), self.w.clone(), grad.clone());
        match self.window.kernel.len() {
            1 => Flex::conv1d_x_backward(x, w, g, self.options()),
            _ => Flex::conv2d_x_backward(x, w, g, self.options()),
        }
    }

    /// The weight's gradient.
    pub fn w(&self, grad: &FlexTensor) -> FlexTensor {
        let (x, w, g) = (self.x.clone(), self.w.clone(), grad.clone());
        match self.window.kernel.len() {
            1 => Flex::conv1d_weight_backward(x, w, g, self.options()),
            _ => Flex::conv2d_weight_backward(x, w, g, self.options()),
        }
    }

    /// The bias's gradient: the output's gradient summed over all but the channels.
    pub fn b(&self, grad: &FlexTensor) -> FlexTensor {
        per_channel_sum(grad.clone())
    }
}

/// The input's gradient of max pooling (recomputing where each maximum is) or of average
/// pooling with the padding's zeros counted, over one or two spatial axes.
pub fn pool(x: &FlexTensor, max: bool, window: &Window, grad: &FlexTensor) -> FlexTensor {
    let (w, x, g) = (window, x.clone(), grad.clone());
    let two = |v: &[usize]| [v[0], v[1]];
    match (w.kernel.len(), max) {
        (1, true) => {
            let (k, s, p, d) = (w.kernel[0], w.strides[0], w.padding[0], w.dilation[0]);
            let at = Flex::max_pool1d_with_indices(x.clone(), k, s, p, d, false, IntDType::I64);
            Flex::max_pool1d_with_indices_backward(x, k, s, p, d, false, g, at.indices).x_grad
        }
        (1, false) => {
            Flex::avg_pool1d_backward(x, g, w.kernel[0], w.strides[0], w.padding[0], true, false)
        }
        (_, true) => {
            let (k, s, p, d) = (
                two(&w.kernel),
                two(&w.strides),
                two(&w.padding),
                two(&w.dilation),
            );
            let at = Flex::max_pool2d_with_indices(x.clone(), k, s, p, d, false, IntDType::I64);
            Flex::max_pool2d_with_indices_backward(x, k, s, p, d, false, g, at.indices).x_grad
        }
        (_, false) => {
            let (k, s, p) = (two(&w.kernel), two(&w.strides), two(&w.padding));
            Flex::avg_pool2d_backward(x, g, k, s, p, true, false)
        }
    }
}

/// The statistics a batch or layer normalization used: the batch's own (training), or `given`.
pub struct Stats<'a> {
    pub mean: &'a FlexTensor,
    pub variance: &'a FlexTensor,
    pub epsilon: f64,
    pub given: bool,
}

/// The gradients of batch normalization: of the input, of `gamma` and of `beta`.
pub fn batch_norm(
    x: &FlexTensor,
    gamma: &FlexTensor,
    stats: Stats,
    grad: &FlexTensor,
) -> [FlexTensor; 3] {
    let (mean, variance) = (stats.mean.clone(), stats.variance.clone());
    if !stats.given {
        let g = Flex::batch_norm_train_backward(
            x.clone(),
            gamma.clone(),
            mean,
            variance,
            stats.epsilon,
            grad.clone(),
        );
        return [g.x_grad, g.gamma_grad, g.beta_grad];
    }
    // Given statistics are constants: y = γ·(x − μ)/σ + β, so dx = γ/σ · dy.
    let dims = x.layout().shape().to_vec();
    let mut per_channel = vec![1; dims.len()];
    per_channel[1] = dims[1];
    let channel = |t: FlexTensor| Flex::float_reshape(t, per_channel.clone().into());
    let inv_std = channel(Flex::float_recip(Flex::float_sqrt(Flex::float_add_scalar(
        variance,
        Scalar::Float(stats.epsilon),
    ))));
    let normalized = Flex::float_mul(Flex::float_sub(x.clone(), channel(mean)), inv_std.clone());
    let dx = Flex::float_mul(
        Flex::float_mul(grad.clone(), channel(gamma.clone())),
        inv_std,
    );
    let dgamma = per_channel_sum(Flex::float_mul(grad.clone(), normalized));
    [dx, dgamma, per_channel_sum(grad.clone())]
}

/// The gradients of layer normalization over the last axis (`features` long) of `x`, with
/// the rows' own statistics: of the input, of `gamma` and of `beta`. With `x̂ = (x − μ)·r`
/// and `g = dy·γ`, per row: `dx = r·(g − mean(g) − x̂·mean(g·x̂))`.
pub fn layer_norm(
    x: &FlexTensor,
    gamma: &FlexTensor,
    stats: Stats,
    grad: &FlexTensor,
    features: usize,
) -> [FlexTensor; 3] {
    let dims = x.layout().shape().to_vec();
    let rows = dims.iter().product::<usize>() / features.max(1);
    let table = |t: &FlexTensor| Flex::float_reshape(t.clone(), [rows, features].into());
    let column = |t: &FlexTensor| Flex::float_reshape(t.clone(), [rows, 1].into());
    let (x, grad) = (table(x), table(grad));
    let rstd = Flex::float_recip(Flex::float_sqrt(Flex::float_add_scalar(
        column(stats.variance),
        Scalar::Float(stats.epsilon),
    )));
    let normalized = Flex::float_mul(Flex::float_sub(x, column(stats.mean)), rstd.clone());
    let per_feature =
        |t: FlexTensor| Flex::float_reshape(Flex::float_sum_dim(t, 0), [features].into());
    let dgamma = per_feature(Flex::float_mul(grad.clone(), normalized.clone()));
    let dbeta = per_feature(grad.clone());
    let g = Flex::float_mul(
        grad,
        Flex::float_reshape(gamma.clone(), [1, features].into()),
    );
    let mean_g = Flex::float_mean_dim(g.clone(), 1);
    let mean_gx = Flex::float_mean_dim(Flex::float_mul(g.clone(), normalized.clone()), 1);
    let centred = Flex::float_sub(
        Flex::float_sub(g, mean_g),
        Flex::float_mul(normalized, mean_gx),
    );
    let dx = Flex::float_mul(centred, rstd);
    [Flex::float_reshape(dx, dims.into()), dgamma, dbeta]
}

/// The gradient of a softmax over the last axis from its output `y`: `y·(dy − Σ dy·y)`.
pub fn softmax(y: &FlexTensor, grad: &FlexTensor) -> FlexTensor {
    let last = y.layout().shape().num_dims() - 1;
    let weighted = Flex::float_sum_dim(Flex::float_mul(grad.clone(), y.clone()), last);
    Flex::float_mul(y.clone(), Flex::float_sub(grad.clone(), weighted))
}

/// `t` (`[batch, channels, …]`) summed over all but the channels.
fn per_channel_sum(t: FlexTensor) -> FlexTensor {
    let mut sum = t;
    for axis in (0..sum.layout().shape().num_dims())
        .rev()
        .filter(|&a| a != 1)
    {
        sum = Flex::float_sum_dim(sum, axis);
    }
    let channels = sum.layout().shape()[1];
    Flex::float_reshape(sum, [channels].into())
}

#[cfg(test)]
#[path = "fallback_tests.rs"]
mod tests;
