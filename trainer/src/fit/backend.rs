//! What lives on the engine's worker during a run: the network, the optimizer and the loss,
//! and the units the loop issues to it: the warm-up, a training step (or a batch whose
//! gradients wait for the next ones, [`super::Fit::accumulate`]), and the reads of the epoch's
//! metrics and of the network itself.

mod passes;
mod recorded;
mod step_losses;

use std::sync::Arc;

use burn::optim::GradientsAccumulator;
use burn::tensor::{Device, Tensor};
use ember::parallel::mpi::{Collective, Exchanged};
use ember::{Block, Loss, Optimizer, Precision, Replicas, Result};
use ember_datasets::Batch;

use super::carry::Carry;
use crate::checkpoint::SavedState;
use crate::metric::Metric;
use crate::target::Target;
use passes::{Pass, Streams, gradients};
pub(super) use recorded::Holds;
use recorded::Recorded;
pub(super) use step_losses::StepLosses;

/// The backend's state: it lives on the engine's worker thread during the run. The network is
/// always the one after the last step that succeeded, once [`Backend::net`] copied it out of
/// a recorded step's slots.
pub(super) struct Backend<B, L: Loss>
where
    L::Target: Target,
{
    net: B,
    pub(super) optimizer: Optimizer,
    loss: Arc<L>,
    /// The training metrics, updated on the main device, read at the epoch's end.
    metrics: Vec<Box<dyn Metric>>,
    /// The steps' outputs (detached) and targets not yet given to the metrics.
    pending: Pending<L::Target>,
    /// The summed gradients of the batches since the last update, and their examples.
    accumulated: GradientsAccumulator<B>,
    accumulated_examples: usize,
    /// The job this process is a rank of ([`super::Fit::distributed`]), and the device its
    /// summed gradients go to.
    distributed: Option<(Collective, Device)>,
    /// When each all-reduce since the job's epoch sums were last read began and returned.
    exchanges: Vec<[std::time::Instant; 2]>,
    /// The precision of the forward passes' products ([`super::Fit::precision`]).
    precision: Precision,
    /// The state the network carries from batch to batch ([`super::Fit::carry`]).
    carry: Option<Carry<B>>,
    /// The recorded step ([`super::Fit::hybridize`]), which holds the parameters while it
    /// lives; `stale` where `net` is older than they are.
    recorded: Option<Recorded<B, L>>,
    stale: bool,
}

/// Outputs the metrics have not seen yet, and how many values they hold.
struct Pending<T> {
    batches: Vec<(Tensor<2>, T)>,
    values: usize,
}

/// The metrics take the steps' outputs in chunks of at least this many values (a MiB of
/// `f32`): one update of a few small kernels per chunk rather than per step, which on the CPU,
/// where a kernel's launch costs more than a metric's arithmetic, kept four metrics' cost per
/// epoch from 15% (every step, d2l's MLP on Fashion-MNIST) to the noise. Nothing is read back.
const CHUNK_VALUES: usize = 1 << 18;

