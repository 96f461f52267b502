//! `TransformerEncoder(layer, num_layers)`: `torch.nn.TransformerEncoder`, `num_layers`
//! copies of one [`TransformerEncoderLayer`] in a chain, then an optional final norm. The
//! parameters are PyTorch's: `layers.0.self_attn.in_proj_weight`, …, `norm.weight`.

use std::fmt;

use burn::module::Module;
use burn::tensor::{Device, Tensor};

use super::encoder_layer::TransformerEncoderLayer;
use super::mask::Mask;
use super::shapes::swap_for;
use crate::block::Block;
use crate::deferred::layer_module;
use crate::error::{Error, Result};
use crate::init::Init;
use crate::layers::norm::LayerNorm;
use crate::ndtensor::NdTensor;

/// The layers and the norm, under PyTorch's names.
#[derive(Module, Debug)]
pub(crate) struct Stack {
    layers: Vec<TransformerEncoderLayer>,
    norm: Option<LayerNorm>,
}

/// PyTorch's `nn.TransformerEncoder(encoder_layer, num_layers, norm)`:
/// `TransformerEncoder::new(TransformerEncoderLayer::new(4, 64), 2).norm(LayerNorm::new())`.
#[derive(Debug, Clone)]
pub struct TransformerEncoder {
    stack: Stack,
    causal: bool,
}

impl TransformerEncoder {
    /// `num_layers` copies of `layer`, each with parameters of its own: a layer already
    /// initialized gives each copy its values under parameter ids of its own, so that each
    /// copy has its own gradients and optimizer state (PyTorch's deep copies).
    pub fn new(layer: TransformerEncoderLayer, num_layers: usize) -> Self {
        let copies = (0..num_layers).map(|_| layer.clone().map(&mut OwnIds)).collect();
        Self {
            stack: Stack {
                layers: copies,
                norm: None,
            },
            causal: false,
        }
    }

    /// PyTorch's `is_causal=True` in [`Block::forward`]: step `i` attends to steps `0..=i`
    /// only ([`Mask::causal`]), as a language model that predicts each next token must.
    pub fn causal(mut self, causal: bool) -> Self {
        self.causal = causal;
        self
    }

    /// `norm`: applied to the last layer's output (`LayerNorm::new()`, its size inferred).
    pub fn norm(mut self, norm: LayerNorm) -> Self {
        self.stack.norm = Some(norm);
        self
    }

    /// The layers, in order.
    pub fn layers(&self) -> &[TransformerEncoderLayer] {
        &self.stack.layers
    }

    /// The final norm, if any.
    pub fn final_norm(&self) -> Option<&LayerNorm> {
        self.stack.norm.as_ref()
    }

    /// Whether [`Block::forward`] applies the causal mask.
    pub fn is_causal(&self) -> bool {
        self.causal
    }

    /// PyTorch's `forward(src, mask, src_key_padding_mask)`: every layer with the same masks,
    /// then the norm.
    ///
    /// # Shapes
    /// As the layers': `[time, batch, d_model]` (`Tnc`) or `[batch, time, d_model]` (`Ntc`).
    ///
    /// # Panics
    /// As [`TransformerEncoderLayer::forward_masked`].
    pub fn forward_masked(&self, x: Tensor<3>, mask: Option<&Mask>) -> Tensor<3> {
        let Some(first) = self.stack.layers.first() else {
            return self.normed(x);
        };
        let layout = first.layout_of();
        let x = swap_for(layout, x);
        let x = self
            .stack
            .layers
            .iter()
            .fold(x, |x, layer| layer.encode(x, mask));
        self.normed(swap_for(layout, x))
    }

    fn normed(&self, x: Tensor<3>) -> Tensor<3> {
        match &self.stack.norm {
            Some(norm) => norm.forward(x.into()).rank(),
            None => x,
        }
    }
}

impl Block for TransformerEncoder {
    /// The encoder without masks, or with the causal one ([`TransformerEncoder::causal`]).
    ///
    /// # Shapes
    /// As [`TransformerEncoder::forward_masked`].
    fn forward(&self, x: NdTensor) -> NdTensor {
        let x: Tensor<3> = x.rank();
        let mask = self.causal.then(|| {
            let steps = match self.stack.layers.first().map(|l| l.layout_of()) {
                Some(crate::layers::rnn::Layout::Ntc) => x.dims()[1],
                _ => x.dims()[0],
            };
            Mask::causal(steps, &x.device())
        });
        self.forward_masked(x, mask.as_ref()).into()
    }

    /// Passes the example through each layer in turn, then the norm.
    fn infer(self, x: NdTensor) -> Result<(Self, NdTensor)> {
        if self.stack.layers.is_empty() {
            return Err(Error::InvalidValue {
                name: "num_layers",
                value: "0".to_string(),
                reason: format!("{self}: an encoder needs 1 layer or more"),
            });
        }
        let mut layers = Vec::with_capacity(self.stack.layers.len());
        let mut x = x;
        for layer in self.stack.layers {
            let (layer, y) = layer.infer(x)?;
            layers.push(layer);
            x = y;
        }
        let norm = match self.stack.norm {
            Some(norm) => {
                let (norm, y) = norm.infer(x)?;
                x = y;
                Some(norm)
            }
            None => None,
        };
        // The example's pass ran without the causal mask: its output's shape is the same.
        let encoder = Self {
            stack: Stack { layers, norm },
            causal: self.causal,
        };
        Ok((encoder, x))
    }

    fn initialize(self, init: Init, device: &Device) -> Self {
        let Stack { layers, norm } = self.stack;
        Self {
            causal: self.causal,
            stack: Stack {
                layers: layers
                    .into_iter()
                    .map(|layer| layer.initialize(init, device))
                    .collect(),
                norm: norm.map(|norm| norm.initialize(init, device)),
            },
        }
    }
}

/// Gives every parameter a new id, its values kept.
struct OwnIds;

impl burn::module::ModuleMapper for OwnIds {
    fn map_float<const D: usize>(
        &mut self,
        param: burn::module::Param<Tensor<D>>,
    ) -> burn::module::Param<Tensor<D>> {
        let require_grad = param.is_require_grad();
        let (_, value, _) = param.consume();
        burn::module::Param::from_tensor(value).set_require_grad(require_grad)
    }
}

impl fmt::Display for TransformerEncoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.stack.layers.first() {
            Some(layer) => write!(f, "TransformerEncoder({} × {layer}", self.layers().len())?,
            None => write!(f, "TransformerEncoder(0 layers")?,
        }
        if let Some(norm) = &self.stack.norm {
            write!(f, ", {norm}")?;
        }
        if self.causal {
            write!(f, ", causal")?;
        }
        write!(f, ")")
    }
}

layer_module!(TransformerEncoder, stack);
