//! The training loop: the frontend prepares and issues batches through the [`Engine`], the
//! [`SyncPolicy`] decides how far it may run ahead, and every batch lands in the [`Trace`].
//!
//! ```
//! use burn::prelude::*;
//! use ember::{Activation, Block, Dense, Init, L2Loss, Sequential, Trainer};
//! use ember_datasets::Synthetic;
//! use ember_trainer::fit::{FitOptions, SyntheticEpochs, fit};
//! use ember_trainer::policy::Window;
//!
//! let device = Device::flex().autodiff();
//! let net: Sequential = Sequential::new()
//!     .add(Dense::new(16).activation(Activation::Relu))
//!     .add(Dense::new(1))
//!     .initialize(Init::default(), &device);
//! let trainer = Trainer::new(&net, "sgd", 0.01).unwrap();
//! let mut data = SyntheticEpochs::new(Synthetic::chapter(8, 4, 0), 5);
//! let run = fit(net, L2Loss, trainer, &device, &mut data, &mut Window(2), &FitOptions::epochs(2), &mut ())
//!     .unwrap();
//! assert_eq!(run.trace.batches.len(), 10);
//! assert_eq!(run.trace.epochs.len(), 2);
//! ```

use std::collections::BTreeMap;
use std::time::Instant;

use burn::tensor::{Device, Int, Tensor};
use ember::engine::Engine;
use ember::{Block, Error, Loss, NdTensor, Result, Trainer};
use ember_datasets::{Batch, Synthetic};

use crate::memory::{mb, rss_bytes};
use crate::policy::{InFlight, SyncPolicy};
use crate::trace::{BatchRecord, EpochRecord, Trace};

/// A loss target built from a host batch's `y` on a device.
pub trait Target: Sized {
    /// Uploads the targets of `batch` to `device`.
    fn upload(batch: &Batch, device: &Device) -> Result<Self>;

    /// Checks the host targets against the width of the network's output, before the loss
    /// sees them (class labels must index an output). Needs no device read.
    fn check(_batch: &Batch, _outputs: usize) -> Result<()> {
        Ok(())
    }
}

impl Target for Tensor<2> {
    fn upload(batch: &Batch, device: &Device) -> Result<Self> {
        NdTensor::from_host(&batch.y, &batch.y_shape, device)?.into_rank()
    }
}

impl Target for Tensor<1, Int> {
    /// Class indices, one per example (`y_shape` must be `[batch, 1]`).
    fn upload(batch: &Batch, device: &Device) -> Result<Self> {
        if batch.y_shape[1] != 1 {
            return Err(Error::Shape {
                what: "class labels".to_string(),
                expected: "[batch, 1]".to_string(),
                got: batch.y_shape.to_vec(),
            });
        }
        let labels: Vec<i64> = batch.y.iter().map(|&y| y as i64).collect();
        Ok(Tensor::<1, Int>::from_ints(labels.as_slice(), device))
    }

    /// Every label must be a class index below the network's output width.
    fn check(batch: &Batch, outputs: usize) -> Result<()> {
        match batch
            .y
            .iter()
            .enumerate()
            .find(|(_, y)| !(y.fract() == 0.0 && **y >= 0.0 && (**y as usize) < outputs))
        {
            Some((row, y)) => Err(Error::InvalidValue {
                name: "class label",
                value: y.to_string(),
                reason: format!(
                    "example {row} of the batch: the network has {outputs} outputs, so labels \
                     must be in 0..{outputs}"
                ),
            }),
            None => Ok(()),
        }
    }
}

/// Host batches, epoch by epoch.
pub trait BatchSource {
    /// The batches of epoch `epoch`, in the order they are to be issued.
    fn batches(&mut self, epoch: usize) -> Box<dyn Iterator<Item = Result<Batch>> + '_>;
}

/// The chapter's seeded synthetic data, `batches` per epoch; each epoch gets new batches.
#[derive(Debug, Clone)]
pub struct SyntheticEpochs {
    data: Synthetic,
    batches: usize,
}

