//! `PositionalEncoding(num_hiddens, dropout)`: d2l's sinusoidal positions (11.6), added to a
//! `[batch, steps, hidden]` input, then dropout:
//!
//! ```text
//! P[i, 2j]   = sin(i / 10000^(2j / d))
//! P[i, 2j+1] = cos(i / 10000^(2j / d))      (d = hidden, i = the step)
//! ```
//!
//! For an odd `d` the last column is a sine (d2l's code is for an even one). It holds no
//! parameter; the table is made for the steps each input has, up to `max_len`.
//!
//! ```
//! use burn::prelude::*;
//! use ember::{Block, PositionalEncoding};
//! let pe = PositionalEncoding::new(4, 0.0);
//! let y: Tensor<3> = pe.forward(Tensor::<3>::zeros([1, 2, 4], &Device::flex()).into()).rank();
//! let p = y.into_data().try_to_vec::<f32>().unwrap();
//! assert_eq!(p[..4], [0.0, 1.0, 0.0, 1.0]); // step 0: sin 0, cos 0
//! assert!((p[4] - 1f32.sin()).abs() < 1e-6 && (p[6] - 0.01f32.sin()).abs() < 1e-6);
//! ```

use std::fmt;

use burn::tensor::{Tensor, TensorData};

use crate::block::Block;
use crate::deferred::layer_module;
use crate::error::{Error, Result};
use crate::layers::dropout::Dropout;
use crate::ndtensor::NdTensor;

/// d2l's `PositionalEncoding`.
#[derive(Debug, Clone)]
pub struct PositionalEncoding {
    hidden: usize,
    max_len: usize,
    dropout: Dropout,
}

impl PositionalEncoding {
    /// Positions for inputs of `hidden` features, dropout at `rate` after adding them, inputs
    /// of up to 1000 steps (d2l's `max_len`).
    pub fn new(hidden: usize, rate: f64) -> Self {
        Self {
            hidden,
            max_len: 1000,
            dropout: Dropout::new(rate),
        }
    }

    /// d2l's `max_len`: the most steps an input may have.
    pub fn max_len(mut self, max_len: usize) -> Self {
        self.max_len = max_len;
        self
    }

    /// The features of each step, and the most steps an input may have.
    pub fn sizes(&self) -> (usize, usize) {
        (self.hidden, self.max_len)
    }

    /// The table `[steps, hidden]`, row `i` the encoding of step `i`.
    pub fn table(&self, steps: usize) -> Vec<f32> {
        let d = self.hidden as f64;
        (0..steps)
            .flat_map(|i| {
                (0..self.hidden).map(move |k| {
                    let angle = i as f64 / 10000f64.powf((k - k % 2) as f64 / d);
                    match k % 2 {
                        0 => angle.sin() as f32,
                        _ => angle.cos() as f32,
                    }
                })
            })
            .collect()
    }
}

impl Block for PositionalEncoding {
    /// # Shapes
    /// `[batch, steps, hidden]` in and out.
    fn forward(&self, x: NdTensor) -> NdTensor {
        let x: Tensor<3> = x.rank();
        let [_, steps, _] = x.dims();
        let table = TensorData::new(self.table(steps), [1, steps, self.hidden]);
        let p = Tensor::<3>::from_data(table, &x.device());
        self.dropout.drop_units(x + p).into()
    }

    fn infer(self, x: NdTensor) -> Result<(Self, NdTensor)> {
        let dims = x.dims();
        let fits = dims.len() == 3 && dims[2] == self.hidden && dims[1] <= self.max_len;
        if !fits {
            return Err(Error::Shape {
                what: self.to_string(),
                expected: format!(
                    "[batch, steps, {}] with at most {} steps (max_len)",
                    self.hidden, self.max_len
                ),
                got: dims,
            });
        }
        let (dropout, x) = self.dropout.clone().infer(x)?;
        let layer = Self { dropout, ..self };
        let y = layer.forward(x);
        Ok((layer, y))
    }
}

impl fmt::Display for PositionalEncoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "PositionalEncoding({}, dropout={})",
            self.hidden,
            self.dropout.rate()
        )
    }
}

layer_module!(PositionalEncoding, dropout);
