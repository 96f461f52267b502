//! Mixed precision, with the semantics of PyTorch's `torch.autocast(dtype=torch.bfloat16)`:
//! inside [`autocast`]`(Precision::Bf16, ..)`, Dense and the convolutions round their input and
//! weights to bf16 and multiply them in bf16 (products accumulated in f32, the result rounded
//! to bf16), then hand an f32 tensor on. Everything else stays in f32: the parameters (the
//! master weights the optimizer updates), the gradients that reach them (autodiff casts each
//! one back), the optimizer's state, biases, activations, BatchNorm's statistics, softmax and
//! the losses.
//!
//! ```
//! use burn::prelude::*;
//! use ember::precision::{Precision, autocast};
//! use ember::{Block, Dense, Init};
//!
//! let device = Device::flex().autodiff();
//! let net = Dense::new(2).in_units(3).initialize(Init::default(), &device);
//! let x = Tensor::<2>::from_floats([[1.001, 2.0, 3.0]], &device);
//! let y: Tensor<2> = autocast(Precision::Bf16, || net.forward(x.clone().into())).rank();
//! let exact: Tensor<2> = net.forward(x.into()).rank();
//! assert_eq!(y.dtype(), exact.dtype()); // f32 out, either way
//! assert!(y.sub(exact).abs().max().into_scalar::<f32>() > 0.0); // 1.001 is no bf16
//! ```
//!
//! Where the products run in bf16 is the backend's: burn's CUDA backend on the card's tensor
//! cores; on the CPU, ember's oneDNN kernels where the CPU multiplies bf16 (AVX512_BF16 or AMX:
//! [`crate::kernels::status`]'s `bf16`), their results, the bias and the activation in f32.
//! Elsewhere burn-flex rounds to bf16 but multiplies in f32 (bf16's numbers, not its speed).
//! burn's wgpu has no bf16 arithmetic (WGSL has no such type): [`Precision::check`] says which
//! device can.

use std::cell::Cell;
use std::fmt;
use std::str::FromStr;

use burn::tensor::{DType, Device, FloatDType, Tensor};

use crate::error::{Error, Result};

/// The precision in which ember's layers compute their products.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Precision {
    /// Everything in f32 (the default).
    #[default]
    F32,
    /// Dense's and the convolutions' products in bf16, everything else in f32.
    Bf16,
}

impl Precision {
    /// Every precision, as the command line takes them.
    pub const ALL: [Precision; 2] = [Self::F32, Self::Bf16];

    /// The name as typed: `f32`, `bf16`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::Bf16 => "bf16",
        }
    }

    /// Whether `device` computes in this precision: an error where its burn backend has no
    /// such arithmetic (the caller knows the device's name).
    pub fn check(self, device: &Device) -> Result<()> {
        match self {
            Self::F32 => Ok(()),
            Self::Bf16 if device.supports_dtype(DType::BF16) => Ok(()),
            Self::Bf16 => Err(Error::InvalidValue {
                name: "precision",
                value: self.to_string(),
                reason: "this device's burn backend has no bf16 arithmetic (wgpu's has none: \
                         its shaders, WGSL, have no such type); use f32 there"
                    .to_string(),
            }),
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl FromStr for Precision {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "f32" | "fp32" | "float32" => Ok(Self::F32),
            "bf16" | "bfloat16" => Ok(Self::Bf16),
            _ => Err(Error::InvalidValue {
                name: "precision",
                value: format!("'{s}'"),
                reason: "it is f32 or bf16".to_string(),
            }),
        }
    }
}

thread_local! {
    /// This thread's precision: what [`autocast`] set, f32 outside.
    static COMPUTE: Cell<Precision> = const { Cell::new(Precision::F32) };
}

/// Runs `f` with this thread's layers computing in `precision`, and restores the one before
/// after, even if `f` panics. Nested calls take the innermost precision, as PyTorch's do; a
/// thread started inside `f` computes in f32 until it calls `autocast` itself.
pub fn autocast<T>(precision: Precision, f: impl FnOnce() -> T) -> T {
    struct Restore(Precision);
    impl Drop for Restore {
        fn drop(&mut self) {
            COMPUTE.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(COMPUTE.with(|c| c.replace(precision)));
    f()
}

/// The precision this thread's layers compute in now.
pub fn current() -> Precision {
    COMPUTE.with(Cell::get)
}

/// `x` as this thread's products take it: rounded to bf16 under `autocast(Bf16, ..)`, else
/// itself.
pub(crate) fn lowered<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    match current() {
        Precision::F32 => x,
        Precision::Bf16 => x.cast(FloatDType::BF16),
    }
}

/// A product's result `y` back in f32, for the layers after it.
pub(crate) fn raised<const D: usize>(y: Tensor<D>) -> Tensor<D> {
    match current() {
        Precision::F32 => y,
        Precision::Bf16 => y.cast(FloatDType::F32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_others_are_refused_by_value() {
        for p in Precision::ALL {
            assert_eq!(p.to_string().parse::<Precision>().unwrap(), p);
        }
        assert_eq!("BFloat16".parse::<Precision>().unwrap(), Precision::Bf16);
        let err = "fp16".parse::<Precision>().unwrap_err().to_string();
        assert!(
            err.contains("'fp16'") && err.contains("f32 or bf16"),
            "{err}"
        );
    }

    #[test]
    fn autocast_nests_and_restores_even_after_a_panic() {
        assert_eq!(current(), Precision::F32);
        autocast(Precision::Bf16, || {
            assert_eq!(current(), Precision::Bf16);
            autocast(Precision::F32, || assert_eq!(current(), Precision::F32));
            assert_eq!(current(), Precision::Bf16);
            // Another thread starts in f32.
            std::thread::spawn(|| assert_eq!(current(), Precision::F32))
                .join()
                .unwrap();
        });
        let panicked = std::panic::catch_unwind(|| autocast(Precision::Bf16, || panic!("inside")));
        assert!(panicked.is_err());
        assert_eq!(current(), Precision::F32);
    }

    #[test]
    fn flex_computes_in_bf16() {
        assert!(Precision::Bf16.check(&Device::flex()).is_ok());
        assert!(Precision::F32.check(&Device::flex()).is_ok());
    }
}
