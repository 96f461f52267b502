//! The run itself ([`Fit::run`]): its settings checked, the first batch's sizes inferred, the
//! start (or the resume) set up, the frontend driven epoch by epoch, and what it hands back.

use std::time::Instant;

use ember::engine::{Engine, Host};
use ember::{Block, Loss, Result};

use super::backend::Backend;
use super::carry::Carry;
use super::frontend::Frontend;
use super::groups::Groups;
use super::rates::{self, Rates};
use super::resume;
use super::source::BatchSource;
use super::{Fit, FitRun, infer};
use crate::metric::Accuracy;
use crate::signals::RunInProgress;
use crate::target::Target;

impl<B, L> Fit<'_, B, L>
where
    B: Block + 'static,
    L: Loss + Send + Sync + 'static,
    L::Target: Target,
{
    /// Trains on `data`.
    ///
    /// Before anything else, the run passes the first batch through the network's
    /// [`Block::infer`]: layers whose input size was deferred take it from there, and a batch
    /// that does not fit the network is an error naming the layer, before any training step.
    /// Every later batch must have the first one's example shape.
    ///
    /// # Errors
    /// Any error of the data, the network's `infer`, a step (as [`ember::Error::Step`], naming
    /// the batch), an evaluation or a checkpoint.
    pub fn run(mut self, data: &mut dyn BatchSource) -> Result<FitRun<B>> {
        // Before the first batch starts rayon's or a loader's threads: glibc's settings reach
        // only threads that have not allocated yet.
        ember::kernels::keep_freed_memory();
        let device = self.replicas.main().clone();
        if self.accumulate == 0 {
            return Err(ember::Error::InvalidValue {
                name: "accumulate",
                value: "0".to_string(),
                reason: "an update needs the gradients of at least 1 batch".to_string(),
            });
        }
        for device in self.replicas.devices() {
            self.precision.check(device)?;
        }
        if self.carry.is_some() && self.replicas.len() > 1 {
            return Err(ember::Error::InvalidValue {
                name: "replicas for a carried state",
                value: self.replicas.len().to_string(),
                reason: "each replica would need its rows' share of the state; train a \
                         carried state on one device"
                    .to_string(),
            });
        }
        let total = match (&self.schedule, data.batches_per_epoch()) {
            (Some(schedule), Some(per_epoch)) => {
                let total = (per_epoch.div_ceil(self.accumulate) * self.epochs) as u64;
                schedule.check(total)?;
                total
            }
            (Some(schedule), None) if !schedule.spans_run() => 0,
            (Some(schedule), None) => {
                return Err(ember::Error::InvalidValue {
                    name: "learning-rate schedule",
                    value: schedule.describe(),
                    reason: "the data source does not say how many batches an epoch has \
                             (BatchSource::batches_per_epoch), and the schedule spans the run"
                        .to_string(),
                });
            }
            (None, _) => 0,
        };
        // The rank that writes checkpoints; the others only keep the same schedule. Checked
        // here, made once the schedule is found sound below.
        let rank = self.distributed.as_ref().map(|c| c.rank());
        let writes = rank.unwrap_or(0) == 0;
        if let Some(checkpointing) = &self.checkpointing
            && writes
        {
            checkpointing.check(self.resume.as_ref())?;
        }
        let first = data.batches(0).next().transpose()?;
        // `Fit::hybridize`: why the steps run eagerly, where the settings say; and the batch
        // whose shape the step is recorded on.
        let hybridize = self
            .hybridize
            .then(|| (self.eager_because(), first.clone()));
        let net = match &first {
            Some(batch) => infer(self.net, batch, &self.replicas)?,
            None => self.net,
        };
        let example_shape = first.as_ref().map(|batch| batch.x_shape[1..].to_vec());
        let start = resume::start(
            net,
            self.optimizer,
            self.seed,
            self.checkpointing.as_ref(),
            self.resume.as_ref(),
        )?;
        // The callbacks' state, and the rate's scalings, from the epochs already done.
        let given = start.optimizer.learning_rate();
        let mut base = given;
        let mut ended_early = None;
        let mut asked = vec![Vec::new(); start.trace.epochs.len()];
        for callback in &mut self.callbacks {
            let actions = callback.replay(&start.trace.epochs)?;
            for (epoch, action) in actions.iter().enumerate() {
                if let Some((scale, _)) = &action.scale_lr {
                    asked[epoch].push(*scale);
                }
            }
            if let Some(why) = actions.last().and_then(|a| a.stop.clone()) {
                ended_early = Some(why);
            }
        }
        // The cuts each epoch made, as its record says (a trace from before the records kept
        // them: those its callbacks ask again); each made here unless it would make the rate
        // vanish. Replaying the asks made a resume with `--lr 1` of a run at 1.6e-38 make
        // the cuts that run could not (hostile pass).
        for (record, asked) in start.trace.epochs.iter().zip(asked) {
            let made = record.lr_scale.map_or(asked, |made| vec![made]);
            let after = (record.epoch + 1, self.epochs);
            for scale in made.into_iter().filter(|&scale| scale != 1.0) {
                let schedule = self.schedule.as_deref();
                match rates::cut(base, scale, schedule, total, after) {
                    Ok(next) => base = next,
                    // Said, as the run says it of a cut it does not make: a cut at the end of
                    // the last epoch, made, was dropped in silence when --epochs grew.
                    Err(vanishing) => self.progress.acted(&format!(
                        "the cut of the learning rate by {} at the end of epoch {} is not made \
                         again: it would make {vanishing}, which single precision makes 0 \
                         (below about 1.2e-38); the base rate stays {}",
                        ember::error::number(scale),
                        record.epoch + 1,
                        ember::error::number(base)
                    )),
                }
            }
        }
        if let Some(best) = &mut self.best {
            best.replay(&start.trace.epochs)?;
        }
        // Before anything is written: a schedule whose rate underflows trains nothing.
        if let Some(schedule) = &self.schedule {
            let epochs = (start.at.epoch, self.epochs);
            rates::refuse_underflow(schedule.as_ref(), base, total, epochs)?;
        }
        // The first thing made: a run refused above leaves no directory behind.
        if let Some(checkpointing) = &self.checkpointing
            && writes
        {
            for note in checkpointing.prepare(self.resume.as_ref())? {
                self.progress.acted(&note);
            }
        }
        if base != given {
            self.progress.acted(&format!(
                "learning rate {base}: {given} as the callbacks scaled it before this resume"
            ));
        }
        if let Some(why) = &ended_early {
            self.progress
                .acted(&format!("{why}, before this resume: nothing more to train"));
        }
        let mut metrics = self.metrics.unwrap_or_else(|| match L::Target::LABELS {
            true => vec![Box::new(Accuracy::default())],
            false => Vec::new(),
        });
        // A checkpoint in the middle of an epoch holds the sums of the epoch's batches so far.
        // (In a job, rank 0's checkpoint holds the job's sums: the others start from none.)
        if let Some(checkpoint) = &self.resume
            && start.at.next_batch > 0
            && writes
        {
            for metric in &mut metrics {
                match checkpoint.position.metrics.get(&metric.name()) {
                    Some(state) => metric.restore(state, &device)?,
                    // A metric that keeps no state, one whose sums were not finite, or a
                    // checkpoint from before the sums were kept: said, not passed in silence.
                    None => self.progress.acted(&format!(
                        "{} holds no sums for the metric {}: epoch {}'s train_{} counts the \
                         batches from batch {} on only",
                        checkpoint.dir.display(),
                        metric.name(),
                        start.at.epoch + 1,
                        metric.name(),
                        start.at.next_batch + 1
                    )),
                }
            }
        }
        // A checkpoint in the middle of an epoch holds the state its next batch starts from.
        let saved_state = match (&self.carry, &self.resume) {
            (Some(_), Some(checkpoint)) if start.at.next_batch > 0 => {
                let saved = checkpoint.position.carried.as_ref();
                if saved.is_none() {
                    self.progress.acted(&format!(
                        "{} holds no carried state (its run carried none): batch {} of epoch \
                         {} starts from the initial state",
                        checkpoint.dir.display(),
                        start.at.next_batch + 1,
                        start.at.epoch + 1
                    ));
                }
                saved.map(|saved| (saved, &device))
            }
            (None, Some(checkpoint)) if checkpoint.position.carried.is_some() => {
                self.progress.acted(&format!(
                    "{} holds the state its run carried from batch to batch; this run carries \
                     none (Fit::carry), and it is not used",
                    checkpoint.dir.display()
                ));
                None
            }
            _ => None,
        };
        let groups = Groups::start(self.accumulate, &start.at, &start.trace);
        let recording_device = device.clone();
        let mut frontend = Frontend {
            engine: Engine::new(
                Backend::new(start.net, start.optimizer, self.loss, metrics)
                    .distributed(self.distributed, &device)
                    .precision(self.precision)
                    .carry(self.carry.map(Carry::new), saved_state)?,
                Some(device),
            ),
            replicas: self.replicas,
            kind: self.policy.kind(),
            policy: self.policy,
            progress: self.progress,
            evaluations: self.evaluations,
            checkpointing: self.checkpointing,
            rank,
            epochs: self.epochs,
            rates: Rates {
                base,
                schedule: self.schedule,
                total,
                made: 1.0,
            },
            example_shape,
            at: start.at,
            trace: start.trace,
            trace_log: Default::default(),
            start: Instant::now(),
            stopped: None,
            last_checkpoint: None,
            callbacks: self.callbacks,
            best: self.best,
            ended_early,
            halted: false,
            groups,
            recording_mb: None,
        };
        if self.warmup
            && let Some(batch) = first
        {
            frontend.warmup(batch)?;
        }
        if let Some((because, Some(first))) = hybridize {
            let recorded = match because {
                Some(because) => Err(because),
                None => frontend
                    .engine
                    .issue(move |b: &mut Backend<B, L>| {
                        Ok(Host(b.record(&first, &recording_device)))
                    })
                    .wait()?,
            };
            frontend.recording_mb = recorded.as_ref().ok().map(|(_, holds)| holds.mb());
            super::hybridize::tell(&mut *frontend.progress, recorded);
        }
        for callback in &mut frontend.callbacks {
            callback.train_begin(&frontend.trace)?;
        }
        // Inferring sizes here (and whatever the caller ran on this thread before) gave it a
        // team of OpenMP threads; only the backend's should be left while it trains.
        ember::kernels::release_threads();
        let run_in_progress = RunInProgress::start();
        frontend.start = Instant::now();
        let mut carried = start.carried;
        let mut trained = Ok(());
        for epoch in frontend.at.epoch..self.epochs {
            if frontend.ended_early.is_some() {
                break;
            }
            match frontend.epoch(data, epoch, std::mem::take(&mut carried)) {
                Ok(false) => {}
                Ok(true) => break,
                Err(error) => {
                    trained = Err(error);
                    break;
                }
            }
        }
        drop(run_in_progress);
        // The directory is free again for the next run (a resume, most likely).
        if let Some(checkpointing) = &frontend.checkpointing
            && writes
        {
            checkpointing.unlock();
        }
        // The network goes to this thread, which saves it: nothing of the worker's may still
        // be in flight under its reads (see `ember::engine::settle`). A device that fails or
        // falls silent there fails the run as a step would, rescue included.
        let trained = trained.and_then(|()| {
            frontend
                .engine
                .issue(|b: &mut Backend<B, L>| {
                    let counts = b.end_recording()?;
                    ember::engine::settle(b.net()?)?;
                    Ok(Host(counts))
                })
                .wait()
        });
        if let Ok(Some(counts)) = &trained {
            super::hybridize::tell_counts(&mut *frontend.progress, *counts);
        }
        if let Err(error) = trained {
            // Where a remote server went, every device that waits on it fails alike: say which.
            let error = ember::device::remote::diagnosed(error);
            if let Some(rescue) = self.rescue
                && frontend.at.steps > 0
            {
                // The worker's work is done (`salvage` waits for it), so a recorded step's
                // slots are read here.
                let mut backend = frontend.engine.salvage();
                let net = backend.as_mut().and_then(|b| b.net().ok());
                rescue(net, &frontend.trace, &error);
            }
            return Err(error);
        }
        let mut backend = frontend.engine.finish()?;
        for callback in &mut frontend.callbacks {
            callback.train_end(&frontend.trace)?;
        }
        Ok(FitRun {
            net: backend.net()?.clone(),
            optimizer: backend.optimizer,
            trace: frontend.trace,
            stopped: frontend.stopped,
            ended_early: frontend.ended_early,
        })
    }
}
