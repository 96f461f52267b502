//! ember's attention layers against PyTorch's `nn.MultiheadAttention`,
//! `nn.TransformerEncoderLayer` and `nn.TransformerEncoder`: the outputs, the attention weights
//! averaged over the heads, the inputs' gradients and every parameter's, within 1e-5, for one
//! and several heads, both layouts, with and without biases, additive and causal masks and
//! d2l's valid lengths, cross-attention, post- and pre-norm, relu and gelu, and a stack of two
//! layers with a final norm. The parameters reach ember as a safetensors file in PyTorch's own
//! names (`layers.1.self_attn.in_proj_weight`), and the gradients are read back through a file
//! ember writes, so names, layouts and the order of the packed q/k/v projection are all checked.
//! References: `tests/reference/torch_attention.py`.

use std::collections::BTreeMap;

use burn::module::{ModuleMapper, Param};
use burn::tensor::{Gradients, Int};

use super::*;
use ember::{Layout, Mask, MultiHeadAttention, TransformerEncoder, TransformerEncoderLayer};

include!("../reference/torch_attention.out.rs");

/// What PyTorch gave for one case.
struct Want {
    y: &'static [f64],
    /// Averaged over the heads; empty for an encoder.
    weights: &'static [f64],
    /// The gradient of each input: x's, or q's, k's and v's.
    dx: &'static [&'static [f64]],
    params: &'static [(&'static str, &'static [usize])],
    d: &'static [&'static [f64]],
}

/// Input `j`: 0 the query (or self-attention's one input), 1 the key, 2 the value.
fn input_of(shape: [usize; 3], j: usize) -> Tensor<3> {
    let values = fill(&shape, |i| (0.37 * i + 0.1 + 0.5 * j as f64).sin());
    Tensor::from_data(TensorData::new(values, shape), &device())
}

/// The gradient that flows into the averaged weights.
fn s_of(shape: [usize; 3]) -> Tensor<3> {
    let values = fill(&shape, |i| (0.29 * i + 0.7).sin());
    Tensor::from_data(TensorData::new(values, shape), &device())
}

/// The additive mask `[queries, keys]`.
fn m_of(queries: usize, keys: usize) -> Tensor<2> {
    let values = fill(&[queries, keys], |i| 0.8 * (0.43 * i + 0.2).sin());
    Tensor::from_data(TensorData::new(values, [queries, keys]), &device())
}

fn lens(lens: &[i64]) -> Tensor<1, Int> {
    Tensor::from_data(TensorData::new(lens.to_vec(), [lens.len()]), &device())
}

/// Asserts as `assert_close` does and returns the largest deviation.
fn deviation(got: &[f32], want: &[f64], what: &str) -> f64 {
    assert_close(got, want, what);
    got.iter()
        .zip(want)
        .map(|(g, w)| (f64::from(*g) - w).abs())
        .fold(0.0, f64::max)
}

/// Replaces every parameter by its gradient.
struct ToGrads<'g>(&'g Gradients);

impl ModuleMapper for ToGrads<'_> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let grads = self.0;
        param.map(|t| t.grad(grads).expect("a gradient for every parameter"))
    }
}

/// Each parameter's gradient as a parameter file holds the parameter: PyTorch's name, shape
/// and layout, read back from the file ember writes.
fn torch_grads<B: Block + 'static>(
    layer: &B,
    grads: &Gradients,
) -> BTreeMap<String, (Vec<usize>, Vec<f32>)> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("grads.safetensors");
    layer
        .clone()
        .map(&mut ToGrads(grads))
        .save_parameters(&path)
        .unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    file.tensors()
        .into_iter()
        .map(|(name, view)| {
            let values = view
                .data()
                .chunks(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            (name, (view.shape().to_vec(), values))
        })
        .collect()
}

/// `layer` resolved for inputs of `shape`, PyTorch's names and shapes checked, and the
/// reference's parameters loaded.
fn loaded<B: Block>(what: &str, layer: B, shape: [usize; 3], want: &Want) -> B {
    let layer = resolved(layer, &shape);
    let listed: Vec<(String, Vec<usize>)> = layer
        .collect_params()
        .params
        .into_iter()
        .map(|p| (p.name, p.shape))
        .collect();
    let expected: Vec<(String, Vec<usize>)> = want
        .params
        .iter()
        .map(|(n, s)| (n.to_string(), s.to_vec()))
        .collect();
    assert_eq!(
        listed, expected,
        "{what}: PyTorch's names, shapes and order"
    );
    with_torch_weights(layer, &expected_refs(&expected))
}

fn expected_refs(params: &[(String, Vec<usize>)]) -> Vec<(&str, Vec<usize>)> {
    params
        .iter()
        .map(|(n, s)| (n.as_str(), s.clone()))
        .collect()
}

