//! `--profile`: runs as Chrome's trace-event JSON (its object form, with `traceEvents` and
//! `displayTimeUnit`), the format MXNet's profiler, PyTorch's and JAX's write, which Perfetto
//! (ui.perfetto.dev) and chrome://tracing open.
//!
//! Each run is a process of its own, named after it (`ember train`, or a policy and its round in
//! a comparison), with these tracks:
//! - `frontend`: per batch an `issue` slice (the frontend making the batch and handing it to
//!   the backend: `issue_start` to `issue_end`) holding a `data` slice (the wait for its data),
//!   and before it a `wait` slice where the sync policy waited for a batch (its `before_issue`
//!   call);
//! - one `backend` track per device (every replica of a data-parallel run): per batch a
//!   `compute` slice, from when the device could start it (its issue's end, or the end of the
//!   device's batch before, whichever is later: the backend runs batches in order) to its
//!   completion, tied to its `issue` by a flow arrow; in a job of ranks, the first device's
//!   `compute` of a batch that ends an update holds an `all-reduce` slice (this rank's, within
//!   the compute: the trace's `allreduce_start` to `allreduce_end`);
//! - `epochs`: a slice per epoch, from its first issue to its last completion;
//! - counters: the process's resident memory (MB, after each issue), the device pool (MB in use
//!   and reserved, at each completion, on backends that have one), the batches in flight
//!   (after each issue) and the window the policy kept (where it keeps one: `auto` sizes it
//!   while training).
//!
//! Timestamps are whole microseconds since the run started: the trace's seconds (`--metrics`'s
//! columns) times 10⁶, rounded down. A batch that never completed (a failed run's last) has
//! no `compute` slice and no arrow. A resumed run's batches from each process that trained it
//! are a process of their own, each on its own clock.
//!
//! ```
//! use ember_trainer::profile::Profile;
//! use ember_trainer::trace::Trace;
//!
//! let trace = Trace::default(); // a `FitRun`'s `trace`
//! let mut profile = Profile::new();
//! profile.add_run("my run", &trace, &["cpu".to_string()]);
//! let json = profile.to_json();
//! assert_eq!(json["displayTimeUnit"], "ms");
//! ```

use std::path::Path;

use ember::io::write_atomic_bytes;
use serde_json::{Map, Value, json};

use crate::trace::{BatchRecord, EpochRecord, Trace, device_count};

/// The tracks of a run, as thread ids of its process.
const EPOCHS: u64 = 0;
const FRONTEND: u64 = 1;
/// The first device's track; device k's is `DEVICES + k`.
const DEVICES: u64 = 2;

/// Whole microseconds, the format's unit, from the trace's seconds: a slice that ends where
/// the next starts (the same seconds) ends at the same integer, which float sums of `ts` and
/// `dur` do not promise, and Perfetto and chrome://tracing would see as overlapping.
fn micros(seconds: f64) -> i64 {
    (seconds * 1e6).floor() as i64
}

/// One device's batches, given as (issue end, completion) in order, as spans of its compute:
/// each from when the device could start it (its issue's end, or the end of the device's batch
/// before, whichever is later: the backend runs batches in order) to its completion; `None`
/// for a batch it never completed. The profile's `compute` slices and `compare --html`'s
/// timelines both draw these.
pub fn compute_spans(batches: impl IntoIterator<Item = (f64, f64)>) -> Vec<Option<[f64; 2]>> {
    let mut free = 0.0_f64;
    batches
        .into_iter()
        .map(|(issued, end)| {
            end.is_finite().then(|| {
                let start = issued.max(free).min(end);
                free = end;
                [start, end]
            })
        })
        .collect()
}

/// The whole microsecond halfway from `a` to `b`.
fn midpoint(a: i64, b: i64) -> i64 {
    a + (b - a) / 2
}

