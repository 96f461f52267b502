//! Batch normalization on oneDNN, forward and backward: with the batch's statistics (training),
//! or with given ones (the running statistics, in inference).
//!
//! burn-flex runs burn's composite instead: each statistic through a transposed copy of the
//! whole input and a reduction, the output through four broadcast passes, and the backward pass
//! through a dozen more. In the small ResNet that was a third of the epoch.

use std::sync::Arc;

use burn::backend::Flex;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops};
use burn::backend::flex::FlexTensor;
use burn::tensor::Tensor;

use super::bridge::{self, AdTensor, Input, Inputs};
use super::fallback;
use super::format::Format;
use super::library::*;
use super::primitive::{Attr, Md, Primitive, Result, forward_prop};
use super::reorder::arrange;

#[derive(Debug, Clone, PartialEq)]
struct Config {
    dims: Vec<usize>,
    epsilon: f32,
    /// The statistics are given (inference) rather than the batch's own (training).
    given: bool,
    /// The input's order in memory, which the output and the gradients keep.
    format: Format,
}

struct Prims {
    data: Md,
    channels: Md,
    /// Forward, training: writes the batch's mean and variance, or reads the given ones.
    training: Primitive,
    /// Forward, inference (given statistics only).
    inference: Option<Primitive>,
    /// Gradients of the input, the scale (γ) and the shift (β).
    backward: Primitive,
}

impl Config {
    fn flags(&self) -> dnnl_normalization_flags_t {
        let given = if self.given { dnnl_use_global_stats } else { 0 };
        dnnl_use_scale | dnnl_use_shift | given
    }

    fn forward(&self, data: &Md, training: bool) -> Result<Primitive> {
        let prop = forward_prop(training);
        let what = "a batch normalization";
        Primitive::describe(what, &Attr::none()?, None, |api, desc| {
            // SAFETY: valid out-pointer and descriptor.
            unsafe {
                api.dnnl_batch_normalization_forward_desc_init(
                    desc,
                    prop,
                    &data.0,
                    self.epsilon,
                    self.flags(),
                )
            }
        })
    }

    fn prims(&self) -> Result<Arc<Prims>> {
        bridge::cached(format!("batch norm {self:?}"), || {
            let data = self.format.md(&self.dims)?;
            let training = self.forward(&data, true)?;
            let what = "a batch normalization's backward pass";
            let backward =
                Primitive::describe(what, &Attr::none()?, Some(&training), |api, desc| {
                    // SAFETY: valid out-pointer and descriptors.
                    unsafe {
                        api.dnnl_batch_normalization_backward_desc_init(
                            desc,
                            dnnl_backward,
                            &data.0,
                            &data.0,
                            self.epsilon,
                            self.flags(),
                        )
                    }
                })?;
            Ok(Prims {
                channels: Md::plain(&[self.dims[1]])?,
                inference: self.given.then(|| self.forward(&data, false)).transpose()?,
                training,
                backward,
                data,
            })
        })
    }
}

#[derive(Clone)]
struct State {
    prims: Arc<Prims>,
    x: FlexTensor,
    gamma: FlexTensor,
    beta: FlexTensor,
    mean: FlexTensor,
    variance: FlexTensor,
    format: Format,
    /// What burn-flex's gradients need, where oneDNN's fail.
    epsilon: f32,
    given: bool,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("oneDNN batch normalization")
    }
}

#[derive(Debug)]
struct BatchNormBackward;

impl Backward<Flex, 3> for BatchNormBackward {
    type State = State;

    fn backward(self, ops: Ops<State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [px, pgamma, pbeta] = ops.parents;
        let s = ops.state;
        let p = &s.prims;
        let grad = grads.consume::<Flex>(&ops.node);
        let written = fallback::or_flex(
            || {
                let grad = arrange(&grad, s.format)?;
                let channels = bridge::dims(&s.gamma);
                let mut dx = bridge::Out::new(&bridge::dims(&s.x));
                let mut dgamma = bridge::Out::new(&channels);
                let mut dbeta = bridge::Out::new(&channels);
                p.backward.execute(&[
                    (DNNL_ARG_SRC, &p.data, bridge::read(&s.x)),
                    (DNNL_ARG_MEAN, &p.channels, bridge::read(&s.mean)),
                    (DNNL_ARG_VARIANCE, &p.channels, bridge::read(&s.variance)),
                    (DNNL_ARG_SCALE, &p.channels, bridge::read(&s.gamma)),
                    // Not read, but oneDNN 2.6 counts it among the backward pass's inputs.
                    (DNNL_ARG_SHIFT, &p.channels, bridge::read(&s.beta)),
                    (DNNL_ARG_DIFF_DST, &p.data, bridge::read(&grad)),
                    (DNNL_ARG_DIFF_SRC, &p.data, dx.ptr()),
                    (DNNL_ARG_DIFF_SCALE, &p.channels, dgamma.ptr()),
                    (DNNL_ARG_DIFF_SHIFT, &p.channels, dbeta.ptr()),
                ])?;
                // SAFETY: the backward pass wrote all three.
                Ok(unsafe { [dx.written_in(s.format), dgamma.written(), dbeta.written()] })
            },
            || {
                let stats = fallback::Stats {
                    mean: &s.mean,
                    variance: &s.variance,
                    epsilon: s.epsilon.into(),
                    given: s.given,
                };
                fallback::batch_norm(&s.x, &s.gamma, stats, &grad)
            },
        );
        for (parent, g) in [px, pgamma, pbeta].into_iter().zip(written) {
            if let Some(parent) = parent {
                grads.register::<Flex>(parent.id, g);
            }
        }
    }
}

