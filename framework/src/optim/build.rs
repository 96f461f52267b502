//! burn's optimizer for an [`OptimizerKind`]. The updates are burn's (`burn::optim`), whose
//! formulas are PyTorch's; only burn's defaults differ (ε 1e-5 everywhere, SGD's dampening
//! 0.1, RMSprop's momentum 0.9, AdamW's decay 1e-4), so every setting is given explicitly.

use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{
    AdaGradConfig, AdamConfig, AdamWConfig, ModuleOptimizer, RmsPropConfig, SgdConfig,
};

use super::kind::OptimizerKind;

impl OptimizerKind {
    /// burn's optimizer with these settings.
    pub(super) fn build(&self) -> ModuleOptimizer {
        let decay = |wd: f64| (wd != 0.0).then(|| WeightDecayConfig::new(wd as f32));
        match *self {
            OptimizerKind::Sgd {
                momentum,
                nesterov,
                weight_decay,
            } => SgdConfig::new()
                .with_momentum((momentum != 0.0).then(|| {
                    MomentumConfig::new()
                        .with_momentum(momentum)
                        .with_dampening(0.0)
                        .with_nesterov(nesterov)
                }))
                .with_weight_decay(decay(weight_decay))
                .init(),
            OptimizerKind::Adam {
                beta1,
                beta2,
                epsilon,
                weight_decay,
            } => AdamConfig::new()
                .with_beta_1(beta1 as f32)
                .with_beta_2(beta2 as f32)
                .with_epsilon(epsilon as f32)
                .with_weight_decay(decay(weight_decay))
                .init(),
            OptimizerKind::AdamW {
                beta1,
                beta2,
                epsilon,
                weight_decay,
            } => AdamWConfig::new()
                .with_beta_1(beta1 as f32)
                .with_beta_2(beta2 as f32)
                .with_epsilon(epsilon as f32)
                .with_weight_decay(weight_decay as f32)
                .init(),
            OptimizerKind::RmsProp {
                alpha,
                epsilon,
                momentum,
                weight_decay,
            } => RmsPropConfig::new()
                .with_alpha(alpha as f32)
                .with_epsilon(epsilon as f32)
                .with_momentum(momentum as f32)
                .with_weight_decay(decay(weight_decay))
                .init(),
            OptimizerKind::AdaGrad {
                epsilon,
                weight_decay,
            } => AdaGradConfig::new()
                .with_epsilon(epsilon as f32)
                .with_weight_decay(decay(weight_decay))
                .init(),
        }
    }
}