/// The batches in parts, one a process that trained them: a part ends where the next batch
/// was issued before it by its clock (a resumed run's process starts its clock again).
fn parts(batches: &[BatchRecord]) -> Vec<&[BatchRecord]> {
    let mut parts = Vec::new();
    let mut start = 0;
    for i in 1..batches.len() {
        if batches[i].issue_start < batches[i - 1].issue_start {
            parts.push(&batches[start..i]);
            start = i;
        }
    }
    parts.push(&batches[start..]);
    parts
}

/// Chrome trace-event JSON of one or more runs.
#[derive(Debug, Default)]
pub struct Profile {
    events: Vec<Value>,
    /// Processes so far: the next run's id is one more.
    runs: u64,
    /// Flow arrows so far: ids are unique across the file.
    flows: u64,
}

impl Profile {
    /// An empty profile.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `trace` as a process of its own named `name`. `devices` names the devices in the
    /// order of the records' `device_done` (the one device of a run on one); a device without
    /// a name is `device K`.
    ///
    /// A resumed run's trace holds the batches of each process that trained it, each timed
    /// from its own start: each such part is a process of its own (`name, part 1 of 2`, …),
    /// as its times share no clock with the others'.
    pub fn add_run(&mut self, name: &str, trace: &Trace, devices: &[String]) -> &mut Self {
        let parts = parts(&trace.batches);
        for (k, part) in parts.iter().enumerate() {
            let name = match parts.len() {
                1 => name.to_string(),
                n => format!("{name}, part {} of {n}", k + 1),
            };
            self.add_part(&name, part, &trace.epochs, devices);
        }
        self
    }

    /// One process's batches as a process of the profile, with the epochs among `epochs`
    /// whose batches are all among them.
    fn add_part(
        &mut self,
        name: &str,
        batches: &[BatchRecord],
        epochs: &[EpochRecord],
        devices: &[String],
    ) {
        self.runs += 1;
        let pid = self.runs;
        let count = device_count(batches).max(1);
        self.meta(pid, 0, "process_name", json!({ "name": name }));
        self.meta(pid, 0, "process_sort_index", json!({ "sort_index": pid }));
        let mut tracks = vec![
            (EPOCHS, "epochs".to_string()),
            (FRONTEND, "frontend".to_string()),
        ];
        tracks.extend((0..count).map(|k| {
            let device = devices
                .get(k)
                .cloned()
                .unwrap_or_else(|| format!("device {k}"));
            let track = match count {
                1 => format!("backend: {device}"),
                _ => format!("backend {k}: {device}"),
            };
            (DEVICES + k as u64, track)
        }));
        for (tid, track) in tracks {
            self.meta(pid, tid, "thread_name", json!({ "name": track }));
            self.meta(pid, tid, "thread_sort_index", json!({ "sort_index": tid }));
        }
        self.epochs(pid, batches, epochs);
        // Each device's spans, from the time it finished each batch.
        let spans: Vec<Vec<Option<[f64; 2]>>> = (0..count)
            .map(|k| {
                compute_spans(batches.iter().map(|b| {
                    let done = match b.device_done.is_empty() {
                        true if k == 0 => b.done,
                        true => f64::NAN,
                        false => b.device_done.get(k).copied().unwrap_or(f64::NAN),
                    };
                    (b.issue_end, done)
                }))
            })
            .collect();
        for (i, batch) in batches.iter().enumerate() {
            self.frontend(pid, batch);
            for (k, device) in spans.iter().enumerate() {
                if let Some([start, end]) = device[i] {
                    self.compute(pid, DEVICES + k as u64, batch, start, end);
                    if let (0, Some(from), Some(to)) =
                        (k, batch.allreduce_start, batch.allreduce_end)
                    {
                        // Nested in the compute slice, whose start is inferred.
                        let span = [from.clamp(start, end), to.clamp(start, end)];
                        let args = json!({ "began (s)": from, "returned (s)": to });
                        self.slice(pid, DEVICES, "all-reduce", span, args);
                    }
                }
            }
            self.counters(pid, batch);
        }
    }

