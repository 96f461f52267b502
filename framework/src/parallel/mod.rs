//! Data parallelism: a batch split across devices ([`Replicas`]), and how their gradients meet
//! ([`exchange`]: moved to the main device and summed, or NCCL's all-reduce across CUDA cards),
//! and a job of processes, one a device, whose gradients MPI sums ([`mpi`]), or NCCL on the
//! cards where every rank has one (`nccl`, in a build with `cuda` and `mpi`).

pub mod exchange;
mod gate;
mod gradient;
// NCCL's sum takes the gradients flat; the pieces are tested on the CPU in every build.
#[cfg_attr(not(all(feature = "cuda", feature = "mpi")), allow(dead_code))]
mod flat;
pub mod mpi;
#[cfg(all(feature = "cuda", feature = "mpi"))]
mod nccl;
pub mod replicas;

pub use replicas::Replicas;
