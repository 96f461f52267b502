//! An optimizer's update that a recorded step can hold: its state in slots, and every number
//! that changes from step to step (the learning rate, Adam's bias corrections) in a slot the
//! host writes before each run. burn's optimizers, which [`Optimizer`] runs
//! eagerly, keep Adam's step count on the host and take the rate as a number given to the
//! launch, so a replay of them would keep the recording's. The arithmetic here is burn's
//! (`burn-optim`'s `Sgd`, `Momentum`, `Adam`, `WeightDecay`), the same operations in the same
//! order, after [`Optimizer`]'s rescaling by the batch size, so that a replayed step's numbers
//! are the eager step's where the backend computes both alike: bit for bit on burn-flex and on
//! wgpu through lavapipe (tests/framework/hybrid_training.rs), for f32 parameters, an update
//! made from an `Optimizer` that has not stepped, and one [`Update::prepare`] a run at the
//! optimizer's rate. On a card, kernel fusion may join the two paths' operations differently
//! (the slots' writes end fused kernels): there, expect agreement within rounding, and check.
//! Where burn's first step differs in form (its velocity and moments start as the gradient's
//! terms alone), the state starts at zero, which adds exact zeros. Adam's step count is one for
//! all parameters, as burn's is where every parameter has a gradient at every step.

use burn::tensor::{Device, Tensor, TensorData};

use super::params::ParamSlots;
use super::slot::Slot;
use crate::error::{Error, Result};
use crate::optim::{Optimizer, OptimizerKind};

/// The update of one optimizer kind, with what it keeps per parameter.
#[derive(Debug)]
pub struct Update {
    rule: Rule,
    /// Per parameter: SGD's velocity (with momentum), Adam's two moments.
    state: Vec<Vec<Slot<1>>>,
    /// This step's numbers ([`Rule`] says which), written by [`Update::prepare`].
    numbers: Slot<1>,
    /// The steps prepared so far.
    steps: usize,
}

#[derive(Debug, Clone, Copy)]
enum Rule {
    /// Numbers: the rate.
    Sgd {
        momentum: f32,
        nesterov: bool,
        weight_decay: f32,
    },
    /// Numbers: the rate, `√(1 − β₂ᵗ) / (1 − β₁ᵗ)`, `ε·√(1 − β₂ᵗ)`.
    Adam {
        beta1: f32,
        beta2: f32,
        epsilon: f32,
        weight_decay: f32,
    },
    /// Numbers: the rate, `1 − β₁ᵗ`, `1 − β₂ᵗ`, `1 − rate·decay` (the decoupled decay).
    AdamW {
        beta1: f32,
        beta2: f32,
        epsilon: f32,
        weight_decay: f32,
    },
}

/// How many numbers a step has.
const NUMBERS: usize = 4;

impl Update {
    /// `optimizer`'s update for the parameters of `params`, on `device`, with no state yet;
    /// the rate comes from each [`Update::prepare`].
    ///
    /// # Errors
    /// [`Error::InvalidValue`] naming what a recorded step cannot hold yet: another kind than
    /// SGD, Adam and AdamW, clipping, and an optimizer with a state of its own (it stepped, or loaded
    /// one), which would not carry over.
    pub fn new(optimizer: &Optimizer, params: &ParamSlots, device: &Device) -> Result<Self> {
        let refuse = |value: String, reason: &str| Error::InvalidValue {
            name: "optimizer for a recorded step",
            value,
            reason: reason.into(),
        };
        if optimizer.is_stateful() {
            return Err(refuse(
                format!("{:?}", optimizer.optimizer()),
                "it has a state of its own (it stepped, or loaded one), which the update would \
                 not carry over: make the update from a new optimizer",
            ));
        }
        let clipping = optimizer.clipping();
        if clipping.global_norm.is_some() || clipping.value.is_some() {
            return Err(refuse(
                format!("{clipping:?}"),
                "clipping is not recorded yet",
            ));
        }
        let (rule, states) = match optimizer.optimizer() {
            OptimizerKind::Sgd {
                momentum,
                nesterov,
                weight_decay,
            } => (
                Rule::Sgd {
                    momentum: momentum as f32,
                    nesterov,
                    weight_decay: weight_decay as f32,
                },
                usize::from(momentum != 0.0),
            ),
            OptimizerKind::Adam {
                beta1,
                beta2,
                epsilon,
                weight_decay,
            } => (
                Rule::Adam {
                    beta1: beta1 as f32,
                    beta2: beta2 as f32,
                    epsilon: epsilon as f32,
                    weight_decay: weight_decay as f32,
                },
                2,
            ),
            OptimizerKind::AdamW {
                beta1,
                beta2,
                epsilon,
                weight_decay,
            } => (
                Rule::AdamW {
                    beta1: beta1 as f32,
                    beta2: beta2 as f32,
                    epsilon: epsilon as f32,
                    weight_decay: weight_decay as f32,
                },
                2,
            ),
            other => {
                return Err(refuse(
                    format!("{other:?}"),
                    "only sgd, adam and adamw are recorded yet",
                ));
            }
        };
        let zeros = |n: usize| Slot::new(Tensor::zeros([n], device));
        let state = params
            .sizes()
            .into_iter()
            .map(|n| (0..states).map(|_| zeros(n)).collect())
            .collect();
        Ok(Update {
            rule,
            state,
            numbers: zeros(NUMBERS),
            steps: 0,
        })
    }

    /// The bytes the update's slots hold: its state (a velocity, Adam's moments) and its
    /// per-step numbers.
    pub fn bytes(&self) -> usize {
        let state: usize = self.state.iter().flatten().map(Slot::bytes).sum();
        state + self.numbers.bytes()
    }