impl<B, L> Backend<B, L>
where
    B: Block + 'static,
    L: Loss + Send + Sync + 'static,
    L::Target: Target,
{
    pub(super) fn new(
        net: B,
        optimizer: Optimizer,
        loss: L,
        metrics: Vec<Box<dyn Metric>>,
    ) -> Self {
        Self {
            net,
            optimizer,
            loss: Arc::new(loss),
            metrics,
            pending: Pending {
                batches: Vec::new(),
                values: 0,
            },
            accumulated: GradientsAccumulator::new(),
            accumulated_examples: 0,
            distributed: None,
            exchanges: Vec::new(),
            precision: Precision::F32,
            carry: None,
            recorded: None,
            stale: false,
        }
    }

    /// Carries a state from each batch to the next through `carry`'s forward pass, from
    /// `saved` where a checkpoint in the middle of an epoch held one.
    pub(super) fn carry(
        mut self,
        carry: Option<Carry<B>>,
        saved: Option<(&SavedState, &Device)>,
    ) -> Result<Self> {
        self.carry = carry;
        if let (Some(carry), Some((saved, device))) = (&mut self.carry, saved) {
            carry.restore(saved, device)?;
        }
        Ok(self)
    }

    /// The carried state as it stands, read back, for a checkpoint.
    pub(super) fn carried_state(&self) -> Result<Option<SavedState>> {
        self.carry.as_ref().map_or(Ok(None), Carry::saved)
    }

    /// Runs the forward passes under [`ember::autocast`] in `precision`, on every replica.
    pub(super) fn precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self
    }

    /// Makes this backend a rank of `collective`'s job: each update sums the gradients over
    /// the ranks (on `device`), and the training metrics are the job's.
    pub(super) fn distributed(mut self, collective: Option<Collective>, device: &Device) -> Self {
        self.distributed = collective.map(|c| (c, device.clone()));
        self
    }

    /// One batch: upload, forward, loss, backward, on one device or split across the replicas,
    /// and the training metrics' updates. Where `update`, the optimizer then steps at `rate`
    /// with the gradients summed since the last update and this batch's, divided by all their
    /// examples (Gluon's `grad_req='add'` then `step(batch_size)`); otherwise the gradients are
    /// added to that sum. A carried state starts again at an epoch's `first` batch. Returns
    /// each device's per-example loss.
    pub(super) fn step(
        &mut self,
        batch: Batch,
        replicas: &Replicas,
        seed: Option<u64>,
        (rate, update): (f64, bool),
        first: bool,
    ) -> Result<StepLosses> {
        let size = batch.len();
        let pass = Pass {
            metered: !self.metrics.is_empty(),
            precision: self.precision,
        };
        let streams = seed.map(Streams);
        if let Some(streams) = streams {
            // burn's own generator too, for what a user's block draws from it: one per device
            // where the backend has one per device (flex has one per process, which the
            // replicas share).
            for (index, device) in replicas.devices().iter().enumerate().rev() {
                device.seed(streams.of(index));
            }
        }
        if let Some(recorded) = &mut self.recorded {
            // `Fit::hybridize` records only where every step updates, on one device.
            let (loss, metered) = recorded.step(&batch, rate, pass.metered)?;
            self.stale = true;
            // The rate the run handed back has, as the eager steps leave it.
            self.optimizer.set_learning_rate(rate);
            self.pend(metered)?;
            return Ok(StepLosses(vec![loss]));
        }
        if first && let Some(carry) = &mut self.carry {
            carry.reset();
        }
        let carry = self.carry.as_mut();
        let (grads, losses, outputs) = gradients(
            &self.net,
            &*self.loss,
            batch,
            replicas,
            (streams, carry),
            pass,
        )?;
        self.pend(outputs)?;
        self.accumulated.accumulate(&self.net, grads);
        self.accumulated_examples += size;
        if update {
            self.apply(rate)?;
        }
        Ok(StepLosses(losses))
    }

    /// The optimizer's step at `rate` with the gradients summed since the last one, where
    /// there are any: the last, shorter group of an epoch that `--accumulate` does not divide.
    pub(super) fn apply(&mut self, rate: f64) -> Result<()> {
        let examples = std::mem::take(&mut self.accumulated_examples);
        if examples == 0 {
            return Ok(());
        }
        // The gradients' kernels are launched as they stand before anything reads them
        // (`flush`: no wait for the device), so that the optimizer's step always starts from
        // gradients of their own. A rank's all-reduce must read them from memory; without this,
        // kernel fusion could fuse a plain process's last gradient products with the
        // optimizer's arithmetic, and burn's tuning then picked other matrix-product kernels
        // for the two (on an H100, with and without TF32), so one rank through NCCL stepped
        // 7.2e-4 away from the plain process (issue 61).
        for device in self.net.devices() {
            device.flush().map_err(|e| ember::Error::Device {
                device: format!("{device:?}"),
                reason: format!("launching the gradients' kernels: {e:?}"),
            })?;
        }
        let mut grads = self.accumulated.grads();
        // DDP's step: the gradients summed over the ranks, divided by every rank's examples
        // (the shards are equal, so each rank had as many).
        let mut examples = examples;
        if let Some((collective, device)) = &mut self.distributed {
            let started = std::time::Instant::now();
            grads = collective.sum_gradients(&self.net, grads, device)?;
            self.exchanges.push([started, std::time::Instant::now()]);
            examples *= collective.size();
        }
        self.optimizer.set_learning_rate(rate);
        self.net = self
            .optimizer
            .step_params(self.net.clone(), grads, examples)?;
        Ok(())
    }

    /// The book's warm-up (`loss(y, net(X)).wait_to_read()`), then a backward pass and an
    /// optimizer step, on every replica, so that every kernel and buffer a training step uses
    /// exists before the clock starts. All of it runs on copies: the network's
    /// (`valid().train()`: its own tensors and running statistics) and the optimizer's (its own
    /// optimizer state). The network, its running statistics and the optimizer state stay as
    /// they are.
    pub(super) fn warmup(&self, batch: &Batch, replicas: &Replicas) -> Result<StepLosses> {
        let copy = self.net.valid().train();
        let pass = Pass {
            metered: false,
            precision: self.precision,
        };
        // The carried state stays as it is: the warm-up starts from none.
        let mut carry = self.carry.as_ref().map(Carry::fresh);
        let (grads, losses, _) = gradients(
            &copy,
            &*self.loss,
            batch.clone(),
            replicas,
            (None, carry.as_mut()),
            pass,
        )?;
        let stepped = self
            .optimizer
            .clone()
            .step_params(copy, grads, batch.len())?;
        drop(stepped);
        Ok(StepLosses(losses))
    }

    /// In a job, `losses` (this rank's batch means) become the job's: the mean of every rank's
    /// mean of each batch (the shards are equal). Alone, as given.
    pub(super) fn job_losses(&self, mut losses: Vec<f64>) -> Vec<f64> {
        if let Some((collective, _)) = &self.distributed {
            collective.sum_f64(&mut losses);
            let ranks = collective.size() as f64;
            losses.iter_mut().for_each(|l| *l /= ranks);
        }
        losses
    }

    /// A job's epoch end: `metrics` (this rank's, as JSON) become rank 0's, so that every rank
    /// decides alike on them; and what this rank's all-reduces did since the last call, and
    /// when each began and returned. Alone, as given.
    pub(super) fn job_epoch(&mut self, metrics: Vec<u8>) -> JobEpoch {
        let spans = std::mem::take(&mut self.exchanges);
        let Some((collective, _)) = &mut self.distributed else {
            return (metrics, Exchanged::default(), spans);
        };
        let first = collective.gather(&metrics).swap_remove(0);
        (first, collective.take_exchanged(), spans)
    }

    /// Keeps a step's outputs and targets for the metrics, and gives them what is pending once
    /// it makes a chunk.
    fn pend(&mut self, outputs: impl IntoIterator<Item = (Tensor<2>, L::Target)>) -> Result<()> {
        for (out, y) in outputs {
            self.pending.values += out.dims().iter().product::<usize>();
            self.pending.batches.push((out, y));
        }
        if self.pending.values >= CHUNK_VALUES {
            self.update_metrics()?;
        }
        Ok(())
    }

    /// Gives the pending outputs to the metrics, as one chunk.
    fn update_metrics(&mut self) -> Result<()> {
        let batches = std::mem::take(&mut self.pending.batches);
        self.pending.values = 0;
        if batches.is_empty() {
            return Ok(());
        }
        let (outputs, targets): (Vec<Tensor<2>>, Vec<L::Target>) = batches.into_iter().unzip();
        let (outputs, targets) = (Tensor::cat(outputs, 0), L::Target::cat(targets));
        for metric in &mut self.metrics {
            metric.update(&outputs, targets.truth())?;
        }
        Ok(())
    }

    /// Each training metric's sums over this epoch's steps so far, by name, for a checkpoint
    /// (none at an epoch's end, where they start again; none for a metric that cannot say).
    pub(super) fn metric_states(&mut self) -> Result<std::collections::BTreeMap<String, Vec<f64>>> {
        self.update_metrics()?;
        // A rank's checkpoint holds the job's sums; each rank's own go on from zero, so the
        // epoch's end adds them once (see [`super::Fit::distributed`]).
        if let Some((collective, device)) = &self.distributed {
            let mut states = std::collections::BTreeMap::new();
            for metric in &mut self.metrics {
                let name = metric.name();
                if let Some(state) = metric.state()? {
                    let state = collective.sum_sparse(&state, &name)?;
                    // Rank 0 holds the job's sums from here on, the others start again.
                    match collective.rank() {
                        0 => metric.restore(&state, device)?,
                        _ => metric.reset(),
                    }
                    if !state.is_empty() && state.iter().all(|v| v.is_finite()) {
                        states.insert(name, state);
                    }
                }
            }
            return Ok(states);
        }
        let mut states = std::collections::BTreeMap::new();
        for metric in &self.metrics {
            // JSON has no NaN or infinity: such a sum is not kept.
            if let Some(state) = metric.state()?
                && !state.is_empty()
                && state.iter().all(|v| v.is_finite())
            {
                states.insert(metric.name(), state);
            }
        }
        Ok(states)
    }

    /// The mean loss of the network as the last update left it on `batch`, on `device`: an
    /// inference copy's (no autodiff, BatchNorm's running statistics, no Dropout), in f32.
    pub(super) fn loss_after_update(&mut self, mut batch: Batch, device: &Device) -> Result<f32> {
        let device = device.clone().inner();
        let net = self.net()?.valid();
        let x = batch.take_x_on(&device)?;
        let y = L::Target::upload(&batch, &device)?;
        let pred: Tensor<2> = net.forward(x).into_rank()?;
        L::Target::check(&batch, pred.dims()[1])?;
        let mean = self.loss.forward(pred, y)?.mean();
        Ok(crate::metric::read_floats(mean, "the loss after the last update")?[0] as f32)
    }

    /// Each training metric's value over this epoch's steps, by name, read once; they start
    /// again for the next epoch.
    pub(super) fn train_metrics(&mut self) -> Result<Vec<(String, f64)>> {
        self.update_metrics()?;
        if let Some((collective, device)) = &self.distributed {
            for metric in &mut self.metrics {
                if let Some(state) = metric.state()? {
                    let state = collective.sum_sparse(&state, &metric.name())?;
                    metric.restore(&state, device)?;
                }
            }
        }
        let values = self
            .metrics
            .iter()
            .map(|m| Ok((m.name(), m.get()?)))
            .collect::<Result<Vec<_>>>();
        for metric in &mut self.metrics {
            metric.reset();
        }
        values
    }
}