/// Compares the inputs' and the parameters' gradients with PyTorch's; returns the largest
/// deviation.
fn compare_grads<B: Block + 'static>(
    what: &str,
    layer: &B,
    inputs: &[Tensor<3>],
    grads: &Gradients,
    want: &Want,
) -> f64 {
    let mut worst: f64 = 0.0;
    assert_eq!(inputs.len(), want.dx.len(), "{what}: inputs");
    for (k, (x, dx)) in inputs.iter().zip(want.dx).enumerate() {
        let got = values(x.grad(grads).unwrap());
        worst = worst.max(deviation(&got, dx, &format!("{what} d(input {k})")));
    }
    let found = torch_grads(layer, grads);
    assert_eq!(found.len(), want.params.len(), "{what}: gradients");
    for ((name, shape), d) in want.params.iter().zip(want.d) {
        let (got_shape, got) = &found[*name];
        assert_eq!(got_shape, shape, "{what}: d{name}'s shape");
        worst = worst.max(deviation(got, d, &format!("{what} d{name}")));
    }
    worst
}

/// Self-attention (`kv` none: `forward_qkv(x, x, x)`) or cross-attention of a query of
/// `q_shape` over a key and value of `kv`.
fn check_attention(
    what: &str,
    layer: MultiHeadAttention,
    q_shape: [usize; 3],
    kv: Option<[usize; 3]>,
    mask: Option<Mask>,
    want: Want,
) {
    let layer = loaded(what, layer, q_shape, &want);
    let q = input_of(q_shape, 0).require_grad();
    let inputs = match kv {
        None => vec![q],
        Some(shape) => vec![
            q,
            input_of(shape, 1).require_grad(),
            input_of(shape, 2).require_grad(),
        ],
    };
    let [q, k, v] = match inputs.as_slice() {
        [x] => [x.clone(), x.clone(), x.clone()],
        [q, k, v] => [q.clone(), k.clone(), v.clone()],
        _ => unreachable!("one input or three"),
    };
    let (y, weights) = layer.forward_qkv(q, k, v, mask.as_ref());
    let g = Tensor::<3>::from_data(TensorData::new(g_of(&y.dims()), y.dims()), &device());
    let loss = (y.clone() * g).sum() + (weights.clone() * s_of(weights.dims())).sum();
    let grads = loss.backward();
    let worst = deviation(&values(y), want.y, &format!("{what} output"))
        .max(deviation(
            &values(weights),
            want.weights,
            &format!("{what} weights"),
        ))
        .max(compare_grads(what, &layer, &inputs, &grads, &want));
    println!("{what}: max deviation from PyTorch {worst:.2e}");
}

/// An encoder layer or stack on `shape`, run by `forward`.
fn check_encoder<B: Block + 'static>(
    what: &str,
    layer: B,
    shape: [usize; 3],
    forward: impl Fn(&B, Tensor<3>) -> Tensor<3>,
    want: Want,
) {
    let layer = loaded(what, layer, shape, &want);
    let x = input_of(shape, 0).require_grad();
    let y = forward(&layer, x.clone());
    let g = Tensor::<3>::from_data(TensorData::new(g_of(&y.dims()), y.dims()), &device());
    let grads = (y.clone() * g).sum().backward();
    let worst = deviation(&values(y), want.y, &format!("{what} output")).max(compare_grads(
        what,
        &layer,
        &[x],
        &grads,
        &want,
    ));
    println!("{what}: max deviation from PyTorch {worst:.2e}");
}

#[test]
fn multi_head_attention_matches_pytorch_with_one_and_four_heads_in_both_layouts() {
    let one = MultiHeadAttention::new(1);
    check_attention("MHA 1 head TNC", one, [5, 2, 8], None, None, MHA_1_HEAD_TNC);
    let four = MultiHeadAttention::new(4).layout(Layout::Ntc);
    check_attention(
        "MHA 4 heads NTC",
        four,
        [2, 5, 8],
        None,
        None,
        MHA_4_HEADS_NTC,
    );
}

#[test]
fn multi_head_attention_masks_as_pytorch_additive_causal_and_valid_lengths() {
    let mask = Mask::new().additive(m_of(5, 5));
    let four = MultiHeadAttention::new(4);
    let want = MHA_4_HEADS_TNC_ADDITIVE;
    check_attention("MHA additive", four, [5, 2, 8], None, Some(mask), want);
    let causal = Mask::causal(5, &device());
    let one = MultiHeadAttention::new(1).layout(Layout::Ntc);
    let want = MHA_1_HEAD_NTC_CAUSAL;
    check_attention("MHA causal", one, [2, 5, 8], None, Some(causal), want);
    let valid = Mask::new().valid_lens(lens(&[2, 5, 1]));
    let four = MultiHeadAttention::new(4).layout(Layout::Ntc);
    let want = MHA_4_HEADS_NTC_VALID_LENS;
    check_attention(
        "MHA valid lengths",
        four,
        [3, 5, 8],
        None,
        Some(valid),
        want,
    );
}

