//! The ONNX model of a network: the [`Export`] trait, and the model's graph, inputs, outputs
//! and operator set around what the blocks describe.

use std::path::Path;

use protobuf::Message;

use super::graph::{OnnxGraph, Value};
use super::proto::onnx::{
    ModelProto, OperatorSetIdProto, TensorShapeProto, TypeProto, ValueInfoProto, tensor_proto,
    tensor_shape_proto, type_proto,
};

use crate::block::Block;
use crate::error::{Error, Result};
use crate::ndtensor::NdTensor;

/// The ONNX operator set every exported file imports (the default domain). 17 has every
/// operator ember's layers need, `LayerNormalization` the newest of them; PyTorch's exporter
/// defaulted to it for years, and every current runtime reads it.
pub const OPSET: i64 = 17;

/// The ONNX IR version of the files: 8, the version of opset 17.
pub const IR_VERSION: i64 = 8;

/// The name of the graph's input.
pub const INPUT: &str = "input";
/// The name of the graph's output.
pub const OUTPUT: &str = "output";

/// A block that can write itself into an ONNX graph: Gluon's `export`. ember's layers and
/// `Sequential` implement it; a block of one's own implements [`Export::describe`], or keeps
/// the default, which is an error naming the block.
pub trait Export: Block {
    /// Writes the block into an ONNX graph: adds its nodes and parameters to `graph` and
    /// returns the value of its output for the input `x`. A block of one's own describes each
    /// child inside [`OnnxGraph::child`] (so that its parameters keep their names) and joins
    /// them with ONNX operators ([`OnnxGraph::node`]).
    ///
    /// # Errors
    /// [`Error::NotExportable`] for a block that does not describe itself; the error of a
    /// child that cannot be described.
    fn describe(&self, graph: &mut OnnxGraph, x: Value) -> Result<Value> {
        let _ = (graph, x);
        let name = std::any::type_name::<Self>();
        let name = name.split('<').next().unwrap_or(name);
        Err(Error::NotExportable {
            block: name.rsplit("::").next().unwrap_or(name).to_string(),
        })
    }

    /// Gluon's `export`: writes the network as an ONNX model for examples of shape `example`
    /// (the batch axis left out: it stays dynamic). See [`export`].
    ///
    /// # Errors
    /// As [`export`].
    fn export(&self, path: impl AsRef<Path>, example: &[usize]) -> Result<()> {
        export(self, example, path)
    }
}

/// Writes `net` as an ONNX model to `path`, for examples of shape `example` (without the
/// batch axis, which stays dynamic). The file is written whole or not at all, and only to a
/// path that can take an output file (see [`crate::io::check`]).
///
/// # Errors
/// As [`to_model`]; [`Error::Output`] for a path that is a device, a FIFO or a directory;
/// [`Error::Io`] when writing fails.
pub fn export<B: Export>(net: &B, example: &[usize], path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    crate::io::check(path)?;
    let bytes = to_model(net, example)?
        .write_to_bytes()
        .map_err(|e| Error::Execution(format!("encoding the ONNX model: {e}")))?;
    crate::io::write_atomic_bytes(path, &bytes)
}

/// The ONNX model of `net` for examples of shape `example` (without the batch axis).
///
/// # Errors
/// [`Error::DeferredInitialization`] while a layer's input size is unknown;
/// [`Error::Shape`] (or the error of the layer at fault) when `example` does not fit the
/// network; [`Error::NotExportable`], with the place of the block, for a block that does
/// not describe itself.
pub fn to_model<B: Export>(net: &B, example: &[usize]) -> Result<ModelProto> {
    let deferred = net.collect_params().deferred;
    if !deferred.is_empty() {
        return Err(Error::DeferredInitialization { layers: deferred });
    }
    // The output's shape, from ember's own forward pass of one example in inference mode.
    let inference = net.valid();
    let device = inference
        .devices()
        .into_iter()
        .next()
        .unwrap_or_else(burn::tensor::Device::flex);
    let mut shape = vec![1];
    shape.extend_from_slice(example);
    let count = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    if count.is_none_or(|n| n > 1 << 28) {
        return Err(Error::Shape {
            what: "the example to export for".to_string(),
            expected: "fewer than 2^28 numbers".to_string(),
            got: shape,
        });
    }
    let x = NdTensor::zeros(&shape, &device)?;
    let (_, y) = inference.infer(x)?;
    let output_dims = y.dims();

    let mut graph = OnnxGraph::default();
    let output = net.describe(&mut graph, Value::new(INPUT, shape.len()))?;
    let mut g = super::proto::onnx::GraphProto::new();
    g.set_name("ember".to_string());
    match graph
        .nodes
        .iter_mut()
        .rev()
        .find(|n| n.output.contains(&output.name().to_string()))
    {
        Some(node) => {
            for name in node.output.iter_mut().filter(|name| *name == output.name()) {
                *name = OUTPUT.to_string();
            }
        }
        None => {
            graph.node("Identity", &[&output], &[]);
            graph.nodes.last_mut().expect("just added").output = vec![OUTPUT.to_string()];
        }
    }
    g.node = graph.nodes;
    g.initializer = graph.initializers;
    g.input.push(value_info(INPUT, &shape));
    g.output.push(value_info(OUTPUT, &output_dims));

    let mut model = ModelProto::new();
    model.set_ir_version(IR_VERSION);
    model.set_producer_name("ember".to_string());
    model.set_producer_version(env!("CARGO_PKG_VERSION").to_string());
    let mut opset = OperatorSetIdProto::new();
    opset.set_domain(String::new());
    opset.set_version(OPSET);
    model.opset_import.push(opset);
    model.graph = Some(g).into();
    Ok(model)
}

/// A float tensor's name and shape, its first axis the dynamic `batch`.
fn value_info(name: &str, dims: &[usize]) -> ValueInfoProto {
    let mut shape = TensorShapeProto::new();
    for (axis, &d) in dims.iter().enumerate() {
        let mut dim = tensor_shape_proto::Dimension::new();
        match axis {
            0 => dim.set_dim_param("batch".to_string()),
            _ => dim.set_dim_value(d as i64),
        }
        shape.dim.push(dim);
    }
    let mut tensor = type_proto::Tensor::new();
    tensor.set_elem_type(tensor_proto::DataType::FLOAT as i32);
    tensor.shape = Some(shape).into();
    let mut ty = TypeProto::new();
    ty.set_tensor_type(tensor);
    let mut info = ValueInfoProto::new();
    info.set_name(name.to_string());
    info.type_ = Some(ty).into();
    info
}
