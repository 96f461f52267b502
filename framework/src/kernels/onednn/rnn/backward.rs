//! A recurrent layer's backward pass on oneDNN: from the packed output's gradient (the
//! outputs', then the final states'), the gradients of the input, the initial states, and
//! each direction's weights and biases in PyTorch's layout. Where oneDNN fails to run it, burn's
//! path for the same layer ([`Reference`]) is differentiated instead, on the same saved arrays,
//! and the failure is recorded ([`super::super::fallback`]).

use std::sync::Arc;

use burn::backend::Flex;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops};
use burn::backend::flex::FlexTensor;
use burn::tensor::Tensor;

use super::super::bridge::{self, Ad, AdTensor};
use super::super::fallback;
use super::super::layout::Buffer;
use super::super::library::*;
use super::super::primitive::{Md, Result};
use super::params::{self, Shape};
use super::prepared::{Arrays, Training};
use crate::kernels::dispatch::{Gates, Reference};

/// The forward pass's workspace, which the backward pass reads.
pub struct Workspace(Vec<f32>);

impl Workspace {
    /// Room for `md`, which the forward pass writes.
    pub fn new(md: &Md) -> Workspace {
        Workspace(Vec::with_capacity(md.size().div_ceil(4)))
    }

    /// Where the forward pass writes it and the backward pass reads it (Rust never reads it).
    pub fn ptr(&mut self) -> *mut f32 {
        self.0.as_mut_ptr()
    }
}

/// What the backward pass reads.
#[derive(Clone)]
pub struct State {
    pub shape: Shape,
    pub prims: Arc<Training>,
    pub arrays: Arrays,
    /// The packed output: the outputs, the final `h` (and `c`).
    pub out: FlexTensor,
    pub workspace: Arc<Workspace>,
    /// The inputs as the layer gave them, and its own path, for a backward pass oneDNN fails.
    pub inputs: Vec<FlexTensor>,
    pub reference: Reference,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "oneDNN recurrent layer {:?}", self.shape)
    }
}

#[derive(Debug)]
pub struct RecurrentBackward;

impl<const N: usize> Backward<Flex, N> for RecurrentBackward {
    type State = State;

    fn backward(self, ops: Ops<State, N>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = bridge::dense(&grads.consume::<Flex>(&ops.node));
        let s = ops.state;
        let wanted: Vec<bool> = ops.parents.iter().map(Option::is_some).collect();
        let found = fallback::or_flex(
            || s.gradients(&grad),
            || s.reference_gradients(&grad, &wanted),
        );
        for (parent, grad) in ops.parents.into_iter().zip(found) {
            if let (Some(parent), Some(grad)) = (parent, grad) {
                grads.register::<Flex>(parent.id, grad);
            }
        }
    }
}

