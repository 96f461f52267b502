//! `Dropout(rate)`: Gluon's dropout over burn-nn's. In training (on an autodiff device, the
//! counterpart of Gluon's `autograd.record()`), each unit is zeroed with probability `rate`
//! and the kept ones are scaled by 1 / (1 − rate); in inference (a `Module::valid` copy, as
//! `fit` evaluates) it is the identity. Inside [`random::with_stream`](crate::random::with_stream)
//! (as `Fit` with a seed runs each step) the masks come from that thread's stream, so that no
//! other thread's draws change them; elsewhere from burn's generator (on burn-flex, from a
//! stream it seeds: [`random`](crate::random) says why).
//!
//! ```
//! use burn::prelude::*;
//! use burn::module::Module;
//! use ember::{Block, Dropout};
//!
//! let device = Device::flex().autodiff();
//! let dropout = Dropout::new(0.5);
//! let x = || Tensor::<2>::ones([100, 100], &device);
//! let y: Tensor<2> = dropout.forward(x().into()).rank();
//! let kept = y.clone().greater_elem(0.0).int().sum().into_scalar::<i64>();
//! assert!((4500..5500).contains(&kept), "{kept} of 10000 kept");
//! assert_eq!(y.max().into_scalar::<f32>(), 2.0);
//! // Inference: the valid copy, on the inner device, passes its input through.
//! let inference = dropout.valid();
//! let x = Tensor::<2>::ones([3, 3], &Device::flex());
//! let y: Tensor<2> = inference.forward(x.clone().into()).rank();
//! assert_eq!(y.into_data(), x.into_data());
//! ```

use std::fmt;

use burn::module::Param;
use burn::nn::Dropout as BurnDropout;
use burn::tensor::Tensor;

use crate::block::Block;
use crate::deferred::layer_module;
use crate::error::{Error, Result};
use crate::ndtensor::{NdTensor, nd_map};
use crate::random;

/// `nn.Dropout(rate)`.
#[derive(Debug, Clone)]
pub struct Dropout {
    dropout: BurnDropout,
}

impl Dropout {
    /// Drops each unit with probability `rate`, in [0, 1); a rate outside it is reported by
    /// [`Block::infer`].
    pub fn new(rate: f64) -> Self {
        // burn-nn's `DropoutConfig::init` would panic on a rate outside [0, 1); the layer is
        // built as it builds it, and the rate checked where errors can be returned.
        Self {
            dropout: BurnDropout {
                prob: rate,
                training: Param::from_bool(true),
            },
        }
    }

    /// The probability of dropping a unit.
    pub fn rate(&self) -> f64 {
        self.dropout.prob
    }

    /// burn-nn's forward, with the mask from this thread's stream where there is one, else on
    /// burn-flex from a stream burn's generator seeds ([`random`]): the same conditions for
    /// the identity, the same values (kept units times 1 / (1 − rate)).
    pub(crate) fn drop_units<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        let dropout = &self.dropout;
        if !dropout.training.is_enabled() || !x.device().is_autodiff() || dropout.prob == 0.0 {
            return x;
        }
        random::count_mask();
        let (keep, device) = (1.0 - dropout.prob, x.device());
        let scale = (1.0 / keep) as f32;
        let mask = random::kept_mask(x.shape(), keep, scale)
            .or_else(|| random::kept_mask_on(&device, x.shape(), keep, scale));
        match mask {
            Some(mask) => {
                let mask = Tensor::from_data(mask, &x.device());
                x * mask
            }
            None => dropout.forward(x),
        }
    }
}

impl Block for Dropout {
    /// # Shapes
    /// Any input; the output has its shape.
    fn forward(&self, x: NdTensor) -> NdTensor {
        nd_map!(x, t => self.drop_units(t))
    }

    fn infer(self, x: NdTensor) -> Result<(Self, NdTensor)> {
        if !(0.0..1.0).contains(&self.rate()) {
            return Err(Error::InvalidValue {
                name: "dropout rate",
                value: self.rate().to_string(),
                reason: "must lie in [0, 1)".to_string(),
            });
        }
        Ok((self, x))
    }
}

impl fmt::Display for Dropout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Dropout(rate={})", self.rate())
    }
}

layer_module!(Dropout, dropout);
