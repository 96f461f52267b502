//! How ember's layers, and the burn modules inside them, are written as standard ONNX
//! operators. The functions on burn modules are public, for a block of one's own that holds
//! burn's layers directly.

use burn::nn::conv::{Conv1d, Conv2d};
use burn::nn::{
    BatchNorm as BurnBatchNorm, Embedding as BurnEmbedding, Linear, PaddingConfig1d,
    PaddingConfig2d,
};
use burn::tensor::Tensor;

use super::export::Export;
use super::graph::{Attribute, OnnxGraph, Value};
use crate::error::{Error, Result};
use crate::layers::sequential::{Layer, NoBlock, Sequential, each};
use crate::{
    Activation, AvgPool2D, BatchNorm, Conv1D, Conv2D, Dense, Dropout, Embedding, Flatten,
    GlobalAvgPool2D, LayerNorm, MaxPool2D,
};

/// burn's `Linear` on `[batch, in]`: `Gemm(x, W, b, transB=1)` with the weight in PyTorch's
/// `(out, in)` layout, as the safetensors file holds it. On more axes (a Dense with
/// `flatten(false)`), `MatMul` with the transposed weight, then `Add` of the bias.
///
/// # Errors
/// When a parameter cannot be read back.
pub fn linear(g: &mut OnnxGraph, linear: &Linear, x: &Value) -> Result<Value> {
    let weight = g.parameter("weight", linear.weight.val().transpose())?;
    let bias = match &linear.bias {
        Some(bias) => Some(g.parameter("bias", bias.val())?),
        None => None,
    };
    if x.rank() == 2 {
        let mut inputs = vec![x, &weight];
        inputs.extend(bias.as_ref());
        return Ok(g.node("Gemm", &inputs, &[("transB", Attribute::Int(1))]));
    }
    let w = g.node(
        "Transpose",
        &[&weight],
        &[("perm", Attribute::Ints(vec![1, 0]))],
    );
    let y = g.node("MatMul", &[x, &w], &[]);
    Ok(match &bias {
        Some(bias) => g.node("Add", &[&y, bias], &[]),
        None => y,
    })
}

/// ONNX's `pads` (every axis's start, then every axis's end) of burn's 2-D padding.
fn pads_2d(padding: &PaddingConfig2d, what: &str) -> Result<Vec<usize>> {
    match *padding {
        PaddingConfig2d::Valid => Ok(vec![0; 4]),
        PaddingConfig2d::Explicit(top, left, bottom, right) => Ok(vec![top, left, bottom, right]),
        PaddingConfig2d::Same => Err(same_padding(what)),
    }
}

fn pads_1d(padding: &PaddingConfig1d, what: &str) -> Result<Vec<usize>> {
    match *padding {
        PaddingConfig1d::Valid => Ok(vec![0; 2]),
        PaddingConfig1d::Explicit(left, right) => Ok(vec![left, right]),
        PaddingConfig1d::Same => Err(same_padding(what)),
    }
}

fn same_padding(what: &str) -> Error {
    Error::InvalidValue {
        name: "padding for ONNX export",
        value: format!("Same ({what})"),
        reason: "depends on the input's size; give the padding explicitly".to_string(),
    }
}

/// The convolution's inputs: data, weight in burn's (= PyTorch's) layout, optional bias.
fn conv<const D: usize>(
    g: &mut OnnxGraph,
    x: &Value,
    weight: Tensor<D>,
    bias: Option<Tensor<1>>,
    attributes: &[(&str, Attribute)],
) -> Result<Value> {
    let weight = g.parameter("weight", weight)?;
    let bias = bias.map(|b| g.parameter("bias", b)).transpose()?;
    let mut inputs = vec![x, &weight];
    inputs.extend(bias.as_ref());
    Ok(g.node("Conv", &inputs, attributes))
}

/// burn's `Conv2d` as ONNX's `Conv` (groups, strides, padding, dilation).
///
/// # Errors
/// For `Same` padding, which depends on the input's size; when a parameter cannot be read.
pub fn conv2d(g: &mut OnnxGraph, c: &Conv2d, x: &Value) -> Result<Value> {
    let pads = pads_2d(&c.padding, "Conv2d")?;
    conv(
        g,
        x,
        c.weight.val(),
        c.bias.as_ref().map(|b| b.val()),
        &[
            ("kernel_shape", Attribute::sizes(&c.kernel_size)),
            ("strides", Attribute::sizes(&c.stride)),
            ("dilations", Attribute::sizes(&c.dilation)),
            ("pads", Attribute::sizes(&pads)),
            ("group", Attribute::Int(c.groups as i64)),
        ],
    )
}

/// burn's `Conv1d` as ONNX's `Conv` on `[batch, channels, width]`.
///
/// # Errors
/// As [`conv2d`].
pub fn conv1d(g: &mut OnnxGraph, c: &Conv1d, x: &Value) -> Result<Value> {
    let pads = pads_1d(&c.padding, "Conv1d")?;
    conv(
        g,
        x,
        c.weight.val(),
        c.bias.as_ref().map(|b| b.val()),
        &[
            ("kernel_shape", Attribute::sizes(&[c.kernel_size])),
            ("strides", Attribute::sizes(&[c.stride])),
            ("dilations", Attribute::sizes(&[c.dilation])),
            ("pads", Attribute::sizes(&pads)),
            ("group", Attribute::Int(c.groups as i64)),
        ],
    )
}

