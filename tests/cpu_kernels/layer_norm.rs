//! LayerNorm and attention's softmax on both CPU paths: oneDNN's layer normalization and
//! softmax primitives against burn's composites, outputs and every gradient, with γ and β
//! moved from their initial ones and zeros so that a scale or a shift read wrong shows.

use burn::module::Module;
use burn::prelude::*;
use ember::kernels::{self, Kernels};
use ember::{Block, LayerNorm, Layout, MultiHeadAttention, NdTensor};

use super::both_paths::{close, compare, every_gradient, host, on_onednn, ready, values};
use super::common::params::Noisy;

#[test]
fn layer_norm_matches_flex() {
    let cases: [(&str, LayerNorm, &[usize]); 4] = [
        ("rows of 12", LayerNorm::new(), &[5, 12]),
        ("[3, 4, 10]", LayerNorm::new(), &[3, 4, 10]),
        ("without β", LayerNorm::new().center(false), &[2, 3, 2, 6]),
        ("epsilon 0.5", LayerNorm::new().epsilon(0.5), &[7, 33]),
    ];
    for (what, norm, shape) in cases {
        let norm = ready(norm, shape).map(&mut Noisy);
        compare(&format!("LayerNorm {what}"), &norm, shape, &every_gradient);
    }
    // An epsilon set once the layer is built reaches both paths (burn's layer keeps the one
    // it was built with).
    let shape = &[7, 33];
    let norm = ready(LayerNorm::new(), shape).map(&mut Noisy).epsilon(0.5);
    compare(
        "LayerNorm epsilon 0.5 once built",
        &norm,
        shape,
        &every_gradient,
    );
}

#[test]
fn an_epsilon_that_is_not_above_zero_is_refused_once_built_too() {
    let shape = [2, 6];
    let x = NdTensor::from_host(&values(12, 1), &shape, &Device::flex().autodiff()).unwrap();
    for epsilon in [0.0, -1e-5, f64::NAN] {
        let norm = ready(LayerNorm::new(), &shape).epsilon(epsilon);
        let err = norm.infer_shape(x.clone()).unwrap_err().to_string();
        assert!(err.contains("epsilon"), "{epsilon}: {err}");
    }
}

/// In inference (a `valid` copy, on burn-flex without autodiff) the forward primitives that
/// keep no statistics: LayerNorm's, and self-attention's softmax.
#[test]
fn layer_norm_and_attention_in_inference_match_flex() {
    let shape = [3, 7, 16];
    let x = NdTensor::from_host(&values(3 * 7 * 16, 5), &shape, &Device::flex()).unwrap();
    let outputs = |block: &dyn Fn(NdTensor) -> NdTensor| {
        let fast = on_onednn("inference", || host(block(x.clone())));
        let reference = kernels::with_kernels(Kernels::Flex, || host(block(x.clone())));
        close(
            "inference",
            &[("output".into(), fast)],
            &[("output".into(), reference)],
        );
    };
    let norm = ready(LayerNorm::new(), &shape).map(&mut Noisy).valid();
    outputs(&|x| norm.forward(x));
    let mha = ready(MultiHeadAttention::new(4).layout(Layout::Ntc), &shape).map(&mut Noisy);
    let mha = mha.valid();
    outputs(&|x| mha.forward(x));
}

/// The operations of one forward pass that run on oneDNN, and nothing falling back.
fn onednn_operations<B: Block>(block: &B, shape: &[usize]) -> u64 {
    let n = shape.iter().product();
    let x = NdTensor::from_host(&values(n, 3), shape, &Device::flex().autodiff()).unwrap();
    let (before, _) = kernels::counts();
    kernels::with_kernels(Kernels::OneDnn, || block.forward(x));
    let (after, fell_back) = kernels::counts();
    assert!(fell_back.is_empty(), "{fell_back:?}");
    after - before
}

/// LayerNorm is one oneDNN operation, and self-attention five: the packed projection, `q·kᵀ`,
/// the softmax, `weights·v` and `out_proj` (with burn's softmax it would be four).
#[test]
fn layer_norm_and_the_softmax_run_on_onednn() {
    let norm = ready(LayerNorm::new(), &[4, 6]);
    assert_eq!(onednn_operations(&norm, &[4, 6]), 1, "LayerNorm");
    let shape = [3, 5, 8];
    let mha = ready(MultiHeadAttention::new(2).layout(Layout::Ntc), &shape);
    assert_eq!(onednn_operations(&mha, &shape), 5, "self-attention");
}
