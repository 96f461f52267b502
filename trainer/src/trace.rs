//! Per-batch and per-epoch records of a run, and their CSV / JSON Lines files.
//!
//! Times are seconds since the run started (after the warm-up batch).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ember::io::write_atomic_bytes;
use serde::{Deserialize, Serialize};

use crate::policy::PolicyKind;

mod jsonl;
pub use jsonl::Jsonl;

/// One batch, from the frontend's issue to the policy's observation of its completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchRecord {
    /// The policy the batch ran under (its name in the files).
    pub policy: PolicyKind,
    /// Epoch, from 0.
    pub epoch: usize,
    /// Batch within the epoch, from 0.
    pub batch: usize,
    /// When the frontend started on this batch (before its data was prepared).
    pub issue_start: f64,
    /// When the frontend handed it to the backend (before the backend could start it).
    pub issue_end: f64,
    /// When the backend finished it (the device readback of its loss completed).
    pub done: f64,
    /// When the loop (the policy, or the epoch's `waitall`) observed that completion.
    pub observed: f64,
    /// Its mean loss.
    pub loss: f32,
    /// Process RSS right after it was issued, in bytes.
    pub rss: u64,
    /// Device pool bytes in use at its completion (absent on CPU backends).
    pub pool_in_use: Option<u64>,
    /// Device pool bytes reserved at its completion (absent on CPU backends).
    pub pool_reserved: Option<u64>,
    /// Batches issued and not yet finished by the device, this one included, right after it
    /// was issued.
    pub depth: usize,
    /// Seconds the frontend waited for this batch's data.
    pub data_wait: f64,
    /// When each device finished its share, in device order, for a data-parallel run
    /// (`done` is the last of them); empty on one device. CSV cells join them with `;`.
    #[serde(default)]
    pub device_done: Vec<f64>,
    /// The learning rate of its step (absent in traces written before ember recorded it).
    #[serde(default)]
    pub lr: Option<f64>,
    /// When the policy's call before this batch (`SyncPolicy::before_issue`) began and
    /// returned, where it waited for at least one batch; absent where it waited for none (and
    /// in traces written before ember recorded it).
    #[serde(default)]
    pub wait_start: Option<f64>,
    /// See `wait_start`.
    #[serde(default)]
    pub wait_end: Option<f64>,
    /// The window this batch started by (batch t after batch t−K finished), where the policy
    /// keeps one (`SyncPolicy::window`, read before its call: `auto` sizes it as it trains).
    #[serde(default)]
    pub window: Option<usize>,
    /// In a job of ranks ([`crate::fit::Fit::distributed`]), on the batch that ends an update:
    /// when this rank's all-reduce of the update's gradients began and returned (the wait for
    /// the other ranks included); absent elsewhere.
    #[serde(default)]
    pub allreduce_start: Option<f64>,
    /// See `allreduce_start`.
    #[serde(default)]
    pub allreduce_end: Option<f64>,
}

/// How many devices the batches were split across: the longest `device_done` (0 for a run on
/// one device).
pub fn device_count(batches: &[BatchRecord]) -> usize {
    batches
        .iter()
        .map(|b| b.device_done.len())
        .max()
        .unwrap_or(0)
}

/// One epoch, as the book reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochRecord {
    /// The policy the epoch ran under (its name in the files).
    pub policy: PolicyKind,
    /// Epoch, from 0.
    pub epoch: usize,
    /// Batches in the epoch.
    pub batches: usize,
    /// Time per epoch: first issue to all complete, in seconds. In a run resumed inside the
    /// epoch, the batches before its checkpoint count from the first one's issue to the last
    /// one's completion; the time between the stop and the resume does not.
    pub time: f64,
    /// Frontend issue time: first issue to last issue, in seconds (a resumed epoch's as
    /// [`EpochRecord::time`]).
    pub issue_time: f64,
    /// RSS before the epoch, in bytes: the baseline of its memory growth.
    pub rss_before: u64,
    /// RSS after the epoch's `waitall` minus RSS before it, in MB (the book's "increased
    /// memory").
    pub increased_mb: f64,
    /// Highest RSS seen during the epoch minus RSS before it, in MB.
    pub peak_growth_mb: f64,
    /// Highest device pool in use during the epoch, in MB (absent on CPU backends).
    pub peak_pool_mb: Option<f64>,
    /// Mean of the batch losses.
    pub mean_loss: f64,
    /// Deepest in-flight queue seen.
    pub max_depth: usize,
    /// For a data-parallel run, per device: the mean seconds from a batch's issue to that
    /// device finishing its share (empty on one device).
    #[serde(default)]
    pub device_time: Vec<f64>,
    /// In a job of ranks ([`crate::fit::Fit::distributed`]): this rank's seconds in the
    /// gradients' all-reduces, waits for the other ranks included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allreduce_time: Option<f64>,
    /// In a job: the MB of gradients this rank sent to its all-reduces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allreduce_mb: Option<f64>,
    /// The epoch's metrics (`train_acc`, `test_acc`, `valid_loss`…), one column each.
    #[serde(flatten)]
    pub metrics: BTreeMap<String, f64>,
}

impl EpochRecord {
    /// A record of zeros under the barrier, for its column names (those of its metrics
    /// aside, which only an epoch that ended has).
    fn columns() -> EpochRecord {
        EpochRecord {
            policy: PolicyKind::Window(1),
            epoch: 0,
            batches: 0,
            time: 0.0,
            issue_time: 0.0,
            rss_before: 0,
            increased_mb: 0.0,
            peak_growth_mb: 0.0,
            peak_pool_mb: None,
            mean_loss: 0.0,
            max_depth: 0,
            device_time: Vec::new(),
            allreduce_time: None,
            allreduce_mb: None,
            metrics: BTreeMap::new(),
        }
    }
}

