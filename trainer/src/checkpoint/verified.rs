//! The checkpoints this process wrote or verified, with what their files looked like then.
//!
//! After each checkpoint the rotation classifies the directory's others ([`super::scan`]), and
//! verifying each of them again (reading and checksumming every file, parsing the trace) made a
//! run's checkpoints cost time quadratic in its length: 2,000 steps with `--checkpoint-every 1`
//! took 60 s, where 0.3 s trains them (issue 62). A checkpoint whose files have the length and
//! modification time they had when this process wrote or verified it is taken as verified; one
//! changed since is verified again. A resume, a process of its own, verifies everything.
//!
//! The trace is the run's log ([`super::TraceLog`]), which every later checkpoint appends to,
//! past the bytes that are the checkpoint's: it is taken as unchanged while it is the same
//! file (on Unix, its device and inode), not by its length and time.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

/// What a file looked like, for telling whether it changed.
#[derive(Debug, PartialEq)]
enum Seen {
    /// Its length and modification time.
    Written(u64, SystemTime),
    /// The file it is (device and inode): for the trace, which grows.
    Same(u64, u64),
}

/// Each file as it was, in the order the checkpoint's files are given.
type Stamp = Vec<Seen>;

static SEEN: Mutex<BTreeMap<PathBuf, Stamp>> = Mutex::new(BTreeMap::new());

/// The checkpoint `dir`'s `files` as they are now; `None` where one is missing or unreadable.
fn stamp(dir: &Path, files: &[&str]) -> Option<Stamp> {
    files
        .iter()
        .map(|file| {
            let meta = fs::symlink_metadata(dir.join(file)).ok()?;
            #[cfg(unix)]
            if *file == super::record::TRACE {
                use std::os::unix::fs::MetadataExt;
                return Some(Seen::Same(meta.dev(), meta.ino()));
            }
            Some(Seen::Written(meta.len(), meta.modified().ok()?))
        })
        .collect()
}

fn key(dir: &Path) -> PathBuf {
    fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf())
}

/// Notes that the checkpoint `dir`, of `files`, is sound as they are now: this process just
/// wrote or verified it.
pub(super) fn remember(dir: &Path, files: &[&str]) {
    if let Some(stamp) = stamp(dir, files) {
        SEEN.lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key(dir), stamp);
    }
}

/// Whether the checkpoint `dir` is one [`remember`] noted, none of its `files` changed since.
pub(super) fn unchanged(dir: &Path, files: &[&str]) -> bool {
    let seen = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    seen.get(&key(dir))
        .is_some_and(|stamp| Some(stamp) == self::stamp(dir, files).as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILES: [&str; 2] = ["model.bpk", "trace.jsonl"];

    #[test]
    fn a_checkpoint_changed_after_it_was_noted_is_verified_again() {
        let dir = tempfile::tempdir().unwrap();
        for file in FILES {
            fs::write(dir.path().join(file), file).unwrap();
        }
        assert!(!unchanged(dir.path(), &FILES), "never noted");
        remember(dir.path(), &FILES);
        assert!(unchanged(dir.path(), &FILES));
        fs::write(dir.path().join(FILES[0]), "another model").unwrap();
        assert!(!unchanged(dir.path(), &FILES), "changed since");
        fs::remove_file(dir.path().join(FILES[1])).unwrap();
        remember(dir.path(), &FILES);
        assert!(!unchanged(dir.path(), &FILES), "a file missing");
    }
}
