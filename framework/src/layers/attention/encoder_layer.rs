//! `TransformerEncoderLayer(heads, dim_feedforward)`: `torch.nn.TransformerEncoderLayer`
//! (d2l's `TransformerEncoderBlock`), self-attention then a position-wise feed-forward
//! network, each with dropout, a residual connection and a LayerNorm:
//!
//! ```text
//! post-norm (the default):  x = norm1(x + sa(x));      x = norm2(x + ff(x))
//! pre-norm (norm_first):    x = x + sa(norm1(x));      x = x + ff(norm2(x))
//! sa(x) = dropout1(self_attn(x, x, x))    ff(x) = dropout2(linear2(dropout(act(linear1(x)))))
//! ```
//!
//! The model size `d_model` is taken from the first input. The parameters are PyTorch's:
//! `self_attn.in_proj_weight`, `self_attn.in_proj_bias`, `self_attn.out_proj.weight`/`bias`,
//! `linear1.weight` (`[dim_feedforward, d_model]`), `linear1.bias`, `linear2.weight`,
//! `linear2.bias`, `norm1.weight`/`bias`, `norm2.weight`/`bias`.

use std::fmt;

use burn::module::Module;
use burn::nn::{LayerNorm as BurnLayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::{Device, Tensor};

use super::boxed::Boxed;
use super::mask::Mask;
use super::weights::{AttentionWeights, ZeroInProjBias, apply_linear};
use super::shapes::{check_heads, embed_of, swap_for};
use crate::block::Block;
use crate::deferred::{Deferred, layer_module};
use crate::error::{Error, Result};
use crate::init::Init;
use crate::layers::activation::Activation;
use crate::layers::dropout::Dropout;
use crate::layers::norm::layer_norm;
use crate::layers::rnn::Layout;
use crate::ndtensor::NdTensor;

/// One layer's parameters and dropouts, in PyTorch's order and names.
#[derive(Module, Debug)]
pub(crate) struct EncoderWeights {
    pub(crate) self_attn: AttentionWeights,
    pub(crate) linear1: Linear,
    dropout: Dropout,
    pub(crate) linear2: Linear,
    pub(crate) norm1: BurnLayerNorm,
    pub(crate) norm2: BurnLayerNorm,
    dropout1: Dropout,
    dropout2: Dropout,
}

/// PyTorch's `nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward)`, `d_model` from
/// the first input: `TransformerEncoderLayer::new(4, 64)`.
#[derive(Debug, Clone)]
pub struct TransformerEncoderLayer {
    heads: usize,
    dim_feedforward: usize,
    dropout: f64,
    activation: Activation,
    norm_first: bool,
    layout: Layout,
    eps: f64,
    use_bias: bool,
    d_model: Option<usize>,
    weights: Deferred<Boxed<EncoderWeights>>,
}

impl TransformerEncoderLayer {
    /// `nhead` heads and a feed-forward network of `dim_feedforward` units; PyTorch's
    /// defaults otherwise: dropout 0.1, relu, post-norm, `[time, batch, features]`, LayerNorm
    /// epsilon 1e-5, biases.
    pub fn new(heads: usize, dim_feedforward: usize) -> Self {
        Self {
            heads,
            dim_feedforward,
            dropout: 0.1,
            activation: Activation::Relu,
            norm_first: false,
            layout: Layout::Tnc,
            eps: 1e-5,
            use_bias: true,
            d_model: None,
            weights: Deferred::new("TransformerEncoderLayer"),
        }
    }

    /// `d_model`: declares the model size, so that `initialize` creates the parameters at once.
    pub fn d_model(mut self, d_model: usize) -> Self {
        self.d_model = Some(d_model);
        self
    }

    /// `dropout`: on the attention weights, inside the feed-forward network and on both
    /// sublayers' outputs, in training.
    pub fn dropout(mut self, rate: f64) -> Self {
        self.dropout = rate;
        self
    }

    /// `activation`: the feed-forward network's, `Relu` (the default) or `Gelu` in PyTorch.
    pub fn activation(mut self, activation: Activation) -> Self {
        self.activation = activation;
        self
    }

    /// `norm_first=True`: each sublayer normalizes its input (pre-norm) instead of the sum.
    pub fn norm_first(mut self, norm_first: bool) -> Self {
        self.norm_first = norm_first;
        self
    }

    /// `batch_first=True` is [`Layout::Ntc`]; the default is [`Layout::Tnc`].
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }

    /// `layer_norm_eps`.
    pub fn layer_norm_eps(mut self, eps: f64) -> Self {
        self.eps = eps;
        self
    }

    /// `bias=False`: no bias in the attention, the linear layers or the LayerNorms.
    pub fn use_bias(mut self, use_bias: bool) -> Self {
        self.use_bias = use_bias;
        self
    }

    /// The model size, once known: the parameters', or as declared.
    pub fn known_d_model(&self) -> Option<usize> {
        self.weights
            .get()
            .map(|w| w.self_attn.embed())
            .or(self.d_model)
    }

    /// The layout of its inputs and outputs.
    pub fn layout_of(&self) -> Layout {
        self.layout
    }

    /// Its parameters once they exist, and the options ONNX export needs: heads, activation,
    /// pre-norm, LayerNorm epsilon.
    pub(crate) fn parts(&self) -> Option<(&EncoderWeights, usize, Activation, bool, f64)> {
        let weights = self.weights.get()?;
        Some((weights, self.heads, self.activation, self.norm_first, self.eps))
    }

    /// PyTorch's `forward(src, mask, src_key_padding_mask)`, both masks in one [`Mask`].
    ///
    /// # Shapes
    /// `[time, batch, d_model]` (`Tnc`) or `[batch, time, d_model]` (`Ntc`), in and out.
    ///
    /// # Panics
    /// Before the model size is known, on an input of another size, or a mask that does not
    /// fit it.
    pub fn forward_masked(&self, x: Tensor<3>, mask: Option<&Mask>) -> Tensor<3> {
        let x = swap_for(self.layout, x);
        swap_for(self.layout, self.encode(x, mask))
    }

    /// The layer on `[batch, time, d_model]`, whatever its layout.
    pub(super) fn encode(&self, x: Tensor<3>, mask: Option<&Mask>) -> Tensor<3> {
        let w = self.weights.module(self);
        let d_model = w.self_attn.embed();
        assert!(
            x.dims()[2] == d_model,
            "{self} takes inputs of {d_model} features; it was given {:?} (batch first)",
            x.dims()
        );
        let attend = |x: Tensor<3>| {
            let (y, _) = w.self_attn.attend_self(self.heads, x, mask);
            w.dropout1.drop_units(y)
        };
        let feed_forward = |x: Tensor<3>| {
            let hidden = self.activation.apply(apply_linear(&w.linear1, x));
            w.dropout2
                .drop_units(apply_linear(&w.linear2, w.dropout.drop_units(hidden)))
        };
        let norm1 = |x| layer_norm(&w.norm1, self.eps, x);
        let norm2 = |x| layer_norm(&w.norm2, self.eps, x);
        if self.norm_first {
            let x = x.clone() + attend(norm1(x));
            x.clone() + feed_forward(norm2(x))
        } else {
            let x = norm1(x.clone() + attend(x));
            norm2(x.clone() + feed_forward(x))
        }
    }

    fn build(&self, d_model: usize, device: &Device) -> Boxed<EncoderWeights> {
        let linear = |d_in, d_out| {
            LinearConfig::new(d_in, d_out)
                .with_bias(self.use_bias)
                .init(device)
        };
        let norm = || {
            LayerNormConfig::new(d_model)
                .with_epsilon(self.eps)
                .with_bias(self.use_bias)
                .init(device)
        };
        Boxed::new(EncoderWeights {
            self_attn: AttentionWeights::zeros(d_model, self.use_bias, self.dropout, device),
            linear1: linear(d_model, self.dim_feedforward),
            dropout: Dropout::new(self.dropout),
            linear2: linear(self.dim_feedforward, d_model),
            norm1: norm(),
            norm2: norm(),
            dropout1: Dropout::new(self.dropout),
            dropout2: Dropout::new(self.dropout),
        })
    }

    fn check(&self, d_model: usize) -> Result<()> {
        check_heads(self, d_model, self.heads, self.dropout)?;
        if self.dim_feedforward == 0 {
            return Err(Error::InvalidValue {
                name: "dim_feedforward",
                value: "0".to_string(),
                reason: format!("{self}: the feed-forward network needs 1 unit or more"),
            });
        }
        if !(self.eps.is_finite() && self.eps > 0.0) {
            return Err(Error::InvalidValue {
                name: "layer_norm_eps",
                value: self.eps.to_string(),
                reason: format!("{self}: must be a finite number above 0"),
            });
        }
        Ok(())
    }
}

