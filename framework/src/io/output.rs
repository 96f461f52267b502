//! Whether a path can take an output, before any work starts: every writer in ember asks here.
//!
//! [`check`] says whether a path can take an output: it must be a
//! regular file, or not exist yet in a writable directory. A symlink to a regular file is
//! followed, and the file it points to is what gets replaced. Anything else (a directory, a
//! FIFO, a character or block device such as `/dev/null`, a socket, a dangling symlink) is an
//! [`Error::Output`] naming the path and what it is. Writing to one would replace it, since
//! the atomic rename that protects a regular file is exactly what destroys the others. A
//! regular file without any write permission (`chmod 444`) is refused too: the rename would
//! replace it whatever its mode says.
//! Files are then written through [`super::atomic`].
//!
//! ```
//! use ember::io::{check, write_atomic_bytes};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("notes.txt");
//! check(&path).unwrap();
//! write_atomic_bytes(&path, b"hello").unwrap();
//! assert_eq!(std::fs::read(&path).unwrap(), b"hello");
//! // A directory is no output file.
//! assert!(check(dir.path()).is_err());
//! ```

use std::fs;
use std::path::{Path, PathBuf};

use super::temporary::temporary;
use crate::error::{Error, Result};

/// Checks that `path` can take an output file and returns the path the file will be written
/// at: `path` itself, or the regular file a symlink at `path` points to.
///
/// # Errors
/// [`Error::Output`] when `path` is anything but a regular file or a symlink to one, or when
/// its directory does not exist or cannot be written.
pub fn check(path: &Path) -> Result<PathBuf> {
    let refuse = |what: String| Error::Output {
        path: path.to_path_buf(),
        what,
    };
    // `out/` names a directory, whatever is there: a file cannot be written under it.
    if path.as_os_str().to_string_lossy().ends_with('/') {
        return Err(refuse(
            "it ends with a /, which names a directory (outputs go only to regular files)"
                .to_string(),
        ));
    }
    let target = match fs::symlink_metadata(path) {
        // Nothing there yet, or a parent that is no directory: the directory's check says.
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            path.to_path_buf()
        }
        Err(e) => return Err(refuse(format!("it cannot be examined ({e})"))),
        Ok(meta) if meta.file_type().is_symlink() => match fs::metadata(path) {
            Ok(target) if target.is_file() => {
                fs::canonicalize(path).map_err(|e| refuse(format!("symlink unresolvable ({e})")))?
            }
            Ok(target) => {
                return Err(refuse(format!(
                    "it is a symlink to {} (outputs go only to regular files)",
                    describe(&target.file_type())
                )));
            }
            // ELOOP: a symlink that leads back to itself is no dangling one.
            Err(e) if e.raw_os_error() == Some(40) => {
                return Err(refuse("it is a symlink loop".to_string()));
            }
            Err(_) => return Err(refuse("it is a dangling symlink".to_string())),
        },
        Ok(meta) if meta.is_file() => path.to_path_buf(),
        Ok(meta) => {
            return Err(refuse(format!(
                "it is {} (outputs go only to regular files)",
                describe(&meta.file_type())
            )));
        }
    };
    // A file its owner made read-only is one they meant to keep: the rename that replaces it
    // atomically would go through the directory's permission, not the file's (it did, as
    // root and as its owner, issue 62).
    if let Ok(meta) = fs::metadata(&target) {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode();
        if meta.is_file() && mode & 0o222 == 0 {
            return Err(refuse(format!(
                "it is read-only (mode {:o}), which says it is to be kept: make it writable \
                 (chmod u+w) to replace it, or give another path",
                mode & 0o7777
            )));
        }
    }
    let dir = directory_of(&target);
    match fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => return Err(refuse(format!("{} is not a directory", dir.display()))),
        Err(e) => return Err(refuse(format!("its directory {}: {e}", dir.display()))),
    }
    // Root writes through permission bits, so only a real file says whether the directory
    // takes one (a read-only mount, a full disk's quota).
    let probe = temporary(&target);
    match fs::File::create(&probe) {
        Ok(_) => {
            let _ = fs::remove_file(&probe);
            Ok(target)
        }
        Err(e) => Err(refuse(format!(
            "its directory {} is not writable ({e})",
            dir.display()
        ))),
    }
}

