//! ember's layers under `ember::autocast(Precision::Bf16)` against PyTorch's
//! `torch.autocast("cpu", dtype=torch.bfloat16)`: outputs, and the gradients of the input and
//! of the parameters, which stay f32. The reference values are printed by
//! `tests/reference/torch_autocast.py` into `tests/reference/torch_autocast.out.rs`, from the
//! formulas of tests/layers.rs, under autocast and in float32.
//!
//! Both round the input and the weights to bf16 and round each product to bf16; PyTorch also
//! rounds the bias and the biased output, which ember adds in f32. So they agree to bf16's
//! rounding, not f32's: within two bf16 steps (2⁻⁷ of the largest value each) of each other,
//! while a layer that stayed in f32 would be within 1e-5 of the float32 values. The bias's
//! gradient, which PyTorch sums in bf16, is f32's in ember.

// PyTorch's bias gradients under autocast, summed in bf16, are printed with the rest; ember's
// are f32's, which the tests compare against.
#![allow(dead_code)]

use ember::{Precision, autocast};

use super::*;

include!("../reference/torch_autocast.out.rs");

/// Two bf16 steps at the largest magnitude of `want`.
fn bf16_tolerance(want: &[f64]) -> f64 {
    2.0 * 2f64.powi(-7) * want.iter().fold(0f64, |m, w| m.max(w.abs()))
}

/// `got` is within bf16's rounding of PyTorch's autocast values `bf16`, and away from its
/// float32 values `f32` by more than f32's rounding: the products did run in bf16.
fn assert_bf16(got: &[f32], bf16: &[f64], f32: &[f64], what: &str) {
    assert_eq!(got.len(), bf16.len(), "{what}: length");
    let tolerance = bf16_tolerance(bf16);
    let mut off_f32 = 0f64;
    for (i, ((g, b), f)) in got.iter().zip(bf16).zip(f32).enumerate() {
        let g = f64::from(*g);
        assert!(
            (g - b).abs() <= tolerance,
            "{what}[{i}]: got {g}, PyTorch's autocast {b} (f32 {f}), tolerance {tolerance}\n\
             got  {got:?}\nwant {bf16:?}"
        );
        off_f32 = off_f32.max((g - f).abs() / f.abs().max(1.0));
    }
    assert!(
        off_f32 > 1e-4,
        "{what}: within {off_f32:e} of PyTorch's float32 values: no bf16 product ran\n{got:?}"
    );
}

fn bf16_run<B: Block>(block: &B, shape: &[usize]) -> Run {
    autocast(Precision::Bf16, || run(block, shape))
}

#[test]
fn dense_under_autocast_matches_pytorch_autocast() {
    let shape = [3, 4, 6];
    let dense = resolved(Dense::new(5), &shape);
    let dense = with_torch_weights(dense, &[("weight", vec![5, 24]), ("bias", vec![5])]);
    let r = bf16_run(&dense, &shape);
    assert_bf16(&r.y, &DENSE_BF16_Y, &DENSE_F32_Y, "y");
    assert_bf16(&r.dx, &DENSE_BF16_DX, &DENSE_F32_DX, "dx");
    let inner = dense.linear().unwrap();
    let dw = inner.weight.val().grad(&r.grads).unwrap();
    assert_eq!(
        dw.dtype(),
        burn::tensor::DType::F32,
        "the master weight's gradient"
    );
    assert_bf16(
        &values(dw.transpose()),
        &DENSE_BF16_D0,
        &DENSE_F32_D0,
        "dweight",
    );
    // ember adds the bias in f32, after the product: its gradient is f32's (PyTorch's, summed
    // in bf16, is within bf16's rounding of the summed terms).
    assert_close(
        &grad(inner.bias.as_ref().unwrap(), &r),
        &DENSE_F32_D1,
        "dbias",
    );
    // The parameters themselves stay f32, and outside autocast the layer is f32's again.
    assert_eq!(inner.weight.val().dtype(), burn::tensor::DType::F32);
    assert_close(&run(&dense, &shape).y, &DENSE_F32_Y, "y after autocast");
}

/// Gluon's `flatten=False` on a rank-3 input, with the activation after the product (burn's
/// path), and the same rows as a rank-2 input (`[6, 4]`), which takes Dense's own path: where
/// oneDNN multiplies bf16, the product with its bias and the ReLU fused.
#[test]
fn dense_on_the_last_axis_with_an_activation_matches_pytorch_autocast() {
    for (shape, flatten) in [(&[2, 3, 4][..], false), (&[6, 4][..], true)] {
        let dense = Dense::new(5).flatten(flatten).activation(Activation::Relu);
        let dense = with_torch_weights(
            resolved(dense, shape),
            &[("weight", vec![5, 4]), ("bias", vec![5])],
        );
        let r = bf16_run(&dense, shape);
        assert_bf16(&r.y, &DENSE_ND_BF16_Y, &DENSE_ND_F32_Y, "y");
        assert_bf16(&r.dx, &DENSE_ND_BF16_DX, &DENSE_ND_F32_DX, "dx");
        let inner = dense.linear().unwrap();
        let dw = values(inner.weight.val().grad(&r.grads).unwrap().transpose());
        assert_bf16(&dw, &DENSE_ND_BF16_D0, &DENSE_ND_F32_D0, "dweight");
    }
}