/// Everything a run recorded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    /// Every batch, in issue order.
    pub batches: Vec<BatchRecord>,
    /// Every epoch.
    pub epochs: Vec<EpochRecord>,
}

impl Trace {
    /// The policy the run was under, as its records say (`None` for an empty trace).
    pub fn policy(&self) -> Option<&PolicyKind> {
        self.batches
            .first()
            .map(|b| &b.policy)
            .or_else(|| self.epochs.first().map(|e| &e.policy))
    }

    /// Appends another run's records (for example another policy's).
    pub fn extend(&mut self, other: Trace) {
        self.batches.extend(other.batches);
        self.epochs.extend(other.epochs);
    }

    /// Writes the trace. `*.jsonl` gives one JSON object per line, each with a `kind` of
    /// `batch` or `epoch`; any other name gives CSV: batches in the file itself, epochs beside
    /// it in `<stem>.epochs.csv`. Files are written to a temporary name and renamed.
    ///
    /// # Errors
    /// [`ember::Error::Output`] for a path that cannot take a file, and I/O errors naming the
    /// path. Each file keeps its old content if writing it fails.
    pub fn write(&self, path: &Path) -> ember::Result<Vec<PathBuf>> {
        if path.extension().is_some_and(|ext| ext == "jsonl") {
            write_atomic_bytes(path, &Jsonl::default().of(self, &[]))?;
            Ok(vec![path.to_path_buf()])
        } else {
            let epochs = epochs_path(path);
            write_atomic_bytes(path, csv(&self.batches).as_bytes())?;
            // A run stopped in its first epoch has no epoch row: the header alone says what
            // the file is, where an empty file reads as no CSV at all (pandas' EmptyDataError).
            let rows = match &self.epochs[..] {
                [] => {
                    csv(&[EpochRecord::columns()])
                        .lines()
                        .next()
                        .unwrap_or("")
                        .to_string()
                        + "\n"
                }
                rows => csv(rows),
            };
            write_atomic_bytes(&epochs, rows.as_bytes())?;
            Ok(vec![path.to_path_buf(), epochs])
        }
    }
}

impl Trace {
    /// The files [`Trace::write`] writes for `path`: `path` itself, and for CSV the epochs'
    /// file beside it. For checking them all before a run.
    pub fn paths(path: &Path) -> Vec<PathBuf> {
        if path.extension().is_some_and(|ext| ext == "jsonl") {
            vec![path.to_path_buf()]
        } else {
            vec![path.to_path_buf(), epochs_path(path)]
        }
    }
}

/// `<stem>.epochs.csv` beside a CSV trace.
fn epochs_path(path: &Path) -> PathBuf {
    path.with_file_name(format!(
        "{}.epochs.csv",
        path.file_stem().unwrap_or_default().to_string_lossy()
    ))
}

/// CSV of flat records: the header from the field names, empty cells for absent values.
pub fn csv<T: Serialize>(rows: &[T]) -> String {
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        let serde_json::Value::Object(map) = serde_json::to_value(row).expect("records serialize")
        else {
            continue;
        };
        if i == 0 {
            out.push_str(&map.keys().cloned().collect::<Vec<_>>().join(","));
            out.push('\n');
        }
        let cells: Vec<String> = map
            .values()
            .map(|v| match v {
                serde_json::Value::Null => String::new(),
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Array(items) => items
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(";"),
                other => other.to_string(),
            })
            .collect();
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}

/// Records for unit tests.
#[cfg(test)]
pub(crate) mod examples {
    use super::*;

    /// Batch `batch` of epoch `epoch`, issued at `issue_start` for a millisecond and done 10
    /// ms after it, under the barrier.
    pub fn batch(epoch: usize, batch: usize, issue_start: f64) -> BatchRecord {
        BatchRecord {
            policy: PolicyKind::Window(1),
            epoch,
            batch,
            issue_start,
            issue_end: issue_start + 0.001,
            done: issue_start + 0.010,
            observed: issue_start + 0.010,
            loss: 1.0,
            rss: 1 << 20,
            pool_in_use: None,
            pool_reserved: None,
            depth: 1,
            data_wait: 0.0002,
            device_done: Vec::new(),
            lr: Some(0.1),
            wait_start: None,
            wait_end: None,
            window: Some(1),
            allreduce_start: None,
            allreduce_end: None,
        }
    }

    /// Epoch `epoch` of `batches` batches, under the barrier.
    pub fn epoch(epoch: usize, batches: usize) -> EpochRecord {
        EpochRecord {
            policy: PolicyKind::Window(1),
            epoch,
            batches,
            time: 0.1,
            issue_time: 0.05,
            rss_before: 1 << 20,
            increased_mb: 0.0,
            peak_growth_mb: 0.0,
            peak_pool_mb: None,
            mean_loss: 1.0,
            max_depth: 1,
            device_time: Vec::new(),
            allreduce_time: None,
            allreduce_mb: None,
            metrics: BTreeMap::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run stopped before its first epoch ended wrote an empty `<stem>.epochs.csv`, which
    /// reads as no CSV at all (issue 62): it gets the columns' header.
    #[test]
    fn a_trace_without_an_epoch_writes_the_epochs_header() {
        let dir = tempfile::tempdir().unwrap();
        let trace = Trace {
            batches: vec![examples::batch(0, 0, 0.0)],
            epochs: Vec::new(),
        };
        let written = trace.write(&dir.path().join("m.csv")).unwrap();
        let epochs = std::fs::read_to_string(&written[1]).unwrap();
        assert!(
            epochs.starts_with("policy,epoch,batches,time,") && epochs.lines().count() == 1,
            "{epochs:?}"
        );
    }
}
