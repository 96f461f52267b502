//! A checkpoint directory belongs to one run at a time: a file `lock` holds the pid of the run
//! writing there, the time that process started and the directory's own identity (device and
//! inode: a copy of the directory, lock and all, is not the directory the run writes), and goes
//! when the run ends.

use std::fs;
use std::os::unix::fs::MetadataExt;

use ember::{Error, Result};

use super::{Checkpointing, LOCK};

impl Checkpointing {
    /// Refuses the directory where another run still holds it, naming its pid, or where
    /// something not ember's has its lock's name; reads only. A lock whose process is gone (a
    /// run that was killed) is no hold.
    pub(super) fn check_lock(&self) -> Result<()> {
        let lock = self.dir.join(LOCK);
        let me = std::process::id();
        let refuse = |reason: String| Error::InvalidValue {
            name: "checkpoint directory",
            value: self.dir.display().to_string(),
            reason,
        };
        // The name is ember's: something else there (a user's file, a link) is never written
        // over or through.
        let holder = match fs::symlink_metadata(&lock) {
            Err(_) => None,
            Ok(meta) if !meta.file_type().is_file() => {
                return Err(refuse(format!(
                    "{} is {}, where ember keeps its lock file; move it away",
                    lock.display(),
                    ember::io::describe(&meta.file_type())
                )));
            }
            Ok(_) => {
                let text = fs::read_to_string(&lock).unwrap_or_default();
                let mut fields = text.split_whitespace();
                let pid = fields.next().and_then(|p| p.parse::<u32>().ok());
                let started = fields.next().map(|s| s.parse::<u64>().ok());
                let place = fields.next();
                match (pid, started, place, fields.next()) {
                    (Some(pid), None, None, None) => Some((pid, None, None)),
                    (Some(pid), Some(Some(at)), place, None) => {
                        Some((pid, Some(at), place.map(str::to_string)))
                    }
                    _ => {
                        return Err(refuse(format!(
                            "{} is a file of another kind than ember's lock (a pid, its start \
                             time and the directory's identity); move it away",
                            lock.display()
                        )));
                    }
                }
            }
        };
        // The holder runs still: the same process (its start time), or, for a lock of an
        // older ember that holds a pid alone, an ember process; and it writes here, not into
        // the directory this one was copied from (a copy of a live run's directory was refused).
        let here = place_of(&self.dir);
        if let Some((pid, started, place)) = holder
            && pid != me
            && place.is_none_or(|place| here.as_deref() == Some(place.as_str()))
            && ember::io::running(pid)
            && match started {
                Some(at) => started_at(pid) == Some(at),
                None => command_of(pid).is_none_or(|c| c.contains("ember")),
            }
        {
            return Err(refuse(format!(
                "another run (pid {pid}) is writing its checkpoints there; wait for it, or give \
                 this run a directory of its own"
            )));
        }
        Ok(())
    }

    /// Takes the directory for this process ([`Checkpointing::check_lock`] first): a file
    /// `lock` holding its pid, the time it started (so that another process given the same pid
    /// later is not taken for it) and the directory's identity.
    pub(super) fn lock(&self) -> Result<()> {
        self.check_lock()?;
        let me = std::process::id();
        let text = match (started_at(me), place_of(&self.dir)) {
            (Some(at), Some(here)) => format!("{me} {at} {here}"),
            (Some(at), None) => format!("{me} {at}"),
            (None, _) => me.to_string(),
        };
        ember::io::write_atomic_bytes(&self.dir.join(LOCK), text.as_bytes())
    }

    /// Gives the directory back at the end of a run: removes the lock, if it is this
    /// process's.
    pub fn unlock(&self) {
        let lock = self.dir.join(LOCK);
        let mine = fs::read_to_string(&lock).is_ok_and(|text| {
            text.split_whitespace().next() == Some(&std::process::id().to_string())
        });
        if mine {
            let _ = fs::remove_file(lock);
        }
    }
}

/// When process `pid` started, in clock ticks since boot (Linux: field 22 of
/// `/proc/PID/stat`); `None` elsewhere.
pub(super) fn started_at(pid: u32) -> Option<u64> {
    ember::io::proc_stat(pid)?.get(19)?.parse().ok()
}

/// The identity of directory `dir` (`DEVICE:INODE`), which a copy of it does not share.
fn place_of(dir: &std::path::Path) -> Option<String> {
    let meta = fs::metadata(dir).ok()?;
    Some(format!("{}:{}", meta.dev(), meta.ino()))
}

/// The command line of process `pid` (Linux), its arguments joined by spaces.
fn command_of(pid: u32) -> Option<String> {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(String::from_utf8_lossy(&raw).replace('\0', " "))
}
