//! What a recurrent layer computes at one time step: Gluon's and PyTorch's equations for the
//! Elman RNN (tanh or relu), the LSTM and the GRU, on the input's projection computed for
//! every step at once.

use std::fmt;

use burn::tensor::Tensor;
use burn::tensor::activation::{relu, sigmoid};

/// The kind of recurrent layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Elman's RNN, `h' = tanh(W_ih x + b_ih + W_hh h + b_hh)` (Gluon's `rnn_tanh`).
    RnnTanh,
    /// The same with `relu` (Gluon's `rnn_relu`).
    RnnRelu,
    /// The LSTM: gates i, f, g, o in that order in each weight's rows, as PyTorch and Gluon
    /// lay them out; `c' = f c + i g`, `h' = o tanh(c')`.
    Lstm,
    /// The GRU: gates r, z, n in that order; `n = tanh(W_in x + b_in + r (W_hn h + b_hn))`,
    /// `h' = (1 − z) n + z h` (the reset applied after the product, as PyTorch and cuDNN do).
    Gru,
}

impl Mode {
    /// How many blocks of `hidden` rows each weight holds: 1, 4 or 3.
    pub fn gates(self) -> usize {
        match self {
            Mode::RnnTanh | Mode::RnnRelu => 1,
            Mode::Lstm => 4,
            Mode::Gru => 3,
        }
    }

    /// How many states a layer carries: `[h, c]` for the LSTM, `[h]` otherwise.
    pub fn states(self) -> usize {
        match self {
            Mode::Lstm => 2,
            _ => 1,
        }
    }

    /// Zero states of `shape`, as many as the layer carries.
    pub(super) fn zero_states<const D: usize>(
        self,
        shape: [usize; D],
        device: &burn::tensor::Device,
    ) -> Vec<Tensor<D>> {
        (0..self.states())
            .map(|_| Tensor::zeros(shape, device))
            .collect()
    }

    /// One step for a batch: `xw` is `W_ih x + b_ih` for this step (`[batch, gates·hidden]`),
    /// `hw` is `W_hh h + b_hh` (the same shape), `c` the LSTM's cell. Returns `h'` and, for
    /// the LSTM, `c'`.
    pub(super) fn step(
        self,
        xw: Tensor<2>,
        hw: Tensor<2>,
        h: Tensor<2>,
        c: Option<Tensor<2>>,
    ) -> (Tensor<2>, Option<Tensor<2>>) {
        match self {
            Mode::RnnTanh => ((xw + hw).tanh(), None),
            Mode::RnnRelu => (relu(xw + hw), None),
            Mode::Lstm => {
                let gates = (xw + hw).chunk(4, 1);
                let [i, f, g, o]: [Tensor<2>; 4] = gates.try_into().expect("four gates");
                let (i, f, g, o) = (sigmoid(i), sigmoid(f), g.tanh(), sigmoid(o));
                let c = f * c.expect("an LSTM carries its cell") + i * g;
                (o * c.clone().tanh(), Some(c))
            }
            Mode::Gru => {
                let x: [Tensor<2>; 3] = xw.chunk(3, 1).try_into().expect("three gates");
                let hh: [Tensor<2>; 3] = hw.chunk(3, 1).try_into().expect("three gates");
                let [xr, xz, xn] = x;
                let [hr, hz, hn] = hh;
                let r = sigmoid(xr + hr);
                let z = sigmoid(xz + hz);
                let n = (xn + r * hn).tanh();
                // (1 − z) n + z h, as n + z (h − n): one product fewer.
                (n.clone() + z * (h - n), None)
            }
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::RnnTanh | Mode::RnnRelu => "RNN",
            Mode::Lstm => "LSTM",
            Mode::Gru => "GRU",
        })
    }
}
