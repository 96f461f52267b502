//! What a checkpoint directory holds under the names ember writes (`step-N`): checkpoints to
//! resume from, checkpoints of ember's that are damaged, and things that are not ember's.
//!
//! A run never writes over, skips or deletes a `step-N` that is not a sound checkpoint of its
//! own: [`super::Checkpointing::prepare`] refuses to start where one would be in its way, and
//! a resume passes damaged ones over, saying why.

use std::fs;
use std::path::{Path, PathBuf};

use ember::{Error, Result};

use super::record::{Checkpoint, FILES, MODEL, OPTIMIZER, PREFIX, STATE, TRACE};

/// One `step-N` entry of a checkpoint directory.
#[derive(Debug, Clone)]
pub enum Entry {
    /// A complete checkpoint whose files are all there and unchanged.
    Sound(Checkpoint),
    /// One of ember's checkpoints that cannot be resumed from.
    Damaged {
        /// Its directory.
        path: PathBuf,
        /// Why: the file missing or changed.
        reason: String,
    },
    /// Something else under a name ember writes: a file, a link, a directory of other things.
    Foreign {
        /// The name.
        path: PathBuf,
        /// What is there, in words.
        what: String,
    },
}

impl Entry {
    /// Where it is.
    pub fn path(&self) -> &Path {
        match self {
            Entry::Sound(c) => &c.dir,
            Entry::Damaged { path, .. } | Entry::Foreign { path, .. } => path,
        }
    }
}

/// The steps a `step-N` name holds (any number of digits, as ember reads them).
pub fn step_of(name: &str) -> Option<u64> {
    let digits = name.strip_prefix(PREFIX)?;
    digits
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| digits.parse().ok())
        .flatten()
}

/// Every `step-N` entry of `dir`, oldest first.
///
/// # Errors
/// [`Error::Io`] when `dir` cannot be read.
pub fn scan(dir: &Path) -> Result<Vec<(u64, Entry)>> {
    let entries = fs::read_dir(dir).map_err(|source| Error::io(dir, source))?;
    let mut found: Vec<(u64, Entry)> = entries
        .flatten()
        .filter_map(|entry| {
            let steps = step_of(&entry.file_name().to_string_lossy())?;
            Some((steps, classify(&entry.path())))
        })
        .collect();
    found.sort_by_key(|(steps, _)| *steps);
    Ok(found)
}

/// What one `step-N` path is.
pub fn classify(path: &Path) -> Entry {
    let foreign = |what: &str| Entry::Foreign {
        path: path.to_path_buf(),
        what: what.to_string(),
    };
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) => return foreign(&format!("unreadable ({e})")),
    };
    if meta.file_type().is_symlink() {
        return foreign("a symbolic link");
    }
    if !meta.is_dir() {
        return foreign(ember::io::describe(&meta.file_type()));
    }
    // An empty one is a checkpoint whose write a second signal cut short.
    if fs::read_dir(path).is_ok_and(|mut entries| entries.next().is_none()) {
        return Entry::Damaged {
            path: path.to_path_buf(),
            reason: "it is empty: its write was cut short".to_string(),
        };
    }
    let ours = [MODEL, OPTIMIZER, TRACE, STATE];
    if !ours.iter().any(|file| path.join(file).exists()) {
        return foreign("a directory that holds none of a checkpoint's files");
    }
    let named = path.file_name().and_then(|n| step_of(&n.to_string_lossy()));
    // The step its name says first: the plainest reason where it is not the file's.
    let opened = Checkpoint::open(path).and_then(|c| match named {
        Some(n) if n != c.position.steps => Ok(c),
        // One this process wrote or verified, and unchanged since, is not read again.
        _ if super::verified::unchanged(path, &FILES) => Ok(c),
        _ => c.verify().map(|()| {
            super::verified::remember(path, &FILES);
            c
        }),
    });
    match opened {
        Ok(c) if named.is_some_and(|n| n != c.position.steps) => Entry::Damaged {
            path: path.to_path_buf(),
            reason: format!(
                "its state.json says step {}, and its name step {}",
                c.position.steps,
                named.unwrap_or_default()
            ),
        },
        Ok(checkpoint) => Entry::Sound(checkpoint),
        Err(e) => Entry::Damaged {
            path: path.to_path_buf(),
            reason: e.to_string(),
        },
    }
}

/// Moves the checkpoint `dir` aside as `{why}-step-N` beside it (`.2`, `.3`… where that name
/// is taken), never deleting it, so that no resume picks it up; returns where it went.
pub fn set_aside(dir: &Path, why: &str) -> Option<PathBuf> {
    let name = format!("{why}-{}", dir.file_name()?.to_string_lossy());
    let aside = (1..)
        .map(|n| match n {
            1 => dir.with_file_name(&name),
            n => dir.with_file_name(format!("{name}.{n}")),
        })
        .find(|p| fs::symlink_metadata(p).is_err())?;
    fs::rename(dir, &aside).ok().map(|()| aside)
}
