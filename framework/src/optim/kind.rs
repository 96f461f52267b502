//! Which optimizer, by name as Gluon and PyTorch name them, with its hyper-parameters
//! (Gluon's `optimizer_params`, less the rate). The updates are burn's: `build.rs` makes
//! burn's optimizer of a kind.

use std::fmt;
use std::str::FromStr;

use super::positive::{invalid, within};
use crate::error::{Error, Result};

/// An optimizer with its hyper-parameters. `"adamw".parse()` (or a constructor) gives
/// PyTorch's defaults; the `with_*` methods change one, and refuse one the optimizer has not.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OptimizerKind {
    /// `sgd`: stochastic gradient descent, with momentum (PyTorch's, no dampening), Nesterov's
    /// momentum, and L2 weight decay.
    Sgd {
        /// Momentum (0 for plain SGD).
        momentum: f64,
        /// Nesterov's momentum (needs a momentum above 0).
        nesterov: bool,
        /// L2 weight decay, added to the gradient.
        weight_decay: f64,
    },
    /// `adam`: Adam, with L2 weight decay added to the gradient.
    Adam {
        /// β₁ (0.9).
        beta1: f64,
        /// β₂ (0.999).
        beta2: f64,
        /// ε (1e-8), added after the square root.
        epsilon: f64,
        /// L2 weight decay (0).
        weight_decay: f64,
    },
    /// `adamw`: Adam with decoupled weight decay: each step first multiplies the parameters
    /// by `1 − lr·wd`.
    AdamW {
        /// β₁ (0.9).
        beta1: f64,
        /// β₂ (0.999).
        beta2: f64,
        /// ε (1e-8).
        epsilon: f64,
        /// Decoupled weight decay (0.01).
        weight_decay: f64,
    },
    /// `rmsprop`: PyTorch's RMSprop (not centered).
    RmsProp {
        /// The squares' moving-average factor α (0.99).
        alpha: f64,
        /// ε (1e-8).
        epsilon: f64,
        /// Momentum (0).
        momentum: f64,
        /// L2 weight decay (0).
        weight_decay: f64,
    },
    /// `adagrad`: AdaGrad.
    AdaGrad {
        /// ε (1e-10).
        epsilon: f64,
        /// L2 weight decay (0).
        weight_decay: f64,
    },
}

/// The optimizers' names, as [`OptimizerKind::from_str`] takes them.
pub const OPTIMIZERS: &str = "sgd, adam, adamw, rmsprop or adagrad";

impl OptimizerKind {
    /// Plain SGD.
    pub fn sgd() -> Self {
        OptimizerKind::Sgd {
            momentum: 0.0,
            nesterov: false,
            weight_decay: 0.0,
        }
    }

    /// Adam with PyTorch's defaults.
    pub fn adam() -> Self {
        OptimizerKind::Adam {
            beta1: 0.9,
            beta2: 0.999,
            epsilon: 1e-8,
            weight_decay: 0.0,
        }
    }

    /// AdamW with PyTorch's defaults (weight decay 0.01).
    pub fn adamw() -> Self {
        OptimizerKind::AdamW {
            beta1: 0.9,
            beta2: 0.999,
            epsilon: 1e-8,
            weight_decay: 0.01,
        }
    }

    /// RMSprop with PyTorch's defaults.
    pub fn rmsprop() -> Self {
        OptimizerKind::RmsProp {
            alpha: 0.99,
            epsilon: 1e-8,
            momentum: 0.0,
            weight_decay: 0.0,
        }
    }

    /// AdaGrad with PyTorch's defaults.
    pub fn adagrad() -> Self {
        OptimizerKind::AdaGrad {
            epsilon: 1e-10,
            weight_decay: 0.0,
        }
    }

