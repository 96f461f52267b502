//! Debian's `fortunes` (and `fortunes-min`): about 2.6 MB of English quotations, jokes and
//! verse in plain text files, one quotation after another, each ended by a line `%`. ember's
//! character language models train on it as d2l's train on *The Time Machine*: a corpus that
//! a package ships (`apt-get install fortunes`), so that nothing is downloaded, English enough
//! for a character model to learn words, and large enough (about 2 million letters) for an
//! epoch to mean something on a CPU.

use std::path::{Path, PathBuf};

use super::{Granularity, Vocab, letters_only, tokenize};
use crate::error::{DatasetError, Result};

/// Where Debian installs the files.
pub const DIR: &str = "/usr/share/games/fortunes";

/// Files of the directory that are no prose: pictures drawn in characters.
const PICTURES: [&str; 2] = ["art", "ascii-art"];

/// The files of quotations in `dir`, in name order: those without an extension (`.dat` is
/// `strfile`'s index and `.u8` a link to the file itself), but for the pictures.
///
/// # Errors
/// [`DatasetError::Io`] naming `dir` where it cannot be read (and the package that installs
/// it).
pub fn files(dir: &Path) -> Result<Vec<PathBuf>> {
    let io = |path: &Path, source| DatasetError::Io {
        path: path.to_path_buf(),
        source,
    };
    let entries = std::fs::read_dir(dir).map_err(|e| {
        let hint = std::io::Error::new(
            e.kind(),
            format!("{e} (Debian's package `fortunes` installs the files there)"),
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
    Ok(files)
}

/// Every line of every quotation in `dir`'s [`files`], file by file, the `%` lines between
/// quotations left out.
///
/// # Errors
/// [`DatasetError::Io`] naming `dir` where it cannot be read (and the package that installs
/// it), or a file in it.
pub fn lines(dir: &Path) -> Result<Vec<String>> {
    let io = |path: &Path, source| DatasetError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut lines = Vec::new();
    for file in files(dir)? {
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

/// d2l's `load_corpus_time_machine` on `dir`'s fortunes: every line cleaned as d2l cleans *The
/// Time Machine* ([`letters_only`]), split into characters, the character vocabulary (`<unk>`,
/// the space, 26 letters), and the corpus's first `max_tokens` characters as indices (all of
/// them for `None`).
///
/// # Errors
/// As [`lines`].
pub fn characters(dir: &Path, max_tokens: Option<usize>) -> Result<(Vec<usize>, Vocab)> {
    let cleaned: Vec<String> = lines(dir)?.iter().map(|l| letters_only(l)).collect();
    let tokens = tokenize(&cleaned, Granularity::Char);
    let vocab = Vocab::new(&tokens, 0, &[] as &[&str]);
    let corpus = tokens
        .iter()
        .flatten()
        .take(max_tokens.unwrap_or(usize::MAX))
        .map(|t| vocab.index(t))
        .collect();
    Ok((corpus, vocab))
}
