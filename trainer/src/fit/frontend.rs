//! The frontend: the loop that prepares each batch and issues its step to the engine, as far
//! ahead as the sync policy lets it, tells the callbacks of each batch's end as it learns of it,
//! and stops at the barriers that checkpoints and signals need.
//!
//! With [`super::Fit::accumulate`], the optimizer steps once a group of batches: checkpoints
//! and stops (a signal's, a batch-level callback's) wait for the group's last batch, so that
//! every checkpoint holds whole updates and a resume forms the same groups.

mod callbacks;
mod checkpoints;

use std::collections::BTreeMap;
use std::time::Instant;

use ember::engine::{Engine, Host};
use ember::{Block, Error, Loss, Replicas, Result, StepAt};
use ember_datasets::Batch;

use super::backend::{Backend, StepLosses};
use super::best::Best;
use super::callback::Callback;
use super::epoch::{Epoch, Evaluation};
use super::groups::Groups;
use super::progress::Progress;
use super::rates::Rates;
use super::source::BatchSource;
use crate::checkpoint::{Checkpointing, Position};
use crate::metric::{TRAIN, column};
use crate::policy::{PolicyKind, SyncPolicy};
use crate::signals::{Signal, requested};
use crate::target::Target;
use crate::trace::{BatchRecord, Trace};

/// Everything the frontend holds during a run. The backend's state lives in `engine`.
pub(super) struct Frontend<'a, B, L>
where
    B: Block + 'static,
    L: Loss + Send + Sync + 'static,
    L::Target: Target,
{
    pub(super) engine: Engine<Backend<B, L>>,
    pub(super) replicas: Replicas,
    pub(super) policy: Box<dyn SyncPolicy + 'a>,
    pub(super) kind: PolicyKind,
    pub(super) progress: Box<dyn Progress + 'a>,
    pub(super) evaluations: Vec<Evaluation<B>>,
    pub(super) checkpointing: Option<Checkpointing>,
    /// This process's rank in a job of several ([`super::Fit::distributed`]); `None` alone.
    pub(super) rank: Option<usize>,
    /// The run's number of epochs: the last one ends with a checkpoint.
    pub(super) epochs: usize,
    /// The learning rate of each step: the optimizer's own, or the schedule's from it.
    pub(super) rates: Rates<'a>,
    /// Every later batch must have the first one's example shape.
    pub(super) example_shape: Option<Vec<usize>>,
    /// Where the run stands: the next batch to issue, and the steps issued.
    pub(super) at: Position,
    pub(super) trace: Trace,
    /// The trace's log, which the checkpoints link.
    pub(super) trace_log: crate::checkpoint::TraceLog,
    /// The clock's zero: the trace's times are seconds since then.
    pub(super) start: Instant,
    pub(super) stopped: Option<Signal>,
    /// The checkpoint this run wrote last, and its steps: until a later step's loss comes
    /// back finite, nothing shows that its parameters train on.
    pub(super) last_checkpoint: Option<(std::path::PathBuf, u64)>,
    pub(super) callbacks: Vec<Box<dyn Callback + 'a>>,
    pub(super) best: Option<Best<'a, B>>,
    /// Why a callback ended the run.
    pub(super) ended_early: Option<String>,
    /// The run stopped in the middle of an epoch, where a batch's end asked it to (the reason
    /// is in `ended_early`), at the first whole update after the ask. An ask at the epoch's
    /// last batches ends the run at the epoch's end instead, as an epoch's callback does.
    pub(super) halted: bool,
    /// How the optimizer's updates are formed from batches.
    pub(super) groups: Groups,
    /// The MB the recorded step holds ([`crate::trace::EpochRecord::recording_mb`]).
    pub(super) recording_mb: Option<f64>,
}

