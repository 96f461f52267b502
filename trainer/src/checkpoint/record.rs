//! What a checkpoint is on disk: its position (`state.json`), its files, and the checks that
//! it is whole and unchanged. Below the directory's scan and the writing, which both use it.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use burn::store::{BurnpackStore, ModuleSnapshot};
use ember::{Block, Error, Optimizer, Result};
use serde::{Deserialize, Serialize};

use super::trace_log;
use crate::trace::Trace;

/// Where a run stands: what a checkpoint's `state.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Position {
    /// The epoch to go on with, from 0.
    pub epoch: usize,
    /// The first batch of that epoch not yet trained on.
    pub next_batch: usize,
    /// Training steps taken since the run began.
    pub steps: u64,
    /// The seed of the per-step random stream, if the run has one.
    pub seed: Option<u64>,
    /// The caller's description of the run ([`Checkpointing::describe`]).
    pub description: BTreeMap<String, String>,
    /// The CRC-32 of each file of the checkpoint, verified on resume: the other files', and
    /// `state.json`'s own over its text without it (none in a checkpoint written before ember
    /// kept them).
    #[serde(default)]
    pub checksums: BTreeMap<String, u32>,
    /// The training metrics' sums over the epoch's batches so far, by metric name
    /// ([`crate::metric::Metric::state`]), where the checkpoint is in the middle of an epoch:
    /// a resume counts the epoch whole. None in a checkpoint written before ember kept them,
    /// nor for a metric that cannot say.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: BTreeMap<String, Vec<f64>>,
    /// How many bytes at the start of `trace.jsonl` are this checkpoint's trace: the file is
    /// the run's log, which later checkpoints append to ([`super::TraceLog`]). None in a
    /// checkpoint written before the logs, whose trace is the whole file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_bytes: Option<u64>,
    /// The state the network carries into the next batch, where the run carries one
    /// ([`crate::fit::Fit::carry`]) and the checkpoint is in the middle of an epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carried: Option<SavedState>,
}

impl Position {
    /// `state.json`'s text for this position.
    ///
    /// # Errors
    /// [`Error::Io`] where it cannot be serialized.
    pub(super) fn state_text(&self) -> Result<String> {
        serde_json::to_string_pretty(self).map_err(|e| Error::io(STATE, std::io::Error::other(e)))
    }
}

/// A carried state in a checkpoint's `state.json`: f32 values, which JSON holds exactly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedState {
    /// The examples of the batch that made it.
    pub examples: usize,
    /// Its tensors, in order.
    pub tensors: Vec<SavedTensor>,
}

/// One tensor of a [`SavedState`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedTensor {
    /// Its shape.
    pub shape: Vec<usize>,
    /// Its values, row-major.
    pub values: Vec<f32>,
}

/// A complete checkpoint found on disk.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    /// Its directory.
    pub dir: PathBuf,
    /// Where the run stood.
    pub position: Position,
}

pub(super) const MODEL: &str = "model.bpk";
pub(super) const OPTIMIZER: &str = "optimizer.bpk";
pub(super) const TRACE: &str = "trace.jsonl";
pub(super) const STATE: &str = "state.json";
/// Every file of a checkpoint, `state.json` first (a removal cut short leaves no sound-looking
/// checkpoint with files missing).
pub(super) const FILES: [&str; 4] = [STATE, MODEL, OPTIMIZER, TRACE];
pub(super) const PREFIX: &str = "step-";
pub(super) const LOCK: &str = "lock";

impl Checkpoint {
    /// Every file is there, unchanged since it was written (where the checkpoint recorded
    /// checksums), and its position is where its trace ends: `state.json`, which holds the
    /// checksums, is checked against the trace, so that one edited into other valid JSON is
    /// found here, where a resume falls back to an earlier checkpoint, not after it began.
    ///
    /// # Errors
    /// [`Error::Io`] naming a missing file; [`Error::ParameterFile`] naming a changed network or
    /// optimizer state, [`Error::Io`] a changed trace;
    /// [`Error::InvalidValue`] for a position that is not where the trace ends.
    pub fn verify(&self) -> Result<()> {
        self.verify_checksums()?;
        // The files as state: a file another run wrote, with its checksum recomputed, is
        // found here too.
        super::states::check_files(&self.dir.join(MODEL), &self.dir.join(OPTIMIZER))?;
        self.check_position(&self.trace()?)
    }

    /// The trace so far, as the checkpoint holds it.
    ///
    /// # Errors
    /// [`Error::Io`] naming `trace.jsonl`, for a file that cannot be read, is shorter than the
    /// checkpoint's trace, or holds a line that is not a record.
    pub fn trace(&self) -> Result<Trace> {
        let path = self.dir.join(TRACE);
        Trace::from_jsonl(&trace_log::read(&path, self.position.trace_bytes)?, &path)
    }

