//! What a run records: each batch as the frontend issued it and the loop observed it done,
//! each epoch's row, and the two together as a run's trace.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::policy::PolicyKind;

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
    /// With [`crate::fit::Fit::hybridize`], the MB of device memory the recorded step's slots
    /// hold for the run: the parameters, running statistics, the optimizer's state and
    /// per-step numbers, the batch. A graph's own buffers come on top on a card (the run says
    /// what the device's pool grew by while it recorded). Made before the first epoch, the
    /// slots are in every epoch's baseline, not in its growth (which the memory policies
    /// bound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording_mb: Option<f64>,
    /// The product of the callbacks' cuts of the learning rate made in the epoch, 1 where
    /// none was (a cut that would make the rate vanish is not made). A resume replays these,
    /// not the callbacks' asks, so that a resume with another rate makes the same cuts.
    /// Absent in traces written before it was recorded.
    #[serde(default)]
    pub lr_scale: Option<f64>,
    /// The epoch's metrics (`train_acc`, `test_acc`, `valid_loss`…), one column each.
    #[serde(flatten)]
    pub metrics: BTreeMap<String, f64>,
}

impl EpochRecord {
    /// A record of zeros under the barrier, for its column names (those of its metrics
    /// aside, which only an epoch that ended has).
    pub(super) fn columns() -> EpochRecord {
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
            recording_mb: None,
            lr_scale: Some(1.0),
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
}
