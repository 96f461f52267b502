//! The five activations, forward and backward, on oneDNN's element-wise primitives.

use std::sync::Arc;

use burn::backend::Flex;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops};
use burn::backend::flex::FlexTensor;
use burn::tensor::Tensor;

use super::bridge::{self, Inputs};
use super::fallback;
use super::format::Format;
use super::library::*;
use super::primitive::{Attr, Error, Md, Primitive, Result, forward_prop};
use super::reorder::arrange;
use crate::kernels::eltwise::Eltwise;

/// oneDNN's algorithm for an activation, and whether its backward pass reads the output (so a
/// fused post-op, which keeps only the output, can be differentiated).
pub fn algorithm(activation: Eltwise) -> (dnnl_alg_kind_t, Option<dnnl_alg_kind_t>) {
    match activation {
        Eltwise::Relu => (dnnl_eltwise_relu, Some(dnnl_eltwise_relu_use_dst_for_bwd)),
        Eltwise::Logistic => (
            dnnl_eltwise_logistic,
            Some(dnnl_eltwise_logistic_use_dst_for_bwd),
        ),
        Eltwise::Tanh => (dnnl_eltwise_tanh, Some(dnnl_eltwise_tanh_use_dst_for_bwd)),
        Eltwise::SoftRelu => (dnnl_eltwise_soft_relu, None),
        Eltwise::GeluErf => (dnnl_eltwise_gelu_erf, None),
    }
}

/// The post-op that applies `activation` to a primitive's result, where the backward pass can
/// do without the result before it (`training`), or always for inference.
pub fn post_op(activation: Option<Eltwise>, training: bool) -> Result<(Attr, bool)> {
    match activation.map(algorithm) {
        Some((alg, from_dst)) if !training || from_dst.is_some() => {
            Ok((Attr::eltwise(alg, 0.0)?, true))
        }
        _ => Ok((Attr::none()?, false)),
    }
}

/// The backward pass of `activation` over an array of these dimensions, reading its output.
pub struct FromOutput {
    activation: Eltwise,
    primitive: Primitive,
    md: Md,
}

impl FromOutput {
    /// For the activations `post_op` fuses.
    pub fn new(activation: Eltwise, dims: &[usize]) -> Result<Arc<FromOutput>> {
        let n = dims.iter().product::<usize>();
        bridge::cached(format!("eltwise-bwd-dst {activation} {n}"), || {
            let (alg, Some(bwd)) = algorithm(activation) else {
                return Err(Error::NeedsInput(activation));
            };
            let md = Md::plain(&[n])?;
            let fwd = forward_primitive(alg, &md, true)?;
            let primitive = backward_primitive(bwd, &md, &fwd)?;
            Ok(FromOutput {
                activation,
                primitive,
                md,
            })
        })
    }

    /// The gradient before the activation, from the gradient after it and its output `y`, both
    /// in `format`.
    fn apply(&self, y: &FlexTensor, grad: &FlexTensor, format: Format) -> Result<FlexTensor> {
        let grad = arrange(grad, format)?;
        let mut dx = bridge::Out::new(&bridge::dims(y));
        self.primitive.execute(&[
            (DNNL_ARG_DST, &self.md, bridge::read(y)),
            (DNNL_ARG_DIFF_DST, &self.md, bridge::read(&grad)),
            (DNNL_ARG_DIFF_SRC, &self.md, dx.ptr()),
        ])?;
        // SAFETY: the backward pass wrote it.
        Ok(unsafe { dx.written_in(format) })
    }
}

/// The gradient before an activation fused into a primitive's output `y` (with `act`), or
/// the gradient itself (without). oneDNN's is in `format`; burn-flex's, where oneDNN failed,
/// may not be, so a primitive reading it arranges it first.
pub fn before_activation(
    act: Option<&FromOutput>,
    y: Option<&FlexTensor>,
    grad: &FlexTensor,
    format: Format,
) -> FlexTensor {
    match (act, y) {
        (Some(act), Some(y)) => fallback::or_flex(
            || act.apply(y, grad, format),
            || fallback::activation(act.activation, y, true, grad),
        ),
        _ => grad.clone(),
    }
}

fn forward_primitive(alg: dnnl_alg_kind_t, md: &Md, training: bool) -> Result<Primitive> {
    let prop = forward_prop(training);
    Primitive::describe("an activation", &Attr::none()?, None, |api, desc| {
        // SAFETY: valid out-pointer and descriptor.
        unsafe { api.dnnl_eltwise_forward_desc_init(desc, prop, alg, &md.0, 0.0, 0.0) }
    })
}

