//! Where a resume goes on from: a path names one checkpoint (`DIR/step-N`) or a directory of
//! them (`DIR`, its newest sound one), and the run's later checkpoints go on in that directory.

use std::path::{Path, PathBuf};

use ember::{Error, Result};

use super::record::{Checkpoint, STATE};
use super::scan::{Entry, classify, scan, step_of};

/// What [`resume_from`] found.
#[derive(Debug)]
pub struct ResumeFrom {
    /// The checkpoint to go on from; `None` where the directory holds none yet (a run killed
    /// before its first checkpoint starts from the beginning).
    pub checkpoint: Option<Checkpoint>,
    /// The directory the run's checkpoints go on in.
    pub dir: PathBuf,
    /// What was found on the way, one line each, for the user: damaged checkpoints newer than
    /// the one found, passed over (a run that goes on there sets them aside when it starts);
    /// a directory with no checkpoint yet.
    pub notes: Vec<String>,
}

/// The checkpoint `path` names: a `step-N` directory is that checkpoint (`step-13` names
/// `step-0000000013`, as a user reads the step off a line); a directory of checkpoints gives
/// its newest sound one, newer damaged ones passed over, each with its reason noted. Nothing is
/// moved or written.
///
/// # Errors
/// [`Error::InvalidValue`] named `resume` for a path that is no directory, a damaged or
/// foreign checkpoint, or a directory whose checkpoints are all damaged; I/O errors naming
/// what could not be read or moved aside.
pub fn resume_from(path: &Path) -> Result<ResumeFrom> {
    let refuse = |path: &Path, reason: String| Error::InvalidValue {
        name: "resume",
        value: path.display().to_string(),
        reason,
    };
    let padded = unpadded_step(path);
    let path = padded.as_deref().unwrap_or(path);
    if !path.is_dir() {
        return Err(refuse(path, missing(path)));
    }
    let named_step = path
        .file_name()
        .is_some_and(|n| step_of(&n.to_string_lossy()).is_some());
    if named_step || path.join(STATE).exists() {
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => PathBuf::from("."),
        };
        return match classify(path) {
            Entry::Sound(found) => Ok(ResumeFrom {
                checkpoint: Some(found),
                dir,
                notes: Vec::new(),
            }),
            Entry::Damaged { reason, .. } => {
                Err(refuse(path, format!("the checkpoint is damaged: {reason}")))
            }
            Entry::Foreign { what, .. } => {
                Err(refuse(path, format!("it is {what}, not a checkpoint")))
            }
        };
    }
    let entries = scan(path)?;
    let newest = entries
        .iter()
        .rposition(|(_, e)| matches!(e, Entry::Sound(_)));
    let damaged: Vec<(&PathBuf, &String)> = entries[newest.map_or(0, |i| i + 1)..]
        .iter()
        .filter_map(|(_, e)| match e {
            Entry::Damaged { path, reason } => Some((path, reason)),
            _ => None,
        })
        .collect();
    let Some(newest) = newest else {
        if !damaged.is_empty() {
            let all: Vec<String> = damaged
                .iter()
                .map(|(p, why)| format!("{}: {why}", p.display()))
                .collect();
            return Err(refuse(
                path,
                format!(
                    "no checkpoint there can be resumed from:\n{}",
                    all.join("\n")
                ),
            ));
        }
        return Ok(ResumeFrom {
            checkpoint: None,
            dir: path.to_path_buf(),
            notes: vec![format!(
                "no complete checkpoint in {} yet: starting from the beginning",
                path.display()
            )],
        });
    };
    let Entry::Sound(found) = &entries[newest].1 else {
        unreachable!("found as sound")
    };
    // Moved aside only once the run is found sound ([`super::Checkpointing::prepare`]): a run
    // refused after this leaves them where they are.
    let notes = damaged
        .iter()
        .map(|(bad, why)| {
            format!(
                "{} is damaged ({why}): passed over for the one before it, {}",
                bad.display(),
                found.dir.display()
            )
        })
        .collect();
    Ok(ResumeFrom {
        checkpoint: Some(found.clone()),
        dir: path.to_path_buf(),
        notes,
    })
}

/// The checkpoint `step-N` names where `path` is missing and ends in a step written without
/// its leading zeros.
fn unpadded_step(path: &Path) -> Option<PathBuf> {
    if path.exists() {
        return None;
    }
    let step = step_of(&path.file_name()?.to_string_lossy())?;
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    let entries = scan(parent.unwrap_or(Path::new("."))).ok()?;
    let (_, entry) = entries.into_iter().find(|(n, _)| *n == step)?;
    Some(entry.path().to_path_buf())
}

/// Why `path` names nothing to resume from: a `step-N` that is not there says which steps are.
fn missing(path: &Path) -> String {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    let named_step = path
        .file_name()
        .is_some_and(|n| step_of(&n.to_string_lossy()).is_some());
    match parent.map(scan) {
        Some(Ok(entries)) if named_step => {
            let sound: Vec<String> = entries
                .iter()
                .filter(|(_, e)| matches!(e, Entry::Sound(_)))
                .map(|(steps, _)| steps.to_string())
                .collect();
            match sound.is_empty() {
                true => "no such checkpoint, and its directory holds none".to_string(),
                false => format!(
                    "no such checkpoint; its directory holds those of steps {}",
                    sound.join(", ")
                ),
            }
        }
        _ => "no such directory of checkpoints".to_string(),
    }
}