/// Batch normalization of `x` (`[batch, channels, …]`, rank 2 to 5) with `gamma` and `beta`;
/// with `stats` (mean, variance) given, or else the batch's own, which it returns. `None` where
/// the tensors are not burn-flex f32 tensors of one kind or oneDNN cannot run it.
pub fn batch_norm<const D: usize>(
    x: &Tensor<D>,
    gamma: &Tensor<1>,
    beta: &Tensor<1>,
    stats: Option<(&Tensor<1>, &Tensor<1>)>,
    epsilon: f64,
) -> Option<crate::kernels::normalized::Normalized<D>> {
    let dims = x.dims().to_vec();
    // Other shapes go to burn's path, which says what is wrong with them.
    let per_channel = |t: &Tensor<1>| t.dims()[0] == dims[1];
    let stats_fit = stats.is_none_or(|(m, v)| per_channel(m) && per_channel(v));
    if !(2..=5).contains(&dims.len()) || !per_channel(gamma) || !per_channel(beta) || !stats_fit {
        return None;
    }
    // The order is the input's, known once its array is.
    let config = |format| Config {
        dims: dims.clone(),
        epsilon: epsilon as f32,
        given: stats.is_some(),
        format,
    };
    let inputs: Inputs<3> = bridge::same_kind([
        bridge::input(x)?,
        bridge::input(gamma)?,
        bridge::input(beta)?,
    ])?;
    // The statistics are constants of the graph: read as arrays, whatever their kind.
    let given = match stats {
        Some((mean, variance)) => Some((array(mean)?, array(variance)?)),
        None => None,
    };
    let graph = matches!(inputs, Inputs::Graph(_));
    let mut batch_stats = None;
    let y = bridge::run(BatchNormBackward, inputs, |[x, gamma, beta], training| {
        // The output keeps the input's order.
        let format = Format::of(x).unwrap_or(Format::Plain);
        let p = config(format).prims()?;
        let x = arrange(x, format)?;
        let (gamma, beta) = (bridge::dense(gamma), bridge::dense(beta));
        let mut y = bridge::Out::new(&dims);
        let (mean, variance) = match &given {
            Some((mean, variance)) => {
                let primitive = match (&p.inference, training) {
                    (Some(inference), false) => inference,
                    _ => &p.training,
                };
                primitive.execute(&[
                    (DNNL_ARG_SRC, &p.data, bridge::read(&x)),
                    (DNNL_ARG_MEAN, &p.channels, bridge::read(mean)),
                    (DNNL_ARG_VARIANCE, &p.channels, bridge::read(variance)),
                    (DNNL_ARG_SCALE, &p.channels, bridge::read(&gamma)),
                    (DNNL_ARG_SHIFT, &p.channels, bridge::read(&beta)),
                    (DNNL_ARG_DST, &p.data, y.ptr()),
                ])?;
                (mean.clone(), variance.clone())
            }
            None => {
                let mut mean = bridge::Out::new(&dims[1..2]);
                let mut variance = bridge::Out::new(&dims[1..2]);
                p.training.execute(&[
                    (DNNL_ARG_SRC, &p.data, bridge::read(&x)),
                    (DNNL_ARG_SCALE, &p.channels, bridge::read(&gamma)),
                    (DNNL_ARG_SHIFT, &p.channels, bridge::read(&beta)),
                    (DNNL_ARG_DST, &p.data, y.ptr()),
                    (DNNL_ARG_MEAN, &p.channels, mean.ptr()),
                    (DNNL_ARG_VARIANCE, &p.channels, variance.ptr()),
                ])?;
                // SAFETY: the forward pass wrote both.
                let (mean, variance) = unsafe { (mean.written(), variance.written()) };
                batch_stats = Some((mean.clone(), variance.clone()));
                (mean, variance)
            }
        };
        // SAFETY: the forward pass wrote it.
        let y = unsafe { y.written_in(format) };
        let state = training.then(|| State {
            prims: p.clone(),
            x,
            gamma,
            beta,
            mean,
            variance,
            format,
            epsilon: epsilon as f32,
            given: given.is_some(),
        });
        Ok((y, state))
    })
    .map_err(|e| crate::kernels::counters::fell_back(&e))
    .ok()?;
    // The batch's statistics leave as constants of the input's kind, as burn's own do.
    let wrap = |t: FlexTensor| {
        if graph {
            Tensor::from_primitive::<bridge::Ad>(AdTensor::new(t))
        } else {
            Tensor::from_primitive::<Flex>(t)
        }
    };
    Some((y, batch_stats.map(|(m, v)| (wrap(m), wrap(v)))))
}

/// A statistic's values as a dense burn-flex array, under autodiff or not.
fn array(t: &Tensor<1>) -> Option<FlexTensor> {
    match bridge::input(t)? {
        Input::Plain(a) => Some(bridge::dense(&a)),
        Input::Graph(a) => Some(bridge::dense(a.primitive())),
    }
}
