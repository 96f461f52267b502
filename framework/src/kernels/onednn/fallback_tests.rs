//! Every oneDNN backward pass, made to fail after its forward pass ran on oneDNN, gives the
//! gradients oneDNN's own backward pass gives (burn-flex's, computed from the same saved
//! arrays) and records why, where it used to panic.

use burn::prelude::*;
use burn::tensor::Gradients;

use super::super::primitive::tests::FAIL;
use crate::kernels::eltwise::Eltwise;
use crate::kernels::window::Window;
use crate::kernels::{self, Kernels, counters, dispatch};
use crate::precision::Precision;

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

fn tracked<const D: usize>(dims: [usize; D], seed: u64) -> Tensor<D> {
    let device = Device::flex().autodiff();
    let n = dims.iter().product();
    Tensor::<1>::from_floats(values(n, seed).as_slice(), &device)
        .reshape(dims)
        .require_grad()
}

fn host<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().try_to_vec::<f32>().unwrap()
}

/// The gradients of `sum(op(inputs) · g)` with respect to each input, with every oneDNN
/// execution of the backward pass failing (`fail`) or not.
fn gradients<const D: usize, const O: usize>(
    inputs: &[Tensor<D>],
    op: &dyn Fn(&[Tensor<D>]) -> Tensor<O>,
    fail: bool,
) -> Vec<Vec<f32>> {
    kernels::with_kernels(Kernels::OneDnn, || {
        let y = op(inputs);
        let g =
            Tensor::<1>::from_floats(values(y.shape().num_elements(), 11).as_slice(), &y.device());
        let loss = (y.flatten::<1>(0, O - 1) * g).sum();
        FAIL.with(|f| f.set(fail));
        let grads: Gradients = loss.backward();
        FAIL.with(|f| f.set(false));
        inputs
            .iter()
            .map(|x| host(x.grad(&grads).expect("a gradient")))
            .collect()
    })
}

/// oneDNN's forward pass, then its backward pass made to fail: the gradients equal those of
/// oneDNN's own backward pass, and the failure is recorded.
fn falls_back<const D: usize, const O: usize>(
    what: &str,
    inputs: &[Tensor<D>],
    op: &dyn Fn(&[Tensor<D>]) -> Tensor<O>,
) {
    falls_back_within(what, inputs, op, 1e-5);
}

/// The same, the gradients within `tolerance` of the largest.
fn falls_back_within<const D: usize, const O: usize>(
    what: &str,
    inputs: &[Tensor<D>],
    op: &dyn Fn(&[Tensor<D>]) -> Tensor<O>,
    tolerance: f32,
) {
    let (ran, _) = counters::counts();
    let failed = gradients(inputs, op, true);
    let (after, reasons) = counters::counts();
    assert!(after > ran, "{what}: oneDNN ran no forward pass");
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("made to fail by a test") && r.contains("backward")),
        "{what}: no fallback recorded: {reasons:?}"
    );
    let reference = gradients(inputs, op, false);
    for (i, (a, b)) in failed.iter().zip(&reference).enumerate() {
        let scale = b.iter().fold(0f32, |m, v| m.max(v.abs()));
        let diff = a.iter().zip(b).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(
            scale > 0.0,
            "{what}: gradient {i} is all zeros: the case tests nothing"
        );
        assert!(
            diff <= tolerance * scale,
            "{what}: gradient {i} differs by {diff:e} of {scale:e}"
        );
    }
}

fn window(kernel: [usize; 2], strides: [usize; 2], padding: [usize; 2]) -> Window {
    Window {
        kernel: kernel.to_vec(),
        strides: strides.to_vec(),
        padding: padding.to_vec(),
        dilation: vec![1, 1],
    }
}

fn dense_inputs() -> [Tensor<2>; 2] {
    [tracked([3, 7], 2), tracked([7, 5], 3)]
}

