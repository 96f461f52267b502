//! One epoch's records: each batch as the frontend issued it and the loop observed it done,
//! and the epoch's row, with its metrics.

use std::collections::BTreeMap;
use std::time::Instant;

use ember::Result;
use ember::engine::Handle;

use crate::memory::{mb, rss_bytes};
use crate::policy::{InFlight, PolicyKind};
use crate::trace::{BatchRecord, EpochRecord};

/// Metrics computed after every epoch on a snapshot of the network taken without autodiff
/// (`Module::valid`), on the caller's thread: test accuracy, validation loss…
pub struct Evaluation<B> {
    /// The columns it gives in the epoch records, in its values' order (`test_acc`).
    pub names: Vec<String>,
    /// Computes them.
    pub compute: Evaluate<B>,
}

/// Computes an evaluation's values from a network snapshot.
pub type Evaluate<B> = Box<dyn Fn(&B) -> Result<Vec<f64>>>;

/// An epoch in progress: its batches in flight, their records, and its memory and times.
pub(super) struct Epoch {
    pub(super) epoch: usize,
    pub(super) flight: InFlight,
    pub(super) records: Vec<BatchRecord>,
    /// In a job: how many of the records hold the job's losses (those a resumed run carried
    /// from its checkpoint, then those `Frontend::job_losses` made so).
    pub(super) reduced: usize,
    /// The records, by index, of this process's batches that ended an update, in order.
    pub(super) updates: Vec<usize>,
    /// Records observed whose device-pool sample is not read yet, with their handles.
    unsampled: Vec<(usize, Handle<f32>)>,
    rss_before: u64,
    peak_rss: u64,
    peak_pool: Option<u64>,
    pub(super) start: Instant,
    pub(super) last_issue: Instant,
    /// The seconds a resumed run's carried records took before its checkpoint: from the first
    /// one's issue to the last one's completion, and to its issue. The epoch's times count
    /// them, and not the time between the stop and the resume.
    carried: [f64; 2],
}

impl Epoch {
    /// Epoch `epoch` begins now; a resumed run's records of it so far are `carried`.
    pub(super) fn begin(epoch: usize, carried: Vec<BatchRecord>) -> Self {
        let rss_before = rss_bytes();
        let start = Instant::now();
        let carried_span = carried_spans(&carried);
        Self {
            epoch,
            flight: InFlight::new(epoch, rss_before),
            reduced: carried.len(),
            records: carried,
            updates: Vec::new(),
            unsampled: Vec::new(),
            rss_before,
            peak_rss: rss_before,
            peak_pool: None,
            start,
            last_issue: start,
            carried: carried_span,
        }
    }

    /// Samples the process's RSS for the epoch's peak, and returns it.
    pub(super) fn sample_rss(&mut self) -> u64 {
        let rss = rss_bytes();
        self.peak_rss = self.peak_rss.max(rss);
        rss
    }

    /// Moves the completions the policy observed into their batches' records; returns those
    /// records' places in `records`, in the order the batches were issued. Their device-pool
    /// samples are left for [`Epoch::sample_pools`]: reading one waits for a round trip
    /// through the device's queue, behind the batches issued since, which here, on every
    /// batch, would be a barrier.
    pub(super) fn absorb(&mut self, seconds: &impl Fn(Instant) -> f64) -> Vec<usize> {
        let mut done = Vec::new();
        for observed in self.flight.take_observed() {
            let Some(place) = self.records.iter().rposition(|r| r.batch == observed.batch) else {
                continue;
            };
            done.push(place);
            let record = &mut self.records[place];
            record.done = seconds(observed.done.at);
            if observed.done.devices.len() > 1 {
                record.device_done = observed
                    .done
                    .devices
                    .iter()
                    .map(|&at| seconds(at))
                    .collect();
            }
            record.observed = seconds(observed.at);
            record.loss = observed.done.value;
            self.unsampled.push((place, observed.handle));
        }
        done.sort_unstable();
        done
    }

