//! What a recurrent layer and a cell share, written once: the kind (`rnn`, `lstm`, `gru`,
//! `relu`), the biases, a declared input size, and the steps of a deferred input size (the
//! size known, the weights made for an input's features, `initialize`). Each type holds the
//! fields `mode`, `use_bias`, `input_size` and `weights` (a `Deferred<Weights>`), a
//! `new(mode, hidden)` and a `build(features, device)`.

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

        /// The input's features, once known: the weights', or as declared.
        fn known_input_size(&self) -> Option<usize> {
            self.weights
                .get()
                .and_then(|w| w.cells.first().map($crate::layers::rnn::weights::Cell::input_size))
                .or(self.input_size)
        }

        /// `infer`'s last steps, for an input `x` of `features` whose shape was checked: the
        /// features the layer knows must match, the weights are made for them, and `x` runs.
        fn resolved(
            mut self,
            features: usize,
            x: $crate::ndtensor::NdTensor,
        ) -> $crate::error::Result<(Self, $crate::ndtensor::NdTensor)> {
            if let Some(known) = self.known_input_size()
                && known != features
            {
                return Err($crate::error::Error::FeatureMismatch {
                    layer: self.to_string(),
                    expected: known,
                    got: features,
                });
            }
            let layer = self.clone();
            self.weights
                .resolve(&layer, &x.device(), |device| Ok(layer.build(features, device)))?;
            let y = $crate::block::Block::forward(&self, x);
            Ok((self, y))
        }

        /// `initialize`: the weights made at once where the input size is declared.
        fn initialized(mut self, init: $crate::init::Init, device: &burn::tensor::Device) -> Self {
            let declared = self.input_size.map(|features| {
                let layer = self.clone();
                move |device: &burn::tensor::Device| layer.build(features, device)
            });
            self.weights.initialize(init, device, declared);
            self
        }
    };
}
pub(super) use shared_options;
