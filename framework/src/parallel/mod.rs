//! Data parallelism: a batch split across devices ([`Replicas`]), and how their gradients meet
//! ([`exchange`]: moved to the main device and summed, or NCCL's all-reduce across CUDA cards),
//! and a job of processes, one a device, whose gradients MPI sums ([`mpi`]).

pub mod exchange;
pub mod mpi;
pub mod replicas;

pub use replicas::Replicas;