impl State {
    /// oneDNN's gradients of every input, in the operation's order (`x, h0, c0`, then each
    /// direction's `weight_ih, weight_hh, bias_ih, bias_hh`; `None` for what it does not have).
    fn gradients(&self, grad: &FlexTensor) -> Result<Vec<Option<FlexTensor>>> {
        let (s, p, a) = (&self.shape, &*self.prims, &self.arrays);
        let d = &p.d;
        let rows = s.batch * s.directions * s.hidden;
        let (out, dy) = (bridge::read(&self.out), bridge::read(grad));
        // SAFETY (offsets): within the packed output and its gradient, of the same dims.
        let at = |base: *mut f32, row: usize| unsafe { base.add(row * rows) };
        let mut wl = p.backward_weights[0].read(bridge::read(&a.weights_layer))?;
        let mut wi = p.backward_weights[1].read(bridge::read(&a.weights_iter))?;
        // oneDNN adds the weights' and the bias's gradients to what their arrays hold.
        let zeroed = |md: &Md| vec![0f32; md.size().div_ceil(4)];
        let mut dwl = zeroed(&p.diff_weights[0].from);
        let mut dwi = zeroed(&p.diff_weights[1].from);
        let mut db = vec![0f32; s.directions * s.bias_gates() * s.hidden];
        let mut dx = bridge::Out::new(&[s.steps, s.batch, s.input]);
        let state_dims = [s.directions, s.batch, s.hidden];
        let mut dh0 = bridge::Out::new(&state_dims);
        let mut dc0 = bridge::Out::new(&state_dims);
        let workspace = self.workspace.0.as_ptr().cast_mut();
        let mut args = vec![
            (DNNL_ARG_SRC_LAYER, &d.src_layer, bridge::read(&a.x)),
            (DNNL_ARG_SRC_ITER, &d.iter, bridge::read(&a.h0)),
            (DNNL_ARG_WEIGHTS_LAYER, &p.backward_weights[0].to, wl.ptr()),
            (DNNL_ARG_WEIGHTS_ITER, &p.backward_weights[1].to, wi.ptr()),
            (DNNL_ARG_BIAS, &d.bias, bridge::read(&a.bias)),
            (DNNL_ARG_DST_LAYER, &d.dst_layer, out),
            (DNNL_ARG_DST_ITER, &d.iter, at(out, s.steps)),
            (DNNL_ARG_WORKSPACE, &p.workspace, workspace),
            (DNNL_ARG_DIFF_DST_LAYER, &d.dst_layer, dy),
            (DNNL_ARG_DIFF_DST_ITER, &d.iter, at(dy, s.steps)),
            (DNNL_ARG_DIFF_SRC_LAYER, &d.src_layer, dx.ptr()),
            (DNNL_ARG_DIFF_SRC_ITER, &d.iter, dh0.ptr()),
            (
                DNNL_ARG_DIFF_WEIGHTS_LAYER,
                &p.diff_weights[0].from,
                dwl.as_mut_ptr(),
            ),
            (
                DNNL_ARG_DIFF_WEIGHTS_ITER,
                &p.diff_weights[1].from,
                dwi.as_mut_ptr(),
            ),
            (DNNL_ARG_DIFF_BIAS, &d.bias, db.as_mut_ptr()),
        ];
        if let Some(c0) = &a.c0 {
            args.push((DNNL_ARG_SRC_ITER_C, &d.iter, bridge::read(c0)));
            args.push((DNNL_ARG_DST_ITER_C, &d.iter, at(out, s.steps + 1)));
            args.push((DNNL_ARG_DIFF_DST_ITER_C, &d.iter, at(dy, s.steps + 1)));
            args.push((DNNL_ARG_DIFF_SRC_ITER_C, &d.iter, dc0.ptr()));
        }
        p.backward.execute(&args)?;
        let dwl = ours(&p.diff_weights[0], dwl)?;
        let dwi = ours(&p.diff_weights[1], dwi)?;
        let dwl = params::weight_grads(s, dwl, s.input);
        let dwi = params::weight_grads(s, dwi, s.hidden);
        let dbs = params::bias_grads(s, &db);
        // SAFETY: the backward pass wrote the input's and the initial states' gradients.
        let mut found = vec![
            Some(unsafe { dx.written() }),
            Some(unsafe { dh0.written() }),
        ];
        found.push(a.c0.is_some().then(|| unsafe { dc0.written() }));
        for ((wl, wi), (bi, bh)) in dwl.into_iter().zip(dwi).zip(dbs) {
            found.extend([Some(wl), Some(wi)]);
            found.extend([s.bias.then_some(bi), s.bias.then_some(bh)]);
        }
        Ok(found)
    }