    /// The whole file: the JSON object form, in milliseconds for display.
    pub fn to_json(&self) -> Value {
        json!({
            "traceEvents": self.events,
            "displayTimeUnit": "ms",
            "otherData": { "producer": format!("ember {}", env!("CARGO_PKG_VERSION")) },
        })
    }

    /// Writes the file to a temporary name and renames it over `path`.
    ///
    /// # Errors
    /// As [`ember::io::write_atomic_bytes`]: the path named, and an old file left as it was.
    pub fn write(&self, path: &Path) -> ember::Result<()> {
        let bytes = serde_json::to_vec(&self.to_json()).expect("a profile serializes");
        write_atomic_bytes(path, &bytes)
    }

    fn meta(&mut self, pid: u64, tid: u64, name: &str, args: Value) {
        self.events.push(json!({
            "ph": "M", "name": name, "pid": pid, "tid": tid, "ts": 0, "args": args,
        }));
    }

    /// A complete slice (`X`) from `start` to `end`, in seconds.
    fn slice(&mut self, pid: u64, tid: u64, name: &str, [start, end]: [f64; 2], args: Value) {
        self.events.push(json!({
            "ph": "X", "name": name, "cat": "ember", "pid": pid, "tid": tid,
            "ts": micros(start), "dur": (micros(end) - micros(start)).max(0), "args": args,
        }));
    }

    /// Each epoch of `epochs` whose batches are all in `batches` (and complete): a slice from
    /// its first issue to its last completion.
    fn epochs(&mut self, pid: u64, batches: &[BatchRecord], epochs: &[EpochRecord]) {
        for epoch in epochs {
            let mine: Vec<&BatchRecord> = batches
                .iter()
                .filter(|b| b.epoch == epoch.epoch && b.policy == epoch.policy)
                .collect();
            if mine.len() != epoch.batches || mine.is_empty() {
                continue;
            }
            let first = mine
                .iter()
                .map(|b| b.issue_start)
                .fold(f64::INFINITY, f64::min);
            let last = mine
                .iter()
                .map(|b| b.done)
                .fold(f64::NEG_INFINITY, f64::max);
            if !(first.is_finite() && last.is_finite()) {
                continue;
            }
            let mut args = Map::new();
            args.insert("batches".into(), epoch.batches.into());
            args.insert("time per epoch (s)".into(), epoch.time.into());
            args.insert("mean loss".into(), epoch.mean_loss.into());
            args.insert("max in flight".into(), epoch.max_depth.into());
            for (metric, value) in &epoch.metrics {
                args.insert(metric.clone(), (*value).into());
            }
            let name = format!("epoch {}", epoch.epoch + 1);
            self.slice(pid, EPOCHS, &name, [first, last], args.into());
        }
    }

    /// The batch's `wait`, `issue` and `data` slices, and its arrows' tails.
    fn frontend(&mut self, pid: u64, batch: &BatchRecord) {
        let at = json!({ "epoch": batch.epoch + 1, "batch": batch.batch });
        if let (Some(start), Some(end)) = (batch.wait_start, batch.wait_end) {
            let args = json!({ "before": at, "policy": batch.policy.to_string() });
            self.slice(pid, FRONTEND, "wait", [start, end], args);
        }
        let args = json!({
            "epoch": batch.epoch + 1, "batch": batch.batch, "lr": batch.lr,
            "in flight": batch.depth, "rss (MB)": batch.rss as f64 / 1e6,
        });
        self.slice(
            pid,
            FRONTEND,
            "issue",
            [batch.issue_start, batch.issue_end],
            args,
        );
        if batch.data_wait > 0.0 {
            let data = [batch.issue_start, batch.issue_start + batch.data_wait];
            self.slice(pid, FRONTEND, "data", data, at);
        }
    }

