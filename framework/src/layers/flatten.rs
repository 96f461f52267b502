//! `Flatten`: Gluon's `nn.Flatten()`, `[batch, d1, d2, …]` → `[batch, d1·d2·…]`.
//!
//! ```
//! use burn::prelude::*;
//! use ember::{Block, Flatten};
//! let x = Tensor::<4>::ones([2, 3, 4, 5], &Device::flex());
//! assert_eq!(Flatten.forward(x.into()).dims(), [2, 60]);
//! ```

use std::fmt;

use crate::block::Block;
use crate::deferred::layer_module;
use crate::error::{Error, Result};
use crate::ndtensor::NdTensor;

/// `nn.Flatten()`. It holds no parameter.
#[derive(Debug, Clone, Copy, Default)]
pub struct Flatten;

impl Block for Flatten {
    /// # Shapes
    /// - input: `[batch, d1, d2, …]`
    /// - output: `[batch, d1·d2·…]`
    fn forward(&self, x: NdTensor) -> NdTensor {
        x.flatten().into()
    }

    fn infer(self, x: NdTensor) -> Result<(Self, NdTensor)> {
        if x.ndim() < 2 {
            return Err(Error::Shape {
                what: self.to_string(),
                expected: "[batch, d1, …]".to_string(),
                got: x.dims(),
            });
        }
        Ok((self, self.forward(x)))
    }
}

impl fmt::Display for Flatten {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Flatten")
    }
}

layer_module!(Flatten);
