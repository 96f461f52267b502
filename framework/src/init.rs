//! Initializers, as Gluon names them: the default `Uniform(0.07)`, `Normal(sigma)`, `Xavier`.
//!
//! Gluon initializes weights with the chosen initializer and biases with zeros; so does ember.
//!
//! ```
//! use ember::Init;
//! assert_eq!(Init::default(), Init::Uniform(0.07));
//! ```

use burn::module::{ModuleMapper, Param};
use burn::nn::Initializer;
use burn::tensor::Tensor;

/// How `initialize` fills weights. Biases are always zero, as in Gluon.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Init {
    /// Uniform(−scale, scale). Gluon's default is `Uniform(0.07)`.
    Uniform(f64),
    /// Normal(0, sigma²). Gluon's `init.Normal(sigma=0.01)`.
    Normal(f64),
    /// Gluon's `init.Xavier()`: uniform, averaging fan-in and fan-out, magnitude 3, that is
    /// Uniform(−a, a) with a = √(6 / (fan_in + fan_out)).
    Xavier,
}

impl Default for Init {
    /// Gluon's default initializer: Uniform(−0.07, 0.07).
    fn default() -> Self {
        Init::Uniform(0.07)
    }
}

impl Init {
    /// burn's initializer for a weight.
    pub fn weight_initializer(&self) -> Initializer {
        match *self {
            Init::Uniform(scale) => Initializer::Uniform {
                min: -scale,
                max: scale,
            },
            Init::Normal(sigma) => Initializer::Normal {
                mean: 0.0,
                std: sigma,
            },
            // burn's XavierUniform with gain 1 is a = √3·√(2/(fan_in+fan_out)) = √(6/(fan_in+fan_out)).
            Init::Xavier => Initializer::XavierUniform { gain: 1.0 },
        }
    }
}

/// Re-initializes every float parameter of a module in place of its old value, by name, as
/// Gluon's per-parameter initializers do: `bias`, `beta` and `running_mean` become zeros,
/// `gamma` and `running_var` ones, and every other tensor (weights) is drawn from the
/// [`Init`]. Fans follow Gluon: for a shape `(a, b, rest…)` fan-out is `a·∏rest` and fan-in
/// `b·∏rest`; the Xavier scale is symmetric in them, so burn's `[d_in, d_out]` Linear layout
/// gives the same scale.
pub(crate) struct Reinitializer {
    init: Init,
    path: Vec<String>,
}

impl Reinitializer {
    pub(crate) fn new(init: Init) -> Self {
        Self {
            init,
            path: Vec::new(),
        }
    }
}

impl ModuleMapper for Reinitializer {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let name = self.path.last().map(String::as_str).unwrap_or_default();
        let constant = match name {
            // A recurrent layer's `bias_ih_l0`, `bias_hh_l1_reverse`: zeros, as Gluon's
            // `i2h_bias_initializer` and `h2h_bias_initializer` are.
            "bias" | "beta" | "running_mean" => Some(0.0),
            n if n.starts_with("bias_") => Some(0.0),
            "gamma" | "running_var" => Some(1.0),
            _ => None,
        };
        let init = self.init;
        param.map(|tensor| {
            let device = tensor.device();
            let require_grad = tensor.is_require_grad();
            let shape = tensor.shape();
            let dims = shape.as_slice().to_vec();
            let fresh: Tensor<D> = match constant {
                Some(value) => Tensor::full(shape, value, &device),
                None => {
                    let receptive: usize = dims.iter().skip(2).product();
                    let fan_a = dims.first().copied().unwrap_or(1) * receptive.max(1);
                    let fan_b = dims.get(1).copied().unwrap_or(1) * receptive.max(1);
                    init.weight_initializer()
                        .init_with(shape, Some(fan_b), Some(fan_a), &device)
                        .val()
                }
            };
            fresh.detach().set_require_grad(require_grad)
        })
    }
}