impl SyntheticEpochs {
    /// `batches` batches per epoch from `data`.
    pub fn new(data: Synthetic, batches: usize) -> Self {
        Self { data, batches }
    }
}

impl BatchSource for SyntheticEpochs {
    fn batches(&mut self, epoch: usize) -> Box<dyn Iterator<Item = Result<Batch>> + '_> {
        let first = (epoch * self.batches) as u64;
        Box::new((0..self.batches as u64).map(move |i| Ok(self.data.batch(first + i))))
    }
}

impl BatchSource for ember_datasets::DataLoader {
    fn batches(&mut self, epoch: usize) -> Box<dyn Iterator<Item = Result<Batch>> + '_> {
        Box::new(self.epoch(epoch).map(Ok))
    }
}

/// A metric computed after every epoch on a snapshot of the network taken without autodiff
/// (`Module::valid`), on the caller's thread: test accuracy, validation loss…
pub struct Evaluation<B> {
    /// The metric's name, used as its column in the epoch records (`test_acc`).
    pub name: String,
    /// Computes the metric.
    pub metric: Metric<B>,
}

/// A metric of a network snapshot.
pub type Metric<B> = Box<dyn Fn(&B) -> Result<f64>>;

/// How long to train, whether to run the book's warm-up batch first, and what to evaluate
/// after each epoch.
///
/// Before anything else, `fit` passes the first batch through the network's
/// [`Block::infer`]: layers whose input size was deferred take it from there, and a batch
/// that does not fit the network is an error naming the layer, before any training step.
/// Every later batch must have the first one's example shape.
pub struct FitOptions<B> {
    /// Epochs to run.
    pub epochs: usize,
    /// One unmeasured training step on the first batch before the first epoch, so that
    /// initialization (kernel compilation, allocation) is not counted, as the book's
    /// `loss(y, net(X)).wait_to_read()` does. It runs on copies of the network and of the
    /// trainer: no parameter, running statistic or optimizer state changes.
    pub warmup: bool,
    /// Metrics computed after each epoch; their time does not count in the epoch's.
    pub evaluations: Vec<Evaluation<B>>,
}

impl<B> FitOptions<B> {
    /// `epochs` epochs with the warm-up batch and no evaluation.
    pub fn epochs(epochs: usize) -> Self {
        Self {
            epochs,
            warmup: true,
            evaluations: Vec::new(),
        }
    }

    /// Adds a metric computed after each epoch.
    pub fn evaluate(
        mut self,
        name: impl Into<String>,
        metric: impl Fn(&B) -> Result<f64> + 'static,
    ) -> Self {
        self.evaluations.push(Evaluation {
            name: name.into(),
            metric: Box::new(metric),
        });
        self
    }
}

/// Hears about the run as it goes: for progress lines and bars.
pub trait Progress {
    /// The frontend just issued `batch` of `epoch`, `elapsed` seconds into the epoch.
    fn issued(&mut self, _epoch: usize, _batch: usize, _elapsed: f64) {}
    /// An epoch finished.
    fn epoch_done(&mut self, _record: &EpochRecord) {}
}

impl Progress for () {}

/// What `fit` hands back.
pub struct FitRun<B> {
    /// The trained network.
    pub net: B,
    /// The trainer, with its optimizer state.
    pub trainer: Trainer,
    /// Every batch and epoch.
    pub trace: Trace,
}

/// The backend's state: it lives on the engine's worker thread during the run.
struct Backend<B, L> {
    net: Option<B>,
    trainer: Trainer,
    loss: L,
}

