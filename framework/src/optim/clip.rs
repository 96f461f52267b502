//! Gradient clipping, applied by [`crate::Optimizer`] after `step`'s rescaling and before the
//! update: [`Clipping::GlobalNorm`] over all gradients together (PyTorch's `clip_grad_norm_`,
//! Gluon's `clip_global_norm`) and [`Clipping::Value`] per element (Gluon's
//! `clip_gradient`).
//!
//! burn's own `GradientClipping::Norm` clips each tensor by its own norm, which is not what
//! either framework does, hence this file. The global norm never goes to the host: the scale
//! `min(1, max_norm / (norm + 1e-6))` is a tensor that multiplies every gradient, as PyTorch
//! computes it, so clipping adds no barrier to the loop.

use std::fmt;

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::Tensor;

use crate::error::Result;

/// How gradients are clipped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Clipping {
    /// Scale all gradients together so that their global L2 norm is at most this.
    pub global_norm: Option<f64>,
    /// Clamp every gradient element to [−value, value], after the norm's scaling.
    pub value: Option<f64>,
}

impl Clipping {
    /// No clipping.
    pub const NONE: Clipping = Clipping {
        global_norm: None,
        value: None,
    };

    /// Clipping to a global norm of at most `max_norm`.
    ///
    /// # Errors
    /// [`crate::Error::InvalidValue`] naming `max_norm` when it is not a finite number above 0.
    pub fn global_norm(max_norm: f64) -> Result<Self> {
        Self::NONE.with_global_norm(max_norm)
    }

    /// Clamping every element to [−value, value].
    ///
    /// # Errors
    /// [`crate::Error::InvalidValue`] naming `value` when it is not a finite number above 0.
    pub fn value(value: f64) -> Result<Self> {
        Self::NONE.with_value(value)
    }

    /// The same, with a global norm of at most `max_norm` too.
    ///
    /// # Errors
    /// As [`Clipping::global_norm`].
    pub fn with_global_norm(self, max_norm: f64) -> Result<Self> {
        Ok(Self {
            global_norm: Some(checked("clip norm", max_norm)?),
            ..self
        })
    }

    /// The same, with every element clamped to [−value, value] too.
    ///
    /// # Errors
    /// As [`Clipping::value`].
    pub fn with_value(self, value: f64) -> Result<Self> {
        Ok(Self {
            value: Some(checked("clip value", value)?),
            ..self
        })
    }

    /// Clips `grads`, the gradients of `net`'s parameters, in place.
    pub fn apply<M: Module>(&self, net: &M, grads: &mut GradientsParams) {
        if let Some(max_norm) = self.global_norm {
            let mut squares = SumOfSquares { grads, sum: None };
            net.visit(&mut squares);
            if let Some(sum) = squares.sum {
                // PyTorch's clip_grad_norm_: the scale is clamped at 1 on the device, never
                // compared on the host.
                let scale = (sum.sqrt().add_scalar(1e-6))
                    .recip()
                    .mul_scalar(max_norm)
                    .clamp_max(1.0);
                net.visit(&mut Scale { grads, scale });
            }
        }
        if let Some(value) = self.value {
            net.visit(&mut Clamp { grads, value });
        }
    }
}

impl fmt::Display for Clipping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.global_norm, self.value) {
            (None, None) => write!(f, "none"),
            (Some(n), None) => write!(f, "norm {n}"),
            (None, Some(v)) => write!(f, "value {v}"),
            (Some(n), Some(v)) => write!(f, "norm {n}, value {v}"),
        }
    }
}

fn checked(name: &'static str, value: f64) -> Result<f64> {
    super::positive::positive(name, value)
}

/// The sum of every gradient's squared elements, on the device.
struct SumOfSquares<'a> {
    grads: &'a GradientsParams,
    sum: Option<Tensor<1>>,
}

impl ModuleVisitor for SumOfSquares<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if let Some(grad) = self.grads.get::<D>(param.id) {
            let squares = grad.powi_scalar(2).sum();
            self.sum = Some(match self.sum.take() {
                Some(sum) => sum.add(squares),
                None => squares,
            });
        }
    }
}

/// Multiplies every gradient by a one-element tensor.
struct Scale<'a> {
    grads: &'a mut GradientsParams,
    scale: Tensor<1>,
}

impl ModuleVisitor for Scale<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if let Some(grad) = self.grads.remove::<D>(param.id) {
            let scale = self.scale.clone().unsqueeze::<D>();
            self.grads.register(param.id, grad.mul(scale));
        }
    }
}

/// Clamps every gradient element to [−value, value].
struct Clamp<'a> {
    grads: &'a mut GradientsParams,
    value: f64,
}

impl ModuleVisitor for Clamp<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if let Some(grad) = self.grads.remove::<D>(param.id) {
            self.grads
                .register(param.id, grad.clamp(-self.value, self.value));
        }
    }
}
