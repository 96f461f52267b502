//! One layer's pass over a whole sequence, in each of its directions: ember's recurrent kernel
//! (oneDNN's RNN primitives, on burn-flex in f32, where the CPU kernels are chosen) takes the
//! whole sequence at once; burn's path, a step at a time, runs everything else, and is the
//! kernel's stand-in for a backward pass it fails to run.

use std::sync::Arc;

use burn::module::Param;
use burn::tensor::Tensor;

use super::mode::Mode;
use super::weights::Cell;
use crate::kernels::{self, Gates, Recurrence, Reference};

impl Mode {
    /// The kernels' name for the recurrence.
    fn recurrence(self) -> Recurrence {
        match self {
            Mode::RnnTanh => Recurrence::Tanh,
            Mode::RnnRelu => Recurrence::Relu,
            Mode::Lstm => Recurrence::Lstm,
            Mode::Gru => Recurrence::Gru,
        }
    }
}

/// The layer of `cells` (one per direction: forward, then reverse) over `x [time, batch, in]`
/// from `states` (`[h]`, or `[h, c]` for the LSTM, each `[directions, batch, hidden]`): its
/// outputs `[time, batch, directions·hidden]` and its final states, shaped as `states`.
pub(super) fn layer(
    mode: Mode,
    cells: &[&Cell],
    x: Tensor<3>,
    states: Vec<Tensor<3>>,
) -> (Tensor<3>, Vec<Tensor<3>>) {
    let values: Vec<_> = cells
        .iter()
        .map(|c| {
            let bias = |b: &Option<Param<Tensor<1>>>| b.as_ref().map(Param::val);
            (
                c.weight_ih.val(),
                c.weight_hh.val(),
                bias(&c.bias_ih),
                bias(&c.bias_hh),
            )
        })
        .collect();
    let gates: Vec<Gates<'_>> = values
        .iter()
        .map(|(wi, wh, bi, bh)| Gates {
            input: wi,
            hidden: wh,
            input_bias: bi.as_ref(),
            hidden_bias: bh.as_ref(),
        })
        .collect();
    let reference: Reference =
        Arc::new(move |x, states, gates| burn_layer(mode, x.clone(), states, gates));
    kernels::recurrent(mode.recurrence(), &x, &states, &gates, &reference)
        .unwrap_or_else(|| burn_layer(mode, x, &states, &gates))
}

/// [`layer`] on burn's path: each direction a step at a time.
fn burn_layer(
    mode: Mode,
    x: Tensor<3>,
    states: &[Tensor<3>],
    gates: &[Gates<'_>],
) -> (Tensor<3>, Vec<Tensor<3>>) {
    let at = |state: usize, k: usize| states[state].clone().narrow(0, k, 1).squeeze_dim(0);
    let (mut outputs, mut hs, mut cs) = (Vec::new(), Vec::new(), Vec::new());
    for (k, g) in gates.iter().enumerate() {
        let c0 = (mode == Mode::Lstm).then(|| at(1, k));
        let (y, h, c) = direction(mode, g, x.clone(), at(0, k), c0, k == 1);
        outputs.push(y);
        hs.push(h);
        cs.extend(c);
    }
    let mut finals = vec![Tensor::stack(hs, 0)];
    if !cs.is_empty() {
        finals.push(Tensor::stack(cs, 0));
    }
    (Tensor::cat(outputs, 2), finals)
}

/// One direction over `[time, batch, in]`: its outputs `[time, batch, hidden]`, and its last
/// `h` (and `c`).
fn direction(
    mode: Mode,
    g: &Gates<'_>,
    x: Tensor<3>,
    h: Tensor<2>,
    c: Option<Tensor<2>>,
    reverse: bool,
) -> (Tensor<3>, Tensor<2>, Option<Tensor<2>>) {
    let [time, batch, features] = x.dims();
    let [width, _] = g.hidden.dims();
    // `x·Wᵀ + b` for PyTorch's `W [out, in]`.
    let product = |x: Tensor<2>, w: &Tensor<2>, b: Option<&Tensor<1>>| {
        burn::tensor::module::linear(x, w.clone().transpose(), b.cloned())
    };
    // The input's part for every step at once: one product, not one a step.
    let xw = product(x.reshape([time * batch, features]), g.input, g.input_bias)
        .reshape([time, batch, width]);
    let (mut h, mut c) = (h, c);
    let mut outputs: Vec<Option<Tensor<2>>> = vec![None; time];
    let steps: Box<dyn Iterator<Item = usize>> = match reverse {
        true => Box::new((0..time).rev()),
        false => Box::new(0..time),
    };
    for t in steps {
        let xt = xw.clone().narrow(0, t, 1).reshape([batch, width]);
        let hw = product(h.clone(), g.hidden, g.hidden_bias);
        (h, c) = mode.step(xt, hw, h, c);
        outputs[t] = Some(h.clone());
    }
    let outputs = outputs.into_iter().map(|o| o.expect("every step ran"));
    (Tensor::stack(outputs.collect(), 0), h, c)
}
