//! The errors of the `ember` crate: one enum, each variant naming the value at fault.

use std::path::PathBuf;

/// Everything that can go wrong in `ember` because of input from outside: shapes, names,
/// files, devices.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A batch's feature count does not match what a layer was built for.
    #[error("input has {got} features but {layer} expects {expected}")]
    FeatureMismatch {
        /// The layer, as it prints (`Dense(512 -> 2048)`).
        layer: String,
        /// The input size the layer was initialized with.
        expected: usize,
        /// The input size of the batch.
        got: usize,
    },
    /// A tensor has the wrong rank or shape for an operation.
    #[error("{what}: expected shape {expected}, got {got:?}")]
    Shape {
        /// The operation or value.
        what: String,
        /// The expected shape, in words.
        expected: String,
        /// The shape received.
        got: Vec<usize>,
    },
    /// A parameter was read before `initialize` was called (Gluon's "has not been initialized").
    #[error("parameter '{param}' has not been initialized: call initialize() first")]
    NotInitialized {
        /// The parameter's structural name (`0.weight`).
        param: String,
    },
    /// Parameters were asked for while layers still wait for their input size (Gluon's
    /// `DeferredInitializationError`).
    #[error(
        "the parameters of {} have not been created yet because their initialization was \
         deferred until the input size is known: call infer_shape with an example input, or \
         train on a batch, first", layers.join(", ")
    )]
    DeferredInitialization {
        /// The deferred layers, by path and kind (`0: Conv2D`).
        layers: Vec<String>,
    },
    /// A device name that ember does not know.
    #[error("unknown device '{0}': expected one of auto, wgpu, flex, ndarray")]
    UnknownDevice(String),
    /// wgpu was asked for on a machine without a wgpu adapter.
    #[error("no wgpu adapter found on this machine (no Vulkan, Metal or DX12 driver)")]
    NoWgpuAdapter,
    /// A loss came back NaN or infinite.
    #[error("loss is {value} at {at}: training diverged (lower the learning rate?)")]
    NonFiniteLoss {
        /// Where it was observed (`batch 12 of epoch 1`).
        at: String,
        /// The value.
        value: f32,
    },
    /// A parameter file does not match the network.
    #[error("parameter file {path} does not match the network:\n{details}")]
    ParameterMismatch {
        /// The file.
        path: PathBuf,
        /// Missing, extra and mis-shaped names, one per line.
        details: String,
    },
    /// A parameter file could not be read or written.
    #[error("parameter file {path}: {message}")]
    ParameterFile {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// A configuration value out of range (learning rate, batch size, optimizer name…).
    #[error("invalid {name} {value}: {reason}")]
    InvalidValue {
        /// What the value is.
        name: &'static str,
        /// The value, as given.
        value: String,
        /// Why it is refused, with the valid forms.
        reason: String,
    },
    /// The backend failed while executing queued work.
    #[error("backend execution failed: {0}")]
    Execution(String),
    /// An error in one child of a `Sequential`, with the child's index.
    #[error("layer {index}: {source}")]
    InChild {
        /// The child's index in its `Sequential`.
        index: usize,
        /// What went wrong there.
        source: Box<Error>,
    },
    /// A path that cannot take an output file: a device, a FIFO, a directory, an unwritable
    /// directory.
    #[error("cannot write {path}: {what}")]
    Output {
        /// The path given.
        path: PathBuf,
        /// What it is, or why it cannot be written.
        what: String,
    },
    /// A data source failed (a dataset file, a loader setting), as that source reports it.
    #[error(transparent)]
    Data(Box<dyn std::error::Error + Send + Sync>),
    /// An I/O error, with the path it concerns.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

impl Error {
    /// The same error, said to come from child `index` of a `Sequential`.
    pub fn at_child(self, index: usize) -> Self {
        Error::InChild {
            index,
            source: Box::new(self),
        }
    }
}

/// `Result` with ember's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
