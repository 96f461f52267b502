//! A trace as JSON Lines: one object per line, each with a `kind` of `batch` or `epoch`.
//! The checkpoints' `trace.jsonl` and `--metrics *.jsonl`.

use std::fs;
use std::path::Path;

use serde::Serialize;

use super::records::{BatchRecord, Trace};

/// A trace's JSON Lines as it grows, each record serialized once. Every checkpoint writes the
/// trace so far; serializing all of it again each time made a run's checkpoints cost time
/// that grew with the square of its length (issue 62).
#[derive(Debug, Default)]
pub struct Jsonl {
    batches: Vec<u8>,
    /// The batch records whose lines `batches` holds, and the last one's place in the run
    /// (epoch, batch, issue): a trace that did not grow from those is serialized afresh.
    batch_count: usize,
    last: Option<(usize, usize, u64)>,
    epochs: Vec<u8>,
    epoch_count: usize,
}

impl Jsonl {
    /// The JSON Lines of `trace`'s batches, then `more` batches (an epoch's so far), then its
    /// epochs: what [`Trace::write`] writes for the trace with `more` appended.
    ///
    /// The batches of `trace` and `more` together, and the epochs, are taken as the ones
    /// given before with new ones after them, those given before unchanged: a run's records
    /// are final once a checkpoint holds them. Only the new ones are serialized.
    pub fn of(&mut self, trace: &Trace, more: &[BatchRecord]) -> Vec<u8> {
        self.grow(trace, more);
        let mut out = Vec::with_capacity(self.batches.len() + self.epochs.len());
        out.extend_from_slice(&self.batches);
        out.extend_from_slice(&self.epochs);
        out
    }

    /// The lines that `trace` and `more` add to those given before (their new batches, then
    /// their new epochs), and whether those given before were dropped, the records not having
    /// grown from them: then the lines are the whole trace's.
    pub fn added(&mut self, trace: &Trace, more: &[BatchRecord]) -> (bool, Vec<u8>) {
        let (afresh, batches, epochs) = self.grow(trace, more);
        let mut out = self.batches[batches..].to_vec();
        out.extend_from_slice(&self.epochs[epochs..]);
        (afresh, out)
    }

    /// Serializes the records not serialized yet. Returns whether the lines kept were dropped,
    /// and the lengths of the batches' and the epochs' lines before.
    fn grow(&mut self, trace: &Trace, more: &[BatchRecord]) -> (bool, usize, usize) {
        let place = |b: &BatchRecord| (b.epoch, b.batch, b.issue_start.to_bits());
        let batches = || trace.batches.iter().chain(more);
        let grew = self.batch_count <= trace.batches.len() + more.len()
            && self.epoch_count <= trace.epochs.len()
            && (self.batch_count == 0
                || batches().nth(self.batch_count - 1).map(place) == self.last);
        if !grew {
            *self = Self::default();
        }
        let before = (!grew, self.batches.len(), self.epochs.len());
        for batch in batches().skip(self.batch_count) {
            line(&mut self.batches, "batch", batch);
            self.batch_count += 1;
            self.last = Some(place(batch));
        }
        for epoch in &trace.epochs[self.epoch_count..] {
            line(&mut self.epochs, "epoch", epoch);
        }
        self.epoch_count = trace.epochs.len();
        before
    }
}

/// Appends `record`'s line, tagged with its `kind`, to `out`.
fn line(out: &mut Vec<u8>, kind: &str, record: &impl Serialize) {
    let mut value = serde_json::to_value(record).expect("records serialize");
    if let serde_json::Value::Object(map) = &mut value {
        map.insert("kind".to_string(), kind.into());
    }
    out.extend(value.to_string().bytes().chain([b'\n']));
}

impl Trace {
    /// Reads a trace written as JSON Lines by [`Trace::write`].
    ///
    /// # Errors
    /// [`ember::Error::Io`] naming the path, for a file that cannot be read or a line that is
    /// not a record (with its number).
    pub fn read_jsonl(path: &Path) -> ember::Result<Trace> {
        let text = fs::read(path).map_err(|source| ember::Error::io(path, source))?;
        Trace::from_jsonl(&text, path)
    }

    /// Reads a trace from `text`, JSON Lines as [`Trace::write`] writes them, read from `path`.
    ///
    /// # Errors
    /// [`ember::Error::Io`] naming the path, for text that is not UTF-8 or a line that is not
    /// a record (with its number).
    pub fn from_jsonl(text: &[u8], path: &Path) -> ember::Result<Trace> {
        let failed = |source: std::io::Error| ember::Error::io(path, source);
        let invalid = |line: usize, e: serde_json::Error| {
            failed(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("line {line}: {e}"),
            ))
        };
        let mut trace = Trace::default();
        let text = std::str::from_utf8(text)
            .map_err(|e| failed(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?;
        for (index, line) in text.lines().enumerate() {
            let mut value: serde_json::Value =
                serde_json::from_str(line).map_err(|e| invalid(index + 1, e))?;
            let kind = value.as_object_mut().and_then(|map| map.remove("kind"));
            if kind.is_some_and(|kind| kind == "epoch") {
                trace
                    .epochs
                    .push(serde_json::from_value(value).map_err(|e| invalid(index + 1, e))?);
            } else {
                trace
                    .batches
                    .push(serde_json::from_value(value).map_err(|e| invalid(index + 1, e))?);
            }
        }
        Ok(trace)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::examples::{batch, epoch};

    /// The trace with `more` appended, serialized whole.
    fn whole(trace: &Trace, more: &[BatchRecord]) -> Vec<u8> {
        let mut all = trace.clone();
        all.batches.extend(more.iter().cloned());
        Jsonl::default().of(&all, &[])
    }

    #[test]
    fn the_lines_kept_from_before_give_the_whole_traces_lines() {
        let mut trace = Trace::default();
        let mut jsonl = Jsonl::default();
        let first: Vec<_> = (0..3).map(|b| batch(0, b, b as f64)).collect();
        assert_eq!(jsonl.of(&trace, &first[..2]), whole(&trace, &first[..2]));
        assert_eq!(jsonl.of(&trace, &first), whole(&trace, &first));
        // The epoch ends: its batches move into the trace, and the next epoch's follow.
        trace.batches.extend(first);
        trace.epochs.push(epoch(0, 3));
        let second = [batch(1, 0, 9.0)];
        assert_eq!(jsonl.of(&trace, &second), whole(&trace, &second));
        assert!(
            String::from_utf8(jsonl.of(&trace, &second))
                .unwrap()
                .lines()
                .count()
                == 5
        );
        // Another trace, not grown from the one before: serialized afresh.
        let other = Trace {
            batches: vec![
                batch(0, 0, 0.0),
                batch(0, 1, 7.0),
                batch(0, 2, 8.0),
                batch(1, 0, 9.5),
            ],
            epochs: vec![epoch(0, 3)],
        };
        assert_eq!(jsonl.of(&other, &[]), whole(&other, &[]));
    }
}
