//! Gluon's recurrent layers (`gluon.rnn.RNN`, `LSTM`, `GRU`): any depth, one or two
//! directions, dropout between layers, Gluon's `TNC` layout or `NTC`, an initial state given or
//! zeros (`begin_state`), the final states returned; the input size deferred as every ember
//! layer's. The parameters are PyTorch's, by name, layout and gate order ([`weights`]), so a
//! `state_dict` of `torch.nn.LSTM` loads, and the numbers are PyTorch's
//! (`tests/layers/recurrent.rs` holds them within 1e-5 of `torch.nn.RNN/LSTM/GRU`). On
//! burn-flex in f32 with oneDNN's kernels chosen (the default), each layer runs over the whole
//! sequence in one of oneDNN's RNN primitives, as PyTorch's CPU layers do; elsewhere burn's
//! operations run it a step at a time (`pass.rs`).
//!
//! ```
//! use burn::prelude::*;
//! use ember::{Block, Init, Layout, Recurrent};
//!
//! let device = Device::flex();
//! let lstm = Recurrent::lstm(8).layers(2).bidirectional(true).layout(Layout::Ntc);
//! let x = Tensor::<3>::ones([4, 5, 3], &device); // 4 sequences of 5 steps of 3 features
//! let lstm = lstm.initialize(Init::default(), &device).infer_shape(x.clone()).unwrap();
//! let (y, states) = lstm.forward_state(x, None);
//! assert_eq!(y.dims(), [4, 5, 16]); // both directions' outputs side by side
//! assert_eq!(states[0].dims(), [4, 4, 8]); // h: [layers × directions, batch, hidden]
//! assert_eq!(states[1].dims(), [4, 4, 8]); // c
//! assert_eq!(lstm.collect_params().get("weight_ih_l1_reverse").unwrap().shape, [32, 16]);
//! ```

mod cell;
mod mode;
mod options;
mod pass;
mod weights;

use std::fmt;

use burn::tensor::{Device, Tensor};

pub use cell::RecurrentCell;
pub use mode::Mode;

mod chain;
pub(crate) mod view;
use weights::{Cell, Weights};

use crate::block::Block;
use crate::deferred::{Deferred, layer_module};
use crate::error::{Error, Result};
use crate::init::Init;
use crate::layers::dropout::Dropout;
use crate::ndtensor::NdTensor;

/// Where the time axis is: Gluon's `layout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `[time, batch, features]`: Gluon's default, and PyTorch's without `batch_first`.
    Tnc,
    /// `[batch, time, features]`: PyTorch's `batch_first=True`.
    Ntc,
}

/// A recurrent layer: `Recurrent::lstm(hidden)` is Gluon's `rnn.LSTM(hidden)`.
#[derive(Debug, Clone)]
pub struct Recurrent {
    mode: Mode,
    hidden: usize,
    layers: usize,
    bidirectional: bool,
    dropout: f64,
    layout: Layout,
    use_bias: bool,
    input_size: Option<usize>,
    weights: Deferred<Weights>,
}

impl Recurrent {
    fn new(mode: Mode, hidden: usize) -> Self {
        Self {
            mode,
            hidden,
            layers: 1,
            bidirectional: false,
            dropout: 0.0,
            layout: Layout::Tnc,
            use_bias: true,
            input_size: None,
            weights: Deferred::new("Recurrent"),
        }
    }

    options::shared_options!("RNN", "LSTM", "GRU");

    /// `num_layers`: stacked layers, each reading the one below's outputs.
    pub fn layers(mut self, layers: usize) -> Self {
        self.layers = layers;
        self
    }

    /// `bidirectional=True`: each layer also reads the sequence backwards, and its output is
    /// both directions' side by side (`2 × hidden`).
    pub fn bidirectional(mut self, bidirectional: bool) -> Self {
        self.bidirectional = bidirectional;
        self
    }

    /// `dropout`: applied to each layer's output but the last's, in training.
    pub fn dropout(mut self, rate: f64) -> Self {
        self.dropout = rate;
        self
    }

