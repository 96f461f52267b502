//! The errors of the `ember` crate: one enum, each variant naming the value at fault.
//!
//! An error is `Clone`: the engine reports one failed unit to every waiter (its handle, a
//! `waitall`, the units it kept from running), each with the variant intact. Context is added
//! as typed fields ([`Error::Step`], [`Error::OnDevice`]), never by formatting text.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// A training step's place in a run: batch `batch` of epoch `epoch`, both counted from 0 as
/// the trace counts them, and printed counted from 1, as every message of ember counts them
/// (`batch 1 of epoch 1` is the first step).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepAt {
    /// The epoch, from 0.
    pub epoch: usize,
    /// The batch within the epoch, from 0.
    pub batch: usize,
}

impl fmt::Display for StepAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "batch {} of epoch {}", self.batch + 1, self.epoch + 1)
    }
}

/// Everything that can go wrong in `ember` because of input from outside: shapes, names,
/// files, devices.
#[derive(Debug, Clone, thiserror::Error)]
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
    #[error(
        "parameter '{param}' has not been initialized: call initialize() first (a block of \
         one's own that holds ember layers passes initialize on to each of them)"
    )]
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
    #[error("unknown device '{0}': expected one of auto, wgpu, flex, ndarray, cuda")]
    UnknownDevice(String),
    /// A device this build of ember was compiled without.
    #[error("{device}: this build of ember has no {backend} backend: {why}")]
    NotBuilt {
        /// The device as given (`cuda:0`).
        device: String,
        /// The backend it needs (`CUDA`, `remote`).
        backend: &'static str,
        /// Why this build lacks it.
        why: &'static str,
    },
    /// burn's CUDA backend is built in, but the NVIDIA driver's library cannot be loaded.
    #[error(
        "{}no NVIDIA driver: none of {} could be loaded",
        device.as_ref().map_or(String::new(), |d| format!("{d}: ")),
        looked_for.join(", ")
    )]
    NoCudaDriver {
        /// The device as given (`cuda:3`), where one was asked for.
        device: Option<String>,
        /// The library names cudarc tried.
        looked_for: Vec<String>,
    },
    /// A remote device whose server could not be reached.
    #[error("cannot connect to {device}: {reason}")]
    Unreachable {
        /// The device as given (`remote:ws://host:3000`).
        device: String,
        /// What the connection attempt said.
        reason: String,
    },
    /// A remote device left a wait unanswered for longer than
    /// [`answer_within`](crate::device::remote::answer_within): its server stopped answering.
    #[error(
        "{device} gave no answer within {seconds} s while {doing}: its server has stopped answering"
    )]
    Silent {
        /// The device as given (`remote:ws://host:3000`).
        device: String,
        /// The bound it exceeded, in seconds.
        seconds: f64,
        /// What ember waited for (a unit's fence read back, the work queued on it).
        doing: String,
    },
    /// wgpu was asked for on a machine without a wgpu adapter.
    #[error("no wgpu adapter found on this machine (no Vulkan, Metal or DX12 driver)")]
    NoWgpuAdapter,
    /// A loss came back NaN or infinite.
    #[error("loss is {value} at {at}: training diverged (lower the learning rate?)")]
    NonFiniteLoss {
        /// The step whose loss it is.
        at: StepAt,
        /// The value.
        value: f32,
    },
    /// The parameters an epoch's last update left give a NaN or infinite loss on that update's
    /// batch: the run's last update diverged, with no later step to find it.
    #[error(
        "loss is {value} with the parameters the update of {at} left, on its batch: training \
         diverged at the epoch's last update (lower the learning rate?)"
    )]
    NonFiniteAfterUpdate {
        /// The step whose update it is.
        at: StepAt,
        /// The value.
        value: f32,
    },
    /// A parameter is NaN or infinite: nothing is written from it (it would replace a good
    /// file with one that trains to NaN), and no file holding one is loaded.
    #[error(
        "parameter {name} holds {value} (value {index}, row-major){}: training diverged or \
         the file is damaged; parameters are saved and loaded only when finite",
        path.as_ref().map_or(String::new(), |p| format!(" in {}", p.display()))
    )]
    NonFiniteParameter {
        /// The file read, if the parameter came from one.
        path: Option<PathBuf>,
        /// Its structural name (`0.weight`).
        name: String,
        /// Where in it, row-major.
        index: usize,
        /// The value: NaN, inf or -inf.
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
    /// A foreign library failed, in its own words, with nothing more to carry (encoding a
    /// protobuf message, installing a signal handler).
    #[error("backend execution failed: {0}")]
    Execution(String),
    /// A tensor's values could not be read back from its device: the device failed while the
    /// work was queued, or the values are not of the type asked for.
    #[error("reading {what} back failed: {reason}")]
    Readback {
        /// What was read (a unit's fence, a parameter, a count).
        what: String,
        /// The backend's reason.
        reason: String,
    },
    /// A device could not be opened or set up (a wgpu device on an adapter, the CUDA driver),
    /// or failed under work.
    #[error("device {device}: {reason}")]
    Device {
        /// The device, as named (`wgpu:0`, `cuda`), or which of several.
        device: String,
        /// The backend's or driver's reason.
        reason: String,
    },
    /// A thread that ember starts could not be started.
    #[error("starting {what}: {source}")]
    Thread {
        /// The thread's job (a replica, the backend worker).
        what: String,
        /// The operating system's error.
        source: Arc<std::io::Error>,
    },
    /// The engine's backend worker has stopped (it panicked, or its device went away): no more
    /// work can be queued.
    #[error("the backend worker has stopped")]
    BackendStopped,
    /// Work on a backend thread panicked (a bug, or a device that failed mid-step): the
    /// panic's message.
    #[error("{0} (a panic on a backend thread)")]
    Panic(String),
    /// A unit of the engine was not run, because an earlier one failed.
    #[error("not run: an earlier unit failed: {0}")]
    NotRun(Box<Error>),
    /// What went wrong in a training step, with the step.
    #[error("{at}: {source}")]
    Step {
        /// The step.
        at: StepAt,
        /// What went wrong there.
        source: Box<Error>,
    },
    /// A run on remote devices failed, and these servers did not answer a new connection
    /// afterwards ([`crate::device::remote::diagnosed`]): the ones to look at, since every
    /// device that waits on a lost one fails with it.
    #[error("{source}\n  {lost}")]
    ServersLost {
        /// Each such device as given, and what its server did.
        lost: String,
        /// What failed.
        source: Box<Error>,
    },
    /// What went wrong on one device of several, with the device's index.
    #[error("device {device}: {source}")]
    OnDevice {
        /// The device's index in the run's device list (0 is the main device).
        device: usize,
        /// What went wrong there.
        source: Box<Error>,
    },
    /// Several devices failed in the same unit: each one, in device order. A device that waits
    /// on another's data fails with it, so the first is not always the cause.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Several(Vec<Error>),
    /// An error in one child of a `Sequential`, with the child's index.
    #[error("layer {index}: {source}")]
    InChild {
        /// The child's index in its `Sequential`.
        index: usize,
        /// What went wrong there.
        source: Box<Error>,
    },
    /// A block asked to describe itself as ONNX that cannot (a user's block that keeps
    /// [`Export::describe`](crate::Export::describe)'s default).
    #[error(
        "{block} cannot be exported to ONNX: it does not describe itself (implement \
         Export::describe for it, describing each child inside OnnxGraph::child)"
    )]
    NotExportable {
        /// The block's type.
        block: String,
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
    Data(Arc<dyn std::error::Error + Send + Sync>),
    /// The processes of a distributed run disagree, or their collective failed.
    #[error("distributed training: {0}")]
    Distributed(String),
    /// An I/O error, with the path it concerns.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: Arc<std::io::Error>,
    },
}

