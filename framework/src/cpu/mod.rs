//! ember's CPU kernels: convolutions, pooling, activations, BatchNorm and Dense layers on burn-flex tensors
//! run through oneDNN, the library PyTorch, MXNet and TensorFlow use on the CPU, where it is
//! installed; burn-flex's own kernels run everything else, and everything where it is not.
//!
//! Each operation is a custom operation of burn's autodiff (`burn_autodiff::ops::Backward`), so
//! gradients, optimizers, checkpoints and sync policies see ordinary burn-flex tensors. The
//! choice is made per process (`EMBER_CPU_KERNELS=flex|onednn`, or [`set_kernels`]) or per
//! thread ([`with_kernels`]); [`status`] says which path runs and why. The library opened is
//! `libdnnl.so.2` (oneDNN 2.x, Debian's `libdnnl-dev`), or the file `EMBER_DNNL_LIBRARY` names.
//!
//! ```
//! use burn::prelude::*;
//! use ember::cpu::{self, Kernels};
//! use ember::{Activation, Block, Dense, Init};
//!
//! let device = Device::flex();
//! let net = Dense::new(3).activation(Activation::Relu).in_units(4).initialize(Init::default(), &device);
//! let x = Tensor::<2>::ones([2, 4], &device);
//! let fast = net.forward(x.clone().into());
//! let reference = cpu::with_kernels(Kernels::Flex, || net.forward(x.into()));
//! let (fast, reference): (Tensor<2>, Tensor<2>) = (fast.rank(), reference.rank());
//! assert!(fast.sub(reference).abs().max().into_scalar::<f32>() < 1e-5);
//! ```

use std::cell::Cell;
use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use burn::tensor::Tensor;

use crate::activation::Activation;
use crate::error::{Error, Result};

mod allocator;
#[cfg(feature = "onednn")]
mod batch_norm;
#[cfg(feature = "onednn")]
mod bridge;
#[cfg(feature = "onednn")]
mod conv;
#[cfg(feature = "onednn")]
mod eltwise;
#[cfg(feature = "onednn")]
mod format;
#[cfg(feature = "onednn")]
mod layout;
#[cfg(feature = "onednn")]
mod library;
#[cfg(feature = "onednn")]
mod matmul;
#[cfg(feature = "onednn")]
mod pool;
#[cfg(feature = "onednn")]
mod primitive;
#[cfg(feature = "onednn")]
mod threads;
mod window;

pub use allocator::keep_freed_memory;
#[cfg(feature = "onednn")]
pub(crate) use pool::Pooling;
pub(crate) use window::Window;

/// Which kernels run ember's layers on burn-flex tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernels {
    /// oneDNN's, where the library can be opened (the default).
    OneDnn,
    /// burn-flex's own: the reference, and the path on machines without oneDNN.
    Flex,
}

/// The environment variable that chooses the kernels for a process.
pub const ENV: &str = "EMBER_CPU_KERNELS";

impl FromStr for Kernels {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "onednn" => Ok(Kernels::OneDnn),
            "flex" => Ok(Kernels::Flex),
            _ => Err(Error::InvalidValue {
                name: "CPU kernels",
                value: s.to_string(),
                reason: "expected onednn or flex".to_string(),
            }),
        }
    }
}

impl fmt::Display for Kernels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kernels::OneDnn => "onednn",
            Kernels::Flex => "flex",
        })
    }
}

// 0: not chosen yet (read ENV), 1: oneDNN, 2: flex.
static PROCESS: AtomicU8 = AtomicU8::new(0);

thread_local! {
    static THREAD: Cell<Option<Kernels>> = const { Cell::new(None) };
}

/// Chooses the kernels for the whole process (the CLI's `--cpu-kernels`).
pub fn set_kernels(kernels: Kernels) {
    PROCESS.store(
        if kernels == Kernels::OneDnn { 1 } else { 2 },
        Ordering::Relaxed,
    );
}

/// Runs `f` with `kernels` chosen on this thread (tests and comparisons run both paths side by
/// side this way).
pub fn with_kernels<T>(kernels: Kernels, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<Kernels>);
    impl Drop for Restore {
        fn drop(&mut self) {
            THREAD.with(|t| t.set(self.0));
        }
    }
    let _restore = Restore(THREAD.with(|t| t.replace(Some(kernels))));
    f()
}

/// The kernels chosen for this thread: [`with_kernels`]'s, else [`set_kernels`]'s, else
/// `EMBER_CPU_KERNELS`, else oneDNN.
///
/// # Errors
/// `EMBER_CPU_KERNELS` set to anything but `onednn` or `flex`.
pub fn chosen() -> Result<Kernels> {
    if let Some(k) = THREAD.with(Cell::get) {
        return Ok(k);
    }
    match PROCESS.load(Ordering::Relaxed) {
        1 => Ok(Kernels::OneDnn),
        2 => Ok(Kernels::Flex),
        _ => match std::env::var(ENV) {
            Ok(value) => value.parse().map_err(|_| Error::InvalidValue {
                name: ENV,
                value,
                reason: "expected onednn or flex".to_string(),
            }),
            Err(_) => Ok(Kernels::OneDnn),
        },
    }
}

/// What runs ember's layers on the CPU, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// The kernels in use.
    pub kernels: Kernels,
    /// One line: the library, its version and instruction set, or why burn-flex runs instead.
    pub detail: String,
}