/// burn's `BatchNorm` in inference mode: ONNX's `BatchNormalization` with the running mean
/// and variance.
///
/// # Errors
/// When a parameter cannot be read back.
pub fn batch_norm(g: &mut OnnxGraph, bn: &BurnBatchNorm, x: &Value) -> Result<Value> {
    let scale = g.parameter("weight", bn.gamma.val())?;
    let bias = g.parameter("bias", bn.beta.val())?;
    let mean = g.parameter("running_mean", bn.running_mean.value())?;
    let var = g.parameter("running_var", bn.running_var.value())?;
    Ok(g.node(
        "BatchNormalization",
        &[x, &scale, &bias, &mean, &var],
        &[("epsilon", Attribute::Float(bn.epsilon as f32))],
    ))
}

/// burn's `LayerNorm` (over the last axis) as ONNX's `LayerNormalization`.
///
/// # Errors
/// When a parameter cannot be read back.
pub fn layer_norm(
    g: &mut OnnxGraph,
    ln: &burn::nn::LayerNorm,
    epsilon: f64,
    x: &Value,
) -> Result<Value> {
    let scale = g.parameter("weight", ln.gamma.val())?;
    let bias = ln
        .beta
        .as_ref()
        .map(|b| g.parameter("bias", b.val()))
        .transpose()?;
    let mut inputs = vec![x, &scale];
    inputs.extend(bias.as_ref());
    Ok(g.node(
        "LayerNormalization",
        &inputs,
        &[
            ("axis", Attribute::Int(-1)),
            ("epsilon", Attribute::Float(epsilon as f32)),
        ],
    ))
}

/// burn's `Embedding` on float indices: `Cast` to int64, then `Gather` of the table's rows.
///
/// # Errors
/// When the table cannot be read back.
pub fn embedding(g: &mut OnnxGraph, e: &BurnEmbedding, x: &Value) -> Result<Value> {
    let table = g.parameter("weight", e.weight.val())?;
    let indices = g.node("Cast", &[x], &[("to", Attribute::Int(7))]);
    let rank = indices.rank() + 1;
    Ok(g.node_of_rank(
        "Gather",
        &[&table, &indices],
        &[("axis", Attribute::Int(0))],
        rank,
    ))
}

impl Activation {
    /// The activation as ONNX operators. GELU is written with `Erf` (opset 17 has no `Gelu`):
    /// x · (1 + erf(x / √2)) / 2, the exact form ember computes.
    pub(crate) fn onnx(self, g: &mut OnnxGraph, x: &Value) -> Value {
        match self {
            Activation::Relu => g.node("Relu", &[x], &[]),
            Activation::Sigmoid => g.node("Sigmoid", &[x], &[]),
            Activation::Tanh => g.node("Tanh", &[x], &[]),
            Activation::SoftRelu => g.node("Softplus", &[x], &[]),
            Activation::Gelu => {
                let sqrt2 = g.constant("sqrt2", &[], &[std::f32::consts::SQRT_2]);
                let one = g.constant("one", &[], &[1.0]);
                let half = g.constant("half", &[], &[0.5]);
                let scaled = g.node("Div", &[x, &sqrt2], &[]);
                let erf = g.node("Erf", &[&scaled], &[]);
                let phi = g.node("Add", &[&erf, &one], &[]);
                let y = g.node("Mul", &[x, &phi], &[]);
                g.node("Mul", &[&y, &half], &[])
            }
        }
    }
}

/// [`Export`] for the built-in layers: each one's `onnx` method below.
macro_rules! export_builtin {
    ($($layer:ty),* $(,)?) => {
        $(
            impl Export for $layer {
                fn describe(&self, graph: &mut OnnxGraph, x: Value) -> Result<Value> {
                    self.onnx(graph, x)
                }
            }
        )*
    };
}

export_builtin!(
    Dense,
    Conv1D,
    Conv2D,
    MaxPool2D,
    AvgPool2D,
    GlobalAvgPool2D,
    BatchNorm,
    LayerNorm,
    Dropout,
    Flatten,
    Embedding,
);

impl Export for Activation {
    fn describe(&self, graph: &mut OnnxGraph, x: Value) -> Result<Value> {
        Ok(self.onnx(graph, &x))
    }
}

impl Export for NoBlock {}

/// Not yet: a cell is one step of a loop of one's own, which the graph does not hold
/// ([`crate::Recurrent`] is ONNX's `LSTM`, `GRU` or `RNN`: `super::recurrent`).
impl Export for crate::RecurrentCell {}

