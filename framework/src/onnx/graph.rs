//! `OnnxGraph`: the ONNX graph a network describes itself into, one node at a time.
//!
//! [`Block::describe`](crate::Block::describe) receives the graph and the [`Value`] its input
//! is, adds nodes and parameters, and returns the value of its output. Parameters are named as
//! the safetensors file names them (`0.weight`, `3.conv1.bias`): a block describes each child
//! inside [`OnnxGraph::child`], which enters the child's name as burn's module path does.

use std::collections::HashMap;

use burn::tensor::Tensor;

use super::proto::onnx::{AttributeProto, NodeProto, TensorProto, attribute_proto, tensor_proto};
use crate::error::{Error, Result};

/// A tensor in the graph: the graph's input, a parameter, or a node's output, with its rank
/// (some layers are written differently on different ranks, as a Dense on images flattens).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Value {
    name: String,
    rank: usize,
}

impl Value {
    pub(crate) fn new(name: impl Into<String>, rank: usize) -> Self {
        Self {
            name: name.into(),
            rank,
        }
    }

    /// Its name in the ONNX file.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its number of axes, the batch axis included.
    pub fn rank(&self) -> usize {
        self.rank
    }
}

/// A node's attribute: ONNX's `INT`, `INTS`, `FLOAT` and `STRING` kinds.
#[derive(Debug, Clone, PartialEq)]
pub enum Attribute {
    /// One integer (`axis`, `group`, `transB`).
    Int(i64),
    /// A list of integers (`kernel_shape`, `pads`, `strides`).
    Ints(Vec<i64>),
    /// One float (`epsilon`, `alpha`).
    Float(f32),
    /// A string (`auto_pad`).
    String(String),
    /// A list of strings (a recurrent operator's `activations`).
    Strings(Vec<String>),
}

impl Attribute {
    /// A list of sizes as ONNX's `INTS`.
    pub fn sizes(sizes: &[usize]) -> Self {
        Attribute::Ints(sizes.iter().map(|&n| n as i64).collect())
    }

    fn proto(&self, name: &str) -> AttributeProto {
        use attribute_proto::AttributeType;
        let mut a = AttributeProto::new();
        a.set_name(name.to_string());
        match self {
            Attribute::Int(i) => {
                a.set_type(AttributeType::INT);
                a.set_i(*i);
            }
            Attribute::Ints(ints) => {
                a.set_type(AttributeType::INTS);
                a.ints = ints.clone();
            }
            Attribute::Float(f) => {
                a.set_type(AttributeType::FLOAT);
                a.set_f(*f);
            }
            Attribute::String(s) => {
                a.set_type(AttributeType::STRING);
                a.set_s(s.as_bytes().to_vec());
            }
            Attribute::Strings(strings) => {
                a.set_type(AttributeType::STRINGS);
                a.strings = strings.iter().map(|s| s.as_bytes().to_vec()).collect();
            }
        }
        a
    }
}

/// The graph being written: nodes in order, parameters as initializers, and the path of the
/// block now describing itself.
#[derive(Debug, Default)]
pub struct OnnxGraph {
    pub(crate) nodes: Vec<NodeProto>,
    pub(crate) initializers: Vec<TensorProto>,
    /// The names entered so far: `["3", "conv1"]` inside a `Sequential`'s fourth child's
    /// `conv1`.
    scope: Vec<String>,
    /// How many nodes of each path and operator exist, for unique node names.
    counts: HashMap<String, usize>,
}

impl OnnxGraph {
    /// The path of the block now describing itself, dotted as parameter names are
    /// (`3.conv1`); empty at the top.
    pub fn path(&self) -> String {
        self.scope.join(".")
    }

    fn scoped(&self, name: &str) -> String {
        match self.scope.is_empty() {
            true => name.to_string(),
            false => format!("{}.{name}", self.path()),
        }
    }

