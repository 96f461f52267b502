//! Per-batch and per-epoch records of a run, and their CSV / JSON Lines files.
//!
//! Times are seconds since the run started (after the warm-up batch).

use std::path::{Path, PathBuf};

use ember::io::write_atomic_bytes;
use serde::Serialize;

mod jsonl;
mod records;
pub use jsonl::Jsonl;
pub use records::{BatchRecord, EpochRecord, Trace, device_count};

impl Trace {
    /// Writes the trace. `*.jsonl` (in any case: `.JSONL` was written as CSV) gives one JSON
    /// object per line, each with a `kind` of `batch` or `epoch`; any other name gives CSV:
    /// batches in the file itself, epochs beside it in `<stem>.epochs.csv`. Files are written
    /// to a temporary name and renamed.
    ///
    /// # Errors
    /// [`ember::Error::Output`] for a path that cannot take a file, and I/O errors naming the
    /// path. Each file keeps its old content if writing it fails.
    pub fn write(&self, path: &Path) -> ember::Result<Vec<PathBuf>> {
        if path
            .extension()
            .is_some_and(|ext| ext.eq_ignore_ascii_case("jsonl"))
        {
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
        if path
            .extension()
            .is_some_and(|ext| ext.eq_ignore_ascii_case("jsonl"))
        {
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
    use std::collections::BTreeMap;

    use super::*;
    use crate::policy::PolicyKind;

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
            recording_mb: None,
            lr_scale: Some(1.0),
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
