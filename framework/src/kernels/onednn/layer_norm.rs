//! Layer normalization on oneDNN, forward and backward: each row (every axis but the last) is
//! normalized over the last axis with its own mean and biased variance, then scaled by γ and
//! shifted by β.
//!
//! burn-flex runs burn's composite instead: a variance and a mean through separate reductions,
//! a subtraction, a square root, a division, the scale and the shift, each a pass over the
//! whole input, and the backward pass through a dozen more. In the Transformer classifier that
//! was four such layers per batch over `[batch · steps, features]`.

use std::sync::Arc;

use burn::backend::Flex;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops};
use burn::backend::flex::FlexTensor;
use burn::tensor::Tensor;

use super::bridge::{self, Inputs};
use super::fallback;
use super::format::Format;
use super::library::*;
use super::primitive::{Attr, Md, Primitive, Result, forward_prop};
use super::reorder::arrange;

/// One layer normalization: `rows` rows of `features`, with or without β.
#[derive(Debug, Clone, PartialEq)]
struct Config {
    rows: usize,
    features: usize,
    epsilon: f32,
    shift: bool,
}

struct Prims {
    data: Md,
    /// Per row: the mean and the variance.
    stats: Md,
    /// Per feature: γ and β, and their gradients.
    features: Md,
    training: Primitive,
    inference: Primitive,
    /// Gradients of the input, γ and (with a shift) β.
    backward: Primitive,
}

impl Config {
    fn flags(&self) -> dnnl_normalization_flags_t {
        let shift = if self.shift { dnnl_use_shift } else { 0 };
        dnnl_use_scale | shift
    }

    fn forward(&self, p: (&Md, &Md), training: bool) -> Result<Primitive> {
        let prop = forward_prop(training);
        Primitive::describe(
            "a layer normalization",
            &Attr::none()?,
            None,
            |api, desc| {
                // SAFETY: valid out-pointer and descriptors.
                unsafe {
                    api.dnnl_layer_normalization_forward_desc_init(
                        desc,
                        prop,
                        &p.0.0,
                        &p.1.0,
                        self.epsilon,
                        self.flags(),
                    )
                }
            },
        )
    }

    fn prims(&self) -> Result<Arc<Prims>> {
        bridge::cached(format!("layer norm {self:?}"), || {
            let data = Md::plain(&[self.rows, self.features])?;
            let stats = Md::plain(&[self.rows])?;
            let training = self.forward((&data, &stats), true)?;
            let what = "a layer normalization's backward pass";
            let backward =
                Primitive::describe(what, &Attr::none()?, Some(&training), |api, desc| {
                    // SAFETY: valid out-pointer and descriptors.
                    unsafe {
                        api.dnnl_layer_normalization_backward_desc_init(
                            desc,
                            dnnl_backward,
                            &data.0,
                            &data.0,
                            &stats.0,
                            self.epsilon,
                            self.flags(),
                        )
                    }
                })?;
            Ok(Prims {
                inference: self.forward((&data, &stats), false)?,
                features: Md::plain(&[self.features])?,
                training,
                backward,
                data,
                stats,
            })
        })
    }
}

#[derive(Clone)]
struct State {
    prims: Arc<Prims>,
    /// The input in row-major order, γ, β (a stand-in without one), and the rows' statistics.
    x: FlexTensor,
    gamma: FlexTensor,
    beta: FlexTensor,
    mean: FlexTensor,
    variance: FlexTensor,
    config: Config,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("oneDNN layer normalization")
    }
}

#[derive(Debug)]
struct LayerNormBackward;

impl Backward<Flex, 3> for LayerNormBackward {
    type State = State;

