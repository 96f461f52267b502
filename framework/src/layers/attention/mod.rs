//! Attention, PyTorch's: [`MultiHeadAttention`] (`torch.nn.MultiheadAttention`),
//! [`TransformerEncoderLayer`] and [`TransformerEncoder`], with d2l's valid lengths and
//! PyTorch's additive masks in one [`Mask`]. Each takes its embedding size from the first
//! input, as every ember layer does; the parameters are PyTorch's by name and layout, so a
//! `state_dict` of the same modules loads (`tests/layers/attention.rs` holds outputs, weights
//! and gradients within 1e-5 of PyTorch's).
//!
//! ```
//! use burn::prelude::*;
//! use burn::tensor::Int;
//! use ember::{Block, Init, Layout, Mask, MultiHeadAttention};
//!
//! let device = Device::flex();
//! let mha = MultiHeadAttention::new(2).layout(Layout::Ntc);
//! let x = Tensor::<3>::ones([3, 5, 8], &device); // 3 sequences of 5 steps of 8 features
//! let mha = mha.initialize(Init::Xavier, &device).infer_shape(x.clone()).unwrap();
//! assert_eq!(mha.collect_params().get("in_proj_weight").unwrap().shape, [24, 8]);
//! assert_eq!(mha.collect_params().get("out_proj.weight").unwrap().shape, [8, 8]);
//! // d2l's valid lengths: the first sequence sees its first 2 keys only.
//! let mask = Mask::new().valid_lens(Tensor::<1, Int>::from_ints([2, 5, 5], &device));
//! let (y, weights) = mha.forward_qkv(x.clone(), x.clone(), x, Some(&mask));
//! assert_eq!(y.dims(), [3, 5, 8]);
//! assert_eq!(weights.dims(), [3, 5, 5]); // averaged over the heads
//! let w = weights.into_data().try_to_vec::<f32>().unwrap();
//! assert_eq!(w[2..5], [0.0, 0.0, 0.0]);
//! ```

mod boxed;
mod encoder;
mod encoder_layer;
mod mask;
mod shapes;
mod multi_head;
mod weights;

pub use encoder::TransformerEncoder;
pub use encoder_layer::TransformerEncoderLayer;
pub use mask::Mask;
pub use multi_head::MultiHeadAttention;
pub(crate) use encoder_layer::EncoderWeights;
pub(crate) use weights::AttentionWeights;

#[cfg(test)]
mod tests;