    /// Before a run, on the host: the next step's numbers at learning rate `rate`, as burn
    /// computes them.
    ///
    /// # Errors
    /// As [`Slot::write`].
    pub fn prepare(&mut self, rate: f64) -> Result<()> {
        self.steps += 1;
        let time = self.steps.min(i32::MAX as usize) as i32;
        let numbers = match self.rule {
            Rule::Sgd { .. } => [rate as f32, 0.0, 0.0, 0.0],
            Rule::Adam {
                beta1,
                beta2,
                epsilon,
                ..
            } => {
                let correction2 = (1.0 - beta2.powi(time)).sqrt();
                let combined = correction2 / (1.0 - beta1.powi(time));
                [rate as f32, combined, epsilon * correction2, 0.0]
            }
            Rule::AdamW {
                beta1,
                beta2,
                weight_decay,
                ..
            } => [
                rate as f32,
                1.0 - beta1.powi(time),
                1.0 - beta2.powi(time),
                (1.0 - rate * f64::from(weight_decay)) as f32,
            ],
        };
        let device = self.numbers.read().device();
        self.numbers.write(Tensor::from_data(
            TensorData::new(numbers.to_vec(), [NUMBERS]),
            &device,
        ))
    }

    /// Forgets the state and the steps (after a capture's warm-up runs, which updated them).
    ///
    /// # Errors
    /// As [`Slot::write`].
    pub fn restart(&mut self) -> Result<()> {
        self.steps = 0;
        for slot in self.state.iter_mut().flatten() {
            let zeros = slot.value().zeros_like();
            slot.write(zeros)?;
        }
        Ok(())
    }

    /// Inside the step: the parameters' new values from their values `params` and gradients
    /// `grads` (flattened, in [`ParamSlots`]' order; `None` where a parameter has none, which
    /// stays as it is), summed over a batch of `batch_size` examples; the state's slots are
    /// written.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for another count of parameters than the update was made for,
    /// and as [`Slot::write`].
    pub fn apply(
        &mut self,
        params: Vec<Tensor<1>>,
        grads: Vec<Option<Tensor<1>>>,
        batch_size: usize,
    ) -> Result<Vec<Option<Tensor<1>>>> {
        if batch_size == 0 {
            return Err(Error::InvalidValue {
                name: "batch size",
                value: "0".into(),
                reason: "an update needs at least one example".into(),
            });
        }
        if params.len() != self.state.len() || grads.len() != self.state.len() {
            return Err(Error::InvalidValue {
                name: "parameters",
                value: format!("{} values and {} gradients", params.len(), grads.len()),
                reason: format!("the update was made for {}", self.state.len()),
            });
        }
        let numbers = self.numbers.read();
        let number = |i: usize| numbers.clone().narrow(0, i, 1);
        // ember's Optimizer: every gradient divided by the batch's examples first.
        let scale = 1.0 / batch_size as f32;
        let mut updated = Vec::with_capacity(params.len());
        for ((param, grad), state) in params.into_iter().zip(grads).zip(&mut self.state) {
            let Some(grad) = grad else {
                updated.push(None);
                continue;
            };
            let mut grad = grad.mul_scalar(scale);
            // L2 decay, added to the gradient (AdamW's is decoupled: below).
            let decay = match self.rule {
                Rule::Sgd { weight_decay, .. } | Rule::Adam { weight_decay, .. } => weight_decay,
                Rule::AdamW { .. } => 0.0,
            };
            if decay != 0.0 {
                grad = param.clone().mul_scalar(decay).add(grad);
            }
            let step = match self.rule {
                Rule::Sgd {
                    momentum, nesterov, ..
                } => match state.first_mut() {
                    None => grad,
                    Some(velocity) => {
                        let v = grad
                            .clone()
                            .mul_scalar(1.0)
                            .add(velocity.read().mul_scalar(momentum));
                        velocity.write(v.clone())?;
                        match nesterov {
                            true => v.mul_scalar(momentum).add(grad),
                            false => v,
                        }
                    }
                },
                Rule::Adam { beta1, beta2, .. } => {
                    let (m, v) = moments(state, grad, beta1, beta2)?;
                    m.mul(number(1)).div(v.sqrt().add(number(2)))
                }
                Rule::AdamW {
                    beta1,
                    beta2,
                    epsilon,
                    ..
                } => {
                    let (m, v) = moments(state, grad, beta1, beta2)?;
                    let v = v.div(number(2)).sqrt().add_scalar(epsilon);
                    m.div(number(1)).div(v)
                }
            };
            let param = match self.rule {
                Rule::AdamW { weight_decay, .. } if weight_decay != 0.0 => param.mul(number(3)),
                _ => param,
            };
            updated.push(Some(param - step.mul(number(0))));
        }
        Ok(updated)
    }
}

/// Adam's two moments after a gradient, written into their slots (`state`: the first, then the
/// second), as burn-optim's `AdaptiveMomentum` computes them.
fn moments(
    state: &mut [Slot<1>],
    grad: Tensor<1>,
    beta1: f32,
    beta2: f32,
) -> Result<(Tensor<1>, Tensor<1>)> {
    let m = state[0]
        .read()
        .mul_scalar(beta1)
        .add(grad.clone().mul_scalar(1.0 - beta1));
    let v = state[1]
        .read()
        .mul_scalar(beta2)
        .add(grad.square().mul_scalar(1.0 - beta2));
    state[0].write(m.clone())?;
    state[1].write(v.clone())?;
    Ok((m, v))
}