    fn backward(self, ops: Ops<State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [px, pgamma, pbeta] = ops.parents;
        let s = ops.state;
        let (p, c) = (&s.prims, &s.config);
        let grad = grads.consume::<Flex>(&ops.node);
        let dims = bridge::dims(&s.x);
        let [dx, dgamma, dbeta] = fallback::or_flex(
            || {
                let grad = arrange(&grad, Format::Plain)?;
                let mut dx = bridge::Out::new(&dims);
                let mut dgamma = bridge::Out::new(&[c.features]);
                let mut dbeta = bridge::Out::new(&[c.features]);
                let mut args = vec![
                    (DNNL_ARG_SRC, &p.data, bridge::read(&s.x)),
                    (DNNL_ARG_MEAN, &p.stats, bridge::read(&s.mean)),
                    (DNNL_ARG_VARIANCE, &p.stats, bridge::read(&s.variance)),
                    (DNNL_ARG_SCALE, &p.features, bridge::read(&s.gamma)),
                    (DNNL_ARG_DIFF_DST, &p.data, bridge::read(&grad)),
                    (DNNL_ARG_DIFF_SRC, &p.data, dx.ptr()),
                    (DNNL_ARG_DIFF_SCALE, &p.features, dgamma.ptr()),
                ];
                if c.shift {
                    args.push((DNNL_ARG_SHIFT, &p.features, bridge::read(&s.beta)));
                    args.push((DNNL_ARG_DIFF_SHIFT, &p.features, dbeta.ptr()));
                }
                p.backward.execute(&args)?;
                // SAFETY: the backward pass wrote dx and dγ, and dβ with a shift; without one,
                // dβ is never read (β's stand-in is not tracked).
                Ok(unsafe {
                    let dbeta = if c.shift {
                        dbeta.written()
                    } else {
                        bridge::output(&[0])
                    };
                    [dx.written(), dgamma.written(), dbeta]
                })
            },
            || {
                let stats = fallback::Stats {
                    mean: &s.mean,
                    variance: &s.variance,
                    epsilon: c.epsilon.into(),
                    given: false,
                };
                fallback::layer_norm(&s.x, &s.gamma, stats, &grad, c.features)
            },
        );
        for (parent, g) in [px, pgamma, pbeta].into_iter().zip([dx, dgamma, dbeta]) {
            if let Some(parent) = parent {
                grads.register::<Flex>(parent.id, g);
            }
        }
    }
}

/// burn's `LayerNorm` on `x` (`[…, features]`, any rank) with `gamma` and `beta` (`None`
/// without a shift): `(x − mean) / √(variance + epsilon) · γ + β` over the last axis. `None`
/// where the tensors are not burn-flex f32 tensors of one kind or oneDNN cannot run it.
pub fn layer_norm<const D: usize>(
    x: &Tensor<D>,
    gamma: &Tensor<1>,
    beta: Option<&Tensor<1>>,
    epsilon: f64,
) -> Option<Tensor<D>> {
    let dims = x.dims().to_vec();
    let features = *dims.last()?;
    let rows = dims[..D - 1].iter().product::<usize>();
    // Other shapes go to burn's path, which says what is wrong with them.
    let fits = |t: &Tensor<1>| t.dims()[0] == features;
    if rows == 0 || features == 0 || !fits(gamma) || !beta.is_none_or(fits) {
        return None;
    }
    let x_input = bridge::input(x)?;
    let beta_input = bridge::bias_or_stand_in(beta, &x_input)?;
    let inputs: Inputs<3> = bridge::same_kind([x_input, bridge::input(gamma)?, beta_input])?;
    let config = Config {
        rows,
        features,
        epsilon: epsilon as f32,
        shift: beta.is_some(),
    };
    let prims = config
        .prims()
        .map_err(|e| crate::kernels::counters::fell_back(&e))
        .ok()?;
    bridge::run(LayerNormBackward, inputs, |[x, gamma, beta], training| {
        let p = &prims;
        let x = arrange(x, Format::Plain)?;
        let (gamma, beta) = (bridge::dense(gamma), bridge::dense(beta));
        let mut y = bridge::Out::new(&dims);
        let mut mean = bridge::Out::new(&[rows]);
        let mut variance = bridge::Out::new(&[rows]);
        let mut args = vec![
            (DNNL_ARG_SRC, &p.data, bridge::read(&x)),
            (DNNL_ARG_SCALE, &p.features, bridge::read(&gamma)),
            (DNNL_ARG_DST, &p.data, y.ptr()),
        ];
        if config.shift {
            args.push((DNNL_ARG_SHIFT, &p.features, bridge::read(&beta)));
        }
        if training {
            args.push((DNNL_ARG_MEAN, &p.stats, mean.ptr()));
            args.push((DNNL_ARG_VARIANCE, &p.stats, variance.ptr()));
            p.training.execute(&args)?;
        } else {
            p.inference.execute(&args)?;
        }
        // SAFETY: the forward pass wrote the output, and the statistics when training.
        let y = unsafe { y.written() };
        let state = training.then(|| State {
            prims: p.clone(),
            // SAFETY: written by the training pass.
            mean: unsafe { mean.written() },
            variance: unsafe { variance.written() },
            x,
            gamma,
            beta,
            config: config.clone(),
        });
        Ok((y, state))
    })
    .map_err(|e| crate::kernels::counters::fell_back(&e))
    .ok()
}
