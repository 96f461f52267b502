//! What a batch normalization kernel returns.

use burn::tensor::Tensor;

/// A batch normalization's output, and the batch's (mean, biased variance) where it normalized
/// with them rather than with given ones.
pub(crate) type Normalized<const D: usize> = (Tensor<D>, Option<(Tensor<1>, Tensor<1>)>);
