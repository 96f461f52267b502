//! Fashion-MNIST (and MNIST, which has the same file names and format) from a directory of IDX
//! files, gzipped or raw.
//!
//! Debian's `dataset-fashion-mnist` package installs the real dataset in [`DEFAULT_DIR`]; no
//! network access is ever attempted.
//!
//! ```no_run
//! use ember_datasets::fashion_mnist;
//! let (train, test) = fashion_mnist::load(fashion_mnist::DEFAULT_DIR).unwrap();
//! assert_eq!((train.len(), test.len()), (60_000, 10_000));
//! assert_eq!(train.features(), 28 * 28);
//! ```

use std::path::{Path, PathBuf};

use crate::error::{DatasetError, Result};
use crate::examples::Examples;
use crate::idx::read_pair;

/// Where `apt-get install dataset-fashion-mnist` puts the files.
pub const DEFAULT_DIR: &str = "/usr/share/datasets/fashion-mnist";

/// The ten class names, in label order.
pub const CLASSES: [&str; 10] = [
    "t-shirt",
    "trouser",
    "pullover",
    "dress",
    "coat",
    "sandal",
    "shirt",
    "sneaker",
    "bag",
    "ankle boot",
];

/// The IDX files a directory holds, train images and labels, then test images and labels.
pub const FILES: [&str; 4] = [
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
];

/// Every name [`load`] reads a file of [`FILES`] by, in the order it looks: gzipped first.
pub fn names(file: &str) -> [String; 2] {
    [format!("{file}.gz"), file.to_string()]
}

/// The train and test sets in `dir`: the [`FILES`], each with or without `.gz`. Pixels are
/// scaled to [0, 1].
pub fn load(dir: impl AsRef<Path>) -> Result<(Examples, Examples)> {
    let dir = dir.as_ref();
    // A file, or a symlink loop, is not "not found".
    let not_a_directory = match std::fs::metadata(dir) {
        Ok(meta) if !meta.is_dir() => Some(
            "a file, not a directory: give the directory holding \
                                            the IDX files",
        ),
        Err(e) if e.raw_os_error() == Some(40) => Some("a symlink loop (ELOOP)"),
        _ => None,
    };
    if let Some(reason) = not_a_directory {
        return Err(DatasetError::Io {
            path: dir.to_path_buf(),
            source: std::io::Error::other(format!("it is {reason}")),
        });
    }
    let [train_images, train_labels, test_images, test_labels] = FILES;
    let train = read_pair(file(dir, train_images)?, file(dir, train_labels)?)?;
    let test = read_pair(file(dir, test_images)?, file(dir, test_labels)?)?;
    Ok((train, test))
}

/// `dir/name.gz`, or else `dir/name`; an error naming both and how to get them, and one for
/// both there at once (which is the data would be a guess).
fn file(dir: &Path, name: &str) -> Result<PathBuf> {
    let there: Vec<PathBuf> = names(name)
        .into_iter()
        .map(|n| dir.join(n))
        .filter(|p| p.exists())
        .collect();
    if let [gz, raw] = &there[..] {
        return Err(DatasetError::Io {
            path: raw.clone(),
            source: std::io::Error::other(format!(
                "both it and {} are there, and they may differ: keep one",
                gz.display()
            )),
        });
    }
    // A symlink to nothing (the package removed, a link made by hand) is not "not found".
    if there.is_empty()
        && let Some((link, target)) = names(name).into_iter().find_map(|n| {
            let link = dir.join(n);
            std::fs::read_link(&link).ok().map(|target| (link, target))
        })
    {
        return Err(DatasetError::Io {
            path: link,
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!(
                    "it is a symlink to {}, which does not exist",
                    target.display()
                ),
            ),
        });
    }
    there.into_iter().next().ok_or_else(|| DatasetError::Io {
            path: dir.join(format!("{name}(.gz)")),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "not found: install Debian's dataset-fashion-mnist \
                 (apt-get install dataset-fashion-mnist) or give the directory holding the IDX files",
            ),
        })
}
