//! Normalization: `BatchNorm` and `LayerNorm`, over burn-nn's, with the number of channels
//! taken from the first input.
//!
//! **Modes.** `BatchNorm` normalizes with the batch's statistics and updates its running
//! statistics only in training, that is on an autodiff device (Gluon's `autograd.record()`,
//! PyTorch's `train()`); a `Module::valid` copy, which is what `fit` evaluates, uses the
//! running statistics.
//!
//! ```
//! use burn::prelude::*;
//! use burn::module::Module;
//! use ember::{BatchNorm, Block, Init};
//!
//! let device = Device::flex().autodiff();
//! let bn = BatchNorm::new().initialize(Init::default(), &device);
//! let x = Tensor::<2>::from_floats([[1.0, 10.0], [3.0, 30.0]], &device);
//! let bn = bn.infer_shape(x.clone()).unwrap();
//! let y: Tensor<2> = bn.forward(x.into()).rank();
//! // Training: each channel is normalized with the batch's own mean and variance.
//! let y: Vec<f32> = y.into_data().try_to_vec().unwrap();
//! assert!((y[0] + 1.0).abs() < 1e-3 && (y[3] - 1.0).abs() < 1e-3, "{y:?}");
//! // The running mean moved from 0 by (1 − 0.9) of the batch mean: [0.2, 2.0].
//! let running = bn.norm().unwrap().running_mean.value_sync().into_data().try_to_vec::<f32>().unwrap();
//! assert!((running[0] - 0.2).abs() < 1e-6 && (running[1] - 2.0).abs() < 1e-5, "{running:?}");
//! ```

use std::fmt;

use burn::module::RunningState;
use burn::nn::{
    BatchNorm as BurnBatchNorm, BatchNormConfig, LayerNorm as BurnLayerNorm, LayerNormConfig,
};
use burn::tensor::{DType, Device, FloatDType, Tensor, module};

use crate::block::Block;
use crate::deferred::{Deferred, layer_module};
use crate::error::{Error, Result};
use crate::init::Init;
use crate::kernels;
use crate::ndtensor::{NdTensor, nd_map};

/// `nn.BatchNorm(axis=1, momentum=0.9, epsilon=1e-5)`: normalizes each channel (axis 1) over
/// the batch and the spatial axes, then scales by γ (`weight`) and shifts by β (`bias`).
///
/// **Momentum.** Gluon's `momentum` weighs the old running value:
/// `running = momentum · running + (1 − momentum) · batch`, default 0.9. PyTorch's weighs the
/// new one: `running = (1 − m) · running + m · batch`, default 0.1. So Gluon's 0.9 is
/// PyTorch's 0.1, and burn (whose convention is PyTorch's) gets `1 − momentum`. As in Gluon
/// (and unlike PyTorch), the running variance is updated with the batch's biased variance.
///
/// Parameter files hold `weight`, `bias`, `running_mean` and `running_var`, PyTorch's names.
#[derive(Debug, Clone)]
pub struct BatchNorm {
    momentum: f64,
    epsilon: f64,
    in_channels: Option<usize>,
    norm: Deferred<BurnBatchNorm>,
}

impl Default for BatchNorm {
    fn default() -> Self {
        Self::new()
    }
}

impl BatchNorm {
    /// Gluon's defaults: momentum 0.9, epsilon 1e-5, channels inferred.
    pub fn new() -> Self {
        Self {
            momentum: 0.9,
            epsilon: 1e-5,
            in_channels: None,
            norm: Deferred::new("BatchNorm"),
        }
    }

    /// Gluon's `momentum` (see the type's doc): the weight of the old running value, in [0, 1].
    pub fn momentum(mut self, momentum: f64) -> Self {
        self.momentum = momentum;
        self
    }

    /// Added to the variance before its square root.
    pub fn epsilon(mut self, epsilon: f64) -> Self {
        self.epsilon = epsilon;
        self
    }

    /// Gluon's optional `in_channels`: declares the channels, so that `initialize` creates
    /// the parameters at once.
    pub fn in_channels(mut self, in_channels: usize) -> Self {
        self.in_channels = Some(in_channels);
        self
    }

    /// The burn layer inside, once created.
    pub fn norm(&self) -> Option<&BurnBatchNorm> {
        self.norm.get()
    }

    fn known_channels(&self) -> Option<usize> {
        self.norm
            .get()
            .map(|norm| norm.gamma.lazy_shape().as_slice()[0])
            .or(self.in_channels)
    }

    /// The momentum and epsilon burn will accept (it panics on others).
    fn check(&self) -> Result<()> {
        if !(0.0..=1.0).contains(&self.momentum) {
            return Err(Error::InvalidValue {
                name: "BatchNorm momentum",
                value: self.momentum.to_string(),
                reason: "must lie in [0, 1] (Gluon's convention: the old value's weight)"
                    .to_string(),
            });
        }
        check_epsilon(self.epsilon)
    }

