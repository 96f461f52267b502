#![allow(missing_docs, clippy::all)]
//! TensorBoard's `Event` and `Summary` messages (`trainer/proto/tensorboard.proto`), generated
//! by rust-protobuf; [`protobuf::Message`] encodes them.
include!(concat!(env!("OUT_DIR"), "/tensorboard/mod.rs"));
