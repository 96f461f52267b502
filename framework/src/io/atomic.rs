//! Output files that nothing can damage: every writer in ember writes through here.
//!
//! [`write_atomic`] writes into a temporary directory beside the target, `fsync`s the file, and
//! renames it over the target, so a reader sees the old file or the new one, never a part. The temporary
//! is removed on every error path; [`remove_temporaries`] removes those in flight when the
//! process is told to stop (SIGINT, SIGTERM), and a later write to the same target removes
//! the ones a killed process (SIGKILL) left behind. Whether a path can take an output at all is
//! [`super::output::check`]'s to say.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::output::{check, directory_of};
use super::temporary::{PREFIX, temporary};
use crate::error::{Error, Result};

/// The temporaries being written now, for [`remove_temporaries`].
static IN_FLIGHT: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
/// Writes the file at `path` atomically: `write` fills a temporary file beside it, which is
/// synced and renamed over `path` only if `write` succeeds. The temporary is removed on every
/// error, and `path` keeps its old content.
///
/// # Errors
/// What [`check`] refuses, what `write` returns, and I/O errors naming `path`.
pub fn write_atomic(path: &Path, write: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let target = check(path)?;
    remove_stale(&target);
    // The temporary is a directory holding the file, so that whatever scratch files the
    // writer makes beside it (burn-store and safetensors make their own, named after it) are
    // inside, and go with it. The file has a short name with the target's extension: a
    // target's name near the 255-byte limit leaves no room for a writer's suffixes.
    let scratch = temporary(&target);
    let guard = ScratchGuard::register(scratch.clone());
    let file = match target.extension().filter(|ext| ext.len() <= 16) {
        Some(ext) => scratch.join("file").with_extension(ext),
        None => scratch.join("file"),
    };
    let written = fs::create_dir(&scratch)
        .map_err(|e| io(&scratch, e))
        .and_then(|()| write(&file))
        .and_then(|()| keep_permissions(&file, &target))
        .and_then(|()| sync(&file))
        .and_then(|()| fs::rename(&file, &target).map_err(|e| io(path, e)));
    drop(guard);
    let _ = fs::remove_dir_all(&scratch);
    written
}

/// [`write_atomic`] of a byte string.
///
/// # Errors
/// As [`write_atomic`].
pub fn write_atomic_bytes(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic(path, |tmp| fs::write(tmp, bytes).map_err(|e| io(path, e)))
}

/// Writes the directory at `path` atomically, as [`write_atomic`] does a file: `write` fills a
/// temporary directory beside it, which is renamed to `path` when complete. `path` must not
/// exist yet.
///
/// # Errors
/// [`Error::Output`] when `path` exists; what `write` returns; I/O errors naming `path`.
pub fn write_atomic_dir(path: &Path, write: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    if fs::symlink_metadata(path).is_ok() {
        return Err(Error::Output {
            path: path.to_path_buf(),
            what: "it exists already".to_string(),
        });
    }
    remove_stale(path);
    let tmp = temporary(path);
    let guard = ScratchGuard::register(tmp.clone());
    let written = fs::create_dir(&tmp)
        .map_err(|e| io(&tmp, e))
        .and_then(|()| write(&tmp))
        .and_then(|()| guard.rename_to(path).map_err(|e| io(path, e)))
        .and_then(|()| sync(directory_of(path)));
    drop(guard);
    if written.is_err() {
        let _ = fs::remove_dir_all(&tmp);
    }
    written
}

/// Removes every temporary file or directory being written now. For a signal handler's thread:
/// the writes in flight are abandoned, and their targets keep their old content. Each is
/// unregistered first, under the lock: a directory whose files were removed while its writer
/// went on is never renamed to its target ([`ScratchGuard::rename_to`]).
pub fn remove_temporaries() {
    let mut in_flight = IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner());
    for tmp in in_flight.drain(..) {
        if tmp.is_dir() {
            let _ = fs::remove_dir_all(tmp);
        } else {
            let _ = fs::remove_file(tmp);
        }
    }
}

/// A scratch directory beside a target, for files no reader should see: removed when dropped,
/// when a signal stops the process at once ([`remove_temporaries`]), and, left by a killed
/// process, by the next [`ScratchDir::beside`] the same target.
pub struct ScratchDir(ScratchGuard);

impl ScratchDir {
    /// Creates `.ember-tmp-PID-N.NAME` beside `target` (NAME its file name), after removing
    /// those that processes no longer running left there.
    ///
    /// # Errors
    /// I/O errors naming the directory.
    pub fn beside(target: &Path) -> Result<Self> {
        remove_stale(target);
        let path = temporary(target);
        // Registered first: a signal while it is made removes it as well.
        let guard = ScratchGuard::register(path.clone());
        fs::create_dir(&path).map_err(|e| io(&path, e))?;
        Ok(Self(guard))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        // Before the guard's own drop takes it off the list.
        let _ = fs::remove_dir_all(&self.0.0);
    }
}

