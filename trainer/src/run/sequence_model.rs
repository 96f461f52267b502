//! `--model rnn:H`, `rnn-relu:H`, `lstm:H`, `gru:H`: d2l's language model of chapter 9 as a
//! chain: an `Embedding`, a recurrent layer (`Recurrent`, batch first) and a `Dense` scoring
//! the vocabulary at every step, flattened to `[batch, steps × vocabulary]` for
//! [`ember::SequenceCrossEntropyLoss`].

use std::fmt;

use ember::{Block, Dense, Embedding, Flatten, Init, Layout, Mode, Recurrent, Sequential};

/// A recurrent language model's sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecurrentSpec {
    /// The recurrent layer's kind.
    pub mode: Mode,
    /// Its hidden units.
    pub hidden: usize,
    /// Its stacked layers.
    pub layers: usize,
    /// The width of each token's embedding.
    pub embed: usize,
}

/// The kinds by their names in `--model`.
const KINDS: [(&str, Mode); 4] = [
    ("rnn", Mode::RnnTanh),
    ("rnn-relu", Mode::RnnRelu),
    ("lstm", Mode::Lstm),
    ("gru", Mode::Gru),
];

/// The language model `--data text:…` trains without `--model`: d2l's LSTM of 256 (9.5).
pub const DEFAULT: RecurrentSpec = RecurrentSpec {
    mode: Mode::Lstm,
    hidden: 256,
    layers: 1,
    embed: 32,
};

/// What `--model` takes of a recurrent network.
pub const FORMS: &str = "rnn:H, rnn-relu:H, lstm:H or gru:H (then ,layers=N ,embed=E)";

impl RecurrentSpec {
    /// `kind:H[,layers=N][,embed=E]` where `kind` is one of [`KINDS`]; `None` for another
    /// kind, an error for sizes it cannot take.
    pub fn parse(s: &str) -> Option<Result<Self, String>> {
        let (kind, rest) = s.split_once(':')?;
        let mode = KINDS.iter().find(|(name, _)| *name == kind)?.1;
        Some(Self::sizes(mode, rest))
    }

    fn sizes(mode: Mode, rest: &str) -> Result<Self, String> {
        let positive = |name: &str, value: &str| match value.parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!(
                "{name} {value:?}: expected a whole number from 1 up"
            )),
        };
        let mut parts = rest.split(',');
        let mut spec = Self {
            mode,
            hidden: positive("hidden size", parts.next().unwrap_or(""))?,
            layers: 1,
            embed: 32,
        };
        for part in parts {
            match part.split_once('=') {
                Some(("layers", n)) => spec.layers = positive("layers", n)?,
                Some(("embed", n)) => spec.embed = positive("embed", n)?,
                _ => return Err(format!("{part:?}: expected layers=N or embed=E")),
            }
        }
        Ok(spec)
    }

    /// The chain for a vocabulary of `vocabulary` tokens; the embedding's and the recurrent
    /// layer's input sizes are known, the `Dense` layer's too.
    pub fn build<U: Block>(&self, vocabulary: usize) -> Sequential<U> {
        let recurrent = match self.mode {
            Mode::RnnTanh => Recurrent::rnn(self.hidden),
            Mode::RnnRelu => Recurrent::rnn(self.hidden).relu(),
            Mode::Lstm => Recurrent::lstm(self.hidden),
            Mode::Gru => Recurrent::gru(self.hidden),
        };
        Sequential::new()
            .add(Embedding::new(vocabulary, self.embed))
            .add(recurrent.layers(self.layers).layout(Layout::Ntc))
            .add(Dense::new(vocabulary).flatten(false))
            .add(Flatten)
    }

    /// d2l trains its recurrent networks from Xavier's initialization.
    pub fn init(&self) -> Init {
        Init::Xavier
    }

    /// Its parameters, and the values one sequence of `steps` makes in the forward pass, for
    /// a vocabulary of `vocabulary`.
    pub fn footprint(&self, steps: u128, vocabulary: u128) -> (u128, u128) {
        let (gates, hidden) = (self.mode.gates() as u128, self.hidden as u128);
        let layer = |input: u128| gates * hidden * (input + hidden + 2);
        let recurrent = layer(self.embed as u128) + (self.layers as u128 - 1) * layer(hidden);
        let parameters = vocabulary * self.embed as u128 + recurrent + (hidden + 1) * vocabulary;
        // Each step: the embedding, each layer's gates and states, the scores.
        let per_step = self.embed as u128 + self.layers as u128 * (gates + 2) * hidden + vocabulary;
        (parameters, steps.saturating_mul(per_step))
    }
}

impl fmt::Display for RecurrentSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = KINDS
            .iter()
            .find(|(_, mode)| *mode == self.mode)
            .map_or("?", |k| k.0);
        write!(f, "{kind}:{}", self.hidden)?;
        if self.layers != 1 {
            write!(f, ",layers={}", self.layers)?;
        }
        if self.embed != 32 {
            write!(f, ",embed={}", self.embed)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_print_back_and_bad_sizes_are_named() {
        for name in [
            "lstm:256",
            "gru:64,layers=2",
            "rnn:8,embed=16",
            "rnn-relu:4,layers=3,embed=5",
        ] {
            let spec = RecurrentSpec::parse(name).unwrap().unwrap();
            assert_eq!(spec.to_string(), name);
        }
        assert!(RecurrentSpec::parse("mlp:3").is_none());
        let err = RecurrentSpec::parse("lstm:0").unwrap().unwrap_err();
        assert!(err.contains("hidden size \"0\""), "{err}");
        let err = RecurrentSpec::parse("lstm:8,depth=2").unwrap().unwrap_err();
        assert!(err.contains("\"depth=2\""), "{err}");
    }

    /// The estimate counts the parameters the built network holds, exactly.
    #[test]
    fn the_footprint_counts_the_parameters_the_chain_holds() {
        use burn::tensor::Device;
        use ember::{Block, NdTensor};

        let device = Device::flex();
        for name in ["lstm:16", "gru:8,layers=2,embed=4", "rnn:5"] {
            let spec = RecurrentSpec::parse(name).unwrap().unwrap();
            let net: Sequential = spec.build(11).initialize(spec.init(), &device);
            let x = NdTensor::zeros(&[2, 7], &device).unwrap();
            let held = net.infer_shape(x).unwrap().collect_params().total() as u128;
            assert_eq!(spec.footprint(7, 11).0, held, "{name}");
        }
    }
}
