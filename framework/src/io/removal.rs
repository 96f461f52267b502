//! Removing a directory as one step seen from outside ([`remove_dir_holding`]): checkpoint
//! rotation's way to remove an old checkpoint without ever leaving a part of one.

use std::fs;
use std::path::Path;

use super::atomic::{ScratchGuard, sync};
use super::output::directory_of;
use super::temporary::temporary;

/// Removes the directory `dir` if it holds nothing but files named in `only`, as one step
/// seen from outside: it is renamed to a temporary first, so that a removal cut short (a
/// SIGKILL) leaves a temporary that the next [`super::remove_stale_in`] of its directory
/// removes, never a `dir` with some of its files gone. Returns `false` where `dir` holds
/// anything else (or cannot be read or renamed), touching nothing; and where a file was put
/// into it while it was being removed: then its own files are gone, and the rest is back
/// under its name (the caller sets it aside as any directory holding another's files).
pub fn remove_dir_holding(dir: &Path, only: &[&str]) -> bool {
    let Ok(entries) = fs::read_dir(dir) else {
        return false;
    };
    let mut names = Vec::new();
    for entry in entries {
        let Ok(entry) = entry else { return false };
        let name = entry.file_name();
        let plain = entry.file_type().is_ok_and(|t| t.is_file());
        match name.to_str() {
            Some(name) if plain && only.contains(&name) => names.push(name.to_string()),
            _ => return false,
        }
    }
    let tmp = temporary(dir);
    let guard = ScratchGuard::register(tmp.clone());
    if fs::rename(dir, &tmp).is_err() {
        return false;
    }
    let _ = sync(directory_of(dir));
    // A file put in meanwhile is not ours to remove: `remove_dir` then fails, and the rest goes
    // back under its name.
    for name in &names {
        let _ = fs::remove_file(tmp.join(name));
    }
    let removed = fs::remove_dir(&tmp).is_ok();
    if !removed {
        let _ = fs::rename(&tmp, dir);
    }
    drop(guard);
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::temporary::PREFIX;
    use crate::io::{entries, remove_stale_in};

    #[test]
    fn a_directory_of_known_files_goes_as_one_step_and_one_holding_more_stays() {
        let dir = tempfile::tempdir().unwrap();
        let step = dir.path().join("step-4");
        fs::create_dir(&step).unwrap();
        fs::write(step.join("state.json"), b"{}").unwrap();
        fs::write(step.join("model.bpk"), b"m").unwrap();
        assert!(remove_dir_holding(
            &step,
            &["state.json", "model.bpk", "trace.jsonl"]
        ));
        assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));

        // Something it does not name (a user's file, a directory under a known name) keeps it
        // all where it is.
        fs::create_dir(&step).unwrap();
        fs::write(step.join("state.json"), b"{}").unwrap();
        fs::write(step.join("notes.txt"), b"mine").unwrap();
        assert!(!remove_dir_holding(&step, &["state.json"]));
        assert_eq!(entries(&step), ["notes.txt", "state.json"]);
        fs::remove_file(step.join("notes.txt")).unwrap();
        fs::create_dir(step.join("model.bpk")).unwrap();
        assert!(!remove_dir_holding(&step, &["state.json", "model.bpk"]));
        assert_eq!(entries(&step), ["model.bpk", "state.json"]);
        assert_eq!(entries(dir.path()), ["step-4"]);
    }

    #[test]
    fn a_removal_cut_short_leaves_a_temporary_the_next_run_removes() {
        // What a SIGKILL between the rename and the last removal leaves: the renamed directory,
        // some of its files gone, under a dead process's temporary name. Never `step-4`.
        let dir = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let left = dir.path().join(format!("{PREFIX}{dead}-0.step-4"));
        fs::create_dir(&left).unwrap();
        fs::write(left.join("model.bpk"), b"m").unwrap();
        remove_stale_in(dir.path());
        assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));
    }
}
