//! Softmax over the last axis on oneDNN, forward and backward (from the output).
//!
//! burn-flex runs burn's composite instead: a maximum, a subtraction, an exponential, a sum and
//! a division, each a pass over the whole input, and as many again backward. Attention's
//! weights are such a softmax over `[batch, heads, queries, keys]`, in every layer.

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
use super::primitive::{Attr, Md, Primitive, Result, forward_prop};
use super::reorder::arrange;

struct Prims {
    /// `[rows, n]`: the softmax runs along the second axis.
    md: Md,
    training: Primitive,
    inference: Primitive,
    backward: Primitive,
}

fn forward(md: &Md, training: bool) -> Result<Primitive> {
    let prop = forward_prop(training);
    Primitive::describe("a softmax", &Attr::none()?, None, |api, desc| {
        // SAFETY: valid out-pointer and descriptors.
        unsafe { api.dnnl_softmax_forward_desc_init(desc, prop, &md.0, 1) }
    })
}

fn prims(rows: usize, n: usize) -> Result<Arc<Prims>> {
    bridge::cached(format!("softmax {rows}x{n}"), || {
        let md = Md::plain(&[rows, n])?;
        let training = forward(&md, true)?;
        let what = "a softmax's backward pass";
        let backward = Primitive::describe(what, &Attr::none()?, Some(&training), |api, desc| {
            // SAFETY: valid out-pointer and descriptors.
            unsafe { api.dnnl_softmax_backward_desc_init(desc, &md.0, &md.0, 1) }
        })?;
        Ok(Prims {
            inference: forward(&md, false)?,
            training,
            backward,
            md,
        })
    })
}

/// The primitives and the output, which the backward pass reads.
#[derive(Clone)]
struct State(Arc<Prims>, FlexTensor);

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("oneDNN softmax")
    }
}

#[derive(Debug)]
struct SoftmaxBackward;

impl Backward<Flex, 1> for SoftmaxBackward {
    type State = State;

    fn backward(self, ops: Ops<State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [parent] = ops.parents;
        let grad = grads.consume::<Flex>(&ops.node);
        let Some(parent) = parent else {
            return;
        };
        let State(p, y) = ops.state;
        let dx = fallback::or_flex(
            || {
                let grad = arrange(&grad, Format::Plain)?;
                let mut dx = bridge::Out::new(&bridge::dims(&y));
                p.backward.execute(&[
                    (DNNL_ARG_DST, &p.md, bridge::read(&y)),
                    (DNNL_ARG_DIFF_DST, &p.md, bridge::read(&grad)),
                    (DNNL_ARG_DIFF_SRC, &p.md, dx.ptr()),
                ])?;
                // SAFETY: the backward pass wrote it.
                Ok(unsafe { dx.written() })
            },
            || fallback::softmax(&y, &grad),
        );
        grads.register::<Flex>(parent.id, dx);
    }
}

/// `softmax(x, D − 1)` through oneDNN, or `None` where `x` is not a burn-flex f32 tensor or
/// oneDNN cannot run it (the caller then takes burn's path).
pub fn softmax<const D: usize>(x: &Tensor<D>) -> Option<Tensor<D>> {
    let dims = x.dims().to_vec();
    let n = *dims.last()?;
    let rows = dims[..D - 1].iter().product::<usize>();
    if rows == 0 || n == 0 {
        return None;
    }
    let inputs: Inputs<1> = bridge::same_kind([bridge::input(x)?])?;
    let prims = prims(rows, n)
        .map_err(|e| crate::kernels::counters::fell_back(&e))
        .ok()?;
    bridge::run(SoftmaxBackward, inputs, |[x], training| {
        let x = arrange(x, Format::Plain)?;
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
        let y = unsafe { y.written() };
        Ok((y.clone(), training.then(|| State(prims.clone(), y))))
    })
    .map_err(|e| crate::kernels::counters::fell_back(&e))
    .ok()
}
