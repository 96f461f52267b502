//! Debian's `fortunes` (and `fortunes-min`): about 2.6 MB of English quotations, jokes and
//! verse in plain text files, one quotation after another, each ended by a line `%`. ember's
//! character language models train on it as d2l's train on *The Time Machine*: a corpus that
//! a package ships (`apt-get install fortunes`), so that nothing is downloaded, English enough
//! for a character model to learn words, and large enough (about 2 million letters) for an
//! epoch to mean something on a CPU.

use std::path::{Path, PathBuf};

use crate::error::{DatasetError, Result};

/// Where Debian installs the files.
pub const DIR: &str = "/usr/share/games/fortunes";

/// Files of the directory that are no prose: pictures drawn in characters.
const PICTURES: [&str; 2] = ["art", "ascii-art"];

/// Every line of every quotation in `dir`'s files (those without an extension: `.dat` is
/// `strfile`'s index and `.u8` a link to the file itself), file by file in name order, the
/// `%` lines between quotations left out.
///
/// # Errors
/// [`DatasetError::Io`] naming `dir` where it cannot be read (with the package to install), or a
/// file in it.
pub fn lines(dir: &Path) -> Result<Vec<String>> {
    let io = |path: &Path, source| DatasetError::Io {
        path: path.to_path_buf(),
        source,
    };
    let entries = std::fs::read_dir(dir).map_err(|e| {
        let hint = std::io::Error::new(
            e.kind(),
            format!("{e}; Debian's fortunes are installed with `apt-get install fortunes`"),
        );
        io(dir, hint)
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_none())
        .filter(|p| {
            !PICTURES
                .iter()
                .any(|name| p.file_name() == Some(name.as_ref()))
        })
        .collect();
    files.sort();
    let mut lines = Vec::new();
    for file in files {
        let bytes = std::fs::read(&file).map_err(|e| io(&file, e))?;
        lines.extend(
            String::from_utf8_lossy(&bytes)
                .lines()
                .filter(|line| line.trim() != "%")
                .map(str::to_string),
        );
    }
    Ok(lines)
}
