//! `Block`: Gluon's building block. Only `forward` is required; `initialize`,
//! `collect_params`, `summary` and burn's `num_params` come for free.
//!
//! A user's own burn module becomes a Block by implementing `forward`:
//!
//! ```
//! use burn::prelude::*;
//! use burn::nn::{Linear, LinearConfig};
//! use ember::{Block, Result};
//!
//! #[derive(Module, Debug)]
//! struct Residual {
//!     fc: Linear,
//! }
//!
//! impl Block for Residual {
//!     fn forward(&self, x: Tensor<2>) -> Result<Tensor<2>> {
//!         Ok(x.clone() + burn::tensor::activation::relu(self.fc.forward(x)))
//!     }
//! }
//!
//! let device = Device::flex();
//! let block = Residual { fc: LinearConfig::new(4, 4).init(&device) };
//! assert_eq!(block.collect_params().names(), vec!["fc.weight", "fc.bias"]);
//! assert_eq!(block.num_params(), 20);
//! let y = block.forward(Tensor::ones([2, 4], &device)).unwrap();
//! assert_eq!(y.dims(), [2, 4]);
//! ```

use std::fmt;

use burn::module::{Module, ModuleDisplay, ModuleVisitor, Param};
use burn::tensor::{Device, Tensor};

use crate::error::Result;
use crate::init::{Init, Reinitializer};

/// A piece of a network: a layer, a container or a user's own module.
pub trait Block: Module + ModuleDisplay + Sized {
    /// Runs the block.
    ///
    /// # Shapes
    /// - `x`: `[batch, in_features]`
    /// - output: `[batch, out_features]`
    fn forward(&self, x: Tensor<2>) -> Result<Tensor<2>>;

    /// Gluon's `initialize`: weights are drawn from `init`, biases are zeros. Layers whose
    /// input size is not yet known defer their parameters until the first forward (or
    /// [`Block::infer_shape`]). The default re-initializes every float parameter of the
    /// module on `device`; containers and deferred layers override it.
    fn initialize(self, init: Init, device: &Device) -> Self {
        self.to_device(device).map(&mut Reinitializer {
            init,
            path: Vec::new(),
        })
    }

    /// Gluon's `infer_shape`: runs an example input through the block, so that every deferred
    /// parameter takes its shape now rather than at the first real batch.
    fn infer_shape(&self, example: Tensor<2>) -> Result<()> {
        self.forward(example).map(drop)
    }

    /// Every parameter with its structural name (`0.weight`, `2.0.bias`, …) and its shape.
    /// Dense and Linear weights are reported as `(units, in_units)`, as Gluon and PyTorch store
    /// them; a size still deferred shows as 0, as Gluon prints it.
    fn collect_params(&self) -> ParamDict {
        let mut collector = ParamCollector::default();
        self.visit(&mut collector);
        ParamDict {
            params: collector.params,
        }
    }

    /// A printable table of the parameters and the total count.
    fn summary(&self) -> String {
        self.collect_params().to_string()
    }

    /// Gluon's `save_parameters`: see [`crate::params::save_parameters`].
    fn save_parameters(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        crate::params::save_parameters(self, path)
    }

    /// Gluon's `load_parameters`: see [`crate::params::load_parameters`].
    fn load_parameters(self, path: impl AsRef<std::path::Path>, device: &Device) -> Result<Self> {
        crate::params::load_parameters(self, path, device)
    }
}

/// One parameter as [`Block::collect_params`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamInfo {
    /// Structural name: `0.weight`, `2.0.bias`, `fc.weight`.
    pub name: String,
    /// Shape in Gluon/PyTorch layout; 0 marks a size that is still deferred.
    pub shape: Vec<usize>,
}

impl ParamInfo {
    /// Whether the shape is fully known.
    pub fn is_known(&self) -> bool {
        !self.shape.contains(&0)
    }

    /// Number of elements (0 while deferred).
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// The parameters of a block, in order, like Gluon's `ParameterDict`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParamDict {
    /// The parameters, in the order the network uses them.
    pub params: Vec<ParamInfo>,
}

impl ParamDict {
    /// The names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.params.iter().map(|p| p.name.as_str()).collect()
    }

    /// The parameter of that name.
    pub fn get(&self, name: &str) -> Option<&ParamInfo> {
        self.params.iter().find(|p| p.name == name)
    }

    /// Total number of scalars (deferred parameters count 0).
    pub fn total(&self) -> usize {
        self.params.iter().map(ParamInfo::numel).sum()
    }

    /// Prefixes every name with `prefix.`, as a container does for its children.
    pub(crate) fn prefixed(self, prefix: &str) -> Self {
        ParamDict {
            params: self
                .params
                .into_iter()
                .map(|p| ParamInfo {
                    name: format!("{prefix}.{}", p.name),
                    shape: p.shape,
                })
                .collect(),
        }
    }
}

impl fmt::Display for ParamDict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self
            .params
            .iter()
            .map(|p| p.name.len())
            .max()
            .unwrap_or(4)
            .max(9);
        writeln!(
            f,
            "{:<width$}  {:<16}  {:>12}",
            "parameter", "shape", "count"
        )?;
        for p in &self.params {
            let dims: Vec<String> = p.shape.iter().map(usize::to_string).collect();
            let shape = format!("({})", dims.join(", "));
            writeln!(f, "{:<width$}  {:<16}  {:>12}", p.name, shape, p.numel())?;
        }
        write!(f, "total parameters: {}", self.total())?;
        if self.params.iter().any(|p| !p.is_known()) {
            write!(f, " (some shapes deferred until the first forward)")?;
        }
        Ok(())
    }
}

/// Walks a module with burn's visitor and records each float parameter under its path.
#[derive(Default)]
struct ParamCollector {
    path: Vec<(String, String)>,
    params: Vec<ParamInfo>,
}

impl ModuleVisitor for ParamCollector {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        self.path
            .push((name.to_string(), container_type.to_string()));
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let name: Vec<&str> = self.path.iter().map(|(name, _)| name.as_str()).collect();
        let mut shape = param.lazy_shape().as_slice().to_vec();
        // burn's Linear keeps its weight as [d_in, d_out]; files and Gluon say (units, in_units).
        if let Some((last, container)) = self.path.last()
            && last == "weight"
            && container == "Struct:Linear"
        {
            shape.reverse();
        }
        self.params.push(ParamInfo {
            name: name.join("."),
            shape,
        });
    }
}
