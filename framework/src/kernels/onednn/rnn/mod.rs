//! Recurrent layers on oneDNN's RNN primitives, one layer over the whole sequence at once (as
//! PyTorch's CPU LSTM runs): Elman's RNN (`vanilla_rnn`, tanh or relu), the LSTM, and the GRU
//! as oneDNN's linear-before-reset GRU (PyTorch's: the reset applied after the hidden
//! product); one direction (`unidirectional_left2right`) or two (`bidirectional_concat`).
//! Training runs `forward_training`, which keeps a workspace for the backward pass; that pass
//! gives the gradients of the input, the initial states, the weights and the biases. In f32
//! only: burn's path runs every other precision.
//!
//! One primitive runs one layer, both its directions: a stack of layers is a call per layer,
//! as dropout between them and a first layer's own input size make it in general (oneDNN
//! stacks layers only of equal input and output sizes).
//!
//! The layer's outputs, its final `h` and (LSTM) `c` are one burn tensor `[time + states,
//! batch, directions·hidden]` of the autodiff graph, which [`recurrent`] cuts into its three
//! parts: a custom operation of burn's autodiff has one output. oneDNN writes `h` and `c`
//! (`[1, directions, batch, hidden]`, `ldnc`) into the rows after the outputs, each `batch ×
//! directions·hidden` long.
//!
//! The arrays: `x [time, batch, in]` (`tnc`, a batch-first input copied so), the states as
//! they come, PyTorch's weights rearranged once ([`params`]) and reordered into the layouts
//! each pass chooses (padded rows for the forward pass, PyTorch's own for the backward pass).

mod backward;
mod describe;
mod params;
mod prepared;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use burn::backend::flex::FlexTensor;
use burn::tensor::Tensor;

use backward::{RecurrentBackward, State, Workspace};
use describe::{Descs, backward_desc, forward_desc, make};
use params::{Arg, Shape};
use prepared::{Arrays, Training};

use super::bridge::{self, Input, Inputs};
use super::library::*;
use super::primitive::{Md, Primitive, Result, forward_prop};
use crate::kernels::dispatch::{Gates, Recurrence, Reference};

/// The forward pass of a layer that is not differentiated.
struct Inference {
    d: Descs,
    forward: Primitive,
    weights: [Arg; 2],
}

const WEIGHTS: [(dnnl_query_t, i32); 2] = [(dnnl_query_weights_md, 0), (dnnl_query_weights_md, 1)];

fn any_weights(s: &Shape) -> Result<[Md; 2]> {
    Ok([
        Md::any(&s.weights_dims(s.input))?,
        Md::any(&s.weights_dims(s.hidden))?,
    ])
}

fn inference(s: &Shape) -> Result<Arc<Inference>> {
    bridge::cached(format!("rnn infer {s:?}"), || {
        let d = Descs::new(s)?;
        let [wl, wi] = any_weights(s)?;
        let (forward, _, chosen) = make(
            "a recurrent layer",
            std::ptr::null(),
            &WEIGHTS,
            |api, desc| forward_desc(api, desc, s, forward_prop(false), &d, [&wl, &wi]),
        )?;
        let weights = [
            Arg::new(&d.weights_layer, &chosen[0])?,
            Arg::new(&d.weights_iter, &chosen[1])?,
        ];
        Ok(Inference {
            d,
            forward,
            weights,
        })
    })
}

fn training(s: &Shape) -> Result<Arc<Training>> {
    bridge::cached(format!("rnn train {s:?}"), || {
        let d = Descs::new(s)?;
        let [wl, wi] = any_weights(s)?;
        let mut queries = WEIGHTS.to_vec();
        queries.push((dnnl_query_workspace_md, 0));
        let (forward, hint, chosen) = make(
            "a recurrent layer",
            std::ptr::null(),
            &queries,
            |api, desc| forward_desc(api, desc, s, forward_prop(true), &d, [&wl, &wi]),
        )?;
        let queries = [
            WEIGHTS[0],
            WEIGHTS[1],
            (dnnl_query_diff_weights_md, 0),
            (dnnl_query_diff_weights_md, 1),
        ];
        let (backward, _, back) = make(
            "a recurrent layer's backward pass",
            hint,
            &queries,
            |api, desc| backward_desc(api, desc, s, &d, [&wl, &wi, &wl, &wi]),
        )?;
        Ok(Training {
            weights: [
                Arg::new(&d.weights_layer, &chosen[0])?,
                Arg::new(&d.weights_iter, &chosen[1])?,
            ],
            workspace: chosen[2].clone(),
            backward_weights: [
                Arg::new(&d.weights_layer, &back[0])?,
                Arg::new(&d.weights_iter, &back[1])?,
            ],
            diff_weights: [
                Arg::new(&back[2], &d.weights_layer)?,
                Arg::new(&back[3], &d.weights_iter)?,
            ],
            d,
            forward,
            backward,
        })
    })
}

