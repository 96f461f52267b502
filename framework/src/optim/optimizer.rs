//! Gluon's `Trainer`, named `Optimizer` here (the crate `ember-trainer` holds the loop): an
//! optimizer, a learning rate, and `step(batch_size)`.
//!
//! `step` rescales every gradient by `1 / batch_size` before the update (Gluon's
//! `rescale_grad`), so the per-example loss vector is simply `backward`-ed, as in the book.
//! The optimizers are burn's (`burn::optim`), not re-implemented here.
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
use std::str::FromStr;

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{AdamConfig, GradientsParams, ModuleOptimizer, SgdConfig};
use burn::tensor::Gradients;
use burn::tensor::Tensor;

use crate::error::{Error, Result};

/// Gluon's default learning rate.
pub const DEFAULT_LEARNING_RATE: f64 = 0.01;

/// Which optimizer, with its hyper-parameters (Gluon's `optimizer_params`, less the rate).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OptimizerKind {
    /// Stochastic gradient descent, optionally with momentum and weight decay (`wd`).
    Sgd {
        /// Momentum (0 for plain SGD).
        momentum: f64,
        /// L2 weight decay.
        weight_decay: f32,
    },
    /// Adam with Gluon's defaults β₁ = 0.9, β₂ = 0.999, ε = 1e-8.
    Adam {
        /// L2 weight decay.
        weight_decay: f32,
    },
}

impl OptimizerKind {
    /// Plain SGD.
    pub fn sgd() -> Self {
        OptimizerKind::Sgd {
            momentum: 0.0,
            weight_decay: 0.0,
        }
    }

    /// Adam.
    pub fn adam() -> Self {
        OptimizerKind::Adam { weight_decay: 0.0 }
    }

    /// Sets the momentum (SGD only; Adam keeps its own moments).
    pub fn with_momentum(self, momentum: f64) -> Self {
        match self {
            OptimizerKind::Sgd { weight_decay, .. } => OptimizerKind::Sgd {
                momentum,
                weight_decay,
            },
            adam => adam,
        }
    }

    /// Sets the weight decay (Gluon's `wd`).
    pub fn with_weight_decay(self, weight_decay: f32) -> Self {
        match self {
            OptimizerKind::Sgd { momentum, .. } => OptimizerKind::Sgd {
                momentum,
                weight_decay,
            },
            OptimizerKind::Adam { .. } => OptimizerKind::Adam { weight_decay },
        }
    }

    fn build(&self) -> ModuleOptimizer {
        let decay = |wd: f32| (wd != 0.0).then(|| WeightDecayConfig::new(wd));
        match *self {
            OptimizerKind::Sgd {
                momentum,
                weight_decay,
            } => SgdConfig::new()
                .with_momentum((momentum != 0.0).then(|| {
                    MomentumConfig::new()
                        .with_momentum(momentum)
                        .with_dampening(0.0)
                }))
                .with_weight_decay(decay(weight_decay))
                .init(),
            OptimizerKind::Adam { weight_decay } => AdamConfig::new()
                .with_epsilon(1e-8)
                .with_weight_decay(decay(weight_decay))
                .init(),
        }
    }
}

impl FromStr for OptimizerKind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "sgd" => Ok(Self::sgd()),
            "adam" => Ok(Self::adam()),
            _ => Err(Error::InvalidValue {
                name: "optimizer",
                value: s.to_string(),
                reason: "expected sgd or adam".to_string(),
            }),
        }
    }
}

/// What `Optimizer::new` takes as its optimizer: a name (`"sgd"`, `"adam"`) or an
/// [`OptimizerKind`].
pub trait IntoOptimizer {
    /// The optimizer, or an error naming the unknown name.
    fn into_optimizer(self) -> Result<OptimizerKind>;
}

impl IntoOptimizer for OptimizerKind {
    fn into_optimizer(self) -> Result<OptimizerKind> {
        Ok(self)
    }
}

impl IntoOptimizer for &str {
    fn into_optimizer(self) -> Result<OptimizerKind> {
        self.parse()
    }
}

impl fmt::Display for OptimizerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OptimizerKind::Sgd {
                momentum,
                weight_decay,
            } => write!(f, "sgd(momentum={momentum}, wd={weight_decay})"),
            OptimizerKind::Adam { weight_decay } => write!(f, "adam(wd={weight_decay})"),
        }
    }
}

/// Applies an optimizer to a network's parameters with Gluon's `step(batch_size)`. A clone
/// has its own copy of the optimizer's state.
#[derive(Clone)]
pub struct Optimizer {
    kind: OptimizerKind,
    learning_rate: f64,
    num_params: usize,
    optimizer: ModuleOptimizer,
}

impl fmt::Debug for Optimizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Optimizer")
            .field("optimizer", &self.kind)
            .field("learning_rate", &self.learning_rate)
            .field("num_params", &self.num_params)
            .finish()
    }
}

impl Optimizer {
    /// `gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': lr})`. The optimizer is a
    /// name (`"sgd"`, `"adam"`) or an [`OptimizerKind`]; the rate must be finite and positive.
    pub fn new<M: Module>(
        net: &M,
        optimizer: impl IntoOptimizer,
        learning_rate: f64,
    ) -> Result<Self> {
        let kind = optimizer.into_optimizer()?;
        if let OptimizerKind::Sgd { momentum, .. } = kind
            && !(0.0..1.0).contains(&momentum)
        {
            return Err(Error::InvalidValue {
                name: "momentum",
                value: momentum.to_string(),
                reason: "must lie in [0, 1)".to_string(),
            });
        }
        if !(learning_rate.is_finite() && learning_rate > 0.0) {
            return Err(Error::InvalidValue {
                name: "learning rate",
                value: learning_rate.to_string(),
                reason: "must be a finite number above 0".to_string(),
            });
        }
        Ok(Self {
            kind,
            learning_rate,
            num_params: net.num_params(),
            optimizer: kind.build(),
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
        Ok(self.optimizer.step(self.learning_rate, net, params))
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
    /// # Errors
    /// [`Error::Io`] naming the file when it cannot be read or is no optimizer state.
    pub fn load_state(mut self, path: &std::path::Path) -> Result<Self> {
        self.optimizer = self
            .optimizer
            .load(path)
            .map_err(|e| state_error(path, e.to_string()))?;
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
        let err = Optimizer::new(&net, "adagrad", 0.1)
            .unwrap_err()
            .to_string();
        assert!(err.contains("sgd or adam"), "{err}");
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