/// Which kernels run, and why (`ember devices` prints it).
pub fn status() -> Status {
    let chosen = match chosen() {
        Ok(k) => k,
        Err(e) => {
            return Status {
                kernels: Kernels::Flex,
                detail: e.to_string(),
            };
        }
    };
    if chosen == Kernels::Flex {
        return Status {
            kernels: Kernels::Flex,
            detail: format!("burn-flex's kernels, as chosen ({ENV}=flex or --cpu-kernels flex)"),
        };
    }
    #[cfg(feature = "onednn")]
    match library::runtime() {
        Ok(rt) => Status {
            kernels: Kernels::OneDnn,
            detail: format!(
                "oneDNN {} ({}, {}) for Dense, Conv1D/Conv2D, pooling, activations and BatchNorm; burn-flex for the rest",
                rt.version,
                library::library_name(),
                rt.isa
            ),
        },
        Err(why) => Status {
            kernels: Kernels::Flex,
            detail: format!("burn-flex's kernels: {why}"),
        },
    }
    #[cfg(not(feature = "onednn"))]
    Status {
        kernels: Kernels::Flex,
        detail: "burn-flex's kernels: this build of ember has no oneDNN path (built without the \
                 `onednn` feature)"
            .to_string(),
    }
}

static RAN: AtomicU64 = AtomicU64::new(0);
static FELL_BACK: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// How many layer operations oneDNN has run in this process, and why any fell back to burn-flex
/// (a configuration oneDNN has no kernel for), each reason once.
pub fn counts() -> (u64, Vec<String>) {
    (
        RAN.load(Ordering::Relaxed),
        FELL_BACK.lock().unwrap().clone(),
    )
}

#[cfg_attr(not(feature = "onednn"), allow(dead_code))]
pub(crate) fn fell_back(why: &str) {
    let mut reasons = FELL_BACK.lock().unwrap();
    if !reasons.iter().any(|r| r == why) {
        reasons.push(why.to_string());
    }
}

/// Whether this thread's layers go to oneDNN.
#[cfg(feature = "onednn")]
fn fast() -> bool {
    matches!(chosen(), Ok(Kernels::OneDnn)) && library::runtime().is_ok()
}

#[cfg(feature = "onednn")]
fn counted<T>(result: Option<T>) -> Option<T> {
    if result.is_some() {
        RAN.fetch_add(1, Ordering::Relaxed);
    }
    result
}

/// `activation(x)`: oneDNN's where it runs, else burn's.
pub(crate) fn activation<const D: usize>(activation: Activation, x: Tensor<D>) -> Tensor<D> {
    #[cfg(feature = "onednn")]
    if fast()
        && let Some(y) = counted(eltwise::apply(activation, &x))
    {
        return y;
    }
    activation.apply_burn(x)
}

/// `activation(x·W + b)` for burn's `W [in, out]`, or `None` for burn's path.
pub(crate) fn dense(
    x: &Tensor<2>,
    weight: &Tensor<2>,
    bias: Option<&Tensor<1>>,
    activation: Option<Activation>,
) -> Option<Tensor<2>> {
    #[cfg(feature = "onednn")]
    if fast() {
        return counted(matmul::dense(x, weight, bias, activation));
    }
    let _ = (x, weight, bias, activation);
    None
}

/// A convolution with its bias and activation, or `None` for burn's path.
pub(crate) fn conv<const D: usize>(
    x: &Tensor<D>,
    weight: &Tensor<D>,
    bias: Option<&Tensor<1>>,
    groups: usize,
    window: Window,
    activation: Option<Activation>,
) -> Option<Tensor<D>> {
    #[cfg(feature = "onednn")]
    if fast() {
        return counted(conv::conv(x, weight, bias, groups, window, activation));
    }
    let _ = (x, weight, bias, groups, window, activation);
    None
}

/// Max or average pooling (zeros of the padding counted), or `None` for burn's path.
pub(crate) fn pool<const D: usize>(x: &Tensor<D>, max: bool, window: Window) -> Option<Tensor<D>> {
    #[cfg(feature = "onednn")]
    if fast() {
        let kind = if max {
            Pooling::Max
        } else {
            Pooling::AvgIncludePad
        };
        return counted(pool::pool(x, kind, window));
    }
    let _ = (x, max, window);
    None
}

/// A batch normalization's output, and the batch's (mean, biased variance) where it normalized
/// with them rather than with given ones.
pub(crate) type Normalized<const D: usize> = (Tensor<D>, Option<(Tensor<1>, Tensor<1>)>);

/// Batch normalization with the given statistics (`stats`: mean, variance; inference), or else
/// with the batch's own, which it returns (a training step); `None` for burn's path.
pub(crate) fn batch_norm<const D: usize>(
    x: &Tensor<D>,
    gamma: &Tensor<1>,
    beta: &Tensor<1>,
    stats: Option<(&Tensor<1>, &Tensor<1>)>,
    epsilon: f64,
) -> Option<Normalized<D>> {
    #[cfg(feature = "onednn")]
    if fast() {
        return counted(batch_norm::batch_norm(x, gamma, beta, stats, epsilon));
    }
    let _ = (x, gamma, beta, stats, epsilon);
    None
}