/// Whether `f` ran a layer on oneDNN, and it fell back for nothing.
fn on_onednn(f: impl FnOnce()) -> bool {
    let (ran, fell_back) = ember::kernels::counts();
    f();
    let (now, fell_back_now) = ember::kernels::counts();
    assert_eq!(fell_back_now, fell_back, "a fallback");
    now > ran
}

/// Where oneDNN multiplies bf16 (a CPU with AVX512_BF16 or AMX, which CI's machines may or may
/// not have), Dense and the convolutions under autocast run on it, so the tests above check
/// oneDNN's bf16 products; elsewhere they check burn's path only, and the kernels' bf16 code
/// runs nowhere in CI.
#[test]
fn under_autocast_the_layers_run_on_onednn_exactly_where_it_multiplies_bf16() {
    let bf16 = ember::kernels::status().bf16;
    let cpu = ember::device::cpu::Cpu::here();
    assert!(!bf16 || cpu.has_bf16(), "{cpu:?}");
    let dense_shape = [3, 24];
    // No activations: oneDNN runs those in f32 whatever the precision, and would count.
    let dense = resolved(Dense::new(5), &dense_shape);
    let conv_shape = [2, 2, 5, 5];
    let conv = resolved(Conv2D::new(3, 3).padding(1), &conv_shape);
    let conv1d_shape = [2, 2, 7];
    let conv1d = resolved(Conv1D::new(3, 3), &conv1d_shape);
    for (what, ran) in [
        ("Dense", on_onednn(|| drop(bf16_run(&dense, &dense_shape)))),
        ("Conv2D", on_onednn(|| drop(bf16_run(&conv, &conv_shape)))),
        (
            "Conv1D",
            on_onednn(|| drop(bf16_run(&conv1d, &conv1d_shape))),
        ),
    ] {
        assert_eq!(ran, bf16, "{what} on oneDNN under autocast ({cpu:?})");
    }
    // In f32, oneDNN runs them whatever the CPU.
    assert!(on_onednn(|| drop(run(&dense, &dense_shape))));
}

#[test]
fn conv2d_with_dilation_groups_and_an_activation_matches_pytorch_autocast() {
    let shape = [1, 2, 5, 5];
    let conv = Conv2D::new(4, 2)
        .dilation(2)
        .groups(2)
        .use_bias(false)
        .activation(Activation::Sigmoid);
    let conv = with_torch_weights(resolved(conv, &shape), &[("weight", vec![4, 1, 2, 2])]);
    let r = bf16_run(&conv, &shape);
    assert_bf16(&r.y, &CONV2D_GROUPS_BF16_Y, &CONV2D_GROUPS_F32_Y, "y");
    assert_bf16(&r.dx, &CONV2D_GROUPS_BF16_DX, &CONV2D_GROUPS_F32_DX, "dx");
    let dw = grad(&conv.conv().unwrap().weight, &r);
    assert_bf16(
        &dw,
        &CONV2D_GROUPS_BF16_D0,
        &CONV2D_GROUPS_F32_D0,
        "dweight",
    );
}

#[test]
fn conv2d_under_autocast_matches_pytorch_autocast() {
    let shape = [2, 2, 5, 5];
    let conv = resolved(Conv2D::new(3, 3).strides(2).padding(1), &shape);
    let conv = with_torch_weights(conv, &[("weight", vec![3, 2, 3, 3]), ("bias", vec![3])]);
    let r = bf16_run(&conv, &shape);
    assert_bf16(&r.y, &CONV2D_BF16_Y, &CONV2D_F32_Y, "y");
    assert_bf16(&r.dx, &CONV2D_BF16_DX, &CONV2D_F32_DX, "dx");
    let inner = conv.conv().unwrap();
    assert_bf16(
        &grad(&inner.weight, &r),
        &CONV2D_BF16_D0,
        &CONV2D_F32_D0,
        "dweight",
    );
    assert_close(
        &grad(inner.bias.as_ref().unwrap(), &r),
        &CONV2D_F32_D1,
        "dbias",
    );
}

#[test]
fn conv1d_under_autocast_matches_pytorch_autocast() {
    let shape = [2, 2, 7];
    let conv = resolved(Conv1D::new(3, 3).padding(1).strides(2), &shape);
    let conv = with_torch_weights(conv, &[("weight", vec![3, 2, 3]), ("bias", vec![3])]);
    let r = bf16_run(&conv, &shape);
    assert_bf16(&r.y, &CONV1D_BF16_Y, &CONV1D_F32_Y, "y");
    assert_bf16(&r.dx, &CONV1D_BF16_DX, &CONV1D_F32_DX, "dx");
    let inner = conv.conv().unwrap();
    assert_bf16(
        &grad(&inner.weight, &r),
        &CONV1D_BF16_D0,
        &CONV1D_F32_D0,
        "dweight",
    );
    assert_close(
        &grad(inner.bias.as_ref().unwrap(), &r),
        &CONV1D_F32_D1,
        "dbias",
    );
}
