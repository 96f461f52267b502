//! `Dense(units)`: Gluon's fully connected layer, with deferred input size.
//!
//! The input size is never written: it is taken from the first batch (or from
//! [`Block::infer_shape`]). Until then the weight's shape is `(units, 0)`, and reading it is a
//! [`Error::DeferredInitialization`], as in Gluon.
//!
//! ```
//! use burn::prelude::*;
//! use ember::{Activation, Block, Dense, Init};
//!
//! let device = Device::flex();
//! let dense = Dense::new(3).activation(Activation::Relu).initialize(Init::default(), &device);
//! assert_eq!(dense.collect_params().get("weight").unwrap().shape, vec![3, 0]);
//! let y = dense.forward(Tensor::ones([2, 5], &device)).unwrap();
//! assert_eq!(y.dims(), [2, 3]);
//! assert_eq!(dense.collect_params().get("weight").unwrap().shape, vec![3, 5]);
//! ```

use std::fmt;
use std::sync::OnceLock;

use burn::module::{
    Content, Devices, Module, ModuleDisplay, ModuleDisplayDefault, ModuleMapper, ModuleVisitor,
};
use burn::nn::{Initializer, Linear, LinearConfig};
use burn::tensor::{Device, Tensor};

use crate::activation::Activation;
use crate::block::{Block, ParamDict, ParamInfo};
use crate::error::{Error, Result};
use crate::init::{Init, Reinitializer};

/// A fully connected layer: `activation(x·Wᵀ + b)`, with `W` of shape `(units, in_units)`.
///
/// Inside it holds a burn [`Linear`] (weight `[in_units, units]`), created when the input size
/// becomes known. Its parameters appear directly under the layer's name (`0.weight`,
/// `0.bias`), as in Gluon and PyTorch.
#[derive(Debug, Clone)]
pub struct Dense {
    units: usize,
    activation: Option<Activation>,
    use_bias: bool,
    flatten: bool,
    in_units: Option<usize>,
    pending: Option<(Init, Device)>,
    linear: OnceLock<Linear>,
}

impl Dense {
    /// `nn.Dense(units)`: no activation, with a bias, flattening its input, input size
    /// inferred.
    pub fn new(units: usize) -> Self {
        Self {
            units,
            activation: None,
            use_bias: true,
            flatten: true,
            in_units: None,
            pending: None,
            linear: OnceLock::new(),
        }
    }

    /// `activation='relu'` and friends.
    pub fn activation(mut self, activation: Activation) -> Self {
        self.activation = Some(activation);
        self
    }

    /// `use_bias=False` drops the bias.
    pub fn use_bias(mut self, use_bias: bool) -> Self {
        self.use_bias = use_bias;
        self
    }

    /// Gluon's `flatten`: when true (the default), an input of rank > 2 is flattened to
    /// `[batch, rest]`; when false, the layer applies to the last axis. See
    /// [`Dense::forward_nd`].
    pub fn flatten(mut self, flatten: bool) -> Self {
        self.flatten = flatten;
        self
    }

    /// Gluon's optional `in_units`: declares the input size, so that `initialize` creates the
    /// parameters at once instead of deferring them.
    pub fn in_units(mut self, in_units: usize) -> Self {
        self.in_units = Some(in_units);
        self
    }

    /// Number of outputs.
    pub fn units(&self) -> usize {
        self.units
    }

    /// The input size, once known.
    pub fn known_in_units(&self) -> Option<usize> {
        self.linear
            .get()
            .map(|linear| linear.weight.lazy_shape().as_slice()[0])
            .or(self.in_units)
    }

    /// The burn layer inside, once created.
    pub fn linear(&self) -> Option<&Linear> {
        self.linear.get()
    }