#[test]
fn multi_head_attention_without_bias_matches_pytorch() {
    let mask = Mask::new().additive(m_of(5, 5));
    let plain = MultiHeadAttention::new(2).use_bias(false);
    let want = MHA_2_HEADS_TNC_NO_BIAS;
    check_attention("MHA no bias", plain, [5, 2, 8], None, Some(mask), want);
}

#[test]
fn cross_attention_over_another_number_of_keys_matches_pytorch() {
    let mask = Mask::new().additive(m_of(4, 6)).valid_lens(lens(&[3, 6]));
    let two = MultiHeadAttention::new(2);
    let want = MHA_CROSS_2_HEADS_TNC;
    check_attention(
        "cross 2 heads TNC",
        two,
        [4, 2, 8],
        Some([6, 2, 8]),
        Some(mask),
        want,
    );
    let mask = Mask::new().valid_lens(lens(&[7, 4]));
    let four = MultiHeadAttention::new(4)
        .use_bias(false)
        .layout(Layout::Ntc);
    let want = MHA_CROSS_4_HEADS_NTC_NO_BIAS;
    check_attention(
        "cross 4 heads NTC",
        four,
        [2, 3, 8],
        Some([2, 7, 8]),
        Some(mask),
        want,
    );
}

/// `Block::forward` projects q, k and v in one product: the same outputs as `forward_qkv`.
#[test]
fn block_forward_is_pytorchs_self_attention() {
    let cases = [
        (MultiHeadAttention::new(1), [5, 2, 8], MHA_1_HEAD_TNC),
        (
            MultiHeadAttention::new(4).layout(Layout::Ntc),
            [2, 5, 8],
            MHA_4_HEADS_NTC,
        ),
    ];
    for (layer, shape, want) in cases {
        let layer = loaded("MHA forward", layer, shape, &want);
        let y = layer.forward(input_of(shape, 0).into());
        assert_close(&values(y.flatten()), want.y, "Block::forward");
    }
}

#[test]
fn transformer_encoder_layer_matches_pytorch_post_and_pre_norm_relu_and_gelu() {
    let layer = || TransformerEncoderLayer::new(2, 16).dropout(0.0);
    let run = |mask: Option<Mask>| {
        move |l: &TransformerEncoderLayer, x| l.forward_masked(x, mask.as_ref())
    };
    let post_relu = layer();
    let want = ENCODER_LAYER_POST_RELU_TNC;
    check_encoder("post relu TNC", post_relu, [5, 2, 8], run(None), want);
    let post_gelu = layer().activation(Activation::Gelu).layout(Layout::Ntc);
    let causal = Some(Mask::causal(5, &device()));
    let want = ENCODER_LAYER_POST_GELU_NTC_CAUSAL;
    check_encoder("post gelu NTC", post_gelu, [2, 5, 8], run(causal), want);
    let pre_relu = layer().norm_first(true).layout(Layout::Ntc);
    let valid = Some(Mask::new().valid_lens(lens(&[4, 5, 2])));
    let want = ENCODER_LAYER_PRE_RELU_NTC_VALID_LENS;
    check_encoder("pre relu NTC", pre_relu, [3, 5, 8], run(valid), want);
    let pre_gelu = layer().activation(Activation::Gelu).norm_first(true);
    let additive = Some(Mask::new().additive(m_of(5, 5)));
    let want = ENCODER_LAYER_PRE_GELU_TNC_ADDITIVE;
    check_encoder("pre gelu TNC", pre_gelu, [5, 2, 8], run(additive), want);
}

#[test]
fn transformer_encoder_of_two_layers_and_a_final_norm_matches_pytorch() {
    let run =
        |mask: Option<Mask>| move |e: &TransformerEncoder, x| e.forward_masked(x, mask.as_ref());
    let layer = TransformerEncoderLayer::new(2, 16)
        .dropout(0.0)
        .layout(Layout::Ntc);
    let encoder = TransformerEncoder::new(layer, 2).norm(LayerNorm::new());
    let valid = Some(Mask::new().valid_lens(lens(&[3, 5])));
    let want = ENCODER_2_LAYERS_NORM_NTC_VALID_LENS;
    check_encoder("encoder NTC", encoder, [2, 5, 8], run(valid), want);
    let layer = TransformerEncoderLayer::new(2, 16)
        .dropout(0.0)
        .activation(Activation::Gelu)
        .norm_first(true);
    let encoder = TransformerEncoder::new(layer, 2).norm(LayerNorm::new());
    let additive = Some(Mask::new().additive(m_of(5, 5)));
    let want = ENCODER_2_LAYERS_PRE_GELU_NORM_TNC;
    check_encoder(
        "encoder pre gelu TNC",
        encoder,
        [5, 2, 8],
        run(additive),
        want,
    );
}