    fn build(&self, channels: usize, device: &Device) -> Result<BurnBatchNorm> {
        self.check()?;
        Ok(BatchNormConfig::new(channels)
            .with_momentum(1.0 - self.momentum)
            .with_epsilon(self.epsilon)
            .init(device))
    }
}

fn check_epsilon(epsilon: f64) -> Result<()> {
    if epsilon.is_finite() && epsilon > 0.0 {
        Ok(())
    } else {
        Err(Error::InvalidValue {
            name: "epsilon",
            value: epsilon.to_string(),
            reason: "must be a finite number above 0".to_string(),
        })
    }
}

/// Checks the input's rank and the size on `axis` against what the layer knows.
fn features(
    layer: &dyn fmt::Display,
    dims: &[usize],
    axis: usize,
    known: Option<usize>,
) -> Result<usize> {
    if dims.len() < 2 || dims[axis] == 0 {
        return Err(Error::Shape {
            what: layer.to_string(),
            expected: "[batch, channels, …]".to_string(),
            got: dims.to_vec(),
        });
    }
    match known {
        Some(expected) if expected != dims[axis] => Err(Error::FeatureMismatch {
            layer: layer.to_string(),
            expected,
            got: dims[axis],
        }),
        _ => Ok(dims[axis]),
    }
}

impl Block for BatchNorm {
    /// # Shapes
    /// - input: `[batch, channels, …]` (rank 2 to 5)
    /// - output: the input's shape
    fn forward(&self, x: NdTensor) -> NdTensor {
        let norm = self.norm.module(self);
        nd_map!(x, t => batch_norm(norm, t))
    }

    /// Creates the parameters and checks the input; the output has the input's shape, so no
    /// forward runs, and the running statistics stay as they are.
    fn infer(mut self, x: NdTensor) -> Result<(Self, NdTensor)> {
        let channels = features(&self, &x.dims(), 1, self.known_channels())?;
        let layer = self.clone();
        self.norm
            .resolve(&layer, &x.device(), |device| layer.build(channels, device))?;
        Ok((self, x))
    }

    fn initialize(mut self, init: Init, device: &Device) -> Self {
        // A declared size with a momentum out of range is reported at `infer`.
        let declared = self
            .in_channels
            .filter(|_| self.check().is_ok())
            .map(|channels| {
                let layer = self.clone();
                move |device: &Device| layer.build(channels, device).expect("checked above")
            });
        self.norm.initialize(init, device, declared);
        self
    }
}

/// burn's `BatchNorm::forward`, with the normalization itself on ember's CPU kernels where they
/// run: the same modes, and the same update of the running statistics, except for an example
/// that [`Block::infer_shape`] runs (it trains nothing). burn keeps each update per thread
/// until the next read on that thread, so the example's, left on the caller's thread, was
/// averaged into the first steps on the engine's worker, or taken over the statistics
/// `load_parameters` had just read.
fn batch_norm<const D: usize>(norm: &BurnBatchNorm, x: Tensor<D>) -> Tensor<D> {
    let (gamma, beta) = (norm.gamma.val(), norm.beta.val());
    if x.device().is_autodiff() && norm.training.is_enabled() {
        let inferring = crate::block::inferring();
        let Some((y, Some((mean, variance)))) =
            kernels::batch_norm(&x, &gamma, &beta, None, norm.epsilon)
        else {
            if inferring {
                return burn::tensor::module::batch_norm_train(x, gamma, beta, norm.epsilon).output;
            }
            return norm.forward(x);
        };
        if inferring {
            return y;
        }
        let device = x.device();
        let m = norm.momentum;
        let update = |running: &RunningState<Tensor<1>>, batch: Tensor<1>| {
            let old = running.value_sync().to_device(&device);
            let new = old.mul_scalar(1.0 - m).add(batch.detach().mul_scalar(m));
            running.update(new.detach());
        };
        update(&norm.running_mean, mean);
        update(&norm.running_var, variance);
        y
    } else {
        let device = x.device();
        let mean = norm.running_mean.value().to_device(&device);
        let variance = norm.running_var.value().to_device(&device);
        kernels::batch_norm(&x, &gamma, &beta, Some((&mean, &variance)), norm.epsilon)
            .map_or_else(|| norm.forward(x), |(y, _)| y)
    }
}

impl fmt::Display for BatchNorm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.known_channels() {
            Some(n) => write!(f, "BatchNorm({n}")?,
            None => write!(f, "BatchNorm(?")?,
        }
        write!(f, ", momentum={}, epsilon={})", self.momentum, self.epsilon)
    }
}