    /// `layout='NTC'` or `'TNC'` (the default).
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }

    fn directions(&self) -> usize {
        1 + usize::from(self.bidirectional)
    }

    /// Gluon's `begin_state`: zeros, `[h]` (and `c` for an LSTM), each
    /// `[layers × directions, batch, hidden]`.
    pub fn begin_state(&self, batch: usize, device: &Device) -> Vec<Tensor<3>> {
        let shape = [self.layers * self.directions(), batch, self.hidden];
        self.mode.zero_states(shape, device)
    }

    /// Gluon's `forward(inputs, states)`: the outputs of the last layer (`[time, batch,
    /// directions × hidden]` in `TNC`, `[batch, time, …]` in `NTC`) and the final states, as
    /// [`Recurrent::begin_state`] shapes them; `None` starts from zeros. A state carried from
    /// one batch to the next is the caller's to detach.
    ///
    /// # Panics
    /// Before the input size is known, or on an input of the wrong shape, as
    /// [`Block::forward`] ([`Block::infer_shape`] checks the input with errors); on states of
    /// another number or shape than [`Recurrent::begin_state`]'s, naming both.
    pub fn forward_state(
        &self,
        x: Tensor<3>,
        states: Option<Vec<Tensor<3>>>,
    ) -> (Tensor<3>, Vec<Tensor<3>>) {
        let weights = self.weights.module(self);
        let mut input = match self.layout {
            Layout::Tnc => x,
            Layout::Ntc => x.swap_dims(0, 1),
        };
        let [_, batch, _] = input.dims();
        let states = states.unwrap_or_else(|| self.begin_state(batch, &input.device()));
        self.check_states(&states, batch);
        let directions = self.directions();
        // Each state's final values, layer by layer.
        let mut ends: Vec<Vec<Tensor<3>>> = vec![Vec::new(); states.len()];
        for layer in 0..self.layers {
            let cells: Vec<&Cell> = (0..directions).map(|d| weights.cell(layer, d)).collect();
            let starts = states
                .iter()
                .map(|s| s.clone().narrow(0, layer * directions, directions))
                .collect();
            let (y, finals) = pass::layer(self.mode, &cells, input, starts);
            for (end, last) in ends.iter_mut().zip(finals) {
                end.push(last);
            }
            input = match layer + 1 < self.layers {
                true => weights.dropout.drop_units(y),
                false => y,
            };
        }
        let y = match self.layout {
            Layout::Tnc => input,
            // Row-major, as the next layer's reshape or product wants it (on oneDNN, a copy
            // on its threads, and a gradient that needs none backward).
            Layout::Ntc => crate::kernels::contiguous(input.swap_dims(0, 1)),
        };
        (y, ends.into_iter().map(|end| Tensor::cat(end, 0)).collect())
    }

    /// States as [`Recurrent::begin_state`] shapes them for `batch`, as many as the layer
    /// carries: one of another shape was reshaped into place, its values scrambled.
    fn check_states(&self, states: &[Tensor<3>], batch: usize) {
        let shape = [self.layers * self.directions(), batch, self.hidden];
        assert!(
            states.len() == self.mode.states() && states.iter().all(|s| s.dims() == shape),
            "{self} takes {} state(s) of shape {shape:?} ([layers × directions, batch, \
             hidden]), as begin_state({batch}) makes them; it was given {:?}",
            self.mode.states(),
            states.iter().map(|s| s.dims()).collect::<Vec<_>>()
        );
    }

    /// The parameters for inputs of `features`, zeros until the initializer fills them.
    fn build(&self, features: usize, device: &Device) -> Weights {
        let cells = (0..self.layers)
            .flat_map(|layer| (0..self.directions()).map(move |_| layer))
            .map(|layer| {
                let input = match layer {
                    0 => features,
                    _ => self.directions() * self.hidden,
                };
                Cell::zeros(self.mode, self.hidden, input, self.use_bias, device)
            })
            .collect();
        Weights {
            alone: false,
            directions: self.directions(),
            cells,
            dropout: Dropout::new(self.dropout),
        }
    }

    fn check_options(&self) -> Result<()> {
        let invalid = |name, value: String, reason: &str| {
            Err(Error::InvalidValue {
                name,
                value,
                reason: format!("{self}: {reason}"),
            })
        };
        if self.hidden == 0 {
            return invalid("hidden size", "0".into(), "a layer needs 1 unit or more");
        }
        if self.layers == 0 {
            return invalid("num_layers", "0".into(), "a network needs 1 layer or more");
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return invalid("dropout", self.dropout.to_string(), "must lie in [0, 1)");
        }
        Ok(())
    }
}

impl Block for Recurrent {
    /// # Shapes
    /// - input: `[time, batch, features]` (`TNC`) or `[batch, time, features]` (`NTC`)
    /// - output: the same with `directions × hidden` features; the states start from zeros
    ///   and are dropped ([`Recurrent::forward_state`] takes and returns them).
    fn forward(&self, x: NdTensor) -> NdTensor {
        self.forward_state(x.rank::<3>(), None).0.into()
    }

    fn infer(self, x: NdTensor) -> Result<(Self, NdTensor)> {
        self.check_options()?;
        let dims = x.dims();
        if dims.len() != 3 || dims.contains(&0) {
            let expected = match self.layout {
                Layout::Tnc => "[time, batch, features], none of them 0",
                Layout::Ntc => "[batch, time, features], none of them 0",
            };
            return Err(Error::Shape {
                what: self.to_string(),
                expected: expected.to_string(),
                got: dims,
            });
        }
        self.resolved(dims[2], x)
    }

    fn initialize(self, init: Init, device: &Device) -> Self {
        self.initialized(init, device)
    }
}

impl fmt::Display for Recurrent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.known_input_size() {
            Some(input) => write!(f, "{}({input} -> {}", self.mode, self.hidden)?,
            None => write!(f, "{}(? -> {}", self.mode, self.hidden)?,
        }
        if self.mode == Mode::RnnRelu {
            write!(f, ", relu")?;
        }
        if self.layers != 1 {
            write!(f, ", {} layers", self.layers)?;
        }
        if self.bidirectional {
            write!(f, ", bidirectional")?;
        }
        if self.dropout > 0.0 {
            write!(f, ", dropout {}", self.dropout)?;
        }
        if self.layout == Layout::Ntc {
            write!(f, ", NTC")?;
        }
        if !self.use_bias {
            write!(f, ", no bias")?;
        }
        write!(f, ")")
    }
}

layer_module!(Recurrent, weights);

#[cfg(test)]
mod tests;
