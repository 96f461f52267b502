//! Checkpoints: everything a run needs to go on as if it had never stopped.
//!
//! A checkpoint is a directory `step-NNNNNNNNNN` (the number of training steps taken) inside
//! the run's checkpoint directory, written atomically through [`ember::io`]: it appears
//! complete or not at all, so a run killed at any moment, SIGKILL included, leaves the last
//! complete checkpoint to resume from. It holds:
//!
//! | file            | what                                                              |
//! |-----------------|-------------------------------------------------------------------|
//! | `model.bpk`     | the parameters and running statistics, with their ids (burnpack)  |
//! | `optimizer.bpk` | the optimizer's state, keyed by those ids (burn's `OptimizerRecord`) |
//! | `trace.jsonl`   | every batch and epoch record so far: its first `trace_bytes` bytes, a link to the run's log, which later checkpoints append to ([`TraceLog`]) |
//! | `state.json`    | the position (epoch, next batch, steps), the seed, the run's description |
//!
//! The data order needs no file: `DataLoader` shuffles each epoch from its seed and the
//! epoch's number, and the synthetic batches are numbered. The random stream of Dropout is
//! re-seeded before every step from the run's seed and the step's number
//! ([`Fit::seed`](crate::fit::Fit::seed)), so the step after a resume draws what it would
//! have drawn. On flex, a resumed run therefore ends with the same bits as one never stopped.
//!
//! Writing a checkpoint is a barrier: the batches in flight finish first.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use burn::store::{BurnpackStore, ModuleSnapshot};
use ember::{Block, Error, Optimizer, Result};

use crate::trace::{BatchRecord, Trace};

mod lock;
mod record;
mod resume_from;
mod scan;
mod states;
mod trace_log;
mod verified;

pub use record::{Checkpoint, Position, SavedState, SavedTensor};
use record::{FILES, LOCK, MODEL, OPTIMIZER, PREFIX, STATE, TRACE, checksum};
pub use resume_from::{ResumeFrom, resume_from};
pub use scan::{Entry, classify, scan, set_aside, step_of};
pub use trace_log::TraceLog;

/// Where and how often a run writes checkpoints.
#[derive(Debug, Clone)]
pub struct Checkpointing {
    /// The run's checkpoint directory; created if missing.
    pub dir: PathBuf,
    /// A checkpoint after every this many training steps (batches); `None`: at the end of
    /// every epoch.
    pub every: Option<usize>,
    /// How many checkpoints to keep; older ones are removed once a newer one is complete.
    pub keep: usize,
    /// What the caller says the run is (its model, data, flags), stored in every checkpoint
    /// so that a resume can check it continues the same run.
    pub description: BTreeMap<String, String>,
}