layer_module!(BatchNorm, norm);

/// `nn.LayerNorm(axis=-1, epsilon=1e-5)`: normalizes each example over its last axis, then
/// scales by γ (`weight`) and shifts by β (`bias`). The same in training and inference.
#[derive(Debug, Clone)]
pub struct LayerNorm {
    epsilon: f64,
    center: bool,
    in_channels: Option<usize>,
    norm: Deferred<BurnLayerNorm>,
}

impl Default for LayerNorm {
    fn default() -> Self {
        Self::new()
    }
}

impl LayerNorm {
    /// Gluon's defaults: epsilon 1e-5, with β, size of the last axis inferred.
    pub fn new() -> Self {
        Self {
            epsilon: 1e-5,
            center: true,
            in_channels: None,
            norm: Deferred::new("LayerNorm"),
        }
    }

    /// Added to the variance before its square root; on a layer built already too. One that
    /// is not a finite number above 0 is refused by `infer_shape` (and `fit`).
    pub fn epsilon(mut self, epsilon: f64) -> Self {
        self.epsilon = epsilon;
        self
    }

    /// Gluon's `center=False` drops β.
    pub fn center(mut self, center: bool) -> Self {
        self.center = center;
        self
    }

    /// Gluon's optional `in_channels`: declares the size of the last axis.
    pub fn in_channels(mut self, in_channels: usize) -> Self {
        self.in_channels = Some(in_channels);
        self
    }

    /// The burn layer inside, once created.
    pub fn norm(&self) -> Option<&BurnLayerNorm> {
        self.norm.get()
    }

    pub(crate) fn epsilon_value(&self) -> f64 {
        self.epsilon
    }

    fn known_size(&self) -> Option<usize> {
        self.norm
            .get()
            .map(|norm| norm.gamma.lazy_shape().as_slice()[0])
            .or(self.in_channels)
    }

    fn build(&self, size: usize, device: &Device) -> Result<BurnLayerNorm> {
        check_epsilon(self.epsilon)?;
        Ok(LayerNormConfig::new(size)
            .with_epsilon(self.epsilon)
            .with_bias(self.center)
            .init(device))
    }
}

impl Block for LayerNorm {
    /// # Shapes
    /// - input: `[…, features]`
    /// - output: the input's shape
    fn forward(&self, x: NdTensor) -> NdTensor {
        let norm = self.norm.module(self);
        nd_map!(x, t => layer_norm(norm, self.epsilon, t))
    }

    fn infer(mut self, x: NdTensor) -> Result<(Self, NdTensor)> {
        // Also for a layer built already, whose epsilon was set since.
        check_epsilon(self.epsilon)?;
        let dims = x.dims();
        let size = features(
            &self,
            &dims,
            dims.len().saturating_sub(1),
            self.known_size(),
        )?;
        let layer = self.clone();
        self.norm
            .resolve(&layer, &x.device(), |device| layer.build(size, device))?;
        let y = self.forward(x);
        Ok((self, y))
    }

    fn initialize(mut self, init: Init, device: &Device) -> Self {
        let declared = self
            .in_channels
            .filter(|_| check_epsilon(self.epsilon).is_ok())
            .map(|size| {
                let layer = self.clone();
                move |device: &Device| layer.build(size, device).expect("checked above")
            });
        self.norm.initialize(init, device, declared);
        self
    }
}

/// The normalization with `norm`'s γ and β and ember's `epsilon` on every path: ember's CPU
/// kernels where they run, else burn's `layer_norm` (as burn's `LayerNorm::forward` calls it,
/// f16 widened to f32), so that an epsilon set after the layer was built reaches both (burn's
/// layer keeps the one it was built with).
pub(crate) fn layer_norm<const D: usize>(
    norm: &BurnLayerNorm,
    epsilon: f64,
    x: Tensor<D>,
) -> Tensor<D> {
    let (gamma, beta) = (norm.gamma.val(), norm.beta.as_ref().map(|b| b.val()));
    if let Some(y) = kernels::layer_norm(&x, &gamma, beta.as_ref(), epsilon) {
        return y;
    }
    let dtype = x.dtype();
    if dtype == DType::F16 {
        let wide = |t: Tensor<1>| t.cast(FloatDType::F32);
        return module::layer_norm(x.cast(FloatDType::F32), wide(gamma), beta.map(wide), epsilon)
            .cast(FloatDType::F16);
    }
    module::layer_norm(x, gamma, beta, epsilon)
}

impl fmt::Display for LayerNorm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.known_size() {
            Some(n) => write!(f, "LayerNorm({n}, epsilon={})", self.epsilon),
            None => write!(f, "LayerNorm(?, epsilon={})", self.epsilon),
        }
    }
}

layer_module!(LayerNorm, norm);
