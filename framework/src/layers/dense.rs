//! `Dense(units)`: Gluon's fully connected layer, with deferred input size.
//!
//! The input size is never written: it is taken from the example given to
//! [`Block::infer_shape`] (or from `fit`'s first batch). Until then the layer holds no
//! parameter and [`Block::collect_params`] lists it as deferred, as Gluon does.
//!
//! ```
//! use burn::prelude::*;
//! use ember::{Activation, Block, Dense, Init};
//!
//! let device = Device::flex();
//! let dense = Dense::new(3).activation(Activation::Relu).initialize(Init::default(), &device);
//! assert_eq!(dense.collect_params().deferred, ["Dense"]);
//! let dense = dense.infer_shape(Tensor::<2>::ones([2, 5], &device)).unwrap();
//! assert_eq!(dense.collect_params().get("weight").unwrap().shape, vec![3, 5]);
//! let y = dense.forward(Tensor::<2>::ones([2, 5], &device).into());
//! assert_eq!(y.dims(), [2, 3]);
//! ```

use std::fmt;

use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Tensor};

use crate::block::Block;
use crate::deferred::{Deferred, layer_module};
use crate::error::{Error, Result};
use crate::init::Init;
use crate::layers::activation::Activation;
use crate::ndtensor::{NdTensor, nd_map, nd_with};
use crate::precision::{self, Precision};

/// A fully connected layer: `activation(x·Wᵀ + b)`, with `W` of shape `(units, in_units)`.
///
/// Inside it holds a burn [`Linear`] (weight `[in_units, units]`), created when the input size
/// becomes known. Its parameters appear directly under the layer's name (`0.weight`,
/// `0.bias`), and parameter files hold the weight as `(units, in_units)`, as Gluon and
/// PyTorch do.
#[derive(Debug, Clone)]
pub struct Dense {
    units: usize,
    activation: Option<Activation>,
    use_bias: bool,
    flatten: bool,
    in_units: Option<usize>,
    linear: Deferred<Linear>,
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
            linear: Deferred::new("Dense"),
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
    /// `[batch, rest]`; when false, the layer applies to the last axis.
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

    pub(crate) fn activation_fn(&self) -> Option<Activation> {
        self.activation
    }

    pub(crate) fn flattens(&self) -> bool {
        self.flatten
    }

    fn build(&self, in_units: usize, device: &Device) -> Linear {
        LinearConfig::new(in_units, self.units)
            .with_bias(self.use_bias)
            .init(device)
    }
}

impl Block for Dense {
    /// # Shapes
    /// - with `flatten(true)` (the default): input `[batch, d1, d2, …]`, output
    ///   `[batch, units]`;
    /// - with `flatten(false)`: input `[…, in_units]`, output `[…, units]`.
    fn forward(&self, x: NdTensor) -> NdTensor {
        let linear = self.linear.module(self);
        // Under autocast, ember's CPU kernels take the product in bf16 where oneDNN multiplies
        // bf16, and leave it to burn's path elsewhere.
        // The rows of the product: the examples flattened, or with `flatten(false)` every
        // position along the axes before the last (a sequence's steps), reshaped back after.
        let dims = x.dims();
        let x2 = match (x.ndim(), self.flatten) {
            (2, _) => Some(x.clone().rank::<2>()),
            (_, true) => Some(x.clone().flatten()),
            (3.., false) => {
                let features = dims[dims.len() - 1];
                let rows = dims[..dims.len() - 1].iter().product::<usize>();
                Some(nd_with!(x.clone(), t => t.reshape([rows, features])))
            }
            _ => None,
        };
        let bias = linear.bias.as_ref().map(|b| b.val());
        if let Some(x2) = x2
            && let Some(y) = crate::kernels::dense(
                &x2,
                &linear.weight.val(),
                bias.as_ref(),
                self.activation.map(Activation::eltwise),
                precision::current(),
            )
        {
            return match self.flatten || x.ndim() == 2 {
                true => y.into(),
                false => positions(y, &dims),
            };
        }
        let y = if self.flatten && x.ndim() != 2 {
            NdTensor::from(affine(linear, x.flatten()))
        } else {
            nd_map!(x, t => affine(linear, t))
        };
        match self.activation {
            Some(activation) => activation.forward(y),
            None => y,
        }
    }

