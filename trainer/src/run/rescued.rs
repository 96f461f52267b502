//! Where trained parameters go when `--save` cannot take them: a free name beside it
//! (`model.rescued.safetensors`), else in the working directory, else in the system's temporary
//! directory. Nothing is overwritten.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ember::io;

use super::model::Net;

/// A name beside `path` that nothing holds: `model.rescued.safetensors`, then
/// `model.rescued.2.safetensors`, and so on.
pub fn beside(path: &Path, what: &str) -> PathBuf {
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let extension = path
        .extension()
        .map_or(String::new(), |e| format!(".{}", e.to_string_lossy()));
    (1..)
        .map(|n| match n {
            1 => path.with_file_name(format!("{stem}.{what}{extension}")),
            n => path.with_file_name(format!("{stem}.{what}.{n}{extension}")),
        })
        .find(|p| std::fs::symlink_metadata(p).is_err())
        .expect("a free name")
}

/// Writes `net`, which `--save path` could not take, to the first place that takes it: beside
/// `path`, in the working directory, in the temporary directory, each under a free
/// `NAME.rescued.EXT`. Returns where it went, or each place's error.
pub fn save_elsewhere(
    net: &Net,
    path: &Path,
    recorded: &BTreeMap<String, String>,
) -> Result<PathBuf, Vec<String>> {
    let name = PathBuf::from(
        path.file_name()
            .unwrap_or("parameters.safetensors".as_ref()),
    );
    let places = [
        beside(path, "rescued"),
        beside(&name, "rescued"),
        beside(&std::env::temp_dir().join(&name), "rescued"),
    ];
    let mut errors = Vec::new();
    for place in places {
        match io::safetensors::save_parameters_with(net, &place, recorded) {
            // The whole path: `m.rescued.st` may be beside --save or in the working directory.
            Ok(()) => return Ok(std::path::absolute(&place).unwrap_or(place)),
            Err(e) => errors.push(format!("{}: {e}", place.display())),
        }
    }
    Err(errors)
}