    /// Applies the layer to an input of any rank.
    ///
    /// # Shapes
    /// - with `flatten(true)`: input `[batch, d1, d2, …]`, output `[batch, units]` (`O = 2`);
    /// - with `flatten(false)`: input `[…, in_units]`, output `[…, units]` (`O = D`).
    ///
    /// Any other output rank is an [`Error::Shape`].
    pub fn forward_nd<const D: usize, const O: usize>(&self, x: Tensor<D>) -> Result<Tensor<O>> {
        let dims = x.dims();
        let (expected_rank, features) = if self.flatten {
            (2, dims.iter().skip(1).product::<usize>())
        } else {
            (D, dims[D - 1])
        };
        if O != expected_rank || D == 0 {
            return Err(Error::Shape {
                what: format!("{self} with flatten={}", self.flatten),
                expected: format!("an output of rank {expected_rank}, asked for rank {O}"),
                got: dims.to_vec(),
            });
        }
        let linear = self.linear_for(features, &x.device())?;
        let mut out_dims = [0usize; O];
        if self.flatten {
            out_dims[0] = dims[0];
            out_dims[1] = features;
        } else {
            out_dims.copy_from_slice(&dims[..O]);
        }
        let y = linear.forward(x.reshape(out_dims));
        Ok(match self.activation {
            Some(activation) => activation.apply(y),
            None => y,
        })
    }

    /// The burn layer for an input of `features`, created now if the size was deferred.
    fn linear_for(&self, features: usize, device: &Device) -> Result<&Linear> {
        if let Some(in_units) = self.known_in_units()
            && in_units != features
        {
            return Err(Error::FeatureMismatch {
                layer: self.to_string(),
                expected: in_units,
                got: features,
            });
        }
        if let Some(linear) = self.linear.get() {
            return Ok(linear);
        }
        let (init, init_device) = self.pending.as_ref().ok_or_else(|| Error::NotInitialized {
            param: format!("{self}.weight"),
        })?;
        if init_device != device {
            return Err(Error::InvalidValue {
                name: "input device",
                value: format!("{device:?}"),
                reason: format!("{self} was initialized on {init_device:?}"),
            });
        }
        Ok(self
            .linear
            .get_or_init(|| self.build(*init, features, init_device)))
    }

    fn build(&self, init: Init, in_units: usize, device: &Device) -> Linear {
        let mut linear = LinearConfig::new(in_units, self.units)
            .with_bias(self.use_bias)
            .with_initializer(init.weight_initializer())
            .init(device);
        // Gluon initializes biases to zero, whatever the weight initializer.
        if self.use_bias {
            linear.bias = Some(Initializer::Zeros.init_with(
                [self.units],
                Some(in_units),
                Some(self.units),
                device,
            ));
        }
        linear
    }

    fn map_linear(mut self, f: impl FnOnce(Linear) -> Linear) -> Self {
        if let Some(linear) = std::mem::take(&mut self.linear).into_inner() {
            let _ = self.linear.set(f(linear));
        }
        self
    }
}

impl Block for Dense {
    fn forward(&self, x: Tensor<2>) -> Result<Tensor<2>> {
        self.forward_nd::<2, 2>(x)
    }

    fn initialize(mut self, init: Init, device: &Device) -> Self {
        self.pending = Some((init, device.clone()));
        if self.linear.get().is_some() {
            return self.map_linear(|linear| {
                linear.to_device(device).map(&mut Reinitializer {
                    init,
                    path: Vec::new(),
                })
            });
        }
        if let Some(in_units) = self.in_units {
            let linear = self.build(init, in_units, device);
            let _ = self.linear.set(linear);
        }
        self
    }

    fn collect_params(&self) -> ParamDict {
        let in_units = self.known_in_units().unwrap_or(0);
        let mut params = vec![ParamInfo {
            name: "weight".to_string(),
            shape: vec![self.units, in_units],
        }];
        if self.use_bias {
            params.push(ParamInfo {
                name: "bias".to_string(),
                shape: vec![self.units],
            });
        }
        ParamDict { params }
    }
}

