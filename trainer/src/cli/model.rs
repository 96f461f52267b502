//! `--model`: the networks `ember train` builds.

use std::fmt;
use std::str::FromStr;

use ember::{Block, Init, Sequential, models};

use super::list;

/// A network by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSpec {
    /// `mlp:H1,H2,…`: Dense(H, relu) for each size, then the output layer.
    Mlp(Vec<usize>),
    /// `lenet`: d2l's LeNet (7.6), sigmoid activations and average pooling.
    LeNet,
    /// `lenet-relu`: the same with ReLU and max pooling.
    LeNetRelu,
}

impl FromStr for ModelSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "lenet" => Ok(ModelSpec::LeNet),
            "lenet-relu" => Ok(ModelSpec::LeNetRelu),
            _ => match s.strip_prefix("mlp:") {
                Some(sizes) => Ok(ModelSpec::Mlp(list::sizes(&sizes.parse()?))),
                None => Err("expected mlp:H1,H2,…, lenet or lenet-relu".to_string()),
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
        }
    }
}

impl ModelSpec {
    /// The network with `outputs` outputs, initialized with `init` on `device`; input sizes
    /// are deferred until the first batch.
    pub fn build(&self, outputs: usize, init: Init, device: &burn::tensor::Device) -> Sequential {
        let net = match self {
            ModelSpec::Mlp(hidden) => models::mlp(hidden, outputs),
            ModelSpec::LeNet => models::lenet(outputs),
            ModelSpec::LeNetRelu => models::lenet_relu(outputs),
        };
        net.initialize(init, device)
    }

    /// The initializer d2l trains it with: N(0, 0.01) for its MLP (3.6), Xavier for LeNet (7.6).
    pub fn init(&self) -> Init {
        match self {
            ModelSpec::Mlp(_) => Init::Normal(0.01),
            ModelSpec::LeNet | ModelSpec::LeNetRelu => Init::Xavier,
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

impl ModelSpec {
    /// An estimate of the numbers the network holds for examples of shape `example`,
    /// `outputs` outputs and batches of `batch`, computed without overflow.
    pub fn footprint(&self, example: &[usize], outputs: usize, batch: usize) -> Footprint {
        let inputs: u128 = example.iter().map(|&d| d as u128).product();
        let (parameters, widths) = match self {
            ModelSpec::Mlp(hidden) => {
                let mut parameters = 0u128;
                let mut width = inputs;
                let mut widths = inputs;
                for &units in hidden.iter().chain([&outputs]) {
                    let units = units as u128;
                    parameters = parameters.saturating_add(width.saturating_mul(units) + units);
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
                let dense = flat.saturating_mul(120) + 120 * 84 + 84 * outputs as u128;
                (dense + 2_572, inputs.saturating_mul(16))
            }
        };
        Footprint {
            parameters,
            activations: widths.saturating_mul(batch as u128),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_print_back() {
        for name in ["lenet", "lenet-relu", "mlp:256", "mlp:64,32"] {
            assert_eq!(name.parse::<ModelSpec>().unwrap().to_string(), name);
        }
        let err = "resnet".parse::<ModelSpec>().unwrap_err();
        assert!(
            err.contains("mlp:H1,H2") && err.contains("lenet-relu"),
            "{err}"
        );
        let err = "mlp:64,0".parse::<ModelSpec>().unwrap_err().to_string();
        assert!(err.contains("\"0\""), "{err}");
    }
}