#[test]
fn a_failing_backward_pass_falls_back_to_flex_for_every_kernel() {
    let status = kernels::status();
    assert_eq!(
        status.kernels,
        Kernels::OneDnn,
        "oneDNN is needed: {}",
        status.detail
    );
    let activations = [
        Eltwise::Relu,
        Eltwise::Logistic,
        Eltwise::Tanh,
        Eltwise::SoftRelu,
        Eltwise::GeluErf,
    ];
    for act in activations {
        falls_back(&format!("{act}"), &[tracked([2, 3, 5, 4], 1)], &|t| {
            dispatch::activation(act, t[0].clone())
        });
        falls_back(&format!("Dense {act}"), &dense_inputs(), &|t| {
            dispatch::dense(&t[0], &t[1], None, Some(act), Precision::F32).expect("oneDNN's Dense")
        });
    }
    let conv = [tracked([2, 4, 7, 6], 4), tracked([6, 2, 3, 3], 5)];
    for act in [None, Some(Eltwise::Relu)] {
        falls_back(&format!("Conv2D groups 2 {act:?}"), &conv, &|t| {
            let w = window([3, 3], [2, 1], [1, 1]);
            dispatch::conv(&t[0], &t[1], None, 2, w, act, Precision::F32)
                .expect("oneDNN's convolution")
        });
    }
    // Under autocast, where oneDNN multiplies bf16: burn-flex's f32 gradients from the arrays
    // the bf16 products read (Dense keeps x and W in bf16), within bf16's rounding of oneDNN's
    // (whose products read the gradient in bf16 too). Elsewhere there is no bf16 path to fail.
    if status.bf16 {
        falls_back_within(
            "Dense bf16",
            &dense_inputs(),
            &|t| {
                dispatch::dense(&t[0], &t[1], None, Some(Eltwise::Relu), Precision::Bf16)
                    .expect("oneDNN's bf16 Dense")
            },
            2f32.powi(-6),
        );
        let with_bias = [
            tracked([2, 4, 7, 6], 15),
            tracked([6, 4, 3, 3], 16),
            tracked([6, 1, 1, 1], 17),
        ];
        falls_back_within(
            "Conv2D bf16 with a bias",
            &with_bias,
            &|t| {
                let b = t[2].clone().reshape([6]);
                let w = window([3, 3], [1, 1], [1, 1]);
                dispatch::conv(&t[0], &t[1], Some(&b), 1, w, None, Precision::Bf16)
                    .expect("oneDNN's bf16 convolution")
            },
            2f32.powi(-6),
        );
    }
    let conv1d = [tracked([2, 3, 9], 6), tracked([4, 3, 3], 7)];
    falls_back("Conv1D", &conv1d, &|t| {
        let w = Window {
            kernel: vec![3],
            strides: vec![1],
            padding: vec![1],
            dilation: vec![1],
        };
        dispatch::conv(&t[0], &t[1], None, 1, w, None, Precision::F32)
            .expect("oneDNN's convolution")
    });
    for max in [true, false] {
        falls_back(
            &format!("pooling, max {max}"),
            &[tracked([2, 3, 9, 7], 8)],
            &|t| {
                dispatch::pool(&t[0], max, window([3, 3], [2, 2], [1, 1]))
                    .expect("oneDNN's pooling")
            },
        );
    }
    // BatchNorm over the batch's statistics, and over given ones (the running statistics,
    // with the training flag off under autodiff): the input's gradient, then γ's and β's.
    let x = tracked([3, 4, 5, 5], 9);
    let (gamma, beta) = (tracked([4], 10), tracked([4], 12));
    let (mean, variance) = (tracked([4], 13) * 0.1, tracked([4], 14).abs() + 0.5);
    for given in [false, true] {
        let stats = given.then_some((&mean, &variance));
        falls_back(
            &format!("BatchNorm, given {given}"),
            std::slice::from_ref(&x),
            &|t| {
                dispatch::batch_norm(&t[0], &gamma, &beta, stats, 1e-5)
                    .expect("oneDNN's")
                    .0
            },
        );
        falls_back(
            &format!("BatchNorm γ, β, given {given}"),
            &[gamma.clone(), beta.clone()],
            &|t| {
                dispatch::batch_norm(&x, &t[0], &t[1], stats, 1e-5)
                    .expect("oneDNN's")
                    .0
            },
        );
    }
    // LayerNorm with and without β, then the softmax (attention's, over the last axis).
    let x = tracked([3, 4, 9], 18);
    let (gamma, beta) = (tracked([9], 19), tracked([9], 20));
    falls_back("LayerNorm", std::slice::from_ref(&x), &|t| {
        dispatch::layer_norm(&t[0], &gamma, Some(&beta), 1e-5).expect("oneDNN's")
    });
    falls_back("LayerNorm γ, β", &[gamma.clone(), beta.clone()], &|t| {
        dispatch::layer_norm(&x, &t[0], Some(&t[1]), 1e-5).expect("oneDNN's")
    });
    falls_back("LayerNorm without β", std::slice::from_ref(&x), &|t| {
        dispatch::layer_norm(&t[0], &gamma, None, 0.1).expect("oneDNN's")
    });
    falls_back("softmax", &[tracked([2, 3, 11], 21)], &|t| {
        dispatch::softmax(t[0].clone())
    });
}
