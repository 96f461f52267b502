//! The names of ember's temporary files: beside their target, marked by a prefix and the
//! writer's PID, so that a later run can tell its own from a killed run's.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Tells apart the temporaries of one process.
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Every temporary name starts with this, then the process id.
pub(super) const PREFIX: &str = ".ember-tmp-";

/// The longest file name Linux's file systems take, in bytes.
const NAME_MAX: usize = 255;

/// Is `name` one of the temporaries [`super::write_atomic`] makes?
pub fn is_temporary(name: &str) -> bool {
    name.starts_with(PREFIX)
}

/// `dir/.ember-tmp-PID-N.NAME`: same directory, so the rename is atomic; the name ends as the
/// target's does, so writers that choose a format by extension (PNG, SVG) choose the same.
pub(super) fn temporary(target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut temporary = format!("{PREFIX}{}-{n}.{name}", std::process::id());
    // A file name holds at most 255 bytes: a target's name near that keeps only its start
    // here (what a stale temporary is matched by), so that a valid name is never refused.
    if temporary.len() > NAME_MAX {
        let mut cut = NAME_MAX;
        while !temporary.is_char_boundary(cut) {
            cut -= 1;
        }
        temporary.truncate(cut);
    }
    target.with_file_name(temporary)
}
