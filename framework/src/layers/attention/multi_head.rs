//! `MultiHeadAttention(heads)`: `torch.nn.MultiheadAttention`, its embedding size taken from
//! the first input as every ember layer's.

use std::fmt;

use burn::tensor::{Device, Tensor};

use super::mask::Mask;
use super::weights::{AttentionWeights, ZeroInProjBias};
use super::shapes::{check_heads, embed_of, swap_for};
use crate::block::Block;
use crate::deferred::{Deferred, layer_module};
use crate::error::Result;
use crate::init::Init;
use crate::layers::rnn::Layout;
use crate::ndtensor::NdTensor;

/// Multi-head attention, PyTorch's: `MultiHeadAttention::new(4)` is
/// `nn.MultiheadAttention(E, 4)` with `E` from the first input.
///
/// Its parameters are PyTorch's, by name and layout: `in_proj_weight` `[3E, E]`,
/// `in_proj_bias` `[3E]`, `out_proj.weight` `[E, E]`, `out_proj.bias` `[E]`. `initialize`
/// draws the weights from its [`Init`] (`Init::Xavier` is PyTorch's `xavier_uniform_` for
/// `in_proj_weight`) and sets the biases to zero, as PyTorch does.
#[derive(Debug, Clone)]
pub struct MultiHeadAttention {
    heads: usize,
    dropout: f64,
    layout: Layout,
    use_bias: bool,
    embed_dim: Option<usize>,
    pub(super) weights: Deferred<AttentionWeights>,
}

impl MultiHeadAttention {
    /// `num_heads` heads, no dropout, `[time, batch, features]` (PyTorch's defaults), the
    /// embedding size inferred.
    pub fn new(heads: usize) -> Self {
        Self {
            heads,
            dropout: 0.0,
            layout: Layout::Tnc,
            use_bias: true,
            embed_dim: None,
            weights: Deferred::new("MultiHeadAttention"),
        }
    }

    /// `embed_dim`: declares the embedding size, so that `initialize` creates the parameters
    /// at once.
    pub fn embed_dim(mut self, embed_dim: usize) -> Self {
        self.embed_dim = Some(embed_dim);
        self
    }

    /// `dropout`: applied to the attention weights, in training.
    pub fn dropout(mut self, rate: f64) -> Self {
        self.dropout = rate;
        self
    }

    /// `batch_first=True` is [`Layout::Ntc`]; the default is [`Layout::Tnc`].
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }

    /// `bias=False` drops `in_proj_bias` and `out_proj.bias`.
    pub fn use_bias(mut self, use_bias: bool) -> Self {
        self.use_bias = use_bias;
        self
    }

    /// The number of heads.
    pub fn heads(&self) -> usize {
        self.heads
    }

    /// The embedding size, once known: the parameters', or as declared.
    pub fn known_embed_dim(&self) -> Option<usize> {
        self.weights
            .get()
            .map(AttentionWeights::embed)
            .or(self.embed_dim)
    }

    /// PyTorch's `forward(query, key, value)`: the output (the query's shape) and the
    /// attention weights averaged over the heads, `[batch, queries, keys]` in either layout
    /// (PyTorch's `need_weights=True`; after dropout, as PyTorch returns them).
    ///
    /// # Shapes
    /// - `q`: `[queries, batch, E]` (`Tnc`) or `[batch, queries, E]` (`Ntc`)
    /// - `k`, `v`: `[keys, batch, E]` or `[batch, keys, E]`
    ///
    /// # Panics
    /// Before the embedding size is known, on inputs of other shapes, or a mask that does not
    /// fit them, naming the shapes.
    pub fn forward_qkv(
        &self,
        q: Tensor<3>,
        k: Tensor<3>,
        v: Tensor<3>,
        mask: Option<&Mask>,
    ) -> (Tensor<3>, Tensor<3>) {
        let weights = self.weights.module(self);
        let (q, k, v) = (
            swap_for(self.layout, q),
            swap_for(self.layout, k),
            swap_for(self.layout, v),
        );
        let embed = weights.embed();
        let [batch, queries, features] = q.dims();
        let [_, keys, _] = k.dims();
        assert!(
            features == embed && k.dims() == [batch, keys, embed] && v.dims() == k.dims(),
            "{self} takes a query of {embed} features and a key and value of one shape, with \
             the query's batch (batch first: [batch, steps, features]); it was given {:?}, \
             {:?} and {:?}",
            q.dims(),
            k.dims(),
            v.dims()
        );
        let (y, each) = weights.attend(self.heads, q, k, v, mask);
        (
            swap_for(self.layout, y),
            average(each, batch, queries, keys),
        )
    }

    /// Its parameters once they exist, its heads and its layout: what ONNX export writes.
    pub(crate) fn parts(&self) -> Option<(&AttentionWeights, usize, Layout)> {
        Some((self.weights.get()?, self.heads, self.layout))
    }

    fn build(&self, embed: usize, device: &Device) -> AttentionWeights {
        AttentionWeights::zeros(embed, self.use_bias, self.dropout, device)
    }

    fn check(&self, embed: usize) -> Result<()> {
        check_heads(self, embed, self.heads, self.dropout)
    }
}