/// Trains `net` on `data` under `policy`: any Block, any Loss, any policy.
#[allow(clippy::too_many_arguments)]
pub fn fit<B, L>(
    net: B,
    loss: L,
    trainer: Trainer,
    device: &Device,
    data: &mut dyn BatchSource,
    policy: &mut dyn SyncPolicy,
    options: &FitOptions<B>,
    progress: &mut dyn Progress,
) -> Result<FitRun<B>>
where
    B: Block + 'static,
    L: Loss + Send + 'static,
    L::Target: Target,
{
    let first = match data.batches(0).next() {
        Some(batch) => Some(batch?),
        None => None,
    };
    let (net, example_shape) = match &first {
        Some(batch) => {
            let x = NdTensor::from_host(&batch.x, &batch.x_shape, device)?;
            let (net, _) = net.infer(x)?;
            (net, Some(batch.x_shape[1..].to_vec()))
        }
        None => (net, None),
    };
    let engine = Engine::new(
        Backend {
            net: Some(net),
            trainer,
            loss,
        },
        Some(device.clone()),
    );
    let name = policy.name();
    // On the backend worker, as every step: its thread's first allocations are warm-up's too.
    if options.warmup
        && let Some(batch) = first
    {
        let device = device.clone();
        engine
            .issue(move |backend: &mut Backend<B, L>| {
                let net = backend.net.as_ref().ok_or_else(lost)?;
                warmup(net, &backend.loss, &backend.trainer, &batch, &device)
            })
            .wait()?;
    }

    let start = Instant::now();
    let seconds = |at: Instant| at.saturating_duration_since(start).as_secs_f64();
    let mut trace = Trace::default();
    for epoch in 0..options.epochs {
        let rss_before = rss_bytes();
        let mut peak_rss = rss_before;
        let mut flight = InFlight::new(epoch, rss_before);
        let mut records: Vec<BatchRecord> = Vec::new();
        let mut batches = data.batches(epoch);
        let epoch_start = Instant::now();
        let mut last_issue = epoch_start;
        for index in 0.. {
            // No policy call for a batch that does not exist, where the source can tell.
            if batches.size_hint().1 == Some(0) {
                break;
            }
            policy.before_issue(index, &mut flight)?;
            let issue_start = Instant::now();
            let Some(batch) = batches.next() else { break };
            let batch = batch?;
            if let Some(expected) = &example_shape
                && batch.x_shape[1..] != expected[..]
            {
                return Err(Error::Shape {
                    what: format!("batch {index} of epoch {epoch}"),
                    expected: format!("examples of shape {expected:?}, as the first batch's"),
                    got: batch.x_shape.clone(),
                });
            }
            let data_wait = issue_start.elapsed().as_secs_f64();
            let handle = engine.issue(train_step::<B, L>(batch, device.clone()));
            flight.push(index, handle);
            last_issue = Instant::now();
            let rss = rss_bytes();
            peak_rss = peak_rss.max(rss);
            records.push(BatchRecord {
                policy: name.clone(),
                epoch,
                batch: index,
                issue_start: seconds(issue_start),
                issue_end: seconds(last_issue),
                done: f64::NAN,
                observed: f64::NAN,
                loss: f32::NAN,
                rss,
                pool_in_use: None,
                pool_reserved: None,
                depth: flight.depth(),
                data_wait,
            });
            progress.issued(epoch, index, seconds(last_issue) - seconds(epoch_start));
        }
        drop(batches);
        flight.wait_all()?;
        let epoch_end = Instant::now();
        let rss_after = rss_bytes();
        peak_rss = peak_rss.max(rss_after);

        let mut peak_pool: Option<u64> = None;
        for observed in flight.take_observed() {
            let record = &mut records[observed.batch];
            record.done = seconds(observed.done.at);
            record.observed = seconds(observed.at);
            record.loss = observed.done.value;
            let pool = observed.handle.pool();
            record.pool_in_use = pool.map(|p| p.in_use);
            record.pool_reserved = pool.map(|p| p.reserved);
            if let Some(pool) = pool {
                peak_pool = Some(peak_pool.unwrap_or(0).max(pool.in_use));
            }
        }
        let mut metrics = BTreeMap::new();
        if !options.evaluations.is_empty() {
            let snapshot = snapshot(&engine, device)?;
            for evaluation in &options.evaluations {
                metrics.insert(evaluation.name.clone(), (evaluation.metric)(&snapshot)?);
            }
        }
        let losses: f64 = records.iter().map(|r| f64::from(r.loss)).sum();
        let epoch_record = EpochRecord {
            policy: name.clone(),
            epoch,
            batches: records.len(),
            time: (epoch_end - epoch_start).as_secs_f64(),
            issue_time: (last_issue - epoch_start).as_secs_f64(),
            rss_before,
            increased_mb: mb(rss_after as f64 - rss_before as f64),
            peak_growth_mb: mb(peak_rss as f64 - rss_before as f64),
            peak_pool_mb: peak_pool.map(|p| mb(p as f64)),
            mean_loss: losses / records.len().max(1) as f64,
            max_depth: records.iter().map(|r| r.depth).max().unwrap_or(0),
            metrics,
        };
        progress.epoch_done(&epoch_record);
        trace.batches.extend(records);
        trace.epochs.push(epoch_record);
    }

    let backend = engine.finish()?;
    let net = backend.net.ok_or_else(lost)?;
    Ok(FitRun {
        net,
        trainer: backend.trainer,
        trace,
    })
}

