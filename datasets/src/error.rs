//! The errors of `ember-datasets`: each names the file and the place in it.

use std::path::PathBuf;

/// A dataset that could not be read, or a loader asked for something impossible.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// The file could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A data path that is not a regular file: a directory, a FIFO, a device (an endless
    /// stream such as `/dev/zero` is never read).
    #[error("{path}: it is {what}; data is read only from regular files")]
    NotAFile {
        /// The path given.
        path: PathBuf,
        /// What it is.
        what: &'static str,
    },
    /// The file's content is not what its format requires.
    #[error("{path}: {at}: {message}")]
    Format {
        /// The file.
        path: PathBuf,
        /// Where: a byte offset, a line, a header field.
        at: String,
        /// What is wrong, with the value found.
        message: String,
    },
    /// A label that is no class index where the data has `classes` classes (a loader's
    /// `classes`, a command line's `--classes`, which a caller names).
    #[error("{path}: {at}: label {label} is not a class index in 0..{classes}")]
    Label {
        /// The file.
        path: PathBuf,
        /// Where: a line, an example.
        at: String,
        /// The label as written.
        label: String,
        /// How many classes there are.
        classes: usize,
    },
    /// Two files that belong together disagree (image and label counts).
    #[error("{first} has {first_count} {what} but {second} has {second_count}")]
    Mismatch {
        /// What is counted (examples, rows).
        what: &'static str,
        /// The first file.
        first: PathBuf,
        /// Its count.
        first_count: usize,
        /// The second file.
        second: PathBuf,
        /// Its count.
        second_count: usize,
    },
    /// A loader setting that cannot work (batch size 0, a batch larger than the data with
    /// drop_last…).
    #[error("invalid {name} {value}: {reason}")]
    InvalidValue {
        /// The setting.
        name: &'static str,
        /// The value given.
        value: String,
        /// Why.
        reason: String,
    },
}

/// `Result` with [`DatasetError`].
pub type Result<T, E = DatasetError> = std::result::Result<T, E>;

/// A dataset's error where ember's are expected (in a `BatchSource`, a `fit` run): the same
/// message, its source kept.
impl From<DatasetError> for ember::Error {
    fn from(error: DatasetError) -> Self {
        ember::Error::Data(std::sync::Arc::new(error))
    }
}