    /// The files whose checksum the checkpoint does not record: a checkpoint written before
    /// ember recorded them (2026-11-25), or a `state.json` edited to drop them. Their
    /// contents cannot be verified; [`Checkpoint::verify`] takes them as they are.
    pub fn unverified(&self) -> Vec<&'static str> {
        [MODEL, OPTIMIZER, TRACE]
            .into_iter()
            .filter(|file| !self.position.checksums.contains_key(*file))
            .collect()
    }

    fn verify_checksums(&self) -> Result<()> {
        // state.json's own checksum, where it records one: over its text without it.
        if let Some(&recorded) = self.position.checksums.get(STATE) {
            let mut without = self.position.clone();
            without.checksums.remove(STATE);
            let found = crc32fast::hash(without.state_text()?.as_bytes());
            if found != recorded {
                let message = format!(
                    "its checksum is {found:08x}, and it recorded {recorded:08x}: the file \
                     changed after it was written"
                );
                return Err(Error::io(
                    self.dir.join(STATE),
                    std::io::Error::new(std::io::ErrorKind::InvalidData, message),
                ));
            }
        }
        for file in [MODEL, OPTIMIZER, TRACE] {
            let path = self.dir.join(file);
            let found = match file {
                TRACE => crc32fast::hash(&trace_log::read(&path, self.position.trace_bytes)?),
                _ => checksum(&path)?,
            };
            match self.position.checksums.get(file) {
                Some(&recorded) if recorded != found => {
                    let message = format!(
                        "its checksum is {found:08x}, and the checkpoint recorded \
                         {recorded:08x}: the file changed after it was written"
                    );
                    // The trace is no parameter file (it was called one, hostile pass).
                    return Err(match file {
                        TRACE => Error::io(
                            &path,
                            std::io::Error::new(std::io::ErrorKind::InvalidData, message),
                        ),
                        _ => Error::ParameterFile { path, message },
                    });
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The checkpoint in `dir`, one `step-N` directory (to go back to an earlier one than the
    /// newest).
    ///
    /// # Errors
    /// [`Error::Io`] when its `state.json` is missing or unreadable.
    pub fn open(dir: &Path) -> Result<Checkpoint> {
        let path = dir.join(STATE);
        let text = fs::read_to_string(&path).map_err(|source| Error::io(&path, source))?;
        let position = serde_json::from_str(&text).map_err(|e| {
            Error::io(
                &path,
                std::io::Error::new(std::io::ErrorKind::InvalidData, e),
            )
        })?;
        Ok(Checkpoint {
            dir: dir.to_path_buf(),
            position,
        })
    }

    /// What the run that wrote it said it was.
    pub fn description(&self) -> &BTreeMap<String, String> {
        &self.position.description
    }

    /// Loads the parameters into `net` (built and resolved as the run's was), the optimizer's
    /// state into `trainer`, and returns them with the trace so far.
    ///
    /// # Errors
    /// [`Error::ParameterFile`] or [`Error::Io`] naming the file that does not fit.
    pub fn restore<B: Block>(&self, net: B, trainer: Optimizer) -> Result<(B, Optimizer, Trace)> {
        self.verify()?;
        let model = self.dir.join(MODEL);
        let mut store = BurnpackStore::from_file(&model).auto_extension(false);
        // As `load_parameters` does: no update held for a thread outlives the restore.
        ember::settle_running_statistics(&net);
        super::states::check_network(&net, &model)?;
        let mut net = net;
        let result = net
            .load_from(&mut store)
            .map_err(|e| Error::ParameterFile {
                path: model.clone(),
                message: e.to_string(),
            })?;
        if !result.errors.is_empty() || !result.missing.is_empty() || !result.unused.is_empty() {
            return Err(Error::ParameterMismatch {
                path: model,
                details: result.to_string(),
            });
        }
        let trainer = trainer.load_state(&self.dir.join(OPTIMIZER))?;
        let trace = self.trace()?;
        self.check_position(&trace)?;
        Ok((net, trainer, trace))
    }

    /// The position must be where the trace ends: as many steps as batches recorded, and the
    /// next batch right after the last one recorded (in its epoch, or at the start of a later
    /// one).
    fn check_position(&self, trace: &Trace) -> Result<()> {
        let p = &self.position;
        let fits = match trace.batches.last() {
            None => p.steps == 0 && p.next_batch == 0,
            Some(last) => {
                p.steps == trace.batches.len() as u64
                    && ((p.epoch == last.epoch && p.next_batch == last.batch + 1)
                        || (p.epoch == last.epoch + 1 && p.next_batch == 0))
            }
        };
        if fits {
            return Ok(());
        }
        Err(Error::InvalidValue {
            name: "checkpoint position",
            value: format!(
                "epoch {}, next batch {}, {} steps in {}",
                p.epoch,
                p.next_batch,
                p.steps,
                self.dir.join(STATE).display()
            ),
            reason: format!(
                "its trace records {} batches{}; the file was edited or is damaged",
                trace.batches.len(),
                trace.batches.last().map_or(String::new(), |b| format!(
                    ", the last batch {} of epoch {}",
                    b.batch + 1,
                    b.epoch + 1
                ))
            ),
        })
    }
}

/// The CRC-32 of a file's bytes.
pub(super) fn checksum(path: &Path) -> Result<u32> {
    let bytes = fs::read(path).map_err(|source| Error::io(path, source))?;
    Ok(crc32fast::hash(&bytes))
}
