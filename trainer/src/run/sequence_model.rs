//! `--model rnn:H`, `rnn-relu:H`, `lstm:H`, `gru:H`: d2l's language model of chapter 9 as a
//! chain: an `Embedding`, a recurrent layer (`Recurrent`, batch first) and a `Dense` scoring
//! the vocabulary at every step, flattened to `[batch, steps × vocabulary]` for
//! [`ember::SequenceCrossEntropyLoss`]. `--model transformer:layers=L,heads=H,dim=D`: the same
//! with a causal Transformer encoder in the recurrent layer's place (d2l 11.7, a decoder-only
//! language model: each step attends to the steps up to it).

use std::fmt;

use ember::{
    Block, Dense, Embedding, Flatten, Init, LayerNorm, Layout, Mode, PositionalEncoding, Recurrent,
    Sequential, TransformerEncoder, TransformerEncoderLayer,
};

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
pub const FORMS: &str = "rnn:H, rnn-relu:H, lstm:H or gru:H (then ,layers=N ,embed=E), transformer:layers=L,heads=H,dim=D";

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

/// A causal Transformer language model's sizes: `transformer:layers=2,heads=4,dim=128`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransformerSpec {
    /// Encoder layers.
    pub layers: usize,
    /// Attention heads, which divide `dim`.
    pub heads: usize,
    /// The model's width: the embedding's, the attention's; the feed-forward layer is 4 times it.
    pub dim: usize,
}

impl TransformerSpec {
    /// `transformer:layers=L,heads=H,dim=D` (each key once, any order, all three given); `None`
    /// for another model.
    pub fn parse(s: &str) -> Option<Result<Self, String>> {
        let rest = s.strip_prefix("transformer:")?;
        let (mut layers, mut heads, mut dim) = (None, None, None);
        for part in rest.split(',') {
            let (key, value) = part.split_once('=').unwrap_or((part, ""));
            let slot = match key {
                "layers" => &mut layers,
                "heads" => &mut heads,
                "dim" => &mut dim,
                _ => {
                    return Some(Err(format!(
                        "{part:?}: expected layers=L, heads=H or dim=D"
                    )));
                }
            };
            match value.parse::<usize>() {
                Ok(n) if n > 0 && slot.is_none() => *slot = Some(n),
                Ok(n) if n > 0 => return Some(Err(format!("{key} is given twice"))),
                _ => return Some(Err(format!("{part:?}: expected a whole number from 1 up"))),
            }
        }
        let (Some(layers), Some(heads), Some(dim)) = (layers, heads, dim) else {
            return Some(Err(
                "expected transformer:layers=L,heads=H,dim=D".to_string()
            ));
        };
        if !dim.is_multiple_of(heads) {
            return Some(Err(format!("dim={dim} is not divisible by heads={heads}")));
        }
        Some(Ok(Self { layers, heads, dim }))
    }

    /// The chain for a vocabulary of `vocabulary` tokens: an `Embedding` of `dim`, d2l's
    /// `PositionalEncoding`, the causal pre-norm encoder with a final `LayerNorm`, the `Dense`
    /// scoring the vocabulary at every step. Dropout 0.1, PyTorch's default.
    pub fn build<U: Block>(&self, vocabulary: usize) -> Sequential<U> {
        let layer = TransformerEncoderLayer::new(self.heads, 4 * self.dim)
            .norm_first(true)
            .layout(Layout::Ntc);
        let encoder = TransformerEncoder::new(layer, self.layers)
            .norm(LayerNorm::new())
            .causal(true);
        Sequential::new()
            .add(Embedding::new(vocabulary, self.dim))
            .add(PositionalEncoding::new(self.dim, 0.1))
            .add(encoder)
            .add(Dense::new(vocabulary).flatten(false))
            .add(Flatten)
    }

    /// Its parameters, and about the values one sequence of `steps` makes in the forward pass.
    pub fn footprint(&self, steps: u128, vocabulary: u128) -> (u128, u128) {
        let (d, layers, heads) = (self.dim as u128, self.layers as u128, self.heads as u128);
        let ff = 4 * d;
        // Attention (in and out projections), the feed-forward pair, two norms.
        let layer = (4 * d * d + 4 * d) + (2 * d * ff + ff + d) + 4 * d;
        let parameters = vocabulary * d + layers * layer + 2 * d + (d + 1) * vocabulary;
        let per_step = layers * (8 * d + ff + heads * steps) + vocabulary + 2 * d;
        (parameters, steps.saturating_mul(per_step))
    }
}

impl fmt::Display for TransformerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self { layers, heads, dim } = self;
        write!(f, "transformer:layers={layers},heads={heads},dim={dim}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transformers_parse_and_print_back_and_bad_sizes_are_named() {
        let spec = TransformerSpec::parse("transformer:dim=32,heads=4,layers=2").unwrap();
        assert_eq!(
            spec.unwrap().to_string(),
            "transformer:layers=2,heads=4,dim=32"
        );
        for (bad, needle) in [
            (
                "transformer:layers=2,heads=3,dim=32",
                "not divisible by heads=3",
            ),
            ("transformer:layers=2,heads=4", "layers=L,heads=H,dim=D"),
            ("transformer:layers=0,heads=4,dim=8", "\"layers=0\""),
            (
                "transformer:layers=1,layers=2,heads=4,dim=8",
                "layers is given twice",
            ),
            ("transformer:depth=2", "\"depth=2\""),
        ] {
            let err = TransformerSpec::parse(bad).unwrap().unwrap_err();
            assert!(err.contains(needle), "{bad}: {err}");
        }
    }

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
        for name in [
            "transformer:layers=2,heads=2,dim=8",
            "transformer:layers=1,heads=1,dim=4",
        ] {
            let spec = TransformerSpec::parse(name).unwrap().unwrap();
            let net: Sequential = spec.build(11).initialize(Init::Xavier, &device);
            let x = NdTensor::zeros(&[2, 7], &device).unwrap();
            let held = net.infer_shape(x).unwrap().collect_params().total() as u128;
            assert_eq!(spec.footprint(7, 11).0, held, "{name}");
        }
    }
}
