//! `--model`: the networks `ember train` builds.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use ember::models::{self, Residual};
use ember::{Block, Init, Sequential};

use super::list;
use super::sequence_model::{self, RecurrentSpec, TransformerSpec};

/// The networks `ember` builds: chains of ember's layers that may hold d2l's residual block,
/// one type for every `--model`.
pub type Net = Sequential<Residual>;

/// A network by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSpec {
    /// `mlp:H1,H2,…`: Dense(H, relu) for each size, then the output layer.
    Mlp(Vec<usize>),
    /// `lenet`: d2l's LeNet (7.6), sigmoid activations and average pooling.
    LeNet,
    /// `lenet-relu`: the same with ReLU and max pooling.
    LeNetRelu,
    /// `resnet`: d2l's small ResNet (8.6), `ember::models::small_resnet`.
    ResNet,
    /// `lstm:H`, `gru:H`, `rnn:H`, `rnn-relu:H`: a language model of text data
    /// ([`RecurrentSpec`]).
    Recurrent(RecurrentSpec),
    /// `transformer:layers=L,heads=H,dim=D`: a causal Transformer language model of text data
    /// ([`TransformerSpec`]).
    Transformer(TransformerSpec),
}

impl FromStr for ModelSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "lenet" => Ok(ModelSpec::LeNet),
            "lenet-relu" => Ok(ModelSpec::LeNetRelu),
            "resnet" => Ok(ModelSpec::ResNet),
            _ => match (s.strip_prefix("mlp:"), RecurrentSpec::parse(s)) {
                (Some(sizes), _) => Ok(ModelSpec::Mlp(list::sizes(&sizes.parse()?))),
                (None, Some(recurrent)) => recurrent.map(ModelSpec::Recurrent),
                (None, None) if let Some(t) = TransformerSpec::parse(s) => {
                    t.map(ModelSpec::Transformer)
                }
                (None, None) => Err(format!(
                    "expected mlp:H1,H2,…, lenet, lenet-relu, resnet, {}",
                    sequence_model::FORMS
                )),
            },
        }
    }
}

impl fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelSpec::Mlp(hidden) => write!(f, "mlp:{}", list::join(hidden)),
            ModelSpec::LeNet => write!(f, "lenet"),
            ModelSpec::LeNetRelu => write!(f, "lenet-relu"),
            ModelSpec::ResNet => write!(f, "resnet"),
            ModelSpec::Recurrent(spec) => spec.fmt(f),
            ModelSpec::Transformer(spec) => spec.fmt(f),
        }
    }
}

impl ModelSpec {
    /// The network with `outputs` outputs, initialized with `init` on `device`; input sizes
    /// are deferred until the first batch.
    pub fn build(&self, outputs: usize, init: Init, device: &burn::tensor::Device) -> Net {
        let net = match self {
            ModelSpec::Mlp(hidden) => models::mlp(hidden, outputs).with_blocks(),
            ModelSpec::LeNet => models::lenet(outputs).with_blocks(),
            ModelSpec::LeNetRelu => models::lenet_relu(outputs).with_blocks(),
            ModelSpec::ResNet => models::small_resnet(outputs),
            ModelSpec::Recurrent(spec) => spec.build(outputs),
            ModelSpec::Transformer(spec) => spec.build(outputs),
        };
        net.initialize(init, device)
    }

    /// The initializer d2l trains it with: N(0, 0.01) for its MLP (3.6), Xavier for LeNet
    /// (7.6) and the ResNet (8.6).
    pub fn init(&self) -> Init {
        match self {
            ModelSpec::Mlp(_) => Init::Normal(0.01),
            ModelSpec::LeNet | ModelSpec::LeNetRelu | ModelSpec::ResNet => Init::Xavier,
            ModelSpec::Recurrent(spec) => spec.init(),
            ModelSpec::Transformer(_) => Init::Xavier,
        }
    }
}

/// How many numbers a network holds: its parameters, and the activations of one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footprint {
    /// Parameters.
    pub parameters: u128,
    /// The batch's inputs and every layer's outputs for it.
    pub activations: u128,
}

/// The values an example of shape `example` holds, saturating at `u128::MAX` rather than
/// wrapping: sizes too large for any machine stay too large.
pub fn values_in(example: &[usize]) -> u128 {
    example
        .iter()
        .try_fold(1u128, |n, &d| n.checked_mul(d as u128))
        .unwrap_or(u128::MAX)
}