impl Checkpointing {
    /// A checkpoint into `dir` at the end of every epoch, keeping the last two.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            every: None,
            keep: 2,
            description: BTreeMap::new(),
        }
    }

    /// A checkpoint after every `steps` training steps.
    pub fn every(mut self, steps: usize) -> Self {
        self.every = Some(steps);
        self
    }

    /// Stores `description` in every checkpoint (see [`Checkpoint::description`]).
    pub fn describe(mut self, description: BTreeMap<String, String>) -> Self {
        self.description = description;
        self
    }

    /// Checks, making nothing, that the directory takes files (or can be made where it does
    /// not exist) and that no checkpoint this run will write has its name taken: by something
    /// not ember's, by a checkpoint of another run (a run that does not `resume` needs a
    /// directory without checkpoints), or by a checkpoint newer than the one `resume` goes on
    /// from. [`Checkpointing::prepare`] checks it again, so a caller that checks every input
    /// and output before it makes any calls this first.
    ///
    /// # Errors
    /// [`Error::Output`] naming the directory and what is wrong with it;
    /// [`Error::InvalidValue`] naming the `step-N` in the way, or an interval of 0.
    pub fn check(&self, resume: Option<&Checkpoint>) -> Result<()> {
        if self.every == Some(0) {
            return Err(Error::InvalidValue {
                name: "checkpoint interval",
                value: "0".to_string(),
                reason: "checkpoints come after at least one step".to_string(),
            });
        }
        ember::io::check_dir_unmade(&self.dir)?;
        if !self.dir.exists() {
            return Ok(());
        }
        // Another run writing there is refused before anything is loaded.
        self.check_lock()?;
        let after = self.resumed_step(resume);
        for (steps, entry) in scan(&self.dir)? {
            let why = match &entry {
                Entry::Foreign { what, .. } => format!(
                    "it is {what}, under a name this run's checkpoints take; move it away, or \
                     give the run another checkpoint directory"
                ),
                _ if after.is_some_and(|a| steps <= a) => continue,
                // A damaged one newer than the checkpoint resumed: set aside by `prepare`.
                Entry::Damaged { .. } if after.is_some() => continue,
                Entry::Sound(_) | Entry::Damaged { .. } => match after {
                    None => "the directory holds checkpoints of another run: go on with that \
                             run with --resume, or give this one an empty directory"
                        .to_string(),
                    Some(a) => format!(
                        "the run goes on from step {a}, and its checkpoints would take the \
                         names of these newer ones; give it another checkpoint directory \
                         (--checkpoint), or move them away"
                    ),
                },
            };
            return Err(Error::InvalidValue {
                name: "checkpoint",
                value: entry.path().display().to_string(),
                reason: why,
            });
        }
        Ok(())
    }

    /// What [`Checkpointing::check`] checks, then creates the directory if needed, takes its
    /// lock, removes what killed runs left half-written there, and sets aside the damaged
    /// checkpoints newer than the one `resume` goes on from (as `damaged-step-N`; an empty one,
    /// which holds nothing, is removed). Returns what it did to those, one line each.
    ///
    /// # Errors
    /// As [`Checkpointing::check`]; [`Error::Output`] where the directory cannot be made,
    /// another run holds it, or a damaged checkpoint cannot be moved aside.
    pub fn prepare(&self, resume: Option<&Checkpoint>) -> Result<Vec<String>> {
        self.check(resume)?;
        ember::io::check_dir(&self.dir)?;
        self.lock()?;
        ember::io::remove_stale_in(&self.dir);
        let mut notes = Vec::new();
        let Some(after) = self.resumed_step(resume) else {
            return Ok(notes);
        };
        for (steps, entry) in scan(&self.dir)? {
            let Entry::Damaged { path, .. } = entry else {
                continue;
            };
            if steps <= after {
                continue;
            }
            if fs::remove_dir(&path).is_ok() {
                notes.push(format!("{} was empty: removed", path.display()));
                continue;
            }
            let aside = set_aside(&path, "damaged").ok_or_else(|| Error::Output {
                path: path.clone(),
                what: "a damaged checkpoint, which could not be moved aside".to_string(),
            })?;
            notes.push(format!(
                "the damaged {} is kept as {}",
                path.display(),
                aside.display()
            ));
        }
        Ok(notes)
    }

    /// The step of the checkpoint `resume` goes on from, where it is in this directory (a
    /// resumed run writes its steps after it there).
    fn resumed_step(&self, resume: Option<&Checkpoint>) -> Option<u64> {
        let here = self.dir.canonicalize().ok();
        resume
            .filter(|c| c.dir.parent().and_then(|p| p.canonicalize().ok()) == here)
            .map(|c| c.position.steps)
    }
}

impl Checkpoint {
    /// The newest sound checkpoint in `dir` (every file there, unchanged), or `None` when
    /// there is none yet; [`scan`] says what was passed over and why.
    ///
    /// # Errors
    /// [`Error::Io`] when `dir` cannot be read.
    pub fn latest(dir: &Path) -> Result<Option<Checkpoint>> {
        Ok(scan(dir)?
            .into_iter()
            .rev()
            .find_map(|(_, entry)| match entry {
                Entry::Sound(checkpoint) => Some(checkpoint),
                _ => None,
            }))
    }
}

