//! Which kernels run ember's layers on burn-flex tensors: chosen per process or per thread.

use std::cell::Cell;
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU8, Ordering};

use crate::error::{Error, Result};

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
        // Empty is unset, as a shell's `EMBER_CPU_KERNELS=` means.
        _ => match std::env::var(ENV).ok().filter(|v| !v.trim().is_empty()) {
            Some(value) => value.parse().map_err(|_| Error::InvalidValue {
                name: ENV,
                value,
                reason: "expected onednn or flex".to_string(),
            }),
            None => Ok(Kernels::OneDnn),
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
    /// Whether they multiply in bf16 under [`crate::autocast`]: oneDNN on an instruction set
    /// with bf16 products (AVX512_BF16, AMX). Elsewhere burn-flex rounds to bf16 around f32
    /// products: bf16's numbers, not its speed.
    pub bf16: bool,
}

/// Which kernels run, and why (`ember devices` prints it).
pub fn status() -> Status {
    let chosen = match chosen() {
        Ok(k) => k,
        Err(e) => {
            return Status {
                kernels: Kernels::Flex,
                detail: e.to_string(),
                bf16: false,
            };
        }
    };
    if chosen == Kernels::Flex {
        return Status {
            kernels: Kernels::Flex,
            detail: format!("burn-flex's kernels, as chosen ({ENV}=flex or --cpu-kernels flex)"),
            bf16: false,
        };
    }
    #[cfg(feature = "onednn")]
    match super::onednn::library::runtime() {
        Ok(rt) => Status {
            kernels: Kernels::OneDnn,
            detail: format!(
                "oneDNN {} ({}, {}) for Dense, Conv1D/Conv2D, pooling, activations, BatchNorm, LayerNorm, the recurrent layers and attention; burn-flex for the rest",
                rt.version,
                super::onednn::library::library_name(),
                rt.isa
            ),
            bf16: rt.bf16,
        },
        Err(why) => Status {
            kernels: Kernels::Flex,
            detail: format!("burn-flex's kernels: {why}"),
            bf16: false,
        },
    }
    #[cfg(not(feature = "onednn"))]
    Status {
        kernels: Kernels::Flex,
        detail: "burn-flex's kernels: this build of ember has no oneDNN path (built without the \
                 `onednn` feature)"
            .to_string(),
        bf16: false,
    }
}
