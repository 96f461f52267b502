//! The frontend's checkpoints: when one is due, the barrier an epoch stops at to write one,
//! the writing, and the setting aside of one whose parameters turn out to diverge.

use ember::engine::Host;
use ember::{Block, Error, Loss, Result, StepAt};

use super::Frontend;
use crate::fit::backend::Backend;
use crate::fit::epoch::Epoch;
use crate::fit::resume;
use crate::fit::source::BatchSource;
use crate::target::Target;
use crate::trace::BatchRecord;

impl<B, L> Frontend<'_, B, L>
where
    B: Block + 'static,
    L: Loss + Send + Sync + 'static,
    L::Target: Target,
{
    /// At an update's end: whether `--checkpoint-every`'s count of batches passed a multiple
    /// since the last update's end. Each batch ends an update without `--accumulate`.
    pub(super) fn update_ends_due(&mut self) -> bool {
        let every = self.checkpointing.as_ref().and_then(|c| c.every);
        self.groups.passed(self.at.steps, every)
    }

    /// `waitall` in the middle of an epoch, every completion into its record (the callbacks
    /// told), and a checkpoint there.
    pub(super) fn settle(&mut self, current: &mut Epoch) -> Result<()> {
        current.flight.wait_all()?;
        self.observe(current)?;
        current.sample_pools();
        self.checkpoint_within(current)
    }

    /// A checkpoint of `current` so far: in a job, its losses become the job's first, so that
    /// a job resumed inside the epoch carries the job's losses.
    pub(super) fn checkpoint_within(&mut self, current: &mut Epoch) -> Result<()> {
        self.job_losses(current)?;
        self.checkpoint(&current.records)
    }

    /// Writes a checkpoint of the run as it stands, with the current epoch's `records` so far,
    /// where the run keeps checkpoints.
    pub(super) fn checkpoint(&mut self, records: &[BatchRecord]) -> Result<()> {
        let Some(checkpointing) = &self.checkpointing else {
            return Ok(());
        };
        // Rank 0 writes the job's checkpoint; the others take part in summing its metrics.
        if self.rank.is_some_and(|rank| rank > 0) {
            self.engine
                .issue(|b: &mut Backend<B, L>| b.metric_states().map(Host))
                .wait()?;
            return Ok(());
        }
        let settings = (checkpointing, &mut self.trace_log);
        let dir = resume::write(&self.engine, settings, &self.at, (&self.trace, records))?;
        self.progress.checkpointed(&dir);
        self.last_checkpoint = Some((dir, self.at.steps));
        Ok(())
    }

    /// A loss that came back NaN or infinite at the step right after this run's last
    /// checkpoint came from that checkpoint's parameters: a resume from it would diverge
    /// again. It is moved aside as `diverged-step-N` (kept, never deleted), so that the newest
    /// checkpoint is one whose parameters gave a finite loss. `records` are the current
    /// epoch's, one a step, after the trace's.
    pub(super) fn set_aside_if_diverged(&mut self, error: &Error, records: &[BatchRecord]) {
        let Error::NonFiniteLoss { at, .. } = error.root() else {
            return;
        };
        let Some(index) = records
            .iter()
            .position(|r| r.epoch == at.epoch && r.batch == at.batch)
        else {
            return;
        };
        let step = (self.trace.batches.len() + index + 1) as u64;
        if let Some((dir, steps)) = &self.last_checkpoint
            && steps + 1 == step
        {
            crate::checkpoint::set_aside(dir, "diverged");
            self.last_checkpoint = None;
        }
    }

    /// The loss of the parameters the epoch's last update left, on that update's last batch
    /// (made again by `data`, as the source makes each epoch's batches alike), read once an
    /// epoch after its clock stopped: NaN or infinite is divergence
    /// ([`Error::NonFiniteAfterUpdate`]), found before `save_best`, a checkpoint or `--save`
    /// keeps those parameters. Every other update's parameters meet the next step's loss.
    pub(super) fn check_last_update(
        &mut self,
        data: &mut dyn BatchSource,
        current: &Epoch,
    ) -> Result<()> {
        let Some(last) = current.records.last() else {
            return Ok(());
        };
        let at = StepAt {
            epoch: last.epoch,
            batch: last.batch,
        };
        let Some(batch) = data.batches_from(at.epoch, at.batch).next() else {
            return Ok(());
        };
        let (batch, device) = (batch?, self.replicas.main().clone());
        let value = self
            .engine
            .issue(move |b: &mut Backend<B, L>| b.loss_after_update(batch, &device).map(Host))
            .wait()?;
        match value.is_finite() {
            true => Ok(()),
            false => Err(Error::NonFiniteAfterUpdate { at, value }),
        }
    }
}
