//! Optimizers: [`Optimizer`], Gluon's `Trainer`, with `step(batch_size)`.

pub mod optimizer;

pub use optimizer::{Optimizer, OptimizerKind};
