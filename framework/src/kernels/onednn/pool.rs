//! Max and average pooling on oneDNN, forward and backward.

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
use crate::kernels::window::Window;

/// Which pooling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pooling {
    Max,
    /// The padding's zeros counted in the mean (Gluon's and PyTorch's default).
    AvgIncludePad,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Config {
    input: Vec<usize>,
    output: Vec<usize>,
    kind: Pooling,
    window: Window,
    /// The input's order in memory, which the output and the gradients keep.
    format: Format,
}

impl Config {
    fn alg(&self) -> dnnl_alg_kind_t {
        match self.kind {
            Pooling::Max => dnnl_pooling_max,
            Pooling::AvgIncludePad => dnnl_pooling_avg_include_padding,
        }
    }

    fn forward(&self, src: &Md, dst: &Md, training: bool) -> Result<Primitive> {
        let w = &self.window;
        let prop = forward_prop(training);
        let right = w.padding_right(&self.input[2..], &self.output[2..]);
        Primitive::describe("a pooling", &Attr::none()?, None, |api, desc| {
            // SAFETY: valid out-pointer, descriptors and dimension arrays.
            unsafe {
                api.dnnl_pooling_v2_forward_desc_init(
                    desc,
                    prop,
                    self.alg(),
                    &src.0,
                    &dst.0,
                    w.strides().as_ptr().cast_mut(),
                    w.kernel().as_ptr().cast_mut(),
                    w.dilation().as_ptr().cast_mut(),
                    w.padding_left().as_ptr().cast_mut(),
                    right.as_ptr().cast_mut(),
                )
            }
        })
    }
}

struct Prims {
    src: Md,
    dst: Md,
    inference: Primitive,
    training: Primitive,
    backward: Primitive,
    /// Where max pooling keeps the position of each maximum for its backward pass.
    workspace: Option<Md>,
}

fn prims(config: &Config) -> Result<Arc<Prims>> {
    bridge::cached(format!("pool {config:?}"), || {
        let src = config.format.md(&config.input)?;
        let dst = config.format.md(&config.output)?;
        let training = config.forward(&src, &dst, true)?;
        let w = &config.window;
        let right = w.padding_right(&config.input[2..], &config.output[2..]);
        let what = "a pooling's backward pass";
        let backward = Primitive::describe(what, &Attr::none()?, Some(&training), |api, desc| {
            // SAFETY: valid out-pointer, descriptors and dimension arrays.
            unsafe {
                api.dnnl_pooling_v2_backward_desc_init(
                    desc,
                    config.alg(),
                    &src.0,
                    &dst.0,
                    w.strides().as_ptr().cast_mut(),
                    w.kernel().as_ptr().cast_mut(),
                    w.dilation().as_ptr().cast_mut(),
                    w.padding_left().as_ptr().cast_mut(),
                    right.as_ptr().cast_mut(),
                )
            }
        })?;
        let workspace = (config.kind == Pooling::Max).then(|| training.md(dnnl_query_workspace_md));
        Ok(Prims {
            inference: config.forward(&src, &dst, false)?,
            training,
            backward,
            workspace,
            src,
            dst,
        })
    })
}

#[derive(Clone)]
struct State {
    prims: Arc<Prims>,
    workspace: Arc<Vec<f32>>,
    input: Vec<usize>,
    format: Format,
    /// What burn-flex's gradient needs, where oneDNN's fails: the window, and for max pooling
    /// the input, to find the maxima again.
    window: Window,
    max_of: Option<FlexTensor>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("oneDNN pooling")
    }
}

#[derive(Debug)]
struct PoolBackward;

impl Backward<Flex, 1> for PoolBackward {
    type State = State;

    fn backward(self, ops: Ops<State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [parent] = ops.parents;
        let s = ops.state;
        let grad = grads.consume::<Flex>(&ops.node);
        let Some(parent) = parent else { return };
        let p = &s.prims;
        let dx = fallback::or_flex(
            || {
                let grad = arrange(&grad, s.format)?;
                let mut dx = bridge::Out::new(&s.input);
                let mut args = vec![
                    (DNNL_ARG_DIFF_DST, &p.dst, bridge::read(&grad)),
                    (DNNL_ARG_DIFF_SRC, &p.src, dx.ptr()),
                ];
                if let Some(ws) = &p.workspace {
                    args.push((DNNL_ARG_WORKSPACE, ws, s.workspace.as_ptr() as *mut f32));
                }
                p.backward.execute(&args)?;
                // SAFETY: the backward pass wrote it.
                Ok(unsafe { dx.written_in(s.format) })
            },
            || {
                // Average pooling reads only the input's shape.
                let x = s.max_of.clone().unwrap_or_else(|| bridge::output(&s.input));
                fallback::pool(&x, s.max_of.is_some(), &s.window, &grad)
            },
        );
        grads.register::<Flex>(parent.id, dx);
    }
}

/// Pooling of `x` (`[batch, channels, spatial…]`) through oneDNN; `None` where `x` is not a
/// burn-flex f32 tensor or oneDNN cannot run it.
pub fn pool<const D: usize>(x: &Tensor<D>, kind: Pooling, window: Window) -> Option<Tensor<D>> {
    // One or two spatial axes: burn-flex's gradients, the backward pass's fallback, have no more.
    if !(1..=2).contains(&window.kernel.len()) {
        return None;
    }
    let input = x.dims().to_vec();
    let mut output = input[..2].to_vec();
    output.extend(window.output(&input[2..])?);
    // The order is the input's, known once its array is.
    let config = |format| Config {
        input: input.clone(),
        output: output.clone(),
        kind,
        window: window.clone(),
        format,
    };
    let inputs: Inputs<1> = bridge::same_kind([bridge::input(x)?])?;
    bridge::run(PoolBackward, inputs, |[x], training| {
        // The output keeps the input's order.
        let format = Format::of(x).unwrap_or(Format::Plain);
        let p = prims(&config(format))?;
        let x = arrange(x, format)?;
        let mut y = bridge::Out::new(&output);
        if !training {
            p.inference.execute(&[
                (DNNL_ARG_SRC, &p.src, bridge::read(&x)),
                (DNNL_ARG_DST, &p.dst, y.ptr()),
            ])?;
            // SAFETY: the forward pass wrote it.
            return Ok((unsafe { y.written_in(format) }, None));
        }
        let mut workspace = vec![0f32; p.workspace.as_ref().map_or(0, |w| w.size().div_ceil(4))];
        let mut args = vec![
            (DNNL_ARG_SRC, &p.src, bridge::read(&x)),
            (DNNL_ARG_DST, &p.dst, y.ptr()),
        ];
        if let Some(ws) = &p.workspace {
            args.push((DNNL_ARG_WORKSPACE, ws, workspace.as_mut_ptr()));
        }
        p.training.execute(&args)?;
        Ok((
            // SAFETY: the forward pass wrote it.
            unsafe { y.written_in(format) },
            Some(State {
                prims: p.clone(),
                workspace: Arc::new(workspace),
                input: input.clone(),
                format,
                window: window.clone(),
                max_of: (kind == Pooling::Max).then_some(x),
            }),
        ))
    })
    .map_err(|e| crate::kernels::counters::fell_back(&e))
    .ok()
}