/// A scratch file beside a target, appended to, for a file that other files link: removed
/// when dropped, when a signal stops the process at once ([`remove_temporaries`]), and, left by
/// a killed process, by the next [`remove_stale_in`] of its directory.
pub struct ScratchFile {
    guard: ScratchGuard,
    file: fs::File,
}

impl ScratchFile {
    /// Creates `.ember-tmp-PID-N.NAME` beside `target` (NAME its file name), empty, open to
    /// append to.
    ///
    /// # Errors
    /// I/O errors naming the file.
    pub fn beside(target: &Path) -> Result<Self> {
        let path = temporary(target);
        let guard = ScratchGuard::register(path.clone());
        let file = (fs::File::options().append(true).create_new(true))
            .open(&path)
            .map_err(|e| io(&path, e))?;
        Ok(Self { guard, file })
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.guard.0
    }

    /// The open file.
    pub fn file(&mut self) -> &mut fs::File {
        &mut self.file
    }
}

impl Drop for ScratchFile {
    fn drop(&mut self) {
        // Before the guard's own drop takes it off the list.
        let _ = fs::remove_file(&self.guard.0);
    }
}

/// A temporary in flight, registered until dropped.
pub(super) struct ScratchGuard(pub(super) PathBuf);

impl ScratchGuard {
    pub(super) fn register(tmp: PathBuf) -> Self {
        IN_FLIGHT
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(tmp.clone());
        ScratchGuard(tmp)
    }

    /// Renames the temporary directory to `target` and unregisters it in one step, under the
    /// lock [`remove_temporaries`] takes; one that a signal's removal took (and may have
    /// emptied in part while the writer went on) is not renamed: an error. Without this, a job
    /// stopped by SIGTERM left its newest `step-N` without `state.json` (1 of 5 runs of its
    /// signal test): the removal had opened the directory and went on emptying it under its
    /// new name, or emptied it half while the writer added the rest.
    pub(super) fn rename_to(&self, target: &Path) -> std::io::Result<()> {
        let mut in_flight = IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner());
        let Some(at) = in_flight.iter().position(|p| *p == self.0) else {
            return Err(std::io::Error::other(
                "a signal abandoned the write: the temporary was removed",
            ));
        };
        fs::rename(&self.0, target)?;
        in_flight.swap_remove(at);
        Ok(())
    }
}

impl Drop for ScratchGuard {
    fn drop(&mut self) {
        IN_FLIGHT
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|p| *p != self.0);
    }
}

/// Removes the temporaries for `target` that processes no longer running left behind.
fn remove_stale(target: &Path) {
    if let Some(name) = target.file_name().map(|n| n.to_string_lossy().into_owned()) {
        // A long name's temporaries hold only its start.
        remove_stale_matching(directory_of(target), |tail| {
            !tail.is_empty() && name.starts_with(tail)
        });
    }
}

/// Removes every temporary in `dir` that a process no longer running left behind (a run
/// killed while it wrote a checkpoint there).
pub fn remove_stale_in(dir: &Path) {
    remove_stale_matching(dir, |_| true);
}

/// Removes the temporaries in `dir` of dead processes whose target's name passes `matches`.
fn remove_stale_matching(dir: &Path, matches: impl Fn(&str) -> bool) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        // PREFIX, then PID-N.NAME
        let Some((pid, rest)) = file.strip_prefix(PREFIX).and_then(|r| r.split_once('-')) else {
            continue;
        };
        let ours = rest
            .split_once('.')
            .is_some_and(|(n, name)| n.parse::<u64>().is_ok() && matches(name));
        if ours && pid.parse::<u32>().is_ok_and(|pid| !running(pid)) {
            let path = entry.path();
            // Twice: a child of the dead process may still have written into it meanwhile.
            let _ = fs::remove_dir_all(&path)
                .or_else(|_| fs::remove_dir_all(&path))
                .or_else(|_| fs::remove_file(&path));
        }
    }
}

/// Whether process `pid` runs on this machine (Linux: `/proc/PID`; elsewhere, assume so).
pub fn running(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    if Path::new("/proc/self").exists() {
        // A zombie has ended: only its exit status waits for a parent to read it (a rank whose
        // `mpirun` was gone when it died, until init reaps it).
        proc_stat(pid).is_some_and(|fields| !matches!(fields[0].as_str(), "Z" | "X"))
    } else {
        true
    }
}

