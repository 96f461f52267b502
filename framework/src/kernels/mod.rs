//! ember's CPU kernels: convolutions, pooling, activations, BatchNorm, LayerNorm, Dense,
//! recurrent layers and attention's products and softmax on burn-flex tensors run through
//! oneDNN, the library PyTorch, MXNet and TensorFlow use on the CPU, where it is installed;
//! burn-flex's own kernels run everything else, and everything where it is not.
//!
//! Each operation is a custom operation of burn's autodiff (`burn_autodiff::ops::Backward`), so
//! gradients, optimizers, checkpoints and sync policies see ordinary burn-flex tensors. The
//! choice is made per process (`EMBER_CPU_KERNELS=flex|onednn`, or [`set_kernels`]) or per
//! thread ([`with_kernels`]); [`status`] says which path runs and why. The library opened is
//! `libdnnl.so.2` (oneDNN 2.x, Debian's `libdnnl-dev`), or the file `EMBER_DNNL_LIBRARY` names.
//!
//! ```
//! use burn::prelude::*;
//! use ember::kernels::{self, Kernels};
//! use ember::{Activation, Block, Dense, Init};
//!
//! let device = Device::flex();
//! let net = Dense::new(3).activation(Activation::Relu).in_units(4).initialize(Init::default(), &device);
//! let x = Tensor::<2>::ones([2, 4], &device);
//! let fast = net.forward(x.clone().into());
//! let reference = kernels::with_kernels(Kernels::Flex, || net.forward(x.into()));
//! let (fast, reference): (Tensor<2>, Tensor<2>) = (fast.rank(), reference.rank());
//! assert!(fast.sub(reference).abs().max().into_scalar::<f32>() < 1e-5);
//! ```

//!
//! Kernels know nothing of layers: a layer hands them its input and the kernels' own small
//! types ([`Eltwise`], [`Window`], `Recurrence` and `Gates`), and takes burn's path where
//! they return `None` (a recurrent layer hands that path over too, as a `Reference`).

mod allocator;
mod choice;
mod counters;
mod dispatch;
mod eltwise;
mod normalized;
#[cfg(feature = "onednn")]
mod onednn;
mod window;

pub use allocator::keep_freed_memory;
pub use choice::{ENV, Kernels, Status, chosen, set_kernels, status, with_kernels};
pub use counters::counts;
pub(crate) use dispatch::{
    Gates, Recurrence, Reference, activation, affine, batch_norm, contiguous, conv, dense,
    layer_norm, matmul_heads, pool, recurrent, softmax,
};
pub use eltwise::Eltwise;
#[cfg(feature = "onednn")]
pub use onednn::threads::ONE_POOL_UP_TO_WIDTH;
pub(crate) use window::Window;

/// Ends the OpenMP team that oneDNN ran the calling thread's primitives on, if it has one.
///
/// Each thread that runs a wide primitive keeps a team of OpenMP threads for as long as it
/// lives. Once the process holds more of them than the machine has CPUs, GNU OpenMP cuts every
/// waiting thread's spin to a hundred pauses, so a training loop's backend team sleeps and is
/// woken between two primitives: on the Fashion-MNIST MLP, epochs 1.2× as long (2 cores of an
/// AMD EPYC). A thread that ran primitives and is done with them for a while (a frontend after
/// inferring sizes or evaluating) calls this; `ember_trainer::Fit` does. The next wide
/// primitive on this thread starts a team again. Where this process has not opened oneDNN, it
/// does nothing.
pub fn release_threads() {
    #[cfg(feature = "onednn")]
    onednn::threads::release_team();
}

/// Runs `f`, a loop of burn-flex work (a training loop's backend), so that oneDNN's OpenMP
/// team and burn-flex's parallel work do not take each other's cores: where oneDNN's kernels
/// run (it opens the library) on a team of 2 threads, `f` runs on a thread that is its own
/// rayon pool, and burn-flex's parallel operations in `f` run on it serially. Elsewhere
/// (burn-flex's kernels, no oneDNN, one core, more than 2) `f` just runs, burn-flex's work on
/// rayon's global pool. `ember::engine::Engine` does this for a backend on flex.
pub fn one_pool<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    #[cfg(feature = "onednn")]
    if dispatch::fast()
        && (2..=onednn::threads::ONE_POOL_UP_TO_WIDTH).contains(&onednn::threads::width())
    {
        return onednn::threads::one_pool(f);
    }
    f()
}

/// The widest OpenMP team oneDNN's primitives on the calling thread would run on now.
#[cfg(all(test, feature = "onednn"))]
pub(crate) fn openmp_width() -> usize {
    onednn::threads::width()
}

/// Opens oneDNN, if it is not open yet; whether it could be.
#[cfg(all(test, feature = "onednn"))]
pub(crate) fn onednn_opens() -> bool {
    onednn::library::runtime().is_ok()
}

/// Runs `f` with oneDNN's primitives on the calling thread on teams of at most the calling
/// thread's width divided by `sharers` (at least one thread): for `sharers` threads that run
/// primitives at the same time, such as data-parallel replicas on one CPU, so that their teams
/// together do not outnumber its cores. Where this process has not opened oneDNN, it just
/// runs `f`.
pub fn sharing_threads<T>(sharers: usize, f: impl FnOnce() -> T) -> T {
    #[cfg(feature = "onednn")]
    if onednn::library::opened() {
        let width = onednn::threads::width() / sharers.max(1);
        return onednn::threads::at_most(width, f);
    }
    let _ = sharers;
    f()
}
