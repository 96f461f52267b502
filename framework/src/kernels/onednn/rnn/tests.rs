//! A recurrent layer's backward pass made to fail after its forward pass ran on oneDNN: the
//! gradients are those of oneDNN's own backward pass (burn's path, differentiated on the saved
//! arrays), and the failure is recorded.

use burn::module::{Module, ModuleVisitor, Param};
use burn::prelude::*;

use super::super::primitive::tests::FAIL;
use crate::kernels::{self, Kernels, counters};
use crate::{Block, Init, Recurrent};

/// Deterministic values in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(6364136223846793005) | 1;
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn tracked(dims: [usize; 3], seed: u64) -> Tensor<3> {
    let device = Device::flex().autodiff();
    let n = dims.iter().product();
    Tensor::<1>::from_floats(values(n, seed).as_slice(), &device)
        .reshape(dims)
        .require_grad()
}

fn host<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().try_to_vec::<f32>().unwrap()
}

/// Every parameter's gradient, in visiting order.
struct Grads<'g>(&'g burn::tensor::Gradients, Vec<Vec<f32>>);

impl ModuleVisitor for Grads<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        self.1.push(host(
            param.val().grad(self.0).expect("a parameter's gradient"),
        ));
    }
}

/// The gradients of the input, the initial states and the parameters of `sum(y · g) + sum(final · s)`, with
/// every oneDNN execution of the backward pass failing (`fail`) or not.
fn gradients(layer: &Recurrent, x: &Tensor<3>, states: &[Tensor<3>], fail: bool) -> Vec<Vec<f32>> {
    kernels::with_kernels(Kernels::OneDnn, || {
        let (y, finals) = layer.forward_state(x.clone(), Some(states.to_vec()));
        let g = |t: &Tensor<3>, seed| {
            let n = t.dims().iter().product();
            Tensor::<1>::from_floats(values(n, seed).as_slice(), &t.device()).reshape(t.dims())
        };
        let mut loss = (y.clone() * g(&y, 11)).sum();
        for f in &finals {
            loss = loss + (f.clone() * g(f, 12)).sum();
        }
        FAIL.with(|f| f.set(fail));
        let grads = loss.backward();
        FAIL.with(|f| f.set(false));
        let mut found = vec![host(x.grad(&grads).expect("the input's gradient"))];
        found.extend(
            states
                .iter()
                .map(|s| host(s.grad(&grads).expect("a state's"))),
        );
        let mut params = Grads(&grads, Vec::new());
        layer.visit(&mut params);
        found.extend(params.1);
        found
    })
}

#[test]
fn a_failing_backward_pass_differentiates_burns_path_instead() {
    let device = Device::flex().autodiff();
    let layers = [
        Recurrent::lstm(6).layers(2).bidirectional(true),
        Recurrent::gru(5).layers(2),
        Recurrent::rnn(4).relu().bidirectional(true),
    ];
    for layer in layers {
        let x = tracked([5, 3, 4], 1);
        let layer = layer
            .initialize(Init::Xavier, &device)
            .infer_shape(x.clone())
            .unwrap();
        let what = layer.to_string();
        let states: Vec<Tensor<3>> = layer
            .begin_state(3, &device)
            .iter()
            .enumerate()
            .map(|(k, s)| tracked(s.dims(), 2 + k as u64))
            .collect();
        let (ran, _) = counters::counts();
        let failed = gradients(&layer, &x, &states, true);
        let (after, reasons) = counters::counts();
        assert!(after > ran, "{what}: oneDNN ran no forward pass");
        assert!(
            reasons
                .iter()
                .any(|r| r.contains("made to fail by a test") && r.contains("backward")),
            "{what}: no fallback recorded: {reasons:?}"
        );
        let reference = gradients(&layer, &x, &states, false);
        for (i, (a, b)) in failed.iter().zip(&reference).enumerate() {
            let scale = b.iter().fold(0f32, |m, v| m.max(v.abs()));
            let diff = a.iter().zip(b).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
            assert!(scale > 0.0, "{what}: gradient {i} is all zeros");
            assert!(
                diff <= 1e-5 * scale,
                "{what}: gradient {i} differs by {diff:e} of {scale:e}"
            );
        }
    }
}
