//! Opening a dataset file: only a regular file (a symlink to one is followed) is read, and its
//! size is known first, so that each reader checks what its header promises against the file
//! before it reads, or allocates for, the rest. An endless stream (`/dev/zero`, a FIFO) is
//! refused at once, and a header that promises more than the file holds is an error naming
//! both figures.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::{DatasetError, Result};

/// An open dataset file and its size in bytes.
pub(crate) struct Input {
    pub(crate) path: PathBuf,
    pub(crate) file: File,
    pub(crate) len: u64,
}

impl Input {
    /// Opens `path` if it is a regular file.
    pub(crate) fn open(path: &Path) -> Result<Self> {
        let io = |source| DatasetError::Io {
            path: path.to_path_buf(),
            source,
        };
        let refuse = |meta: std::fs::Metadata| DatasetError::NotAFile {
            path: path.to_path_buf(),
            what: ember::io::describe(&meta.file_type()),
        };
        // Looked at before opening: opening a FIFO would wait for a writer.
        let meta = std::fs::metadata(path).map_err(io)?;
        if !meta.is_file() {
            return Err(refuse(meta));
        }
        let file = File::open(path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        if !meta.is_file() {
            return Err(refuse(meta));
        }
        Ok(Self {
            path: path.to_path_buf(),
            file,
            len: meta.len(),
        })
    }

    /// An error at `at` in this file.
    pub(crate) fn format(&self, at: impl Into<String>, message: String) -> DatasetError {
        DatasetError::Format {
            path: self.path.clone(),
            at: at.into(),
            message,
        }
    }

    /// Reads exactly `n` bytes at the current position; `at` names the part for the error.
    pub(crate) fn bytes(&mut self, n: usize, at: &str) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        (&mut self.file)
            .take(n as u64)
            .read_to_end(&mut out)
            .map_err(|source| DatasetError::Io {
                path: self.path.clone(),
                source,
            })?;
        if out.len() < n {
            return Err(self.format(at, format!("truncated: {} bytes, {n} needed", out.len())));
        }
        Ok(out)
    }
}

/// The product of `dims` times `width` bytes, or `None` where it passes `u64` (and so any
/// file).
pub(crate) fn size_of(dims: &[usize], width: usize) -> Option<u64> {
    dims.iter()
        .try_fold(width as u64, |n, &d| n.checked_mul(d as u64))
}