impl Error {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source: Arc::new(source),
        }
    }

    /// The same error, said to come from step `at` of a run.
    pub fn at_step(self, at: StepAt) -> Self {
        Error::Step {
            at,
            source: Box::new(self),
        }
    }

    /// The same error, said to come from device `device` of several.
    pub fn on_device(self, device: usize) -> Self {
        Error::OnDevice {
            device,
            source: Box::new(self),
        }
    }

    /// The error behind the context that [`Error::Step`], [`Error::OnDevice`],
    /// [`Error::ServersLost`], [`Error::InChild`] and [`Error::NotRun`] add: what actually went wrong.
    pub fn root(&self) -> &Error {
        match self {
            Error::Step { source, .. }
            | Error::OnDevice { source, .. }
            | Error::ServersLost { source, .. }
            | Error::InChild { source, .. } => source.root(),
            Error::NotRun(source) => source.root(),
            other => other,
        }
    }

    /// The remote device that fell silent ([`Error::Silent`]) anywhere in this error, with
    /// several devices' errors searched too: a read from the network it holds, or from one
    /// that waits on it, would wait a whole bound again.
    pub fn silent_device(&self) -> Option<&str> {
        match self.root() {
            Error::Silent { device, .. } => Some(device),
            Error::Several(errors) => errors.iter().find_map(Error::silent_device),
            _ => None,
        }
    }

    /// Whether the run diverged: a loss or a parameter went NaN or infinite.
    pub fn diverged(&self) -> bool {
        matches!(
            self.root(),
            Error::NonFiniteLoss { .. }
                | Error::NonFiniteAfterUpdate { .. }
                | Error::NonFiniteParameter { path: None, .. }
        )
    }

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

/// The message a panic carried, for [`Error::Panic`] and for errors that report a caught one.
pub(crate) fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".to_string())
}

/// A number as a message shows it: as Rust writes it, unless that is longer than a dozen
/// characters (1e-50 written out is 52), then in scientific notation.
pub fn number(value: f64) -> String {
    let plain = value.to_string();
    match plain.len() {
        0..=12 => plain,
        _ => format!("{value:e}"),
    }
}
