//! ONNX export: Gluon's `net.export`, as an ONNX model that ONNX Runtime, and every runtime
//! that reads ONNX, runs without ember.
//!
//! The file holds the graph (standard ONNX operators, opset [`OPSET`], IR version
//! [`IR_VERSION`]) and the parameters as initializers, named as the safetensors file names
//! them. Its input is `input` and its output `output`; their first axis, the batch, is dynamic
//! (`batch`), the others are the example's. BatchNorm and Dropout are written in inference
//! mode: the running statistics, and no dropout.
//!
//! Each block describes itself through the [`Export`] trait, which lives here so that
//! [`Block`](crate::Block) knows nothing of ONNX: ember's layers and `Sequential` implement it
//! (`onnx/layers.rs`); a block of one's own implements it too, describing its children inside
//! [`OnnxGraph::child`]. One that keeps the default `describe` is an error naming it and its
//! place, before anything is written.
//!
//! ```
//! use burn::prelude::*;
//! use ember::{Activation, Block, Dense, Export, Init, Sequential};
//!
//! let device = Device::flex();
//! let net: Sequential = Sequential::new()
//!     .add(Dense::new(8).activation(Activation::Relu))
//!     .add(Dense::new(2));
//! let net = net.initialize(Init::default(), &device).infer_shape(Tensor::<2>::zeros([1, 4], &device)).unwrap();
//! let dir = tempfile::tempdir().unwrap();
//! net.export(dir.path().join("mlp.onnx"), &[4]).unwrap();
//! let model = ember::onnx::to_model(&net, &[4]).unwrap();
//! assert_eq!(model.graph.node.iter().map(|n| n.op_type()).collect::<Vec<_>>(), ["Gemm", "Relu", "Gemm"]);
//! ```

mod attention;
mod export;
mod graph;
mod layers;
pub mod proto;
mod recurrent;

pub use export::{Export, INPUT, IR_VERSION, OPSET, OUTPUT, export, to_model};
pub use graph::{Attribute, OnnxGraph, Value};
pub use layers::{batch_norm, conv1d, conv2d, embedding, layer_norm, linear};
