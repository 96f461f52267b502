//! Gluon's recurrent cells (`rnn.RNNCell`, `LSTMCell`, `GRUCell`): one time step, for loops of
//! one's own (a decoder that feeds its output back, attention over an encoder's states). The
//! parameters are PyTorch's `nn.LSTMCell`'s (`weight_ih`, `weight_hh`, `bias_ih`, `bias_hh`),
//! the arithmetic is the layers' ([`super::Mode`]).
//!
//! ```
//! use burn::prelude::*;
//! use ember::{Block, Init, RecurrentCell};
//!
//! let device = Device::flex();
//! let cell = RecurrentCell::lstm(6).input_size(3).initialize(Init::default(), &device);
//! let mut states = cell.begin_state(2, &device);
//! for _ in 0..4 {
//!     let x = Tensor::<2>::ones([2, 3], &device);
//!     let (h, next) = cell.forward_step(x, Some(states));
//!     assert_eq!(h.dims(), [2, 6]);
//!     states = next;
//! }
//! assert_eq!(cell.collect_params().get("weight_hh").unwrap().shape, [24, 6]);
//! ```

use std::fmt;

use burn::tensor::{Device, Tensor};

use super::mode::Mode;
use super::weights::{Cell, Weights};
use crate::block::Block;
use crate::deferred::{Deferred, layer_module};
use crate::error::{Error, Result};
use crate::init::Init;
use crate::layers::dropout::Dropout;
use crate::ndtensor::NdTensor;

/// One step of a recurrent layer: `RecurrentCell::gru(hidden)` is Gluon's
/// `rnn.GRUCell(hidden)`.
#[derive(Debug, Clone)]
pub struct RecurrentCell {
    mode: Mode,
    hidden: usize,
    use_bias: bool,
    input_size: Option<usize>,
    weights: Deferred<Weights>,
}

impl RecurrentCell {
    fn new(mode: Mode, hidden: usize) -> Self {
        Self {
            mode,
            hidden,
            use_bias: true,
            input_size: None,
            weights: Deferred::new("RecurrentCell"),
        }
    }

    super::options::shared_options!("RNNCell", "LSTMCell", "GRUCell");

    /// `begin_state`: zeros, `[h]` (and `c` for an LSTM cell), each `[batch, hidden]`.
    pub fn begin_state(&self, batch: usize, device: &Device) -> Vec<Tensor<2>> {
        self.mode.zero_states([batch, self.hidden], device)
    }

    /// One step: the output (`h'`) and the next states, from `x` (`[batch, features]`) and
    /// `states` (zeros where `None`).
    ///
    /// # Panics
    /// Before the input size is known, or on inputs of the wrong shape, as
    /// [`Block::forward`]; on states of another number or shape than `begin_state`'s.
    pub fn forward_step(
        &self,
        x: Tensor<2>,
        states: Option<Vec<Tensor<2>>>,
    ) -> (Tensor<2>, Vec<Tensor<2>>) {
        let weights = self.weights.module(self);
        let cell = weights.cell(0, 0);
        let [batch, _] = x.dims();
        let states = states.unwrap_or_else(|| self.begin_state(batch, &x.device()));
        let shape = [batch, self.hidden];
        assert!(
            states.len() == self.mode.states() && states.iter().all(|s| s.dims() == shape),
            "{self} takes {} state(s) of shape {shape:?}, as begin_state({batch}) makes them; \
             it was given {:?}",
            self.mode.states(),
            states.iter().map(|s| s.dims()).collect::<Vec<_>>()
        );
        let mut states = states.into_iter();
        let h = states.next().expect("a state h");
        let c = states.next();
        let hw = cell.hidden_part(h.clone());
        let (h, c) = self.mode.step(cell.input_part(x), hw, h, c);
        let mut next = vec![h.clone()];
        next.extend(c);
        (h, next)
    }
}

impl Block for RecurrentCell {
    /// # Shapes
    /// - input: `[batch, features]`
    /// - output: `[batch, hidden]`, from zero states ([`RecurrentCell::forward_step`] takes
    ///   and returns them).
    fn forward(&self, x: NdTensor) -> NdTensor {
        self.forward_step(x.rank::<2>(), None).0.into()
    }

    fn infer(self, x: NdTensor) -> Result<(Self, NdTensor)> {
        let dims = x.dims();
        if self.hidden == 0 {
            return Err(Error::InvalidValue {
                name: "hidden size",
                value: "0".to_string(),
                reason: format!("{self}: a cell needs 1 unit or more"),
            });
        }
        if dims.len() != 2 || dims.contains(&0) {
            return Err(Error::Shape {
                what: self.to_string(),
                expected: "[batch, features], neither 0".to_string(),
                got: dims,
            });
        }
        self.resolved(dims[1], x)
    }

    fn initialize(self, init: Init, device: &Device) -> Self {
        self.initialized(init, device)
    }
}

impl RecurrentCell {
    fn build(&self, features: usize, device: &Device) -> Weights {
        Weights {
            alone: true,
            directions: 1,
            cells: vec![Cell::zeros(
                self.mode,
                self.hidden,
                features,
                self.use_bias,
                device,
            )],
            dropout: Dropout::new(0.0),
        }
    }
}

impl fmt::Display for RecurrentCell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.known_input_size() {
            Some(input) => write!(f, "{}Cell({input} -> {}", self.mode, self.hidden)?,
            None => write!(f, "{}Cell(? -> {}", self.mode, self.hidden)?,
        }
        if self.mode == Mode::RnnRelu {
            write!(f, ", relu")?;
        }
        if !self.use_bias {
            write!(f, ", no bias")?;
        }
        write!(f, ")")
    }
}

layer_module!(RecurrentCell, weights);