    /// The batch's `compute` slice on track `tid`, with an arrow from its `issue` slice.
    fn compute(&mut self, pid: u64, tid: u64, batch: &BatchRecord, start: f64, end: f64) {
        let args = json!({
            "epoch": batch.epoch + 1, "batch": batch.batch, "loss": batch.loss,
            "issued (s)": batch.issue_end, "done (s)": end, "observed (s)": batch.observed,
        });
        self.slice(pid, tid, "compute", [start, end], args);
        self.flows += 1;
        let id = self.flows;
        // Each end inside its own slice, away from the edges a neighbour may share: the tail
        // in the issue's part after its data, the head mid-compute.
        let data_end = micros(batch.issue_start + batch.data_wait).min(micros(batch.issue_end));
        let tail = midpoint(data_end, micros(batch.issue_end));
        self.events.push(json!({
            "ph": "s", "name": "batch", "cat": "ember", "id": id, "pid": pid,
            "tid": FRONTEND, "ts": tail,
        }));
        self.events.push(json!({
            "ph": "f", "bp": "e", "name": "batch", "cat": "ember", "id": id, "pid": pid,
            "tid": tid, "ts": midpoint(micros(start), micros(end)),
        }));
    }

    fn counters(&mut self, pid: u64, batch: &BatchRecord) {
        let issued = micros(batch.issue_end);
        let rss = batch.rss as f64 / 1e6;
        self.counter(pid, "memory (MB)", issued, json!({ "rss": rss }));
        self.counter(pid, "in flight", issued, json!({ "batches": batch.depth }));
        if let Some(window) = batch.window {
            self.counter(pid, "window", issued, json!({ "batches": window }));
        }
        if let (Some(in_use), true) = (batch.pool_in_use, batch.done.is_finite()) {
            let reserved = batch.pool_reserved.unwrap_or(in_use) as f64 / 1e6;
            let args = json!({ "in use": in_use as f64 / 1e6, "reserved": reserved });
            self.counter(pid, "device pool (MB)", micros(batch.done), args);
        }
    }

    fn counter(&mut self, pid: u64, name: &str, ts: i64, args: Value) {
        self.events.push(json!({
            "ph": "C", "name": name, "pid": pid, "tid": 0, "ts": ts, "args": args,
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::examples::batch;

    /// A resumed run: epoch 0's three batches from the first process, then the second
    /// process's clock starting again at epoch 1.
    #[test]
    fn a_resumed_runs_processes_are_parts_of_their_own_that_never_overlap() {
        let trace = Trace {
            batches: vec![
                batch(0, 0, 0.0),
                batch(0, 1, 0.02),
                batch(0, 2, 0.04),
                batch(1, 0, 0.0),
                batch(1, 1, 0.02),
            ],
            epochs: Vec::new(),
        };
        let mut profile = Profile::new();
        profile.add_run("ember train", &trace, &[]);
        let json = profile.to_json();
        let events = json["traceEvents"].as_array().unwrap();
        let names: Vec<&str> = events
            .iter()
            .filter(|e| e["name"] == "process_name")
            .map(|e| e["args"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            ["ember train, part 1 of 2", "ember train, part 2 of 2"]
        );
        // Per process and track, each slice ends before the next begins.
        let mut slices: Vec<(u64, u64, i64, i64)> = events
            .iter()
            .filter(|e| e["ph"] == "X" && e["name"] != "data")
            .map(|e| {
                let ts = e["ts"].as_i64().unwrap();
                let track = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
                (track.0, track.1, ts, ts + e["dur"].as_i64().unwrap())
            })
            .collect();
        slices.sort();
        for pair in slices.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if (a.0, a.1) == (b.0, b.1) {
                assert!(a.3 <= b.2, "{pair:?}");
            }
        }
        assert_eq!(parts(&trace.batches).len(), 2);
        assert_eq!(parts(&[]).len(), 1);
    }
}
