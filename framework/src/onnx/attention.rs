//! Attention and the Transformer encoder as standard ONNX operators (opset 17 has no attention
//! operator): the packed input projection as one `MatMul` and `Add`, `Split` into the query,
//! key and value, `Reshape` and `Transpose` into heads, `MatMul` of the scaled queries and the
//! keys, the causal mask added, `Softmax`, `MatMul` with the values, the heads joined by
//! `Transpose` and `Reshape`, then `out_proj`: the arithmetic `layers/attention/weights.rs`
//! does, in its order.
//!
//! The number of steps is read from the input inside the graph (`Shape`), never written in:
//! the causal mask is `Trilu` of a `−∞` matrix `Expand`ed to `[steps, steps]`, and
//! `PositionalEncoding`'s table is written for `max_len` steps and `Slice`d to the input's.
//! The file declares only its first axis dynamic, so a batch-first model keeps the example's
//! steps there; a `[time, batch, ·]` one takes any number of steps.
//! Dropout is training's only: inference has none.

use burn::module::Param;

use super::export::Export;
use super::graph::{Attribute, OnnxGraph, Value};
use super::layers::{layer_norm, linear};
use crate::error::{Error, Result};
use crate::layers::attention::{AttentionWeights, EncoderWeights};
use crate::{
    Activation, Layout, MultiHeadAttention, PositionalEncoding, TransformerEncoder,
    TransformerEncoderLayer,
};

/// A layer whose parameters do not exist yet: `export` names every deferred layer before any
/// describes itself, so this is for a block of one's own that calls `describe` directly.
fn deferred(layer: &dyn std::fmt::Display) -> Error {
    Error::DeferredInitialization {
        layers: vec![layer.to_string()],
    }
}

/// `x` batch first: `[time, batch, ·]` ↔ `[batch, time, ·]` for `Tnc`.
fn swap_for(g: &mut OnnxGraph, layout: Layout, x: Value) -> Value {
    match layout {
        Layout::Tnc => g.node(
            "Transpose",
            &[&x],
            &[("perm", Attribute::Ints(vec![1, 0, 2]))],
        ),
        Layout::Ntc => x,
    }
}

/// The steps of `x` (`[batch, steps, ·]`) as a 1-D int64 tensor of one value.
fn steps(g: &mut OnnxGraph, x: &Value) -> Value {
    g.node_of_rank(
        "Shape",
        &[x],
        &[("start", Attribute::Int(1)), ("end", Attribute::Int(2))],
        1,
    )
}

/// [`crate::Mask::causal`] for the steps of `x` (`[batch, steps, ·]`): `[steps, steps]`, −∞
/// above the diagonal, 0 on and below it.
fn causal_mask(g: &mut OnnxGraph, x: &Value) -> Value {
    let t = steps(g, x);
    let square = g.node("Concat", &[&t, &t], &[("axis", Attribute::Int(0))]);
    let forbidden = g.constant("forbidden", &[], &[f32::NEG_INFINITY]);
    let full = g.node_of_rank("Expand", &[&forbidden, &square], &[], 2);
    let above = g.integers("above_diagonal", &[], &[1]);
    g.node("Trilu", &[&full, &above], &[("upper", Attribute::Int(1))])
}

/// Multi-head self-attention of `x` (`[batch, steps, E]`) with `heads` heads and an optional
/// additive mask (`[steps, steps]`), inside the block's own scope: its parameters are
/// `in_proj_weight`, `in_proj_bias` and `out_proj.*`, as in the safetensors file.
fn self_attention(
    g: &mut OnnxGraph,
    w: &AttentionWeights,
    heads: usize,
    x: &Value,
    mask: Option<&Value>,
) -> Result<Value> {
    let embed = w.embed();
    let head = embed / heads;
    let weight = g.parameter("in_proj_weight", w.in_proj_weight.val())?;
    let weight = g.node(
        "Transpose",
        &[&weight],
        &[("perm", Attribute::Ints(vec![1, 0]))],
    );
    let mut qkv = g.node("MatMul", &[x, &weight], &[]);
    if let Some(bias) = &w.in_proj_bias {
        let bias = g.parameter("in_proj_bias", Param::val(bias))?;
        qkv = g.node("Add", &[&qkv, &bias], &[]);
    }
    let parts = g.integers("split", &[3], &[embed as i64; 3]);
    let [q, k, v] = g.node_with_outputs(
        "Split",
        &[&qkv, &parts],
        &[("axis", Attribute::Int(2))],
        [3; 3],
    );
    // [batch, steps, E] → [batch, steps, heads, d]; 0 keeps the batch and the steps.
    let split = g.integers("heads", &[4], &[0, 0, heads as i64, head as i64]);
    let into_heads = |g: &mut OnnxGraph, t: &Value, perm: Vec<i64>| {
        let t = g.node_of_rank("Reshape", &[t, &split], &[], 4);
        g.node("Transpose", &[&t], &[("perm", Attribute::Ints(perm))])
    };
    let q = into_heads(g, &q, vec![0, 2, 1, 3]);
    let k = into_heads(g, &k, vec![0, 2, 3, 1]);
    let v = into_heads(g, &v, vec![0, 2, 1, 3]);
    let scale = (1.0 / (head as f64).sqrt()) as f32;
    let scale = g.constant("scale", &[], &[scale]);
    let q = g.node("Mul", &[&q, &scale], &[]);
    let mut scores = g.node("MatMul", &[&q, &k], &[]);
    if let Some(mask) = mask {
        scores = g.node("Add", &[&scores, mask], &[]);
    }
    let weights = g.node("Softmax", &[&scores], &[("axis", Attribute::Int(-1))]);
    let context = g.node("MatMul", &[&weights, &v], &[]);
    let context = g.node(
        "Transpose",
        &[&context],
        &[("perm", Attribute::Ints(vec![0, 2, 1, 3]))],
    );
    let joined = g.integers("joined", &[3], &[0, 0, embed as i64]);
    let context = g.node_of_rank("Reshape", &[&context, &joined], &[], 3);
    g.child("out_proj", |g| linear(g, &w.out_proj, &context))
}