fn backward_primitive(alg: dnnl_alg_kind_t, md: &Md, fwd: &Primitive) -> Result<Primitive> {
    let what = "an activation's backward pass";
    Primitive::describe(what, &Attr::none()?, Some(fwd), |api, desc| {
        // SAFETY: valid out-pointer and descriptors.
        unsafe { api.dnnl_eltwise_backward_desc_init(desc, alg, &md.0, &md.0, 0.0, 0.0) }
    })
}

/// The forward and backward primitives of one activation over one shape.
struct Prims {
    md: Md,
    inference: Primitive,
    training: Primitive,
    backward: Primitive,
    /// The backward pass reads the output (else the input).
    from_dst: bool,
    activation: Eltwise,
}

/// Element-wise, so over the array's memory in whichever order it is: one dimension of `n`.
fn prims(activation: Eltwise, n: usize) -> Result<Arc<Prims>> {
    bridge::cached(format!("eltwise {activation} {n}"), || {
        let (alg, dst) = algorithm(activation);
        let md = Md::plain(&[n])?;
        let training = forward_primitive(alg, &md, true)?;
        let backward = backward_primitive(dst.unwrap_or(alg), &md, &training)?;
        Ok(Prims {
            inference: forward_primitive(alg, &md, false)?,
            training,
            backward,
            from_dst: dst.is_some(),
            activation,
            md,
        })
    })
}

#[derive(Debug)]
struct EltwiseBackward;

impl Backward<Flex, 1> for EltwiseBackward {
    /// The primitives, the array the backward pass reads (the output or the input), and its
    /// order.
    type State = (Arc<PrimsHandle>, FlexTensor, Format);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [parent] = ops.parents;
        let grad = grads.consume::<Flex>(&ops.node);
        if let Some(parent) = parent {
            let (prims, data, format) = ops.state;
            let p = &prims.0;
            let dx = fallback::or_flex(
                || p.differentiate(&data, &grad, format),
                || fallback::activation(p.activation, &data, p.from_dst, &grad),
            );
            grads.register::<Flex>(parent.id, dx);
        }
    }
}

/// `Prims` in the graph's state (which must be `Debug`).
pub struct PrimsHandle(Arc<Prims>);

impl std::fmt::Debug for PrimsHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("oneDNN activation")
    }
}

impl Prims {
    fn differentiate(
        &self,
        data: &FlexTensor,
        grad: &FlexTensor,
        format: Format,
    ) -> Result<FlexTensor> {
        let grad = arrange(grad, format)?;
        let mut dx = bridge::Out::new(&bridge::dims(data));
        let data_arg = if self.from_dst {
            DNNL_ARG_DST
        } else {
            DNNL_ARG_SRC
        };
        self.backward.execute(&[
            (data_arg, &self.md, bridge::read(data)),
            (DNNL_ARG_DIFF_DST, &self.md, bridge::read(&grad)),
            (DNNL_ARG_DIFF_SRC, &self.md, dx.ptr()),
        ])?;
        // SAFETY: the backward pass wrote it.
        Ok(unsafe { dx.written_in(format) })
    }
}

/// `activation(x)` through oneDNN, or `None` where `x` is not a burn-flex f32 tensor or oneDNN
/// cannot run it (the caller then takes burn's path).
pub fn apply<const D: usize>(activation: Eltwise, x: &Tensor<D>) -> Option<Tensor<D>> {
    let inputs: Inputs<1> = bridge::same_kind([bridge::input(x)?])?;
    let dims = x.dims().to_vec();
    // A primitive oneDNN cannot make is a fallback like any other: its reason is recorded.
    let prims = prims(activation, dims.iter().product())
        .map_err(|e| crate::kernels::counters::fell_back(&e))
        .ok()?;
    bridge::run(EltwiseBackward, inputs, |[x], training| {
        // The output keeps the input's order.
        let format = Format::of(x).unwrap_or(Format::Plain);
        let x = arrange(x, format)?;
        let mut y = bridge::Out::new(&dims);
        let primitive = if training {
            &prims.training
        } else {
            &prims.inference
        };
        primitive.execute(&[
            (DNNL_ARG_SRC, &prims.md, bridge::read(&x)),
            (DNNL_ARG_DST, &prims.md, y.ptr()),
        ])?;
        // SAFETY: the forward pass wrote it.
        let y = unsafe { y.written_in(format) };
        let data = if prims.from_dst { y.clone() } else { x };
        Ok((
            y,
            Some((Arc::new(PrimsHandle(prims.clone())), data, format)),
        ))
    })
    .map_err(|e| crate::kernels::counters::fell_back(&e))
    .ok()
}