    /// Reads the device-pool samples of the records observed so far, where the loop waits
    /// anyway (a checkpoint, the epoch's end, an error).
    pub(super) fn sample_pools(&mut self) {
        for (place, handle) in std::mem::take(&mut self.unsampled) {
            let pool = handle.pool();
            let record = &mut self.records[place];
            record.pool_in_use = pool.map(|p| p.in_use);
            record.pool_reserved = pool.map(|p| p.reserved);
            if let Some(pool) = pool {
                self.peak_pool = Some(self.peak_pool.unwrap_or(0).max(pool.in_use));
            }
        }
    }

    /// The epoch's row, from its batches, once they are all done at `end` with RSS
    /// `rss_after` (sampled with [`Epoch::sample_rss`], so the peak includes it).
    pub(super) fn record(
        &self,
        policy: &PolicyKind,
        end: Instant,
        rss_after: u64,
        metrics: BTreeMap<String, f64>,
    ) -> EpochRecord {
        let records = &self.records;
        let losses: f64 = records.iter().map(|r| f64::from(r.loss)).sum();
        EpochRecord {
            policy: policy.clone(),
            epoch: self.epoch,
            batches: records.len(),
            time: self.carried[0] + (end - self.start).as_secs_f64(),
            issue_time: self.carried[1] + (self.last_issue - self.start).as_secs_f64(),
            rss_before: self.rss_before,
            increased_mb: mb(rss_after as f64 - self.rss_before as f64),
            peak_growth_mb: mb(self.peak_rss as f64 - self.rss_before as f64),
            peak_pool_mb: self.peak_pool.map(|p| mb(p as f64)),
            mean_loss: losses / records.len().max(1) as f64,
            max_depth: records.iter().map(|r| r.depth).max().unwrap_or(0),
            device_time: device_times(records),
            allreduce_time: None,
            allreduce_mb: None,
            recording_mb: None,
            // The callbacks' cuts come at the epoch's end, after this record.
            lr_scale: None,
            metrics,
        }
    }
}

/// The seconds `carried` records took, from each process's first issue to its last completion,
/// and to its last issue, summed over the processes: each process's clock starts at 0, so an
/// epoch resumed twice holds two clocks (one span across them was meaningless, hostile
/// review).
fn carried_spans(carried: &[BatchRecord]) -> [f64; 2] {
    let mut spans = [0.0; 2];
    let processes = carried.chunk_by(|before, after| after.issue_start >= before.issue_start);
    for process in processes {
        let (first, last) = (&process[0], &process[process.len() - 1]);
        let done = [last.done, last.observed, last.issue_end]
            .into_iter()
            .filter(|at| at.is_finite())
            .fold(f64::NEG_INFINITY, f64::max);
        spans[0] += (done - first.issue_start).max(0.0);
        spans[1] += (last.issue_end - first.issue_start).max(0.0);
    }
    spans
}

/// Per device, the mean seconds from a batch's issue to the device finishing its share, over
/// the batches that recorded it (none on one device).
fn device_times(records: &[BatchRecord]) -> Vec<f64> {
    (0..crate::trace::device_count(records))
        .map(|device| {
            let lags: Vec<f64> = records
                .iter()
                .filter_map(|r| r.device_done.get(device).map(|done| done - r.issue_end))
                .collect();
            lags.iter().sum::<f64>() / lags.len().max(1) as f64
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::trace::examples::batch;

    #[test]
    fn an_epoch_resumed_twice_counts_each_processs_span() {
        // Batches 0-1 from the first process, 2-3 from the second, whose clock began again.
        let carried = [
            batch(0, 0, 0.0),
            batch(0, 1, 0.02),
            batch(0, 2, 0.0),
            batch(0, 3, 0.02),
        ];
        let [done, issued] = super::carried_spans(&carried);
        assert!((done - 2.0 * 0.030).abs() < 1e-12, "{done}");
        assert!((issued - 2.0 * 0.021).abs() < 1e-12, "{issued}");
        assert_eq!(super::carried_spans(&[]), [0.0; 2]);
    }
}