impl Export for MultiHeadAttention {
    /// Self-attention, as [`crate::Block::forward`] computes it.
    fn describe(&self, g: &mut OnnxGraph, x: Value) -> Result<Value> {
        let (w, heads, layout) = self.parts().ok_or_else(|| deferred(self))?;
        let x = swap_for(g, layout, x);
        let y = self_attention(g, w, heads, &x, None)?;
        Ok(swap_for(g, layout, y))
    }
}

/// One encoder layer on `x` (`[batch, steps, d_model]`), post- or pre-norm, with `mask`.
fn encode(
    g: &mut OnnxGraph,
    layer: &TransformerEncoderLayer,
    x: Value,
    mask: Option<&Value>,
) -> Result<Value> {
    let (w, heads, activation, norm_first, eps): (&EncoderWeights, usize, Activation, bool, f64) =
        layer.parts().ok_or_else(|| deferred(layer))?;
    let attend = |g: &mut OnnxGraph, x: &Value| {
        g.child("self_attn", |g| {
            self_attention(g, &w.self_attn, heads, x, mask)
        })
    };
    let feed_forward = |g: &mut OnnxGraph, x: &Value| {
        let hidden = g.child("linear1", |g| linear(g, &w.linear1, x))?;
        let hidden = activation.onnx(g, &hidden);
        g.child("linear2", |g| linear(g, &w.linear2, &hidden))
    };
    let norm = |g: &mut OnnxGraph, name: &str, which: &burn::nn::LayerNorm, x: &Value| {
        g.child(name, |g| layer_norm(g, which, eps, x))
    };
    if norm_first {
        let normed = norm(g, "norm1", &w.norm1, &x)?;
        let attended = attend(g, &normed)?;
        let x = g.node("Add", &[&x, &attended], &[]);
        let normed = norm(g, "norm2", &w.norm2, &x)?;
        let fed = feed_forward(g, &normed)?;
        Ok(g.node("Add", &[&x, &fed], &[]))
    } else {
        let attended = attend(g, &x)?;
        let sum = g.node("Add", &[&x, &attended], &[]);
        let x = norm(g, "norm1", &w.norm1, &sum)?;
        let fed = feed_forward(g, &x)?;
        let sum = g.node("Add", &[&x, &fed], &[]);
        norm(g, "norm2", &w.norm2, &sum)
    }
}

impl Export for TransformerEncoderLayer {
    /// The layer without masks, as [`crate::Block::forward`] computes it.
    fn describe(&self, g: &mut OnnxGraph, x: Value) -> Result<Value> {
        let x = swap_for(g, self.layout_of(), x);
        let y = encode(g, self, x, None)?;
        Ok(swap_for(g, self.layout_of(), y))
    }
}

impl Export for TransformerEncoder {
    /// Every layer with the causal mask if the encoder has it, then the final norm: its
    /// parameters `layers.<i>.…` and `norm.*`.
    fn describe(&self, g: &mut OnnxGraph, x: Value) -> Result<Value> {
        let layout = self
            .layers()
            .first()
            .map_or(Layout::Ntc, TransformerEncoderLayer::layout_of);
        let mut x = swap_for(g, layout, x);
        let mask = self.is_causal().then(|| causal_mask(g, &x));
        for (i, layer) in self.layers().iter().enumerate() {
            x = g.child("layers", |g| {
                g.child(&i.to_string(), |g| encode(g, layer, x, mask.as_ref()))
            })?;
        }
        let x = swap_for(g, layout, x);
        match self.final_norm() {
            Some(norm) => g.child("norm", |g| norm.describe(g, x)),
            None => Ok(x),
        }
    }
}

impl Export for PositionalEncoding {
    /// `x + P[:steps]`: the table of `max_len` steps as a constant, cut to the input's steps.
    fn describe(&self, g: &mut OnnxGraph, x: Value) -> Result<Value> {
        let (hidden, max_len) = self.sizes();
        let table = g.constant("table", &[max_len, hidden], &self.table(max_len));
        let t = steps(g, &x);
        let start = g.integers("start", &[1], &[0]);
        let axis = g.integers("axis", &[1], &[0]);
        let rows = g.node("Slice", &[&table, &start, &t, &axis], &[]);
        Ok(g.node("Add", &[&x, &rows], &[]))
    }
}