    /// The same gradients from burn's path for the layer, differentiated on a graph of its own
    /// over the saved inputs; only those `wanted`.
    fn reference_gradients(&self, grad: &FlexTensor, wanted: &[bool]) -> Vec<Option<FlexTensor>> {
        let inputs = &self.inputs;
        let d = self.shape.directions;
        let x: Tensor<3> = graph(&inputs[0], wanted[0]);
        let mut states: Vec<Tensor<3>> = vec![graph(&inputs[1], wanted[1])];
        if self.shape.states() == 2 {
            states.push(graph(&inputs[2], wanted[2]));
        }
        // Direction k / 2's weight_ih (k even) or weight_hh, then its biases likewise.
        let at = |k: usize, bias: usize| 3 + 4 * (k / 2) + 2 * bias + k % 2;
        let weights: Vec<Tensor<2>> = (0..2 * d)
            .map(|k| graph(&inputs[at(k, 0)], wanted[at(k, 0)]))
            .collect();
        // A bias the layer does not have is a stand-in of no elements.
        let biases: Vec<Option<Tensor<1>>> = (0..2 * d)
            .map(|k| {
                let i = at(k, 1);
                (bridge::dims(&inputs[i])[0] > 0).then(|| graph(&inputs[i], wanted[i]))
            })
            .collect();
        let gates: Vec<Gates<'_>> = (0..d)
            .map(|k| Gates {
                input: &weights[2 * k],
                hidden: &weights[2 * k + 1],
                input_bias: biases[2 * k].as_ref(),
                hidden_bias: biases[2 * k + 1].as_ref(),
            })
            .collect();
        let (y, finals) = (self.reference)(&x, &states, &gates);
        let [_, n, width] = y.dims();
        let mut packed = vec![y];
        packed.extend(finals.into_iter().map(|f| f.reshape([1, n, width])));
        let g: Tensor<3> = graph(grad, false);
        let grads = (Tensor::cat(packed, 0) * g).sum().backward();
        let mut found = vec![grad_of(&x, &grads)];
        found.extend(states.iter().map(|s| grad_of(s, &grads)));
        if states.len() == 1 {
            found.push(None);
        }
        for k in 0..d {
            found.push(grad_of(&weights[2 * k], &grads));
            found.push(grad_of(&weights[2 * k + 1], &grads));
            found.push(biases[2 * k].as_ref().and_then(|b| grad_of(b, &grads)));
            found.push(biases[2 * k + 1].as_ref().and_then(|b| grad_of(b, &grads)));
        }
        found
            .into_iter()
            .zip(wanted)
            .map(|(g, &w)| g.filter(|_| w))
            .collect()
    }
}

/// A saved array on a graph of burn's autodiff, tracked or not.
fn graph<const D: usize>(t: &FlexTensor, tracked: bool) -> Tensor<D> {
    let t = Tensor::<D>::from_primitive::<Ad>(AdTensor::new(t.clone()));
    match tracked {
        true => t.require_grad(),
        false => t,
    }
}

/// `t`'s gradient as a burn-flex array, if it has one.
fn grad_of<const D: usize>(t: &Tensor<D>, grads: &burn::tensor::Gradients) -> Option<FlexTensor> {
    t.grad(grads)?.try_into_primitive::<Flex>().ok()
}

/// A weight gradient written in the backward pass's layout, in [`params::weights`]' array.
fn ours(arg: &super::params::Arg, written: Vec<f32>) -> Result<Vec<f32>> {
    let mut written = Buffer::Owned(written);
    match &arg.reorder {
        None => match written {
            Buffer::Owned(v) => Ok(v),
            Buffer::Borrowed(_) => unreachable!("owned above"),
        },
        Some(reorder) => {
            let n = arg.to.size().div_ceil(4);
            let mut copy = Vec::with_capacity(n);
            reorder.execute(&[
                (DNNL_ARG_FROM, &arg.from, written.ptr()),
                (DNNL_ARG_TO, &arg.to, copy.as_mut_ptr()),
            ])?;
            // SAFETY: the reorder wrote every element of the plain array.
            unsafe { copy.set_len(n) };
            Ok(copy)
        }
    }
}
