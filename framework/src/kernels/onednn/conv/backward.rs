//! A convolution's backward pass: the data gradient and the weight and bias gradients on
//! oneDNN, each falling back to burn-flex's where oneDNN fails ([`super::super::fallback`]).

use std::sync::Arc;

use burn::backend::Flex;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops};
use burn::backend::flex::FlexTensor;

use super::super::bridge;
use super::super::eltwise::{self, FromOutput};
use super::super::fallback;
use super::super::format::Format;
use super::super::layout::Pass;
use super::super::library::*;
use super::super::matmul::ColumnSums;
use super::super::reorder::arrange;
use crate::kernels::window::Window;

/// The passes of a convolution that is differentiated.
pub(super) struct Training {
    pub(super) forward: Pass,
    /// The output's order (and so its gradient's).
    pub(super) output: Format,
    pub(super) data: Pass,
    pub(super) weights: Pass,
    /// What sums the bias's gradient.
    pub(super) bias_sum: BiasSum,
    /// The activation's backward pass, where it is fused into the forward pass.
    pub(super) activation: Option<Arc<FromOutput>>,
}

/// What sums a convolution's bias gradient, always in f32.
pub(super) enum BiasSum {
    /// Nothing: the convolution has no bias.
    NoBias,
    /// The weight-gradient pass, in f32 (it reads the output's gradient in f32).
    WeightPass,
    /// Under autocast, whose weight-gradient pass reads the gradient in bf16: a product over the
    /// f32 gradient's rows of channels, where it is channels last (boxed: its descriptors are
    /// kilobytes).
    Rows(Box<ColumnSums>),
    /// burn-flex, where it is not.
    Flex,
}

/// `Training` in the graph's state.
#[derive(Clone)]
pub(super) struct State {
    pub(super) prims: Arc<Training>,
    pub(super) x: FlexTensor,
    pub(super) w: FlexTensor,
    /// The input's order (its gradient's too).
    pub(super) src: Format,
    pub(super) has_bias: bool,
    /// What burn-flex's gradients need, where oneDNN's fail ([`fallback::Conv`]).
    pub(super) window: Window,
    pub(super) groups: usize,
    /// The output, where the activation's backward pass reads it.
    pub(super) y: Option<FlexTensor>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("oneDNN convolution")
    }
}

#[derive(Debug)]
pub(super) struct ConvBackward;

impl Backward<Flex, 3> for ConvBackward {
    type State = State;

    fn backward(self, ops: Ops<State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [px, pw, pb] = ops.parents;
        let grad = grads.consume::<Flex>(&ops.node);
        let s = ops.state;
        let p = &s.prims;
        let grad =
            eltwise::before_activation(p.activation.as_deref(), s.y.as_ref(), &grad, p.output);
        let flex = fallback::Conv {
            x: &s.x,
            w: &s.w,
            window: &s.window,
            groups: s.groups,
        };
        if let Some(px) = px {
            let dx = fallback::or_flex(
                || {
                    let grad = arrange(&grad, p.output)?;
                    let mut dx = bridge::Out::new(&bridge::dims(&s.x));
                    p.data.run(
                        &[
                            (DNNL_ARG_DIFF_DST, bridge::read(&grad)),
                            (DNNL_ARG_WEIGHTS, bridge::read(&s.w)),
                        ],
                        &[(DNNL_ARG_DIFF_SRC, dx.ptr())],
                    )?;
                    // SAFETY: the data-gradient pass wrote it.
                    Ok(unsafe { dx.written_in(s.src) })
                },
                || flex.x(&grad),
            );
            grads.register::<Flex>(px.id, dx);
        }
        if pw.is_none() && pb.is_none() {
            return;
        }
        let (dw, db) = fallback::or_flex(
            || {
                let grad = arrange(&grad, p.output)?;
                let mut dw = bridge::Out::new(&bridge::dims(&s.w));
                let mut db = bridge::Out::new(&bridge::dims(&s.w)[..1]);
                let mut outputs = vec![(DNNL_ARG_DIFF_WEIGHTS, dw.ptr())];
                if matches!(p.bias_sum, BiasSum::WeightPass) {
                    outputs.push((DNNL_ARG_DIFF_BIAS, db.ptr()));
                }
                p.weights.run(
                    &[
                        (DNNL_ARG_SRC, bridge::read(&s.x)),
                        (DNNL_ARG_DIFF_DST, bridge::read(&grad)),
                    ],
                    &outputs,
                )?;
                // SAFETY: the weight-gradient pass wrote both (the bias's where it writes it;
                // where there is none, the bias has no parent).
                let db = match (pb.is_some(), &p.bias_sum) {
                    (false, _) | (true, BiasSum::NoBias) => None,
                    (true, BiasSum::WeightPass) => Some(unsafe { db.written() }),
                    (true, BiasSum::Rows(sums)) => Some(sums.run(&grad)?),
                    (true, BiasSum::Flex) => Some(flex.b(&grad)),
                };
                Ok((unsafe { dw.written() }, db))
            },
            || (flex.w(&grad), s.has_bias.then(|| flex.b(&grad))),
        );
        if let Some(pw) = pw {
            grads.register::<Flex>(pw.id, dw);
        }
        if let (Some(pb), Some(db)) = (pb, db) {
            grads.register::<Flex>(pb.id, db);
        }
    }
}
