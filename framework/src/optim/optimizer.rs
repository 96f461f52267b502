//! Gluon's `Trainer`, named `Optimizer` here (the crate `ember-trainer` holds the loop): an
//! optimizer, a learning rate, and `step(batch_size)`.
//!
//! `step` rescales every gradient by `1 / batch_size` before the update (Gluon's
//! `rescale_grad`), so the per-example loss vector is simply `backward`-ed, as in the book.
//! Then gradients are clipped where [`Optimizer::clip`] says ([`Clipping`]). The optimizers
//! are burn's (`burn::optim`), not re-implemented here ([`OptimizerKind`]); Adam's and AdamW's
//! update of a burn-flex parameter runs burn's arithmetic as one pass over its elements.
//!
//! ```
//! use burn::prelude::*;
//! use ember::{Block, Dense, Init, L2Loss, Loss, Sequential, Optimizer};
//!
//! let device = Device::flex().autodiff();
//! let (x, y) = (Tensor::<2>::ones([8, 3], &device), Tensor::<2>::ones([8, 1], &device));
//! let net: Sequential = Sequential::new().add(Dense::new(1)).initialize(Init::default(), &device);
//! let mut net = net.infer_shape(x.clone()).unwrap();
//! // trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.01})
//! let mut trainer = Optimizer::new(&net, "sgd", 0.01).unwrap();
//! let l = L2Loss.forward(net.forward(x.into()).rank(), y).unwrap();
//! net = trainer.step(net, l.backward(), 8).unwrap();
//! ```

use std::fmt;

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::{GradientsParams, ModuleOptimizer};
use burn::tensor::Gradients;
use burn::tensor::Tensor;

use super::clip::Clipping;
use super::kind::{IntoOptimizer, OptimizerKind};
use crate::error::{Error, Result};

/// Gluon's default learning rate.
pub const DEFAULT_LEARNING_RATE: f64 = 0.01;

/// Applies an optimizer to a network's parameters with Gluon's `step(batch_size)`. A clone
/// has its own copy of the optimizer's state.
#[derive(Clone)]
pub struct Optimizer {
    kind: OptimizerKind,
    learning_rate: f64,
    clipping: Clipping,
    num_params: usize,
    optimizer: ModuleOptimizer,
    /// Whether it holds state: it stepped, or loaded a saved state.
    stateful: bool,
}

impl fmt::Debug for Optimizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Optimizer")
            .field("optimizer", &self.kind)
            .field("learning_rate", &self.learning_rate)
            .field("clipping", &self.clipping)
            .field("num_params", &self.num_params)
            .finish()
    }
}

impl Optimizer {
    /// `gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': lr})`. The optimizer is a
    /// name (`"sgd"`, `"adam"`, `"adamw"`, `"rmsprop"`, `"adagrad"`: PyTorch's defaults) or an
    /// [`OptimizerKind`] with its options; the rate must be finite and positive.
    ///
    /// ```
    /// use ember::{Dense, Optimizer, OptimizerKind, Sequential};
    /// use ember::optim::Clipping;
    ///
    /// let net: Sequential = Sequential::new().add(Dense::new(1));
    /// // trainer = gluon.Trainer(params, 'sgd', {'learning_rate': 0.1, 'momentum': 0.9,
    /// //                                          'clip_gradient': 5})
    /// let sgd = OptimizerKind::sgd().with_momentum(0.9).unwrap();
    /// let trainer = Optimizer::new(&net, sgd, 0.1).unwrap().clip(Clipping::value(5.0).unwrap());
    /// // torch.optim.AdamW(params, lr=1e-3), with PyTorch's defaults
    /// let adamw = Optimizer::new(&net, "adamw", 1e-3).unwrap();
    /// assert_eq!(adamw.optimizer(), OptimizerKind::adamw());
    /// ```
    pub fn new<M: Module>(
        net: &M,
        optimizer: impl IntoOptimizer,
        learning_rate: f64,
    ) -> Result<Self> {
        let kind = optimizer.into_optimizer()?;
        kind.check()?;
        let learning_rate = super::positive::positive("learning rate", learning_rate)?;
        Ok(Self {
            kind,
            learning_rate,
            clipping: Clipping::NONE,
            num_params: net.num_params(),
            optimizer: kind.build(),
            stateful: false,
        })
    }

    /// The learning rate.
    pub fn learning_rate(&self) -> f64 {
        self.learning_rate
    }

    /// Gluon's `set_learning_rate`.
    pub fn set_learning_rate(&mut self, learning_rate: f64) {
        self.learning_rate = learning_rate;
    }

    /// The optimizer and its hyper-parameters.
    pub fn optimizer(&self) -> OptimizerKind {
        self.kind
    }

