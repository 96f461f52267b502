//! Data parallelism: a batch split across devices ([`Replicas`]), and how their gradients meet
//! ([`exchange`]: moved to the main device and summed, or NCCL's all-reduce across CUDA cards).

pub mod exchange;
pub mod replicas;

pub use replicas::Replicas;