/// Checks a directory that outputs will be written into (`ember compare --out`): it is created
/// if missing, and must then be a writable directory (a symlink to one is followed).
///
/// # Errors
/// [`Error::Output`] naming the path and what it is.
pub fn check_dir(dir: &Path) -> Result<()> {
    check_dir_unmade(dir)?;
    let refuse = |what: String| Error::Output {
        path: dir.to_path_buf(),
        what,
    };
    match fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(meta) => {
            return Err(refuse(format!(
                "it is {}, not a directory",
                describe(&meta.file_type())
            )));
        }
        Err(_) => fs::create_dir_all(dir)
            .map_err(|e| refuse(format!("it cannot be created as a directory ({e})")))?,
    }
    check(&dir.join("probe"))
        .map(drop)
        .map_err(|_| refuse("it is a directory that cannot be written".to_string()))
}

/// Checks a directory that outputs will be written into as [`check_dir`] does, making nothing:
/// where it is missing, the directory it would be made in (its nearest existing ancestor)
/// must be a writable directory. For a command that checks all its outputs before it makes
/// any, so that a refusal leaves no empty directory behind.
///
/// # Errors
/// [`Error::Output`] naming the path and what it is.
pub fn check_dir_unmade(dir: &Path) -> Result<()> {
    let refuse = |what: String| Error::Output {
        path: dir.to_path_buf(),
        what,
    };
    let below = match fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => dir,
        Ok(meta) => {
            return Err(refuse(format!(
                "it is {}, not a directory",
                describe(&meta.file_type())
            )));
        }
        Err(_) => {
            let existing = dir
                .ancestors()
                .skip(1)
                .map(|a| {
                    if a.as_os_str().is_empty() {
                        Path::new(".")
                    } else {
                        a
                    }
                })
                .find(|a| fs::symlink_metadata(a).is_ok())
                .unwrap_or(Path::new("."));
            match fs::metadata(existing) {
                Ok(meta) if meta.is_dir() => existing,
                Ok(meta) => {
                    return Err(refuse(format!(
                        "it cannot be created as a directory: {} is {}",
                        existing.display(),
                        describe(&meta.file_type())
                    )));
                }
                Err(e) => {
                    return Err(refuse(format!(
                        "it cannot be created as a directory: {} ({e})",
                        existing.display()
                    )));
                }
            }
        }
    };
    check(&below.join("probe")).map(drop).map_err(|_| {
        refuse(if below == dir {
            "it is a directory that cannot be written".to_string()
        } else {
            format!(
                "it cannot be created as a directory: {} cannot be written",
                below.display()
            )
        })
    })
}

/// Where `path` is, as one place has one name: its directory resolved (symlinks, `..`, a
/// relative start) and its file name, itself resolved when it is a symlink. Two outputs are
/// the same file exactly when these are equal; comparing the paths as given misses `m` and
/// `./m`.
pub fn place(path: &Path) -> PathBuf {
    if let Ok(resolved) = fs::canonicalize(path) {
        return resolved;
    }
    let dir = fs::canonicalize(directory_of(path)).unwrap_or_else(|_| directory_of(path).into());
    match path.file_name() {
        Some(name) => dir.join(name),
        None => dir,
    }
}

/// What makes two paths one file: its device and inode where it exists (so hard links and
/// symbolic links to it are the same file), else where it would be made ([`place`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// An existing file or directory.
    Inode {
        /// The device it is on.
        device: u64,
        /// Its inode on that device.
        inode: u64,
    },
    /// A path with nothing there yet.
    New(PathBuf),
}

/// `path`'s [`Identity`], following symbolic links.
pub fn identity(path: &Path) -> Identity {
    #[cfg(unix)]
    if let Ok(meta) = fs::metadata(path) {
        use std::os::unix::fs::MetadataExt;
        return Identity::Inode {
            device: meta.dev(),
            inode: meta.ino(),
        };
    }
    Identity::New(place(path))
}

pub(super) fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}
/// What a file type is, in words ("a FIFO (named pipe)", "a character device"), for errors
/// that refuse a path.
pub fn describe(kind: &fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if kind.is_char_device() {
            return "a character device";
        }
        if kind.is_block_device() {
            return "a block device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    if kind.is_file() {
        "a regular file"
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_symlink() {
        "a symlink"
    } else {
        "not a regular file"
    }
}