/// The fields of `/proc/PID/stat` after the command's name (Linux), from the state on: `[0]`
/// the state, `[1]` the parent's pid, `[19]` the start time in clock ticks since boot. `None`
/// where there is no such process, or no `/proc`. The name, in parentheses, may hold spaces
/// and parentheses: the fields count from its last `)`.
pub fn proc_stat(pid: u32) -> Option<Vec<String>> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<String> = after.split_whitespace().map(str::to_string).collect();
    (!fields.is_empty()).then_some(fields)
}
/// Gives `file` the permissions of the `target` it replaces, or, for a new one, those of a
/// file a user creates (0644): writers' own scratch files are often 0600.
fn keep_permissions(file: &Path, target: &Path) -> Result<()> {
    let permissions = match fs::metadata(target) {
        Ok(meta) => meta.permissions(),
        #[cfg(unix)]
        Err(_) => std::os::unix::fs::PermissionsExt::from_mode(0o644),
        #[cfg(not(unix))]
        Err(_) => return Ok(()),
    };
    fs::set_permissions(file, permissions).map_err(|e| io(file, e))
}

pub(super) fn sync(path: &Path) -> Result<()> {
    fs::File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| io(path, e))
}

fn io(path: &Path, source: std::io::Error) -> Error {
    Error::io(path, source)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::entries;

    #[test]
    fn a_zombie_is_not_running() {
        // A child that has exited but was not waited for: its pid stays in /proc as a zombie,
        // as a killed rank does until init reaps it.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while proc_stat(pid).is_none_or(|fields| fields[0] != "Z") {
            assert!(
                std::time::Instant::now() < deadline,
                "the child never exited"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!running(pid), "a zombie holds nothing");
        child.wait().unwrap();
        assert!(!running(pid));
        assert!(running(std::process::id()));
    }

    #[test]
    fn a_failed_write_keeps_the_old_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.csv");
        fs::write(&path, b"old").unwrap();
        let err = write_atomic(&path, |tmp| {
            fs::write(tmp, b"half").unwrap();
            Err(Error::io(tmp, std::io::Error::other("the writer failed")))
        })
        .unwrap_err();
        assert!(err.to_string().contains("the writer failed"), "{err}");
        assert_eq!(fs::read(&path).unwrap(), b"old");
        assert_eq!(entries(dir.path()), ["out.csv"]);
    }

    #[test]
    fn remove_temporaries_removes_the_writes_in_flight() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.st");
        let seen = write_atomic(&path, |tmp| {
            fs::write(tmp, b"partial").unwrap();
            assert!(tmp.exists());
            // As a signal's thread would, while the write is in flight.
            remove_temporaries();
            Ok(tmp.exists()).and_then(|exists| {
                if exists {
                    Ok(())
                } else {
                    Err(Error::io(tmp, std::io::Error::other("gone")))
                }
            })
        });
        assert!(seen.is_err(), "the temporary was removed under the writer");
        assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));
    }

    #[test]
    fn a_directory_is_written_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("step-1");
        let failed = write_atomic_dir(&target, |tmp| {
            fs::write(tmp.join("a"), b"1").unwrap();
            Err(Error::io(tmp, std::io::Error::other("stopped half way")))
        });
        assert!(failed.is_err());
        assert!(entries(dir.path()).is_empty());
        write_atomic_dir(&target, |tmp| {
            fs::write(tmp.join("a"), b"1").map_err(|e| io(tmp, e))
        })
        .unwrap();
        assert_eq!(entries(&target), ["a"]);
        assert!(
            write_atomic_dir(&target, |_| Ok(())).is_err(),
            "never over an existing one"
        );
    }

    /// A signal's removal of the temporaries, come while a directory is written: the
    /// writer, which goes on until the process exits, made the directory again and finished
    /// it, and the rename published a checkpoint missing the files removed (a job stopped by
    /// SIGTERM kept a `step-N` without `state.json`). Now a write a signal abandoned is never
    /// renamed to its target.
    #[test]
    fn a_directory_whose_write_a_signal_abandoned_is_never_published() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("step-8");
        let wrote = write_atomic_dir(&target, |tmp| {
            fs::write(tmp.join("model.bpk"), b"x").map_err(|e| io(tmp, e))?;
            remove_temporaries();
            fs::create_dir_all(tmp).map_err(|e| io(tmp, e))?;
            fs::write(tmp.join("state.json"), b"{}").map_err(|e| io(tmp, e))
        });
        let err = wrote.unwrap_err().to_string();
        assert!(err.contains("a signal abandoned the write"), "{err}");
        assert!(!target.exists(), "{:?}", entries(&target));
        // A write no signal touched is published whole.
        write_atomic_dir(&target, |tmp| {
            fs::write(tmp.join("state.json"), b"{}").map_err(|e| io(tmp, e))
        })
        .unwrap();
        assert_eq!(entries(&target), ["state.json"]);
    }
}