    /// The name, as [`OptimizerKind::from_str`] takes it.
    pub fn name(&self) -> &'static str {
        match self {
            OptimizerKind::Sgd { .. } => "sgd",
            OptimizerKind::Adam { .. } => "adam",
            OptimizerKind::AdamW { .. } => "adamw",
            OptimizerKind::RmsProp { .. } => "rmsprop",
            OptimizerKind::AdaGrad { .. } => "adagrad",
        }
    }

    /// The options this optimizer takes, by the names of the `with_*` methods (and of
    /// `ember train`'s flags).
    pub fn options(&self) -> &'static [&'static str] {
        match self {
            OptimizerKind::Sgd { .. } => &["momentum", "nesterov", "wd"],
            OptimizerKind::Adam { .. } | OptimizerKind::AdamW { .. } => {
                &["beta1", "beta2", "eps", "wd"]
            }
            OptimizerKind::RmsProp { .. } => &["alpha", "eps", "momentum", "wd"],
            OptimizerKind::AdaGrad { .. } => &["eps", "wd"],
        }
    }

    /// Sets the momentum (SGD and RMSprop), in [0, 1).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for another optimizer or a value outside [0, 1).
    pub fn with_momentum(mut self, value: f64) -> Result<Self> {
        let value = within("momentum", value, 0.0, 1.0)?;
        match &mut self {
            OptimizerKind::Sgd { momentum, .. } | OptimizerKind::RmsProp { momentum, .. } => {
                *momentum = value;
            }
            _ => return Err(self.has_no("momentum", value)),
        }
        Ok(self)
    }

    /// Nesterov's momentum (SGD).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for another optimizer.
    pub fn with_nesterov(mut self, value: bool) -> Result<Self> {
        match &mut self {
            OptimizerKind::Sgd { nesterov, .. } => *nesterov = value,
            _ => return Err(self.has_no("nesterov", value)),
        }
        Ok(self)
    }

    /// Sets the weight decay (Gluon's `wd`), 0 or more: L2 on the gradient, decoupled for
    /// AdamW.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for a negative or non-finite value.
    pub fn with_weight_decay(mut self, value: f64) -> Result<Self> {
        let value = within("wd", value, 0.0, f64::INFINITY)?;
        match &mut self {
            OptimizerKind::Sgd { weight_decay, .. }
            | OptimizerKind::Adam { weight_decay, .. }
            | OptimizerKind::AdamW { weight_decay, .. }
            | OptimizerKind::RmsProp { weight_decay, .. }
            | OptimizerKind::AdaGrad { weight_decay, .. } => *weight_decay = value,
        }
        Ok(self)
    }

    /// Sets β₁ (Adam and AdamW), in [0, 1).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for another optimizer or a value outside [0, 1).
    pub fn with_beta1(mut self, value: f64) -> Result<Self> {
        let value = within("beta1", value, 0.0, 1.0)?;
        match &mut self {
            OptimizerKind::Adam { beta1, .. } | OptimizerKind::AdamW { beta1, .. } => {
                *beta1 = value;
            }
            _ => return Err(self.has_no("beta1", value)),
        }
        Ok(self)
    }

    /// Sets β₂ (Adam and AdamW), in [0, 1).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for another optimizer or a value outside [0, 1).
    pub fn with_beta2(mut self, value: f64) -> Result<Self> {
        let value = within("beta2", value, 0.0, 1.0)?;
        match &mut self {
            OptimizerKind::Adam { beta2, .. } | OptimizerKind::AdamW { beta2, .. } => {
                *beta2 = value;
            }
            _ => return Err(self.has_no("beta2", value)),
        }
        Ok(self)
    }

    /// Sets ε (every optimizer but SGD), above 0.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for SGD or a value not above 0.
    pub fn with_epsilon(mut self, value: f64) -> Result<Self> {
        let value = super::positive::positive("eps", value)?;
        match &mut self {
            OptimizerKind::Adam { epsilon, .. }
            | OptimizerKind::AdamW { epsilon, .. }
            | OptimizerKind::RmsProp { epsilon, .. }
            | OptimizerKind::AdaGrad { epsilon, .. } => *epsilon = value,
            OptimizerKind::Sgd { .. } => return Err(self.has_no("eps", value)),
        }
        Ok(self)
    }

    /// Sets RMSprop's α, in [0, 1).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for another optimizer or a value outside [0, 1).
    pub fn with_alpha(mut self, value: f64) -> Result<Self> {
        let value = within("alpha", value, 0.0, 1.0)?;
        match &mut self {
            OptimizerKind::RmsProp { alpha, .. } => *alpha = value,
            _ => return Err(self.has_no("alpha", value)),
        }
        Ok(self)
    }

    /// Checks what no single option can: Nesterov's momentum needs a momentum.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] naming `nesterov`.
    pub fn check(&self) -> Result<()> {
        if let OptimizerKind::Sgd {
            momentum, nesterov, ..
        } = *self
            && nesterov
            && momentum == 0.0
        {
            return Err(invalid(
                "nesterov",
                true,
                "Nesterov's momentum needs a momentum above 0",
            ));
        }
        Ok(())
    }

    fn has_no(&self, option: &'static str, value: impl fmt::Display) -> Error {
        invalid(
            option,
            value,
            &format!(
                "{} has no {option}; it takes {}",
                self.name(),
                self.options().join(", ")
            ),
        )
    }
}

impl FromStr for OptimizerKind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "sgd" => Ok(Self::sgd()),
            "adam" => Ok(Self::adam()),
            "adamw" => Ok(Self::adamw()),
            "rmsprop" => Ok(Self::rmsprop()),
            "adagrad" => Ok(Self::adagrad()),
            _ => Err(invalid("optimizer", s, &format!("expected {OPTIMIZERS}"))),
        }
    }
}