/// Writes a checkpoint of `net`, `trainer` and the trace (the run's records, and the current
/// epoch's so far, through the run's `log`) at `position` into `settings.dir`, then removes
/// the ones beyond `settings.keep`. Returns its directory.
pub(crate) fn write<B: Block + 'static>(
    settings: &Checkpointing,
    position: &Position,
    (net, trainer): (&B, &Optimizer),
    log: &mut TraceLog,
    trace: (&Trace, &[BatchRecord]),
) -> Result<PathBuf> {
    let dir = settings.dir.join(format!("{PREFIX}{:010}", position.steps));
    if fs::symlink_metadata(&dir).is_ok() {
        return match classify(&dir) {
            // The same step again (a stop right after a periodic checkpoint): already written.
            Entry::Sound(c) if c.position.steps == position.steps => Ok(dir),
            _ => Err(Error::InvalidValue {
                name: "checkpoint",
                value: dir.display().to_string(),
                reason: "something else took its name while the run went on; the checkpoint \
                         was not written"
                    .to_string(),
            }),
        };
    }
    ember::io::write_atomic_dir(&dir, |tmp| {
        // The reads of the network and the optimizer's state are the frontend's own: on a
        // remote device they get its bound, which no engine's watcher gives them here.
        let (net, trainer, into) = (net.clone(), trainer.clone(), tmp.to_path_buf());
        ember::device::remote::bounded(
            &net.devices(),
            "reading the network back for a checkpoint",
            move || write_model(&net, &trainer, &into),
        )?;
        let (bytes, crc) = log.put(&settings.dir, &tmp.join(TRACE), trace)?;
        let mut position = position.clone();
        position.trace_bytes = Some(bytes);
        for file in [MODEL, OPTIMIZER] {
            position
                .checksums
                .insert(file.to_string(), checksum(&tmp.join(file))?);
        }
        (position.checksums).insert(TRACE.to_string(), crc);
        // state.json's own, over its text without it: a flipped bit in the run's flags was
        // refused as another run's, where a damaged checkpoint is passed over (hostile pass).
        let state_crc = crc32fast::hash(position.state_text()?.as_bytes());
        (position.checksums).insert(STATE.to_string(), state_crc);
        let state = position.state_text()?;
        ember::io::write_atomic_bytes(&tmp.join(STATE), state.as_bytes())
    })?;
    verified::remember(&dir, &FILES);
    // A `step-N` left empty, by a write that a second signal cut short, holds nothing: it goes
    // (`remove_dir` takes an empty directory only).
    for (_, entry) in scan(&settings.dir)? {
        if let Entry::Damaged { path, .. } = entry {
            let _ = fs::remove_dir(path);
        }
    }
    let steps = steps_in(&settings.dir)?;
    for old in steps
        .iter()
        .take(steps.len().saturating_sub(settings.keep.max(1)))
    {
        remove(old);
    }
    Ok(dir)
}

/// Writes `net` and `trainer`'s state into the checkpoint's directory `tmp` while it is made.
fn write_model<B: Block>(net: &B, trainer: &Optimizer, tmp: &Path) -> Result<()> {
    // Never a checkpoint to resume from that trains to NaN: a run that diverged stops here,
    // and its last checkpoint stays the last one whose parameters were finite.
    if let Some(e) = ember::io::safetensors::non_finite(net) {
        return Err(e);
    }
    let model = tmp.join(MODEL);
    // The inference copy folds pending running-statistic updates in; ids stay the same.
    let mut store = BurnpackStore::from_file(&model).auto_extension(false);
    net.valid()
        .save_into(&mut store)
        .map_err(|e| Error::ParameterFile {
            path: model.clone(),
            message: e.to_string(),
        })?;
    trainer.save_state(&tmp.join(OPTIMIZER))
}

/// Removes a checkpoint that rotation leaves behind: its own files, then its directory where
/// that leaves it empty. Anything else in it (a user's export, a copy) stays, in its
/// directory renamed `kept-step-N`, out of the names checkpoints take: rotation never deletes
/// what it did not write. `state.json` goes first, so that a removal cut short leaves no
/// sound-looking checkpoint with files missing. One that holds only its own files goes as one
/// step: renamed to a temporary first, which the next run removes if this removal is cut
/// short.
fn remove(old: &Path) {
    if ember::io::remove_dir_holding(old, &FILES) {
        return;
    }
    for file in FILES {
        let _ = fs::remove_file(old.join(file));
    }
    if fs::remove_dir(old).is_err() {
        set_aside(old, "kept");
    }
}

/// The sound checkpoints in `dir`, oldest first: the ones pruning may remove (a damaged or
/// foreign `step-N` is left as it is).
fn steps_in(dir: &Path) -> Result<Vec<PathBuf>> {
    Ok(scan(dir)?
        .into_iter()
        .filter_map(|(_, entry)| match entry {
            Entry::Sound(c) => Some(c.dir),
            _ => None,
        })
        .collect())
}