/// The network as it stands after every issued step, without autodiff, handed over by the
/// backend worker.
fn snapshot<B, L>(engine: &Engine<Backend<B, L>>, device: &Device) -> Result<B>
where
    B: Block + 'static,
    L: Loss + Send + 'static,
{
    let (sender, receiver) = std::sync::mpsc::channel();
    let device = device.clone();
    engine
        .issue(move |backend: &mut Backend<B, L>| {
            let net = backend.net.as_ref().ok_or_else(lost)?;
            let _ = sender.send(net.valid());
            Ok(Tensor::<1>::zeros([1], &device))
        })
        .wait()?;
    receiver
        .recv()
        .map_err(|_| Error::Execution("the backend did not hand over the network".to_string()))
}

/// One training step on the backend: upload, forward, loss, backward, `step(batch_size)`.
/// Returns the per-example loss, whose readback marks the batch as done.
fn train_step<B, L>(
    batch: Batch,
    device: Device,
) -> impl FnOnce(&mut Backend<B, L>) -> Result<Tensor<1>> + Send + 'static
where
    B: Block + 'static,
    L: Loss + Send + 'static,
    L::Target: Target,
{
    move |backend: &mut Backend<B, L>| {
        let size = batch.len();
        let l = loss_of(
            backend.net.as_ref().ok_or_else(lost)?,
            &backend.loss,
            &batch,
            &device,
        )?;
        drop(batch);
        let grads = l.backward();
        let net = backend.net.take().ok_or_else(lost)?;
        backend.net = Some(backend.trainer.step(net, grads, size)?);
        Ok(l)
    }
}

/// The error for a network a failed step took away.
fn lost() -> Error {
    Error::Execution("the network was lost in a failed step".to_string())
}

/// The per-example loss of `net` on `batch`: upload, forward, check the targets, loss.
fn loss_of<B, L>(net: &B, loss: &L, batch: &Batch, device: &Device) -> Result<Tensor<1>>
where
    B: Block,
    L: Loss,
    L::Target: Target,
{
    let x = NdTensor::from_host(&batch.x, &batch.x_shape, device)?;
    let y = L::Target::upload(batch, device)?;
    let pred: Tensor<2> = net.forward(x).into_rank()?;
    L::Target::check(batch, pred.dims()[1])?;
    loss.forward(pred, y)
}

/// The warm-up: the book's forward pass and loss (`loss(y, net(X)).wait_to_read()`), then a
/// backward pass and an optimizer step, so that every kernel and buffer a training step uses
/// exists before the clock starts. All of it runs on copies: the network's (`valid().train()`:
/// its own tensors and running statistics) and the trainer's (its own optimizer state). The
/// network, its running statistics and the optimizer state stay as they are. Returns the loss.
fn warmup<B, L>(
    net: &B,
    loss: &L,
    trainer: &Trainer,
    batch: &Batch,
    device: &Device,
) -> Result<Tensor<1>>
where
    B: Block,
    L: Loss,
    L::Target: Target,
{
    let copy = net.valid().train();
    let l = loss_of(&copy, loss, batch, device)?;
    let stepped = trainer
        .clone()
        .step(copy, l.clone().backward(), batch.len())?;
    drop(stepped);
    Ok(l)
}