/// What `Optimizer::new` takes as its optimizer: a name (`"sgd"`, `"adamw"`, …) or an
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

/// The name and every hyper-parameter: `adamw(beta1=0.9, beta2=0.999, eps=1e-8, wd=0.01)`.
impl fmt::Display for OptimizerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // 1e-20 as written, not twenty decimals (hostile pass).
        let n = crate::error::number;
        match *self {
            OptimizerKind::Sgd {
                momentum,
                nesterov,
                weight_decay,
            } => write!(
                f,
                "sgd(momentum={}, nesterov={nesterov}, wd={})",
                n(momentum),
                n(weight_decay)
            ),
            OptimizerKind::Adam {
                beta1,
                beta2,
                epsilon,
                weight_decay,
            }
            | OptimizerKind::AdamW {
                beta1,
                beta2,
                epsilon,
                weight_decay,
            } => write!(
                f,
                "{}(beta1={}, beta2={}, eps={epsilon:e}, wd={})",
                self.name(),
                n(beta1),
                n(beta2),
                n(weight_decay)
            ),
            OptimizerKind::RmsProp {
                alpha,
                epsilon,
                momentum,
                weight_decay,
            } => write!(
                f,
                "rmsprop(alpha={}, eps={epsilon:e}, momentum={}, wd={})",
                n(alpha),
                n(momentum),
                n(weight_decay)
            ),
            OptimizerKind::AdaGrad {
                epsilon,
                weight_decay,
            } => write!(f, "adagrad(eps={epsilon:e}, wd={})", n(weight_decay)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_an_optimizer_has_not_are_errors_naming_it_and_what_it_takes() {
        let err = OptimizerKind::adam().with_momentum(0.9).unwrap_err();
        let err = err.to_string();
        assert!(err.contains("momentum") && err.contains("beta1"), "{err}");
        assert!(OptimizerKind::sgd().with_beta1(0.5).is_err());
        assert!(OptimizerKind::sgd().with_epsilon(1e-3).is_err());
        assert!(OptimizerKind::adagrad().with_nesterov(true).is_err());
        assert!(OptimizerKind::rmsprop().with_momentum(0.5).is_ok());
        for bad in [1.0, -0.1, f64::NAN] {
            assert!(OptimizerKind::sgd().with_momentum(bad).is_err(), "{bad}");
            assert!(OptimizerKind::adam().with_beta2(bad).is_err(), "{bad}");
        }
        assert!(OptimizerKind::adamw().with_weight_decay(-1.0).is_err());
        // 1 and infinity in single precision, where burn's optimizers run.
        let err = OptimizerKind::adam().with_beta2(0.99999999).unwrap_err();
        assert!(err.to_string().contains("single precision"), "{err}");
        assert!(OptimizerKind::adamw().with_beta1(0.9999999999).is_err());
        assert!(OptimizerKind::sgd().with_weight_decay(1e39).is_err());
        assert!(OptimizerKind::adam().with_epsilon(1e-50).is_err());
        let sgd = OptimizerKind::sgd().with_momentum(-0.0).unwrap();
        assert_eq!(sgd.to_string(), "sgd(momentum=0, nesterov=false, wd=0)");
        // A tiny value as written, not as twenty decimals.
        let tiny = OptimizerKind::adamw().with_weight_decay(1e-20).unwrap();
        assert_eq!(
            tiny.to_string(),
            "adamw(beta1=0.9, beta2=0.999, eps=1e-8, wd=1e-20)"
        );
        assert!(OptimizerKind::adamw().with_epsilon(0.0).is_err());
        let nesterov = OptimizerKind::sgd().with_nesterov(true).unwrap();
        assert!(
            nesterov
                .check()
                .unwrap_err()
                .to_string()
                .contains("nesterov")
        );
        assert!(nesterov.with_momentum(0.9).unwrap().check().is_ok());
    }

    #[test]
    fn names_parse_to_pytorchs_defaults() {
        for name in ["sgd", "adam", "adamw", "rmsprop", "adagrad"] {
            let kind: OptimizerKind = name.parse().unwrap();
            assert_eq!(kind.name(), name);
            assert!(kind.to_string().starts_with(name));
        }
        assert_eq!(
            "AdamW".parse::<OptimizerKind>().unwrap().to_string(),
            "adamw(beta1=0.9, beta2=0.999, eps=1e-8, wd=0.01)"
        );
        let err = "lion".parse::<OptimizerKind>().unwrap_err().to_string();
        assert!(err.contains("lion") && err.contains("rmsprop"), "{err}");
    }
}