    /// Describes a child named `name` (a field's name, or an index in a `Sequential`): its
    /// parameters are named `<path>.<name>.<parameter>`, as in the safetensors file.
    ///
    /// # Errors
    /// Whatever `describe` returns.
    pub fn child<T>(
        &mut self,
        name: &str,
        describe: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<T> {
        self.scope.push(name.to_string());
        let described = describe(self);
        self.scope.pop();
        described
    }

    /// Adds a node of ONNX operator `op` (the default domain, at [`OPSET`](super::OPSET)) and
    /// returns its one output, of the largest rank among the inputs (right for element-wise
    /// and broadcasting operators, convolutions, pooling and normalizations; see
    /// [`OnnxGraph::node_of_rank`] for the others). An optional input left out at the end is
    /// simply not given.
    pub fn node(&mut self, op: &str, inputs: &[&Value], attributes: &[(&str, Attribute)]) -> Value {
        let rank = inputs.iter().map(|v| v.rank).max().unwrap_or(0);
        self.node_of_rank(op, inputs, attributes, rank)
    }

    /// [`OnnxGraph::node`] for an operator whose output has another rank than its inputs
    /// (`Flatten`, `Gather`, `Reshape`).
    pub fn node_of_rank(
        &mut self,
        op: &str,
        inputs: &[&Value],
        attributes: &[(&str, Attribute)],
        rank: usize,
    ) -> Value {
        let [output] = self.node_with_outputs(op, inputs, attributes, [rank]);
        output
    }

    /// [`OnnxGraph::node`] for an operator of `N` outputs (`Split`), of the ranks given.
    pub fn node_with_outputs<const N: usize>(
        &mut self,
        op: &str,
        inputs: &[&Value],
        attributes: &[(&str, Attribute)],
        ranks: [usize; N],
    ) -> [Value; N] {
        let key = format!("{}/{op}", self.path());
        let count = self.counts.entry(key.clone()).or_insert(0);
        let name = format!("/{key}_{count}").replace("//", "/");
        *count += 1;
        let outputs = std::array::from_fn(|i| match N {
            1 => Value::new(format!("{name}_output"), ranks[i]),
            _ => Value::new(format!("{name}_output_{i}"), ranks[i]),
        });
        let mut node = NodeProto::new();
        node.set_name(name);
        node.set_op_type(op.to_string());
        node.input = inputs.iter().map(|v| v.name.clone()).collect();
        node.output = outputs.iter().map(|v: &Value| v.name.clone()).collect();
        node.attribute = attributes.iter().map(|(n, a)| a.proto(n)).collect();
        self.nodes.push(node);
        outputs
    }

    /// Adds a parameter of the block now describing itself, named `<path>.<name>` as in the
    /// safetensors file, with the values of `tensor` (read back from its device).
    ///
    /// # Errors
    /// [`Error::Execution`] when the values cannot be read back.
    pub fn parameter<const D: usize>(&mut self, name: &str, tensor: Tensor<D>) -> Result<Value> {
        let dims = tensor.dims().to_vec();
        let values: Vec<f32> = tensor
            .into_data()
            .convert::<f32>()
            .try_to_vec::<f32>()
            .map_err(|e| Error::Readback {
                what: self.scoped(name),
                reason: format!("{e:?}"),
            })?;
        Ok(self.initializer(self.scoped(name), &dims, &values))
    }

    /// Adds a constant of the graph (not a parameter: a number an operator needs, such as
    /// GELU's 1/√2), named after the block's path.
    pub fn constant(&mut self, name: &str, dims: &[usize], values: &[f32]) -> Value {
        let name = self.unique(name);
        self.initializer(name, dims, values)
    }

    /// An int64 constant of the graph (the sizes `Reshape`, `Split` and `Slice` read), named
    /// after the block's path as [`OnnxGraph::constant`] is.
    pub fn integers(&mut self, name: &str, dims: &[usize], values: &[i64]) -> Value {
        let name = self.unique(name);
        let raw = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.raw_initializer(name, dims, tensor_proto::DataType::INT64, raw)
    }

    /// `<path>.<name>`, numbered where that name is taken.
    fn unique(&self, name: &str) -> String {
        let mut unique = self.scoped(name);
        let mut n = 1;
        while self.initializers.iter().any(|t| t.name() == unique) {
            unique = format!("{}_{n}", self.scoped(name));
            n += 1;
        }
        unique
    }

    fn initializer(&mut self, name: String, dims: &[usize], values: &[f32]) -> Value {
        let raw = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.raw_initializer(name, dims, tensor_proto::DataType::FLOAT, raw)
    }

    fn raw_initializer(
        &mut self,
        name: String,
        dims: &[usize],
        data_type: tensor_proto::DataType,
        raw: Vec<u8>,
    ) -> Value {
        let mut t = TensorProto::new();
        t.set_name(name.clone());
        t.set_data_type(data_type as i32);
        t.dims = dims.iter().map(|&d| d as i64).collect();
        t.set_raw_data(raw);
        self.initializers.push(t);
        Value::new(name, dims.len())
    }
}