impl<U: Export> Export for Sequential<U> {
    /// Describes each child in turn under its index, as its parameters are named.
    fn describe(&self, graph: &mut OnnxGraph, x: Value) -> Result<Value> {
        let mut x = x;
        for (index, layer) in self.layers().iter().enumerate() {
            x = graph
                .child(&index.to_string(), |graph| layer.describe(graph, x))
                .map_err(|err| err.at_child(index))?;
        }
        Ok(x)
    }
}

impl<U: Export> Export for Layer<U> {
    fn describe(&self, graph: &mut OnnxGraph, x: Value) -> Result<Value> {
        each!(self, inner => inner.describe(graph, x))
    }
}

fn activate(g: &mut OnnxGraph, activation: Option<Activation>, y: Value) -> Value {
    match activation {
        Some(activation) => activation.onnx(g, &y),
        None => y,
    }
}

/// A layer whose parameters do not exist yet: export needs them.
fn deferred(g: &OnnxGraph, layer: &dyn std::fmt::Display) -> Error {
    let place = match g.path() {
        path if path.is_empty() => String::new(),
        path => format!("{path}: "),
    };
    Error::DeferredInitialization {
        layers: vec![format!("{place}{layer}")],
    }
}

impl Dense {
    pub(crate) fn onnx(&self, g: &mut OnnxGraph, x: Value) -> Result<Value> {
        let inner = self.linear().ok_or_else(|| deferred(g, self))?;
        let x = match self.flattens() && x.rank() != 2 {
            true => g.node_of_rank("Flatten", &[&x], &[("axis", Attribute::Int(1))], 2),
            false => x,
        };
        let y = linear(g, inner, &x)?;
        Ok(activate(g, self.activation_fn(), y))
    }
}

impl Conv2D {
    pub(crate) fn onnx(&self, g: &mut OnnxGraph, x: Value) -> Result<Value> {
        let y = conv2d(g, self.conv().ok_or_else(|| deferred(g, self))?, &x)?;
        Ok(activate(g, self.activation_fn(), y))
    }
}

impl Conv1D {
    pub(crate) fn onnx(&self, g: &mut OnnxGraph, x: Value) -> Result<Value> {
        let y = conv1d(g, self.conv().ok_or_else(|| deferred(g, self))?, &x)?;
        Ok(activate(g, self.activation_fn(), y))
    }
}

impl MaxPool2D {
    pub(crate) fn onnx(&self, g: &mut OnnxGraph, x: Value) -> Result<Value> {
        let p = self.pool();
        let pads = pads_2d(&p.padding, "MaxPool2D")?;
        Ok(g.node(
            "MaxPool",
            &[&x],
            &[
                ("kernel_shape", Attribute::sizes(&p.kernel_size)),
                ("strides", Attribute::sizes(&p.stride)),
                ("dilations", Attribute::sizes(&p.dilation)),
                ("pads", Attribute::sizes(&pads)),
                ("ceil_mode", Attribute::Int(i64::from(p.ceil_mode))),
            ],
        ))
    }
}

impl AvgPool2D {
    pub(crate) fn onnx(&self, g: &mut OnnxGraph, x: Value) -> Result<Value> {
        let p = self.pool();
        let pads = pads_2d(&p.padding, "AvgPool2D")?;
        Ok(g.node(
            "AveragePool",
            &[&x],
            &[
                ("kernel_shape", Attribute::sizes(&p.kernel_size)),
                ("strides", Attribute::sizes(&p.stride)),
                ("pads", Attribute::sizes(&pads)),
                (
                    "count_include_pad",
                    Attribute::Int(i64::from(p.count_include_pad)),
                ),
                ("ceil_mode", Attribute::Int(i64::from(p.ceil_mode))),
            ],
        ))
    }
}

impl GlobalAvgPool2D {
    pub(crate) fn onnx(&self, g: &mut OnnxGraph, x: Value) -> Result<Value> {
        Ok(g.node("GlobalAveragePool", &[&x], &[]))
    }
}

impl BatchNorm {
    pub(crate) fn onnx(&self, g: &mut OnnxGraph, x: Value) -> Result<Value> {
        batch_norm(g, self.norm().ok_or_else(|| deferred(g, self))?, &x)
    }
}

impl LayerNorm {
    pub(crate) fn onnx(&self, g: &mut OnnxGraph, x: Value) -> Result<Value> {
        let norm = self.norm().ok_or_else(|| deferred(g, self))?;
        layer_norm(g, norm, self.epsilon_value(), &x)
    }
}

impl Dropout {
    /// Inference mode: ONNX's `Dropout` without `training_mode` passes its input through.
    pub(crate) fn onnx(&self, g: &mut OnnxGraph, x: Value) -> Result<Value> {
        Ok(g.node("Dropout", &[&x], &[]))
    }
}

impl Flatten {
    pub(crate) fn onnx(&self, g: &mut OnnxGraph, x: Value) -> Result<Value> {
        Ok(g.node_of_rank("Flatten", &[&x], &[("axis", Attribute::Int(1))], 2))
    }
}

impl Embedding {
    pub(crate) fn onnx(&self, g: &mut OnnxGraph, x: Value) -> Result<Value> {
        embedding(g, self.table().ok_or_else(|| deferred(g, self))?, &x)
    }
}