impl<B, L> Frontend<'_, B, L>
where
    B: Block + 'static,
    L: Loss + Send + Sync + 'static,
    L::Target: Target,
{
    /// Seconds from the run's start to `at`.
    pub(super) fn seconds(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.start).as_secs_f64()
    }

    /// Runs epoch `epoch` from the run's next batch on (0, unless a resumed run stopped inside
    /// it, whose records of it so far are `carried`); adds its records to the trace. Returns
    /// whether a signal stopped it.
    pub(super) fn epoch(
        &mut self,
        data: &mut dyn BatchSource,
        epoch: usize,
        carried: Vec<BatchRecord>,
    ) -> Result<bool> {
        let mut current = Epoch::begin(epoch, carried);
        let issued = self
            .callbacks
            .iter_mut()
            .try_for_each(|c| c.epoch_begin(epoch))
            .and_then(|()| self.issue_epoch(data, self.at.next_batch, &mut current))
            .and_then(|()| self.close_group(&mut current));
        if let Err(error) = issued {
            self.set_aside_if_diverged(&error, &current.records);
            // The batches issued so far stay in the trace, for what a failed run still writes.
            current.absorb(&|at| self.seconds(at));
            current.sample_pools();
            self.trace.batches.extend(current.records);
            return Err(error);
        }
        let end = Instant::now();
        let rss_after = current.sample_rss();
        let observed = self.observe(&mut current);
        current.sample_pools();
        if let Err(error) = observed {
            self.trace.batches.extend(current.records);
            return Err(error);
        }
        // The epoch's end is an update's end: a signal that came while its last group was open
        // stops the run here.
        if self.stopped.is_none() && !self.halted {
            self.stopped = requested();
        }
        // Before anything saves them (a stop's checkpoint too): the last update has no later
        // step to find that its parameters diverged.
        if let Err(error) = self.check_last_update(data, &current) {
            // A checkpoint the epoch's last batch wrote holds those parameters.
            if let Some((dir, steps)) = &self.last_checkpoint
                && *steps == self.at.steps
            {
                crate::checkpoint::set_aside(dir, "diverged");
                self.last_checkpoint = None;
            }
            self.trace.batches.extend(current.records);
            return Err(error);
        }
        if self.stopped.is_some() || self.halted {
            // A stop, by a signal or a batch's end, in this epoch or at its end: a checkpoint
            // of every batch so far (the epoch's record is the resumed run's to write).
            let written = self.checkpoint_within(&mut current);
            // The batches stay in the trace, for what a failed run still writes.
            self.trace.batches.extend(current.records);
            return written.map(|()| true);
        }
        // The next epoch starts at its first batch.
        self.at.epoch = epoch + 1;
        self.at.next_batch = 0;
        let mut metrics = self.metrics()?;
        let exchanged = match self.rank {
            Some(_) => {
                let (job, exchanged) = self.job_epoch(&mut current, metrics)?;
                metrics = job;
                Some(exchanged)
            }
            None => None,
        };
        let mut record = current.record(&self.kind, end, rss_after, metrics);
        record.recording_mb = self.recording_mb;
        if let Some(exchanged) = exchanged {
            record.allreduce_time = Some(exchanged.seconds);
            record.allreduce_mb = Some(exchanged.values as f64 * 4.0 / 1e6);
        }
        self.progress.epoch_done(&record);
        // In the trace first: a callback that fails leaves the epoch's records to the rescue.
        self.trace.batches.extend(current.records);
        self.trace.epochs.push(record.clone());
        // Before the checkpoint: a run killed between the two has not passed this epoch, and a
        // resume trains it again and saves it again, where the other order would lose it.
        self.save_best(&record)?;
        self.ask_callbacks(|callback| callback.epoch_end(&record))?;
        if let Some(done) = self.trace.epochs.last_mut() {
            done.lr_scale = Some(self.rates.take_made());
        }
        // The evaluations (and any forward pass of `save_best` or a callback) gave this thread
        // a team of OpenMP threads: kept through the next epoch, it would cut the backend's
        // spin between primitives.
        ember::kernels::release_threads();
        // At the end of every epoch, or with `every`, at the end of the run: a run shorter
        // than `every` steps still leaves its checkpoint.
        let last = epoch + 1 == self.epochs || self.ended_early.is_some();
        let due = self.update_ends_due();
        if self
            .checkpointing
            .as_ref()
            .is_some_and(|c| c.every.is_none() || last || due)
        {
            self.checkpoint(&[])?;
        }
        Ok(self.ended_early.is_some())
    }

    /// The epoch's end: its last, shorter group's update, where `--accumulate` does not divide
    /// its batches, issued after them; then `waitall`, so that a failed batch is named before
    /// the update that needed it.
    fn close_group(&mut self, current: &mut Epoch) -> Result<()> {
        let update = match self.groups.closed() {
            true => None,
            false => {
                let rate = self.rates.of(self.groups.update(), current.epoch)?;
                self.groups.close();
                if let Some(last) = current.records.len().checked_sub(1) {
                    current.updates.push(last);
                }
                Some(
                    self.engine
                        .issue(move |b: &mut Backend<B, L>| b.apply(rate).map(Host)),
                )
            }
        };
        current.flight.wait_all()?;
        update.map_or(Ok(()), |update| update.wait())
    }

    /// Issues the epoch's batches from `first` on, each when the policy allows, until the data
    /// ends or a signal stops the run.
    fn issue_epoch(
        &mut self,
        data: &mut dyn BatchSource,
        first: usize,
        current: &mut Epoch,
    ) -> Result<()> {
        let mut batches = data.batches_from(current.epoch, first);
        for index in first.. {
            // No policy call for a batch that does not exist, where the source can tell.
            if batches.size_hint().1 == Some(0) {
                break;
            }
            // The window this call waits by (a policy that sizes it changes it after).
            let window = self.policy.window();
            let (wait_start, waits) = (Instant::now(), current.flight.waits());
            self.policy.before_issue(index, &mut current.flight)?;
            // Recorded where the policy waited for a batch, not for a call that returned.
            let wait = (current.flight.waits() > waits).then(|| [wait_start, Instant::now()]);
            self.observe(current)?;
            if self.ended_early.is_some() && self.groups.closed() {
                // A batch's end asked to stop: the batches in flight end, and the checkpoint is
                // written at the epoch's end, as a signal's.
                self.halted = true;
                break;
            }
            let issue_start = Instant::now();
            let Some(batch) = batches.next() else { break };
            self.issue(batch?, index, (wait, window), issue_start, current)?;
            if self.after_issue(current)? {
                break;
            }
        }
        Ok(())
    }

    /// Issues batch `index` of the current epoch and records it, with the policy's `wait`
    /// before it (its call's start and end, where it waited for a batch) and the `window` it
    /// kept.
    fn issue(
        &mut self,
        batch: Batch,
        index: usize,
        (wait, window): (Option<[Instant; 2]>, Option<usize>),
        issue_start: Instant,
        current: &mut Epoch,
    ) -> Result<()> {
        if let Some(expected) = &self.example_shape
            && batch.x_shape[1..] != expected[..]
        {
            return Err(Error::Shape {
                what: StepAt {
                    epoch: current.epoch,
                    batch: index,
                }
                .to_string(),
                expected: format!("examples of shape {expected:?}, as the first batch's"),
                got: batch.x_shape.clone(),
            });
        }
        let data_wait = issue_start.elapsed().as_secs_f64();
        let seed = self
            .at
            .seed
            .map(|seed| ember::random::derive(seed, self.at.steps));
        let replicas = self.replicas.clone();
        let rate = self.rates.of(self.groups.update(), current.epoch)?;
        for callback in &mut self.callbacks {
            callback.batch_begin(current.epoch, index, rate)?;
        }
        let update = self.groups.issue();
        let ends_update = update;
        // The issue ends as the step is handed over: the backend may run and finish it before
        // this thread is scheduled again, so a later instant could come after its completion.
        current.last_issue = Instant::now();
        let handle = self.engine.issue(move |backend: &mut Backend<B, L>| {
            backend.step(batch, &replicas, seed, (rate, update), index == 0)
        });
        current.flight.push(index, handle);
        self.at.steps += 1;
        self.at.epoch = current.epoch;
        self.at.next_batch = index + 1;
        let rss = current.sample_rss();
        current.records.push(BatchRecord {
            policy: self.kind.clone(),
            epoch: current.epoch,
            batch: index,
            issue_start: self.seconds(issue_start),
            issue_end: self.seconds(current.last_issue),
            done: f64::NAN,
            observed: f64::NAN,
            loss: f32::NAN,
            rss,
            pool_in_use: None,
            pool_reserved: None,
            depth: current.flight.depth(),
            data_wait,
            device_done: Vec::new(),
            lr: Some(rate),
            wait_start: wait.map(|[start, _]| self.seconds(start)),
            wait_end: wait.map(|[_, end]| self.seconds(end)),
            window,
            allreduce_start: None,
            allreduce_end: None,
        });
        if ends_update {
            current.updates.push(current.records.len() - 1);
        }
        let elapsed = self.seconds(current.last_issue) - self.seconds(current.start);
        self.progress.issued(current.epoch, index, elapsed);
        Ok(())
    }

    /// After each issue that ends an update: a barrier and a checkpoint when one is due.
    /// Returns whether a signal stops the run (its checkpoint is the epoch's end's).
    fn after_issue(&mut self, current: &mut Epoch) -> Result<bool> {
        if !self.groups.closed() {
            return Ok(false);
        }
        self.stopped = requested();
        if self.stopped.is_some() {
            // Its checkpoint is the epoch's end's, after the last update's check.
            return Ok(true);
        }
        if self.update_ends_due() {
            self.settle(current)?;
        }
        Ok(false)
    }

    /// The epoch's metrics: the training metrics its steps summed (`train_acc`…), and each
    /// evaluation, on a snapshot of the network without autodiff.
    fn metrics(&mut self) -> Result<BTreeMap<String, f64>> {
        let mut metrics = BTreeMap::new();
        let train = self
            .engine
            .issue(|b: &mut Backend<B, L>| b.train_metrics().map(Host))
            .wait()?;
        for (name, value) in train {
            metrics.insert(column(TRAIN, &name), value);
        }
        if !self.evaluations.is_empty() {
            let snapshot = self
                .engine
                .issue(|b: &mut Backend<B, L>| Ok(b.net()?.valid()))
                .wait()?;
            for evaluation in &self.evaluations {
                let values = (evaluation.compute)(&snapshot)?;
                metrics.extend(evaluation.names.iter().cloned().zip(values));
            }
        }
        Ok(metrics)
    }

    /// The unmeasured warm-up on `first`, batch 0 of epoch 0, on the backend worker as every
    /// step is, so that its thread's first allocations are warm-up's too. Changes nothing the
    /// run keeps; its errors name that batch, as the step's own would.
    pub(super) fn warmup(&self, first: Batch) -> Result<()> {
        let replicas = self.replicas.clone();
        self.engine
            .issue(move |b: &mut Backend<B, L>| -> Result<StepLosses> {
                b.warmup(&first, &replicas)
            })
            .wait()
            .map(drop)
            .map_err(|e| e.at_step(StepAt { epoch: 0, batch: 0 }))
    }
}