impl fmt::Display for Dense {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.known_in_units() {
            Some(in_units) => write!(f, "Dense({in_units} -> {}", self.units)?,
            None => write!(f, "Dense(? -> {}", self.units)?,
        }
        if let Some(activation) = self.activation {
            write!(f, ", {activation}")?;
        }
        if !self.use_bias {
            write!(f, ", no bias")?;
        }
        write!(f, ")")
    }
}

// The parameters of the inner Linear appear directly under the Dense (`0.weight`), so the
// module passes every operation through without a path segment of its own.
impl Module for Dense {
    fn collect_devices(&self, devices: Devices) -> Devices {
        match self.linear.get() {
            Some(linear) => linear.collect_devices(devices),
            None => devices,
        }
    }
    fn fork(self, device: &Device) -> Self {
        self.map_linear(|linear| linear.fork(device))
    }
    fn to_device(self, device: &Device) -> Self {
        self.map_linear(|linear| linear.to_device(device))
    }
    fn train(self) -> Self {
        self.map_linear(Module::train)
    }
    fn valid(&self) -> Self {
        self.clone().map_linear(|linear| linear.valid())
    }
    fn materialize(self) -> Self {
        self.map_linear(Module::materialize)
    }
    fn visit<V: ModuleVisitor>(&self, visitor: &mut V) {
        if let Some(linear) = self.linear.get() {
            linear.visit(visitor);
        }
    }
    fn map<M: ModuleMapper>(self, mapper: &mut M) -> Self {
        self.map_linear(|linear| linear.map(mapper))
    }
}

impl ModuleDisplayDefault for Dense {
    fn content(&self, content: Content) -> Option<Content> {
        content.add_formatted(self).optional()
    }
}

impl ModuleDisplay for Dense {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reading_before_initialize_names_the_layer() {
        let dense = Dense::new(4);
        let err = dense
            .forward(Tensor::ones([1, 3], &Device::flex()))
            .unwrap_err();
        assert!(matches!(err, Error::NotInitialized { .. }), "{err}");
        assert!(err.to_string().contains("initialize()"), "{err}");
    }

    #[test]
    fn a_feature_mismatch_names_both_sizes() {
        let device = Device::flex();
        let dense = Dense::new(4).initialize(Init::default(), &device);
        dense.forward(Tensor::ones([2, 3], &device)).unwrap();
        let err = dense.forward(Tensor::ones([2, 7], &device)).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("7 features") && text.contains("expects 3"),
            "{text}"
        );
    }

    #[test]
    fn declared_in_units_initialize_at_once_and_gluon_init_has_zero_bias() {
        let device = Device::flex();
        let dense = Dense::new(6)
            .in_units(5)
            .initialize(Init::Uniform(0.07), &device);
        let linear = dense.linear().expect("created at initialize");
        let weight: Vec<f32> = linear.weight.val().into_data().try_to_vec().unwrap();
        assert!(weight.iter().all(|w| w.abs() <= 0.07));
        assert!(weight.iter().any(|w| *w != 0.0));
        let bias: Vec<f32> = linear
            .bias
            .as_ref()
            .unwrap()
            .val()
            .into_data()
            .try_to_vec()
            .unwrap();
        assert_eq!(bias, vec![0.0; 6]);
    }

    #[test]
    fn flatten_false_applies_to_the_last_axis() {
        let device = Device::flex();
        let dense = Dense::new(2)
            .flatten(false)
            .initialize(Init::default(), &device);
        let y: Tensor<3> = dense
            .forward_nd(Tensor::<3>::ones([4, 3, 5], &device))
            .unwrap();
        assert_eq!(y.dims(), [4, 3, 2]);
        let flat = Dense::new(2).initialize(Init::default(), &device);
        let y: Tensor<2> = flat
            .forward_nd(Tensor::<3>::ones([4, 3, 5], &device))
            .unwrap();
        assert_eq!(y.dims(), [4, 2]);
        assert_eq!(flat.known_in_units(), Some(15));
    }
}
