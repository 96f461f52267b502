//! What the attention layers check of their sizes and inputs, and the layout they compute in.

use std::fmt;

use burn::tensor::Tensor;

use crate::error::{Error, Result};
use crate::layers::rnn::Layout;

/// The heads and dropout an attention of `embed` features can take: at least one head, as
/// many as divide `embed`, and a rate in [0, 1).
pub(super) fn check_heads(
    layer: &dyn fmt::Display,
    embed: usize,
    heads: usize,
    dropout: f64,
) -> Result<()> {
    let invalid = |name, value: String, reason: String| {
        Err(Error::InvalidValue {
            name,
            value,
            reason: format!("{layer}: {reason}"),
        })
    };
    if heads == 0 {
        return invalid(
            "num_heads",
            "0".into(),
            "attention needs 1 head or more".into(),
        );
    }
    if !embed.is_multiple_of(heads) {
        let reason = format!("the embedding size {embed} is not divisible by {heads} heads");
        return invalid("embedding size", embed.to_string(), reason);
    }
    if !(0.0..1.0).contains(&dropout) {
        return invalid("dropout", dropout.to_string(), "must lie in [0, 1)".into());
    }
    Ok(())
}

/// `infer`'s check of an input: `[·, ·, features]`, none of them 0, features as known.
pub(super) fn embed_of(
    layer: &dyn fmt::Display,
    dims: &[usize],
    layout: Layout,
    known: Option<usize>,
) -> Result<usize> {
    if dims.len() != 3 || dims.contains(&0) {
        let expected = match layout {
            Layout::Tnc => "[time, batch, features], none of them 0",
            Layout::Ntc => "[batch, time, features], none of them 0",
        };
        return Err(Error::Shape {
            what: layer.to_string(),
            expected: expected.to_string(),
            got: dims.to_vec(),
        });
    }
    match known {
        Some(expected) if expected != dims[2] => Err(Error::FeatureMismatch {
            layer: layer.to_string(),
            expected,
            got: dims[2],
        }),
        _ => Ok(dims[2]),
    }
}

/// `[time, batch, ·]` ↔ `[batch, time, ·]` for `Tnc`; `Ntc` is batch first already.
pub(super) fn swap_for(layout: Layout, x: Tensor<3>) -> Tensor<3> {
    match layout {
        Layout::Tnc => x.swap_dims(0, 1),
        Layout::Ntc => x,
    }
}
