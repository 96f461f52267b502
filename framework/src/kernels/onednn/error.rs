//! Why the oneDNN path could not run an operation. Every such error is a fallback: the forward
//! pass then takes burn-flex's kernel, the backward pass burn-flex's gradient
//! ([`super::fallback`]), and the reason is recorded ([`crate::kernels::counters`]).

use crate::kernels::eltwise::Eltwise;

/// A failure of the oneDNN path. `Clone`, as a configuration oneDNN cannot run is remembered
/// with its reason ([`super::bridge::cached`]).
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The shared library could not be opened (the loader's message, as text: it is not `Clone`).
    #[error(
        "{library} could not be loaded ({reason}); install oneDNN 2.x with `apt-get install -y libdnnl-dev`"
    )]
    Load { library: String, reason: String },
    /// One of oneDNN's calls returned a failing status.
    #[error("oneDNN: {what}: {reason} (status {status})")]
    Status {
        what: String,
        status: i64,
        reason: &'static str,
    },
    /// A primitive's pass has no memory slot for an argument ember hands it.
    #[error("oneDNN: argument {0} has no slot")]
    NoSlot(u32),
    /// burn's autodiff tracked an operation whose forward pass kept nothing for its backward pass.
    #[error("a tracked operation ran without its backward pass")]
    NoBackwardState,
    /// A backward pass was handed a gradient of another element type or shape than its
    /// forward pass made.
    #[error("the gradient of {0} is not the f32 array of its output's dimensions")]
    UnexpectedGradient(&'static str),
    /// The activation's gradient needs its input, which a fused post-op does not keep.
    #[error("{0} needs its input to be differentiated")]
    NeedsInput(Eltwise),
}

impl From<&Error> for Error {
    fn from(e: &Error) -> Self {
        e.clone()
    }
}