impl Block for TransformerEncoderLayer {
    /// The layer without masks.
    ///
    /// # Shapes
    /// `[time, batch, d_model]` (`Tnc`) or `[batch, time, d_model]` (`Ntc`), in and out.
    fn forward(&self, x: NdTensor) -> NdTensor {
        self.forward_masked(x.rank::<3>(), None).into()
    }

    fn infer(mut self, x: NdTensor) -> Result<(Self, NdTensor)> {
        let d_model = embed_of(&self, &x.dims(), self.layout, self.known_d_model())?;
        self.check(d_model)?;
        let fresh = self.weights.get().is_none();
        let layer = self.clone();
        self.weights.resolve(&layer, &x.device(), |device| {
            Ok(layer.build(d_model, device))
        })?;
        if fresh {
            self.weights = ZeroInProjBias::apply(self.weights);
        }
        let y = self.forward(x);
        Ok((self, y))
    }

    fn initialize(mut self, init: Init, device: &Device) -> Self {
        // A declared size the options do not fit is reported at `infer`.
        let declared = self
            .d_model
            .filter(|&d_model| self.check(d_model).is_ok())
            .map(|d_model| {
                let layer = self.clone();
                move |device: &Device| layer.build(d_model, device)
            });
        self.weights.initialize(init, device, declared);
        self.weights = ZeroInProjBias::apply(self.weights);
        self
    }
}

impl fmt::Display for TransformerEncoderLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.known_d_model() {
            Some(d_model) => write!(f, "TransformerEncoderLayer({d_model}")?,
            None => write!(f, "TransformerEncoderLayer(?")?,
        }
        write!(
            f,
            ", {} heads, {} feedforward, {}",
            self.heads, self.dim_feedforward, self.activation
        )?;
        if self.dropout > 0.0 {
            write!(f, ", dropout {}", self.dropout)?;
        }
        if self.norm_first {
            write!(f, ", norm first")?;
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

layer_module!(TransformerEncoderLayer, weights);