impl ModelSpec {
    /// An estimate of the numbers the network holds for examples of shape `example`,
    /// `outputs` outputs and batches of `batch`, computed without overflow.
    pub fn footprint(&self, example: &[usize], outputs: usize, batch: usize) -> Footprint {
        let inputs = values_in(example);
        let (parameters, widths) = match self {
            ModelSpec::Mlp(hidden) => {
                let mut parameters = 0u128;
                let mut width = inputs;
                let mut widths = inputs;
                for &units in hidden.iter().chain([&outputs]) {
                    let units = units as u128;
                    parameters = parameters
                        .saturating_add(width.saturating_mul(units))
                        .saturating_add(units);
                    widths = widths.saturating_add(units);
                    width = units;
                }
                (parameters, widths)
            }
            // Two small convolutions, then Dense layers of 120, 84 and `outputs` on what is
            // left of the image: 16 channels of a sixteenth of it (two 2×2 poolings), no more
            // numbers than it had.
            ModelSpec::LeNet | ModelSpec::LeNetRelu => {
                let flat = inputs;
                let dense = flat
                    .saturating_mul(120)
                    .saturating_add(120 * 84 + 84 * outputs as u128 + 2_572);
                (dense, inputs.saturating_mul(16))
            }
            // A 3×3 convolution to 8 channels, a residual block of 8 and one of 16 at half the
            // size (each: two 3×3 convolutions with BatchNorm, the second also a 1×1 shortcut),
            // the pooling and Dense(outputs). Each 8-channel stage keeps about 10 maps of the
            // image's size (convolution, BatchNorm, ReLU, sum), the 16-channel one about 12 at
            // a quarter of it.
            ModelSpec::ResNet => {
                let channels = example.first().map_or(1, |&c| c as u128);
                let pixels = inputs / channels.max(1);
                let convolutions = 9 * channels * 8
                    + 8
                    + 2 * (9 * 8 * 8 + 8)
                    + (9 * 8 * 16 + 16)
                    + (9 * 16 * 16 + 16)
                    + (8 * 16 + 16);
                // BatchNorm: gamma, beta and the running mean and variance per channel.
                let norms = 4 * (3 * 8 + 2 * 16);
                let parameters = convolutions + norms + 16 * outputs as u128 + outputs as u128;
                let widths = inputs
                    .saturating_add(pixels.saturating_mul(8 * 10 * 2))
                    .saturating_add((pixels / 4).saturating_mul(16 * 12))
                    .saturating_add(16 + outputs as u128);
                (parameters, widths)
            }
            // Examples are sequences of `steps` tokens, the outputs the vocabulary.
            ModelSpec::Recurrent(spec) => spec.footprint(inputs, outputs as u128),
            ModelSpec::Transformer(spec) => spec.footprint(inputs, outputs as u128),
        };
        Footprint {
            parameters,
            activations: widths.saturating_mul(batch as u128),
        }
    }

    /// Refuses a network of this spec, for examples of shape `example` and `outputs` outputs,
    /// that cannot hold its parameters and one example's activations in the memory available
    /// here: what `export` and `summary` check before they build it (`train` makes its own
    /// check, with the batch and the queue). `what` names where the sizes came from.
    pub fn check_fits(&self, example: &[usize], outputs: usize, what: &str) -> anyhow::Result<()> {
        let need = self.footprint(example, outputs, 1);
        let needed = need
            .parameters
            .saturating_add(need.activations)
            .saturating_mul(4);
        let available = crate::memory::available_bytes().map_or(isize::MAX as u128, u128::from);
        if needed > available {
            anyhow::bail!(
                "{what}: the network {self} for inputs of shape {example:?} and {outputs} outputs \
                 is too large for this machine: its parameters and one example need about {}, \
                 and {} of memory is available",
                bytes(needed),
                bytes(available)
            );
        }
        Ok(())
    }
}

/// A byte count for people: `16.8 MB`, `12.3 GB`, `4.1 TB`.
pub(super) fn bytes(n: u128) -> String {
    let n = n as f64;
    if n >= 1e12 {
        format!("{:.1} TB", n / 1e12)
    } else if n >= 1e9 {
        format!("{:.1} GB", n / 1e9)
    } else {
        format!("{:.1} MB", n / 1e6)
    }
}

// The metadata keys `ember train --save` writes, each read back by `ember export`.

/// The network, in `--model`'s words.
pub const MODEL: &str = "ember.model";
/// The shape of one example, comma separated.
pub const INPUT: &str = "ember.input";
/// The network's outputs.
pub const OUTPUTS: &str = "ember.outputs";

/// What `ember train --save` records of its network: all that `ember export` needs.
pub fn recorded(model: &ModelSpec, example: &[usize], outputs: usize) -> BTreeMap<String, String> {
    BTreeMap::from([
        (MODEL.to_string(), model.to_string()),
        (INPUT.to_string(), list::join(example)),
        (OUTPUTS.to_string(), outputs.to_string()),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_print_back() {
        for name in ["lenet", "lenet-relu", "resnet", "mlp:256", "mlp:64,32"] {
            assert_eq!(name.parse::<ModelSpec>().unwrap().to_string(), name);
        }
        let err = "resnet50".parse::<ModelSpec>().unwrap_err();
        assert!(
            err.contains("mlp:H1,H2") && err.contains("lenet-relu") && err.contains("lstm:H"),
            "{err}"
        );
        assert_eq!(
            "gru:8,layers=2".parse::<ModelSpec>().unwrap().to_string(),
            "gru:8,layers=2"
        );
        let err = "mlp:64,0".parse::<ModelSpec>().unwrap_err().to_string();
        assert!(err.contains("\"0\""), "{err}");
    }

    /// The estimate counts the parameters the built network holds: exactly for the MLP and
    /// the ResNet, at most a bound for LeNet (its Dense layer is sized for the whole image).
    #[test]
    fn the_footprint_counts_the_parameters_each_network_holds() {
        use burn::tensor::Device;
        use ember::NdTensor;

        let device = Device::flex();
        for (name, example) in [
            ("mlp:64,32", vec![1, 28, 28]),
            ("lenet", vec![1, 28, 28]),
            ("resnet", vec![1, 28, 28]),
            ("resnet", vec![3, 32, 32]),
        ] {
            let model: ModelSpec = name.parse().unwrap();
            let net = model.build(10, model.init(), &device);
            let mut shape = vec![1];
            shape.extend_from_slice(&example);
            let x = NdTensor::zeros(&shape, &device).unwrap();
            let held = net.infer_shape(x).unwrap().collect_params().total() as u128;
            let estimated = model.footprint(&example, 10, 1).parameters;
            if model == ModelSpec::LeNet {
                assert!(estimated >= held, "{name}: {estimated} < {held}");
            } else {
                assert_eq!(estimated, held, "{name} on {example:?}");
            }
        }
    }
}