/// What [`Backend::job_epoch`] gives: rank 0's metrics, the all-reduces' totals, and their
/// spans.
pub(super) type JobEpoch = (Vec<u8>, Exchanged, Vec<[std::time::Instant; 2]>);

impl<B, L> Backend<B, L>
where
    B: Block + 'static,
    L: Loss + Send + Sync + 'static,
    L::Target: Target,
{
    /// Records the training step on `batch`'s shape ([`Recorded::record`]); returns why the
    /// steps run eagerly where it cannot, or whether the device replays a graph and what the
    /// recording holds.
    pub(in crate::fit) fn record(
        &mut self,
        batch: &Batch,
        device: &Device,
    ) -> std::result::Result<(bool, Holds), String> {
        let recorded =
            Recorded::record(&self.net, &self.optimizer, self.loss.clone(), batch, device)?;
        let made = (recorded.is_graph(), recorded.holds);
        self.recorded = Some(recorded);
        Ok(made)
    }

    /// The network as the last step left it.
    pub(in crate::fit) fn net(&mut self) -> Result<&B> {
        if self.stale
            && let Some(recorded) = &self.recorded
        {
            self.net = recorded.trained(self.net.clone())?;
            self.stale = false;
        }
        Ok(&self.net)
    }

    /// Ends the recording, the network copied out of its slots first: at the run's end, on
    /// the worker, before the backend leaves it. Returns how many steps ran the recording,
    /// and how many ran outside it (batches of another shape).
    pub(in crate::fit) fn end_recording(&mut self) -> Result<Option<(usize, usize)>> {
        self.net()?;
        Ok(self.recorded.take().map(|recorded| recorded.counts))
    }
}
