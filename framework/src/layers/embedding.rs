//! `Embedding(input_dim, output_dim)`: Gluon's lookup table over burn-nn's. Its input holds
//! indices as floats, as Gluon's NDArrays do; each becomes a row of the table.
//!
//! ```
//! use burn::prelude::*;
//! use ember::{Block, Embedding, Init};
//! let device = Device::flex();
//! let embed = Embedding::new(10, 4).initialize(Init::default(), &device);
//! let tokens = Tensor::<2>::from_floats([[1.0, 2.0, 9.0]], &device);
//! assert_eq!(embed.forward(tokens.into()).dims(), [1, 3, 4]);
//! assert_eq!(embed.collect_params().get("weight").unwrap().shape, [10, 4]);
//! ```

use std::fmt;

use burn::nn::{Embedding as BurnEmbedding, EmbeddingConfig};
use burn::tensor::Device;

use crate::block::Block;
use crate::deferred::{Deferred, layer_module};
use crate::error::{Error, Result};
use crate::init::Init;
use crate::ndtensor::NdTensor;

/// `nn.Embedding(input_dim, output_dim)`: the weight is `(input_dim, output_dim)`, in Gluon's,
/// PyTorch's and burn's layout alike. Both sizes are given, so `initialize` creates it.
#[derive(Debug, Clone)]
pub struct Embedding {
    input_dim: usize,
    output_dim: usize,
    table: Deferred<BurnEmbedding>,
}

impl Embedding {
    /// A table of `input_dim` rows of `output_dim` values.
    pub fn new(input_dim: usize, output_dim: usize) -> Self {
        Self {
            input_dim,
            output_dim,
            table: Deferred::new("Embedding"),
        }
    }

    /// The burn layer inside, once created.
    pub fn table(&self) -> Option<&BurnEmbedding> {
        self.table.get()
    }
}

impl Block for Embedding {
    /// # Shapes
    /// - input: `[batch]` or `[batch, steps]` of indices in `0..input_dim`
    /// - output: `[batch, output_dim]` or `[batch, steps, output_dim]`
    fn forward(&self, x: NdTensor) -> NdTensor {
        let table = self.table.module(self);
        match x.ndim() {
            1 => {
                let indices = x.rank::<1>().int().unsqueeze_dim::<2>(1);
                let [batch, _] = indices.dims();
                table
                    .forward(indices)
                    .reshape([batch, self.output_dim])
                    .into()
            }
            _ => table.forward(x.rank::<2>().int()).into(),
        }
    }

    /// Checks the rank and that every index of the example is a row of the table.
    fn infer(self, x: NdTensor) -> Result<(Self, NdTensor)> {
        let dims = x.dims();
        if self.table.get().is_none() {
            return Err(Error::NotInitialized {
                param: format!("{self}.weight"),
            });
        }
        if !(1..=2).contains(&dims.len()) {
            return Err(Error::Shape {
                what: self.to_string(),
                expected: "[batch] or [batch, steps] of indices".to_string(),
                got: dims,
            });
        }
        let indices: Vec<i64> = x
            .clone()
            .flatten()
            .int()
            .into_data()
            .convert::<i64>()
            .try_to_vec()
            .map_err(|e| Error::Readback {
                what: "the embedding's indices".to_string(),
                reason: format!("{e:?}"),
            })?;
        if let Some(bad) = indices
            .iter()
            .find(|i| !(0..self.input_dim as i64).contains(*i))
        {
            return Err(Error::InvalidValue {
                name: "embedding index",
                value: bad.to_string(),
                reason: format!("{self} has rows 0..{}", self.input_dim),
            });
        }
        let y = self.forward(x);
        Ok((self, y))
    }

    fn initialize(mut self, init: Init, device: &Device) -> Self {
        let (input_dim, output_dim) = (self.input_dim, self.output_dim);
        let build = move |device: &Device| EmbeddingConfig::new(input_dim, output_dim).init(device);
        self.table.initialize(init, device, Some(build));
        self
    }
}

impl fmt::Display for Embedding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Embedding({} -> {})", self.input_dim, self.output_dim)
    }
}

layer_module!(Embedding, table);
