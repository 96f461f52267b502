//! burn's optimizer for an [`OptimizerKind`]. The updates are burn's (`burn::optim`), whose
//! formulas are PyTorch's; only burn's defaults differ (ε 1e-5 everywhere, SGD's dampening
//! 0.1, RMSprop's momentum 0.9, AdamW's decay 1e-4), so every setting is given explicitly.
//! Adam's and AdamW's update of a burn-flex parameter is burn's arithmetic in one pass
//! ([`super::fused`]).

use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{
    AdaGradConfig, AdamConfig, AdamWConfig, ModuleOptimizer, RmsPropConfig, SgdConfig,
};

use super::fused::{self, Moments};
use super::kind::OptimizerKind;

/// The moments' settings in f32, as burn's config holds them, for the fused pass.
fn moments(beta1: f64, beta2: f64, epsilon: f64) -> Moments {
    Moments {
        beta1: beta1 as f32,
        beta2: beta2 as f32,
        epsilon: epsilon as f32,
    }
}

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
            } => {
                let decay = decay(weight_decay);
                ModuleOptimizer::from(fused::Adam {
                    penalty: decay.as_ref().map(|d| d.penalty),
                    burn: AdamConfig::new()
                        .with_beta_1(beta1 as f32)
                        .with_beta_2(beta2 as f32)
                        .with_epsilon(epsilon as f32)
                        .with_weight_decay(decay)
                        .build(),
                    moments: moments(beta1, beta2, epsilon),
                })
            }
            OptimizerKind::AdamW {
                beta1,
                beta2,
                epsilon,
                weight_decay,
            } => ModuleOptimizer::from(fused::AdamW {
                burn: AdamWConfig::new()
                    .with_beta_1(beta1 as f32)
                    .with_beta_2(beta2 as f32)
                    .with_epsilon(epsilon as f32)
                    .with_weight_decay(weight_decay as f32)
                    .build(),
                moments: moments(beta1, beta2, epsilon),
                weight_decay: weight_decay as f32,
            }),
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
