//! The loop's part of a job of ranks ([`super::Fit::distributed`]) at an epoch's end.

use std::collections::BTreeMap;

use ember::engine::Host;
use ember::parallel::mpi::Exchanged;
use ember::{Block, Error, Loss, Result};

use super::backend::Backend;
use super::epoch::Epoch;
use super::frontend::Frontend;
use crate::target::Target;

impl<B, L> Frontend<'_, B, L>
where
    B: Block + 'static,
    L: Loss + Send + Sync + 'static,
    L::Target: Target,
{
    /// The epoch's end in a job: the losses of this process's batches become the job's (so
    /// the epoch's mean loss and the trace are the job's), each update's all-reduce span goes
    /// to the batch that ended it, and every rank takes rank 0's `metrics`, so that early
    /// stopping, the learning rate's plateau and the best epoch are decided alike on every rank
    /// (one that stopped alone would leave the others waiting in their next all-reduce).
    /// Returns the metrics and what the all-reduces did.
    pub(super) fn job_epoch(
        &mut self,
        current: &mut Epoch,
        metrics: BTreeMap<String, f64>,
    ) -> Result<(BTreeMap<String, f64>, Exchanged)> {
        self.job_losses(current)?;
        // Each value's bits: a NaN metric travels as it is (JSON has no NaN).
        let bits: Vec<(&String, u64)> = metrics.iter().map(|(k, v)| (k, v.to_bits())).collect();
        let mine = serde_json::to_vec(&bits).map_err(|e| Error::Distributed(e.to_string()))?;
        let (first, exchanged, spans) = self
            .engine
            .issue(move |b: &mut Backend<B, L>| Ok(Host(b.job_epoch(mine))))
            .wait()?;
        // The k-th all-reduce of this process's part of the epoch was the k-th update's.
        for (&index, [start, end]) in current.updates.iter().zip(spans) {
            let record = &mut current.records[index];
            record.allreduce_start = Some(self.seconds(start));
            record.allreduce_end = Some(self.seconds(end));
        }
        // Records the epoch's checkpoints already wrote changed: their lines are made again
        // (the trace's JSON Lines keep each record's line, hostile review).
        if !current.updates.is_empty() {
            self.trace_log.restart();
        }
        let first: Vec<(String, u64)> = serde_json::from_slice(&first).map_err(|e| {
            Error::Distributed(format!("rank 0's metrics did not arrive whole: {e}"))
        })?;
        let metrics = first
            .into_iter()
            .map(|(k, bits)| (k, f64::from_bits(bits)))
            .collect();
        Ok((metrics, exchanged))
    }

    /// The losses of this process's batches observed since the last call become the job's,
    /// where every rank has observed them all (a `waitall`): before a checkpoint, so that a
    /// job resumed inside the epoch carries the job's losses, and at the epoch's end. Outside
    /// a job they are the job's already.
    pub(super) fn job_losses(&mut self, current: &mut Epoch) -> Result<()> {
        if self.rank.is_none() {
            return Ok(());
        }
        let fresh = current.reduced..current.records.len();
        let losses: Vec<f64> = current.records[fresh.clone()]
            .iter()
            .map(|r| f64::from(r.loss))
            .collect();
        let losses = self
            .engine
            .issue(move |b: &mut Backend<B, L>| Ok(Host(b.job_losses(losses))))
            .wait()?;
        for (record, loss) in current.records[fresh].iter_mut().zip(losses) {
            record.loss = loss as f32;
        }
        current.reduced = current.records.len();
        Ok(())
    }
}