/// The weights of every head, averaged: `[batch, queries, keys]`.
fn average(each: Tensor<4>, batch: usize, queries: usize, keys: usize) -> Tensor<3> {
    each.mean_dim(1).reshape([batch, queries, keys])
}

impl Block for MultiHeadAttention {
    /// Self-attention, PyTorch's `mha(x, x, x)[0]`.
    ///
    /// # Shapes
    /// - input: `[time, batch, E]` (`Tnc`) or `[batch, time, E]` (`Ntc`)
    /// - output: the input's shape
    fn forward(&self, x: NdTensor) -> NdTensor {
        let weights = self.weights.module(self);
        let x = swap_for(self.layout, x.rank::<3>());
        let embed = weights.embed();
        assert!(
            x.dims()[2] == embed,
            "{self} takes inputs of {embed} features; it was given {:?}",
            x.dims()
        );
        let (y, _) = weights.attend_self(self.heads, x, None);
        swap_for(self.layout, y).into()
    }

    fn infer(mut self, x: NdTensor) -> Result<(Self, NdTensor)> {
        let embed = embed_of(&self, &x.dims(), self.layout, self.known_embed_dim())?;
        self.check(embed)?;
        let fresh = self.weights.get().is_none();
        let layer = self.clone();
        self.weights
            .resolve(&layer, &x.device(), |device| Ok(layer.build(embed, device)))?;
        if fresh {
            self.weights = ZeroInProjBias::apply(self.weights);
        }
        let y = self.forward(x);
        Ok((self, y))
    }

    fn initialize(mut self, init: Init, device: &Device) -> Self {
        // A declared size that cannot take the heads is reported at `infer`.
        let declared = self
            .embed_dim
            .filter(|&embed| self.check(embed).is_ok())
            .map(|embed| {
                let layer = self.clone();
                move |device: &Device| layer.build(embed, device)
            });
        self.weights.initialize(init, device, declared);
        self.weights = ZeroInProjBias::apply(self.weights);
        self
    }
}

impl fmt::Display for MultiHeadAttention {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.known_embed_dim() {
            Some(embed) => write!(f, "MultiHeadAttention({embed}, {} heads", self.heads)?,
            None => write!(f, "MultiHeadAttention(?, {} heads", self.heads)?,
        }
        if self.dropout > 0.0 {
            write!(f, ", dropout {}", self.dropout)?;
        }
        if self.layout == Layout::Ntc {
            write!(f, ", NTC")?;
        }
        if !self.use_bias {
            write!(f, ", no bias")?;
        }
        write!(f, ")")
    }
}

layer_module!(MultiHeadAttention, weights);
