//! Gluon's layers, one per file with its options and tests, and `Sequential`, the container
//! that chains them. Each layer with an input size takes it from the first batch (deferred
//! initialization, [`crate::deferred`]) and runs on ember's CPU kernels where they apply
//! ([`crate::kernels`]).

pub mod activation;
pub mod conv;
pub mod conv1d;
pub mod conv2d;
pub mod dense;
pub mod dropout;
pub mod embedding;
pub mod flatten;
pub mod norm;
pub mod pool;
pub mod sequential;