    fn infer(mut self, x: NdTensor) -> Result<(Self, NdTensor)> {
        let dims = x.dims();
        if dims.len() < 2 {
            return Err(Error::Shape {
                what: self.to_string(),
                expected: "[batch, features, …]".to_string(),
                got: dims,
            });
        }
        let features = if self.flatten {
            dims[1..].iter().product()
        } else {
            dims[dims.len() - 1]
        };
        if let Some(in_units) = self.known_in_units()
            && in_units != features
        {
            return Err(Error::FeatureMismatch {
                layer: self.to_string(),
                expected: in_units,
                got: features,
            });
        }
        let layer = self.clone();
        self.linear.resolve(&layer, &x.device(), |device| {
            Ok(layer.build(features, device))
        })?;
        let y = self.forward(x);
        Ok((self, y))
    }

    fn initialize(mut self, init: Init, device: &Device) -> Self {
        let declared = self.in_units.map(|in_units| {
            let layer = self.clone();
            move |device: &Device| layer.build(in_units, device)
        });
        self.linear.initialize(init, device, declared);
        self
    }
}

/// The product's rows `[positions, units]` as the input's axes `dims` with the last of
/// `units` (rank 3 to 5; `Block::forward` takes no other with `flatten(false)`).
fn positions(y: Tensor<2>, dims: &[usize]) -> NdTensor {
    let units = y.dims()[1];
    match *dims {
        [a, b, _] => y.reshape([a, b, units]).into(),
        [a, b, c, _] => y.reshape([a, b, c, units]).into(),
        [a, b, c, d, _] => y.reshape([a, b, c, d, units]).into(),
        _ => unreachable!("Dense reshapes rank 3 to 5 into rows, not {dims:?}"),
    }
}

/// `x·W + b` on burn's path: burn's `Linear`, or under [`crate::autocast`] the product in the
/// thread's precision, back in f32 for the bias.
fn affine<const D: usize>(linear: &Linear, x: Tensor<D>) -> Tensor<D> {
    if precision::current() == Precision::F32 {
        return linear.forward(x);
    }
    let weight = precision::lowered(linear.weight.val());
    let product = burn::tensor::module::linear(precision::lowered(x), weight, None);
    let y = precision::raised(product);
    match &linear.bias {
        Some(b) => y + b.val().unsqueeze(),
        None => y,
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

layer_module!(Dense, linear);

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::Tensor;

    #[test]
    fn resolving_before_initialize_names_the_layer() {
        let err = Dense::new(4)
            .infer_shape(Tensor::<2>::ones([1, 3], &Device::flex()))
            .unwrap_err();
        assert!(matches!(err, Error::NotInitialized { .. }), "{err}");
        assert!(err.to_string().contains("initialize()"), "{err}");
    }

    #[test]
    fn a_feature_mismatch_names_both_sizes() {
        let device = Device::flex();
        let dense = Dense::new(4)
            .initialize(Init::default(), &device)
            .infer_shape(Tensor::<2>::ones([2, 3], &device))
            .unwrap();
        let err = dense
            .infer_shape(Tensor::<2>::ones([2, 7], &device))
            .unwrap_err();
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
    fn flatten_false_applies_to_the_last_axis_and_true_flattens() {
        let device = Device::flex();
        let x = || NdTensor::from(Tensor::<3>::ones([4, 3, 5], &device));
        let (_, y) = Dense::new(2)
            .flatten(false)
            .initialize(Init::default(), &device)
            .infer(x())
            .unwrap();
        assert_eq!(y.dims(), [4, 3, 2]);
        let (flat, y) = Dense::new(2)
            .initialize(Init::default(), &device)
            .infer(x())
            .unwrap();
        assert_eq!(y.dims(), [4, 2]);
        assert_eq!(flat.known_in_units(), Some(15));
    }
}
