//! The framework core against Gluon's semantics, on flex and on wgpu (lavapipe in CI). One file
//! a concept under `framework/`, with `tiny_net.rs` holding the network and files they share.

mod common;

#[path = "framework/blocks.rs"]
mod blocks;
#[path = "framework/chapter_mlp.rs"]
mod chapter_mlp;
#[path = "framework/hybrid.rs"]
mod hybrid;
#[path = "framework/hybrid_training.rs"]
mod hybrid_training;
#[path = "framework/mxnet.rs"]
mod mxnet;
#[path = "framework/parameter_files.rs"]
mod parameter_files;
#[path = "framework/recipes.rs"]
mod recipes;
#[path = "framework/tiny_net.rs"]
mod tiny_net;