    /// Clips every step's gradients, after their rescaling by `1 / batch_size` (Gluon's
    /// `clip_gradient` comes at the same point; PyTorch's `clip_grad_norm_` sees the mean
    /// loss's gradients, the same ones).
    pub fn clip(mut self, clipping: Clipping) -> Self {
        self.clipping = clipping;
        self
    }

    /// How gradients are clipped.
    pub fn clipping(&self) -> Clipping {
        self.clipping
    }

    /// Gluon's `trainer.step(batch_size)`: gradients are divided by `batch_size`, then the
    /// optimizer updates every parameter of `net`. burn modules are values, so the updated
    /// network is returned.
    pub fn step<M: Module>(&mut self, net: M, grads: Gradients, batch_size: usize) -> Result<M> {
        let params = GradientsParams::from_grads(grads, &net);
        self.step_params(net, params, batch_size)
    }

    /// [`Optimizer::step`] on gradients already gathered per parameter, such as the sum of every
    /// device's gradients in a data-parallel step (see [`crate::parallel`]): they are
    /// divided by `batch_size`, the examples of all devices together, then applied.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] when `batch_size` is 0.
    pub fn step_params<M: Module>(
        &mut self,
        net: M,
        mut params: GradientsParams,
        batch_size: usize,
    ) -> Result<M> {
        if batch_size == 0 {
            return Err(Error::InvalidValue {
                name: "batch size",
                value: "0".to_string(),
                reason: "step(batch_size) needs at least one example".to_string(),
            });
        }
        net.visit(&mut Rescale {
            grads: &mut params,
            scale: 1.0 / batch_size as f32,
        });
        self.clipping.apply(&net, &mut params);
        self.stateful = true;
        Ok(self.optimizer.step(self.learning_rate, net, params))
    }

    /// Whether it holds a state of its own (momentum buffers, Adam's moments and step count):
    /// it has stepped, or loaded a saved state.
    pub fn is_stateful(&self) -> bool {
        self.stateful
    }
}

impl Optimizer {
    /// Writes the optimizer's state (momentum buffers, Adam's moments and step count) to a
    /// burnpack file at `path`, keyed by the parameters' ids, which burn's burnpack store keeps
    /// with the parameters (checkpoints write both).
    ///
    /// # Errors
    /// [`Error::Io`] naming the file when writing fails.
    pub fn save_state(&self, path: &std::path::Path) -> Result<()> {
        self.optimizer
            .save(path)
            .map_err(|e| state_error(path, e.to_string()))
    }

    /// Reads back what [`Optimizer::save_state`] wrote. Each parameter's state goes to the
    /// parameter of the same id, so the network must come from the same checkpoint.
    ///
    /// burn creates the state on its default device (`burn::tensor::Device::default()`, which
    /// the environment variable `BURN_DEVICE` names; in a build with `cuda`, the card), and the
    /// next step moves each parameter's to that parameter's device. A program that trains on
    /// another device sets `BURN_DEVICE=flex` before it starts a thread, as `ember` does, so
    /// that a card it was not asked for is never opened.
    ///
    /// # Errors
    /// [`Error::Io`] naming the file when it cannot be read or is no optimizer state.
    pub fn load_state(mut self, path: &std::path::Path) -> Result<Self> {
        self.optimizer = self
            .optimizer
            .load(path)
            .map_err(|e| state_error(path, e.to_string()))?;
        self.stateful = true;
        Ok(self)
    }
}

fn state_error(path: &std::path::Path, message: String) -> Error {
    Error::io(
        path,
        std::io::Error::other(format!("optimizer state: {message}")),
    )
}

/// Multiplies each parameter's gradient by `scale` (Gluon's `rescale_grad`).
struct Rescale<'a> {
    grads: &'a mut GradientsParams,
    scale: f32,
}

impl ModuleVisitor for Rescale<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if let Some(grad) = self.grads.remove::<D>(param.id) {
            self.grads.register(param.id, grad.mul_scalar(self.scale));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Dense, Sequential};

    #[test]
    fn bad_names_rates_and_batch_sizes_are_errors() {
        let net: Sequential = Sequential::new().add(Dense::new(1));
        let err = Optimizer::new(&net, "adagrad2", 0.1)
            .unwrap_err()
            .to_string();
        assert!(err.contains("adagrad"), "{err}");
        let err = Optimizer::new(&net, "sgd", -1.0).unwrap_err().to_string();
        assert!(err.contains("-1"), "{err}");
        assert!(Optimizer::new(&net, "sgd", f64::NAN).is_err());
        let mut trainer = Optimizer::new(&net, OptimizerKind::adam(), 0.1).unwrap();
        let device = burn::tensor::Device::flex().autodiff();
        let x = Tensor::<1>::ones([1], &device).require_grad();
        let err = trainer.step(net, x.sum().backward(), 0).unwrap_err();
        assert!(err.to_string().contains("batch size 0"), "{err}");
    }
}
