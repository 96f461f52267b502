//! Sequence models in ONNX Runtime: the recurrent layers as ONNX's `LSTM`, `GRU` and `RNN`,
//! attention and the Transformer encoder as `MatMul`, `Softmax` and `LayerNormalization`, and
//! the CLI's language models, each against ember's own outputs.

use ember::{Activation, Block, Dense, LayerNorm, Sequential};

use super::common::params::Noisy;
use super::{TOLERANCE, built, built_with, largest_difference, normal};

/// ember's recurrent layers as ONNX's `LSTM`, `GRU` and `RNN`: ONNX Runtime's outputs equal
/// ember's for every kind, stacked and bidirectional, batch first or not, with and without
/// biases, and for the CLI's language model (`--model lstm:H`: Embedding, LSTM, Dense,
/// Flatten). A gate order that ONNX reads otherwise fails here.
#[test]
fn recurrent_layers_run_in_onnx_runtime_as_in_ember() {
    use ember::{Embedding, Flatten, Layout, Recurrent};
    let nets: Vec<(&str, Sequential, Vec<usize>)> = vec![
        (
            "LSTM, 2 layers, bidirectional, NTC",
            Sequential::new().add(
                Recurrent::lstm(6)
                    .layers(2)
                    .bidirectional(true)
                    .layout(Layout::Ntc),
            ),
            vec![5, 4],
        ),
        (
            "GRU, TNC",
            Sequential::new().add(Recurrent::gru(5)),
            vec![3, 4],
        ),
        (
            "GRU, bidirectional, no biases, NTC",
            Sequential::new().add(
                Recurrent::gru(3)
                    .bidirectional(true)
                    .use_bias(false)
                    .layout(Layout::Ntc),
            ),
            vec![6, 2],
        ),
        (
            "RNN relu, 3 layers",
            Sequential::new().add(Recurrent::rnn(4).relu().layers(3)),
            vec![2, 3],
        ),
        (
            "RNN tanh, bidirectional",
            Sequential::new().add(Recurrent::rnn(4).bidirectional(true)),
            vec![2, 3],
        ),
    ];
    for (name, net, example) in nets {
        let net = built(net, &example);
        let difference = largest_difference(&net, &example, normal);
        assert!(difference < TOLERANCE, "{name}: {difference:e}");
    }
    // The language model, on token indices.
    let lm: Sequential = Sequential::new()
        .add(Embedding::new(11, 8))
        .add(Recurrent::lstm(16).layout(Layout::Ntc))
        .add(Dense::new(11).flatten(false))
        .add(Flatten);
    let tokens = |shape: &[usize]| -> Vec<f32> {
        let n: usize = shape.iter().product();
        (0..n).map(|i| ((i * 7 + 3) % 11) as f32).collect()
    };
    let lm = built_with(lm, &[9], tokens);
    let difference = largest_difference(&lm, &[9], tokens);
    assert!(difference < TOLERANCE, "language model: {difference:e}");
}

/// Attention and the Transformer as ONNX's MatMul, Softmax and LayerNormalization: ONNX
/// Runtime's outputs equal ember's for multi-head attention in both layouts, with and without
/// biases, encoder layers post- and pre-norm with relu and gelu, a causal encoder of 2 layers
/// with its final norm, and the CLI's Transformer language model (`--model
/// transformer:…`: Embedding, PositionalEncoding, the causal encoder, Dense, Flatten). In the
/// `[time, batch, ·]` layout the first axis, the file's dynamic one, is the steps: batches 1
/// and 7 are 1 and 7 steps there, so the causal mask and the positions follow the input's
/// steps.
#[test]
fn attention_and_the_transformer_run_in_onnx_runtime_as_in_ember() {
    use burn::module::Module;
    use ember::{Layout, MultiHeadAttention, TransformerEncoder, TransformerEncoderLayer};
    let nets: Vec<(&str, Sequential, Vec<usize>)> = vec![
        (
            "MultiHeadAttention, 2 heads, NTC",
            Sequential::new().add(MultiHeadAttention::new(2).layout(Layout::Ntc)),
            vec![5, 8],
        ),
        (
            "MultiHeadAttention, 3 heads, TNC, no bias",
            Sequential::new().add(MultiHeadAttention::new(3).use_bias(false)),
            vec![4, 6],
        ),
        (
            "encoder layer, post-norm, relu, TNC",
            Sequential::new().add(TransformerEncoderLayer::new(2, 16)),
            vec![3, 8],
        ),
        (
            "encoder layer, pre-norm, gelu, NTC, no bias",
            Sequential::new().add(
                TransformerEncoderLayer::new(4, 12)
                    .norm_first(true)
                    .activation(Activation::Gelu)
                    .use_bias(false)
                    .layout(Layout::Ntc),
            ),
            vec![6, 8],
        ),
        (
            "causal encoder, 2 layers, final norm, TNC",
            Sequential::new().add(
                TransformerEncoder::new(TransformerEncoderLayer::new(2, 8), 2)
                    .norm(LayerNorm::new())
                    .causal(true),
            ),
            vec![2, 4],
        ),
    ];
    for (name, net, example) in nets {
        let net = built(net, &example).map(&mut Noisy);
        let difference = largest_difference(&net, &example, normal);
        assert!(difference < TOLERANCE, "{name}: {difference:e}");
    }
    let spec = ember_trainer::run::sequence_model::TransformerSpec {
        layers: 2,
        heads: 2,
        dim: 8,
    };
    let tokens = |shape: &[usize]| -> Vec<f32> {
        let n: usize = shape.iter().product();
        (0..n).map(|i| ((i * 5 + 2) % 13) as f32).collect()
    };
    let lm: Sequential = spec.build(13);
    let lm = built_with(lm, &[9], tokens).map(&mut Noisy);
    let difference = largest_difference(&lm, &[9], tokens);
    assert!(
        difference < TOLERANCE,
        "Transformer language model: {difference:e}"
    );
}

/// The exported encoder's parameters are named as the safetensors file names them.
#[test]
fn the_encoders_parameters_keep_their_safetensors_names_in_onnx() {
    use ember::{TransformerEncoder, TransformerEncoderLayer};
    let encoder =
        TransformerEncoder::new(TransformerEncoderLayer::new(2, 8), 2).norm(LayerNorm::new());
    let net: Sequential = Sequential::new().add(encoder);
    let net = built(net, &[3, 4]);
    let model = ember::onnx::to_model(&net, &[3, 4]).unwrap();
    let graph = model.graph.as_ref().unwrap();
    let mut written: Vec<String> = graph
        .initializer
        .iter()
        .map(|t| t.name().to_string())
        .filter(|name| net.collect_params().get(name).is_some())
        .collect();
    written.sort();
    let mut params: Vec<String> = net
        .collect_params()
        .names()
        .into_iter()
        .map(str::to_string)
        .collect();
    params.sort();
    assert_eq!(written, params);
    assert!(
        params.contains(&"0.layers.1.self_attn.in_proj_weight".to_string()),
        "{params:?}"
    );
}