/// Runs a forward pass of `forward` with `weights` on `a` into the packed output `out`
/// (`[time + states, batch, directions·hidden]`), keeping its `workspace` where it trains.
fn execute_forward(
    s: &Shape,
    d: &Descs,
    forward: &Primitive,
    weights: &[Arg; 2],
    a: &Arrays,
    out: *mut f32,
    workspace: Option<(&Md, *mut f32)>,
) -> Result<()> {
    let mut wl = weights[0].read(bridge::read(&a.weights_layer))?;
    let mut wi = weights[1].read(bridge::read(&a.weights_iter))?;
    let rows = s.batch * s.directions * s.hidden;
    let mut args = vec![
        (DNNL_ARG_SRC_LAYER, &d.src_layer, bridge::read(&a.x)),
        (DNNL_ARG_SRC_ITER, &d.iter, bridge::read(&a.h0)),
        (DNNL_ARG_WEIGHTS_LAYER, &weights[0].to, wl.ptr()),
        (DNNL_ARG_WEIGHTS_ITER, &weights[1].to, wi.ptr()),
        (DNNL_ARG_BIAS, &d.bias, bridge::read(&a.bias)),
        (DNNL_ARG_DST_LAYER, &d.dst_layer, out),
        // SAFETY (both): within the packed output, after the outputs' rows.
        (DNNL_ARG_DST_ITER, &d.iter, unsafe {
            out.add(s.steps * rows)
        }),
    ];
    if let Some(c0) = &a.c0 {
        args.push((DNNL_ARG_SRC_ITER_C, &d.iter, bridge::read(c0)));
        args.push((DNNL_ARG_DST_ITER_C, &d.iter, unsafe {
            out.add((s.steps + 1) * rows)
        }));
    }
    if let Some((md, ptr)) = workspace {
        args.push((DNNL_ARG_WORKSPACE, md, ptr));
    }
    forward.execute(&args)
}

/// One layer of `recurrence` through oneDNN: its outputs `[time, batch, directions·hidden]`
/// and final states (`[h]` or `[h, c]`, each `[directions, batch, hidden]`); `None` where the
/// tensors are not burn-flex f32 tensors of one kind, or oneDNN cannot run it (the reason is
/// recorded).
pub fn recurrent(
    recurrence: Recurrence,
    x: &Tensor<3>,
    states: &[Tensor<3>],
    directions: &[Gates<'_>],
    reference: &Reference,
) -> Option<(Tensor<3>, Vec<Tensor<3>>)> {
    let [steps, batch, input] = x.dims();
    let [rows, hidden] = directions.first()?.hidden.dims();
    let shape = Shape {
        recurrence,
        steps,
        batch,
        input,
        hidden,
        directions: directions.len(),
        bias: directions
            .iter()
            .any(|g| g.input_bias.is_some() || g.hidden_bias.is_some()),
    };
    if rows != shape.gates() * hidden || states.len() != shape.states() {
        return None;
    }
    let x_in = bridge::input(x)?;
    // What the layer has not (a GRU's `c0`, biases): an untracked stand-in, never read.
    let stand_in = |t: Option<&Tensor<1>>| bridge::bias_or_stand_in(t, &x_in);
    let h0 = bridge::input(&states[0])?;
    let c0 = match states.get(1) {
        Some(c) => bridge::input(c)?,
        None => stand_in(None)?,
    };
    let mut params = Vec::with_capacity(4 * directions.len());
    for g in directions {
        params.push(bridge::input(g.input)?);
        params.push(bridge::input(g.hidden)?);
        params.push(stand_in(g.input_bias)?);
        params.push(stand_in(g.hidden_bias)?);
    }
    let mut inputs = vec![x_in, h0, c0];
    inputs.extend(params);
    let packed = match shape.directions {
        1 => run::<7>(shape, inputs, reference),
        2 => run::<11>(shape, inputs, reference),
        _ => return None,
    }?;
    let (t, d) = (shape.steps, shape.directions);
    let state = |k: usize| {
        packed
            .clone()
            .narrow(0, t + k, 1)
            .reshape([d, batch, hidden])
    };
    let finals = (0..shape.states()).map(state).collect();
    Some((packed.narrow(0, 0, t), finals))
}

/// The operation on its `N` inputs (`x, h0, c0, then each direction's weight_ih, weight_hh,
/// bias_ih, bias_hh`), its output packed.
fn run<const N: usize>(s: Shape, inputs: Vec<Input>, reference: &Reference) -> Option<Tensor<3>> {
    let inputs: [Input; N] = inputs.try_into().ok()?;
    let inputs: Inputs<N> = bridge::same_kind(inputs)?;
    let op = RecurrentBackward;
    bridge::run(op, inputs, |a: &[FlexTensor; N], tracked| {
        let arrays = Arrays::new(&s, a);
        let packed = [s.steps + s.states(), s.batch, s.directions * s.hidden];
        let mut out = bridge::Out::new(&packed);
        if !tracked {
            let p = inference(&s)?;
            execute_forward(&s, &p.d, &p.forward, &p.weights, &arrays, out.ptr(), None)?;
            // SAFETY: the primitive wrote the outputs and every state.
            return Ok((unsafe { out.written() }, None));
        }
        let p = training(&s)?;
        let mut workspace = Workspace::new(&p.workspace);
        execute_forward(
            &s,
            &p.d,
            &p.forward,
            &p.weights,
            &arrays,
            out.ptr(),
            Some((&p.workspace, workspace.ptr())),
        )?;
        // SAFETY: as above.
        let out = unsafe { out.written() };
        let state = State {
            shape: s,
            prims: p,
            arrays,
            out: out.clone(),
            workspace: Arc::new(workspace),
            inputs: a.to_vec(),
            reference: reference.clone(),
        };
        Ok((out, Some(state)))
    })
    .map_err(|e| crate::kernels::counters::fell_back(&e))
    .ok()
}
