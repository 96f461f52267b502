//! oneDNN's primitives behind ember's CPU kernels: the library opened at run time, its
//! primitives and their cache, the bridge to burn-flex's tensors and burn's autodiff, and one
//! file per operation.

pub(super) mod batch_norm;
pub(super) mod batched;
mod bridge;
pub(super) mod conv;
pub(super) mod eltwise;
mod error;
mod fallback;
mod format;
pub(super) mod layer_norm;
mod layout;
pub(super) mod library;
pub(super) mod matmul;
pub(super) mod permuted;
pub(super) mod pool;
mod primitive;
mod reorder;
pub(super) mod rnn;
pub(super) mod softmax;
pub(super) mod threads;
