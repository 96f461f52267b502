//! The options a recurrent layer and a cell share, written once: the kind (`rnn`, `lstm`,
//! `gru`, `relu`), the biases and a declared input size. Each type holds the fields `mode`,
//! `use_bias` and `input_size` and a `new(mode, hidden)`.

/// The shared constructors and options, for `$name` (`RNN` or `RNNCell` in the docs).
macro_rules! shared_options {
    ($rnn:literal, $lstm:literal, $gru:literal) => {
        #[doc = concat!("`rnn.", $rnn, "(hidden)`: Elman's, with tanh (`.relu()` for `activation='relu'`).")]
        pub fn rnn(hidden: usize) -> Self {
            Self::new($crate::layers::rnn::mode::Mode::RnnTanh, hidden)
        }

        #[doc = concat!("`rnn.", $lstm, "(hidden)`.")]
        pub fn lstm(hidden: usize) -> Self {
            Self::new($crate::layers::rnn::mode::Mode::Lstm, hidden)
        }

        #[doc = concat!("`rnn.", $gru, "(hidden)`.")]
        pub fn gru(hidden: usize) -> Self {
            Self::new($crate::layers::rnn::mode::Mode::Gru, hidden)
        }

        /// `activation='relu'` for an Elman one; an LSTM or GRU keeps its gates' activations.
        pub fn relu(mut self) -> Self {
            if self.mode == $crate::layers::rnn::mode::Mode::RnnTanh {
                self.mode = $crate::layers::rnn::mode::Mode::RnnRelu;
            }
            self
        }

        /// `i2h_bias`/`h2h_bias` off (PyTorch's `bias=False`).
        pub fn use_bias(mut self, use_bias: bool) -> Self {
            self.use_bias = use_bias;
            self
        }

        /// `input_size`: declares the input's features, so that `initialize` creates the
        /// parameters at once.
        pub fn input_size(mut self, input_size: usize) -> Self {
            self.input_size = Some(input_size);
            self
        }

        /// The kind.
        pub fn mode(&self) -> $crate::layers::rnn::mode::Mode {
            self.mode
        }
    };
}
pub(super) use shared_options;
