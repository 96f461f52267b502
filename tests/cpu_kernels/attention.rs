//! Attention on both CPU paths: oneDNN's batched products for the heads' scores and weighted
//! sums, its softmax and layer normalization, and its matrix product for the projections and
//! the feed-forward network, against burn-flex's, for multi-head attention in both layouts, an
//! encoder layer post- and pre-norm, and a causal encoder of two layers: outputs, the input's
//! gradient and every parameter's.
//! (`tests/layers/attention.rs` holds the default path to PyTorch's numbers.)

use ember::{
    Activation, LayerNorm, Layout, MultiHeadAttention, TransformerEncoder, TransformerEncoderLayer,
};

use super::both_paths::{every_gradient, same};

#[test]
fn attention_matches_flex() {
    same(
        "MultiHeadAttention, 4 heads, NTC",
        MultiHeadAttention::new(4).layout(Layout::Ntc),
        &[3, 7, 16],
        &every_gradient,
    );
    same(
        "MultiHeadAttention, 3 heads, TNC, no bias",
        MultiHeadAttention::new(3).use_bias(false),
        &[5, 2, 9],
        &every_gradient,
    );
    same(
        "encoder layer, post-norm, relu",
        TransformerEncoderLayer::new(2, 24).dropout(0.0),
        &[6, 3, 8],
        &every_gradient,
    );
    same(
        "encoder layer, pre-norm, gelu, NTC",
        TransformerEncoderLayer::new(4, 32)
            .dropout(0.0)
            .norm_first(true)
            .activation(Activation::Gelu)
            .layout(Layout::Ntc),
        &[4, 11, 16],
        &every_gradient,
    );
    let layer = TransformerEncoderLayer::new(2, 16)
        .dropout(0.0)
        .norm_first(true)
        .layout(Layout::Ntc);
    same(
        "causal encoder, 2 layers, final norm",
        TransformerEncoder::new(layer, 2)
            .norm(LayerNorm::new())
            .causal(true),
        &[2, 9, 8],
        &every_gradient,
    );
}
