//! The training loop: the frontend prepares and issues batches through the [`Engine`], the
//! [`SyncPolicy`] decides how far it may run ahead, and every batch lands in the [`Trace`].
//! A run is set up with [`Fit`], and can keep checkpoints and resume from them:
//!
//! ```
//! use burn::prelude::*;
//! use ember::{Activation, Block, Dense, Init, L2Loss, Sequential, Trainer};
//! use ember_datasets::Synthetic;
//! use ember_trainer::checkpoint::{Checkpoint, Checkpointing};
//! use ember_trainer::fit::{Fit, SyntheticEpochs};
//!
//! let device = Device::flex().autodiff();
//! let build = || -> Sequential {
//!     Sequential::new()
//!         .add(Dense::new(16).activation(Activation::Relu))
//!         .add(Dense::new(1))
//!         .initialize(Init::default(), &device)
//! };
//! let dir = tempfile::tempdir().unwrap();
//! let mut data = SyntheticEpochs::new(Synthetic::chapter(8, 4, 0), 5);
//! let net = build();
//! let trainer = Trainer::new(&net, "adam", 0.01).unwrap();
//! Fit::new(net, L2Loss, trainer, &device)
//!     .epochs(2)
//!     .checkpoint(Checkpointing::new(dir.path()).every(3))
//!     .run(&mut data)
//!     .unwrap();
//!
//! // A new process: the same network, then the newest checkpoint (after step 9 of 10).
//! let last = Checkpoint::latest(dir.path()).unwrap().unwrap();
//! assert_eq!((last.position.epoch, last.position.next_batch), (1, 4));
//! let net = build();
//! let trainer = Trainer::new(&net, "adam", 0.01).unwrap();
//! let run = Fit::new(net, L2Loss, trainer, &device)
//!     .epochs(2)
//!     .resume(last)
//!     .run(&mut data)
//!     .unwrap();
//! assert_eq!(run.trace.batches.len(), 10);
//! ```

use std::collections::BTreeMap;
use std::time::Instant;

use burn::optim::GradientsParams;
use burn::tensor::{Device, Int, Tensor};
use ember::engine::{Engine, Outputs};
use ember::{Block, Error, Loss, NdTensor, Replicas, Result, Trainer};
use ember_datasets::{Batch, Synthetic};

use crate::checkpoint::{self, Checkpoint, Checkpointing, Position};
use crate::memory::{mb, rss_bytes};
use crate::policy::{InFlight, SyncPolicy};
use crate::signals::{RunInProgress, Signal, requested};
use crate::trace::{BatchRecord, EpochRecord, Trace};

/// A loss target built from a host batch's `y` on a device.
pub trait Target: Sized {
    /// Uploads the targets of `batch` to `device`.
    ///
    /// # Errors
    /// [`Error::Shape`] when the targets do not have the shape this kind of target needs.
    fn upload(batch: &Batch, device: &Device) -> Result<Self>;

    /// Checks the host targets against the width of the network's output, before the loss
    /// sees them (class labels must index an output). Needs no device read.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] naming the first target the output cannot take.
    fn check(_batch: &Batch, _outputs: usize) -> Result<()> {
        Ok(())
    }

    /// How many of the batch's examples the network's outputs got right, on the device, where
    /// "right" means something (class labels: the largest output is the label). The loop sums
    /// it over an epoch's steps and reads it once, as `train_acc`: d2l's `train_ch3` metric,
    /// from the forward passes the steps already made.
    fn correct(_outputs: &Tensor<2>, _target: &Self) -> Option<Tensor<1, Int>> {
        None
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

    fn correct(outputs: &Tensor<2>, labels: &Self) -> Option<Tensor<1, Int>> {
        let [rows, _] = outputs.dims();
        let predicted = outputs.clone().detach().argmax(1).reshape([rows]);
        Some(predicted.equal(labels.clone()).int().sum())
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

    /// The batches of epoch `epoch` from batch `first` on, for a run that resumes inside an
    /// epoch. By default the earlier ones are made and passed over.
    fn batches_from(
        &mut self,
        epoch: usize,
        first: usize,
    ) -> Box<dyn Iterator<Item = Result<Batch>> + '_> {
        Box::new(self.batches(epoch).skip(first))
    }
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
        self.batches_from(epoch, 0)
    }

    fn batches_from(
        &mut self,
        epoch: usize,
        first: usize,
    ) -> Box<dyn Iterator<Item = Result<Batch>> + '_> {
        let start = (epoch * self.batches) as u64;
        Box::new(
            (first.min(self.batches) as u64..self.batches as u64)
                .map(move |i| Ok(self.data.batch(start + i))),
        )
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
/// Before anything else, the run passes the first batch through the network's
/// [`Block::infer`]: layers whose input size was deferred take it from there, and a batch
/// that does not fit the network is an error naming the layer, before any training step.
/// Every later batch must have the first one's example shape.
pub struct FitOptions<B> {
    /// Epochs to run.
    pub epochs: usize,
    /// One unmeasured pass on the first batch before the clock starts, so that initialization
    /// (kernel compilation, allocation) is not counted, as the book's
    /// `loss(y, net(X)).wait_to_read()` does. It runs on copies of the network and of the
    /// trainer: no parameter, running statistic or optimizer state changes, and the first
    /// batch's recorded loss is its loss before its own update.
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
    /// A checkpoint was written.
    fn checkpointed(&mut self, _dir: &std::path::Path) {}
}

impl Progress for () {}

impl<P: Progress + ?Sized> Progress for &mut P {
    fn issued(&mut self, epoch: usize, batch: usize, elapsed: f64) {
        (**self).issued(epoch, batch, elapsed);
    }
    fn epoch_done(&mut self, record: &EpochRecord) {
        (**self).epoch_done(record);
    }
    fn checkpointed(&mut self, dir: &std::path::Path) {
        (**self).checkpointed(dir);
    }
}

/// What a run hands back.
pub struct FitRun<B> {
    /// The trained network.
    pub net: B,
    /// The trainer, with its optimizer state.
    pub trainer: Trainer,
    /// Every batch and epoch.
    pub trace: Trace,
    /// The signal that stopped the run before its last epoch ended (see [`crate::signals`]);
    /// `None` when it ran to the end.
    pub stopped: Option<Signal>,
}

/// The backend's state: it lives on the engine's worker thread during the run.
struct Backend<B, L> {
    net: Option<B>,
    trainer: Trainer,
    loss: L,
    /// This epoch's correct predictions so far, summed on the device (for targets that have
    /// them), and the examples they were counted over.
    correct: Option<Tensor<1, Int>>,
    counted: usize,
}

/// A training run, set up by name in the style of burn-train's `Learner`, then [`Fit::run`]
/// on a data source. Any Block, any Loss, any policy.
///
/// ```
/// use burn::prelude::*;
/// use ember::{Activation, Block, Dense, Init, L2Loss, Sequential, Trainer};
/// use ember_datasets::Synthetic;
/// use ember_trainer::fit::{Fit, SyntheticEpochs};
/// use ember_trainer::policy::Window;
///
/// let device = Device::flex().autodiff();
/// let net: Sequential = Sequential::new()
///     .add(Dense::new(16).activation(Activation::Relu))
///     .add(Dense::new(1))
///     .initialize(Init::default(), &device);
/// let trainer = Trainer::new(&net, "sgd", 0.01).unwrap();
/// let mut data = SyntheticEpochs::new(Synthetic::chapter(8, 4, 0), 5);
/// let run = Fit::new(net, L2Loss, trainer, &device)
///     .policy(Window(2))
///     .epochs(2)
///     .run(&mut data)
///     .unwrap();
/// assert_eq!(run.trace.batches.len(), 10);
/// assert_eq!(run.trace.epochs.len(), 2);
/// ```
pub struct Fit<'a, B, L> {
    net: B,
    loss: L,
    trainer: Trainer,
    replicas: Replicas,
    policy: Box<dyn SyncPolicy + 'a>,
    options: FitOptions<B>,
    progress: Box<dyn Progress + 'a>,
    seed: Option<u64>,
    checkpointing: Option<Checkpointing>,
    resume: Option<Checkpoint>,
}

impl<'a, B, L> Fit<'a, B, L>
where
    B: Block + 'static,
    L: Loss + Send + Sync + 'static,
    L::Target: Target,
{
    /// Trains `net` with `loss` and `trainer` on `device` (an autodiff device): one epoch
    /// under a barrier, with the warm-up batch, until other settings say otherwise.
    pub fn new(net: B, loss: L, trainer: Trainer, device: &Device) -> Self {
        Self {
            net,
            loss,
            trainer,
            replicas: Replicas::single(device.clone()),
            policy: Box::new(crate::policy::Window(1)),
            options: FitOptions::epochs(1),
            progress: Box::new(()),
            seed: None,
            checkpointing: None,
            resume: None,
        }
    }

    /// Data parallelism over `replicas` (see [`ember::data_parallel`]): each step splits its
    /// batch across the devices, and the policy bounds the steps in flight across all of them.
    /// They replace the device given to [`Fit::new`]; the network must live on the first
    /// one, the main device. Every batch needs at least one example per device.
    ///
    /// ```
    /// use burn::prelude::*;
    /// use ember::{Block, Dense, Init, L2Loss, Replicas, Sequential, Trainer};
    /// use ember_datasets::Synthetic;
    /// use ember_trainer::fit::{Fit, SyntheticEpochs};
    ///
    /// let device = Device::flex().autodiff();
    /// let net: Sequential = Sequential::new().add(Dense::new(1)).initialize(Init::default(), &device);
    /// let trainer = Trainer::new(&net, "sgd", 0.01).unwrap();
    /// let replicas = Replicas::new(vec![device.clone(), device.clone()]).unwrap();
    /// let mut data = SyntheticEpochs::new(Synthetic::chapter(8, 4, 0), 3);
    /// let run = Fit::new(net, L2Loss, trainer, &device)
    ///     .replicas(replicas)
    ///     .run(&mut data)
    ///     .unwrap();
    /// // Each batch records when each of the two devices finished its half.
    /// assert!(run.trace.batches.iter().all(|b| b.device_done.len() == 2));
    /// ```
    pub fn replicas(mut self, replicas: Replicas) -> Self {
        self.replicas = replicas;
        self
    }

    /// The sync policy (a `&mut` one works too, to read its state afterwards).
    pub fn policy(mut self, policy: impl SyncPolicy + 'a) -> Self {
        self.policy = Box::new(policy);
        self
    }

    /// Epochs, warm-up and evaluations at once.
    pub fn options(mut self, options: FitOptions<B>) -> Self {
        self.options = options;
        self
    }

    /// How many epochs to run.
    pub fn epochs(mut self, epochs: usize) -> Self {
        self.options.epochs = epochs;
        self
    }

    /// Whether to run the unmeasured warm-up batch first (see [`FitOptions::warmup`]).
    pub fn warmup(mut self, warmup: bool) -> Self {
        self.options.warmup = warmup;
        self
    }

    /// Adds a metric computed after each epoch (see [`FitOptions::evaluate`]).
    pub fn evaluate(
        mut self,
        name: impl Into<String>,
        metric: impl Fn(&B) -> Result<f64> + 'static,
    ) -> Self {
        self.options = self.options.evaluate(name, metric);
        self
    }

    /// Where progress goes (a `&mut` one works too).
    pub fn progress(mut self, progress: impl Progress + 'a) -> Self {
        self.progress = Box::new(progress);
        self
    }

    /// Re-seeds the device's random stream (Dropout's) before every step from `seed` and the
    /// step's number, so that a resumed run draws what the uninterrupted one would have.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Writes checkpoints as `checkpointing` says.
    pub fn checkpoint(mut self, checkpointing: Checkpointing) -> Self {
        self.checkpointing = Some(checkpointing);
        self
    }

    /// Goes on from `checkpoint` instead of from the start: its parameters, optimizer state,
    /// position and trace replace the run's. The network must be built as the checkpointed
    /// one was; its deferred sizes are resolved from the data first.
    pub fn resume(mut self, checkpoint: Checkpoint) -> Self {
        self.resume = Some(checkpoint);
        self
    }

    /// Trains on `data`.
    ///
    /// # Errors
    /// Any error of the data, the network's `infer`, a step, an evaluation or a checkpoint,
    /// with the batch it concerns where there is one.
    pub fn run(self, data: &mut dyn BatchSource) -> Result<FitRun<B>> {
        let Fit {
            net,
            loss,
            trainer,
            replicas,
            mut policy,
            options,
            mut progress,
            mut seed,
            checkpointing,
            resume,
        } = self;
        let device = &replicas.main().clone();
        if let Some(checkpointing) = &checkpointing {
            checkpointing.prepare()?;
        }
        let first = match data.batches(0).next() {
            Some(batch) => Some(batch?),
            None => None,
        };
        let (net, example_shape) = match &first {
            Some(batch) => {
                if batch.len() < replicas.len() {
                    batch.split(replicas.len())?;
                }
                let x = batch.x_on(device)?;
                let (net, _) = net.infer(x)?;
                (net, Some(batch.x_shape[1..].to_vec()))
            }
            None => (net, None),
        };
        let mut at = Position {
            epoch: 0,
            next_batch: 0,
            steps: 0,
            seed,
            description: checkpointing
                .as_ref()
                .map(|c| c.description.clone())
                .unwrap_or_default(),
        };
        let (net, trainer, mut trace) = match &resume {
            Some(checkpoint) => {
                at.epoch = checkpoint.position.epoch;
                at.next_batch = checkpoint.position.next_batch;
                at.steps = checkpoint.position.steps;
                seed = seed.or(checkpoint.position.seed);
                at.seed = seed;
                checkpoint.restore(net, trainer)?
            }
            None => (net, trainer, Trace::default()),
        };
        let engine = Engine::new(
            Backend {
                net: Some(net),
                trainer,
                loss,
                correct: None,
                counted: 0,
            },
            Some(device.clone()),
        );
        let name = policy.name();
        // On the backend worker, as every step: its thread's first allocations are warm-up's too.
        if options.warmup
            && let Some(batch) = first
        {
            let replicas = replicas.clone();
            engine
                .issue(move |backend: &mut Backend<B, L>| {
                    let net = backend.net.as_ref().ok_or_else(lost)?;
                    warmup(net, &backend.loss, &backend.trainer, &batch, &replicas)
                })
                .wait()?;
        }
        let run_in_progress = RunInProgress::start();
        let mut stopped = None;

        let start = Instant::now();
        let seconds = |at: Instant| at.saturating_duration_since(start).as_secs_f64();
        // The records of the epoch a resumed run stopped in go on from where they were.
        let mut carried: Vec<BatchRecord> = Vec::new();
        if resume.is_some() {
            let (done, current) = trace.batches.drain(..).partition(|b| b.epoch < at.epoch);
            trace.batches = done;
            carried = current;
        }
        for epoch in at.epoch..options.epochs {
            let first_batch = if epoch == at.epoch { at.next_batch } else { 0 };
            let rss_before = rss_bytes();
            let mut peak_rss = rss_before;
            let mut flight = InFlight::new(epoch, rss_before);
            let mut records: Vec<BatchRecord> = std::mem::take(&mut carried);
            let mut peak_pool: Option<u64> = None;
            let mut batches = data.batches_from(epoch, first_batch);
            let epoch_start = Instant::now();
            let mut last_issue = epoch_start;
            for index in first_batch.. {
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
                let step_seed = seed.map(|seed| step_seed(seed, at.steps));
                let handle = engine.issue(train_step::<B, L>(batch, replicas.clone(), step_seed));
                flight.push(index, handle);
                at.steps += 1;
                at.epoch = epoch;
                at.next_batch = index + 1;
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
                    device_done: Vec::new(),
                });
                progress.issued(epoch, index, seconds(last_issue) - seconds(epoch_start));
                stopped = requested();
                let due = checkpointing.as_ref().is_some_and(|c| {
                    c.every
                        .is_some_and(|every| at.steps.is_multiple_of(every as u64))
                });
                if stopped.is_some() || due {
                    flight.wait_all()?;
                    absorb(&mut flight, &mut records, &mut peak_pool, &seconds);
                }
                if let Some(checkpointing) = &checkpointing
                    && (due || stopped.is_some())
                {
                    let mut so_far = trace.clone();
                    so_far.batches.extend(records.iter().cloned());
                    let dir = write_checkpoint(&engine, device, checkpointing, &at, &so_far)?;
                    progress.checkpointed(&dir);
                }
                if stopped.is_some() {
                    break;
                }
            }
            drop(batches);
            flight.wait_all()?;
            let epoch_end = Instant::now();
            let rss_after = rss_bytes();
            peak_rss = peak_rss.max(rss_after);
            absorb(&mut flight, &mut records, &mut peak_pool, &seconds);
            if stopped.is_some() {
                trace.batches.extend(records);
                break;
            }
            // The next epoch starts at its first batch.
            at.epoch = epoch + 1;
            at.next_batch = 0;

            let mut metrics = BTreeMap::new();
            if let Some(train_acc) = on_backend(&engine, device, train_accuracy)?? {
                metrics.insert(TRAIN_ACC.to_string(), train_acc);
            }
            if !options.evaluations.is_empty() {
                let snapshot = on_backend(&engine, device, |b| b.net.as_ref().map(B::valid))?
                    .ok_or_else(lost)?;
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
                device_time: device_times(&records),
                metrics,
            };
            progress.epoch_done(&epoch_record);
            trace.batches.extend(records);
            trace.epochs.push(epoch_record);
            if let Some(checkpointing) = &checkpointing
                && checkpointing.every.is_none()
            {
                let dir = write_checkpoint(&engine, device, checkpointing, &at, &trace)?;
                progress.checkpointed(&dir);
            }
        }
        drop(run_in_progress);

        let backend = engine.finish()?;
        let net = backend.net.ok_or_else(lost)?;
        Ok(FitRun {
            net,
            trainer: backend.trainer,
            trace,
            stopped,
        })
    }
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

/// Moves the completions `flight` observed into their batches' records.
fn absorb(
    flight: &mut InFlight,
    records: &mut [BatchRecord],
    peak_pool: &mut Option<u64>,
    seconds: &impl Fn(Instant) -> f64,
) {
    for observed in flight.take_observed() {
        let Some(record) = records.iter_mut().rev().find(|r| r.batch == observed.batch) else {
            continue;
        };
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
        let pool = observed.handle.pool();
        record.pool_in_use = pool.map(|p| p.in_use);
        record.pool_reserved = pool.map(|p| p.reserved);
        if let Some(pool) = pool {
            *peak_pool = Some(peak_pool.unwrap_or(0).max(pool.in_use));
        }
    }
}

/// Writes a checkpoint of the backend's network and trainer as they stand after every issued
/// step, at `position`.
fn write_checkpoint<B, L>(
    engine: &Engine<Backend<B, L>>,
    device: &Device,
    checkpointing: &Checkpointing,
    position: &Position,
    trace: &Trace,
) -> Result<std::path::PathBuf>
where
    B: Block + 'static,
    L: Loss + Send + 'static,
{
    let (net, trainer) = on_backend(engine, device, |b| (b.net.clone(), b.trainer.clone()))?;
    let net = net.ok_or_else(lost)?;
    checkpoint::write(checkpointing, position, &net, &trainer, trace)
}

/// The seed of step `step`'s random stream: SplitMix64 of the run's seed and the step.
fn step_seed(seed: u64, step: u64) -> u64 {
    let mut z = seed ^ step.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Runs `f` on the backend's state after every issued step, on the worker, and hands its
/// result over.
fn on_backend<B, L, T>(
    engine: &Engine<Backend<B, L>>,
    device: &Device,
    f: impl FnOnce(&mut Backend<B, L>) -> T + Send + 'static,
) -> Result<T>
where
    B: Block + 'static,
    L: Loss + Send + 'static,
    T: Send + 'static,
{
    let (sender, receiver) = std::sync::mpsc::channel();
    let device = device.clone();
    engine
        .issue(move |backend: &mut Backend<B, L>| {
            let _ = sender.send(f(backend));
            Ok(Tensor::<1>::zeros([1], &device))
        })
        .wait()?;
    receiver
        .recv()
        .map_err(|_| Error::Execution("the backend did not hand over its state".to_string()))
}

/// One training step on the backend: upload, forward, loss, backward, `step(batch_size)`, on
/// one device or split across the replicas. Returns the per-example loss (each device's
/// share), whose readback marks the batch as done.
fn train_step<B, L>(
    batch: Batch,
    replicas: Replicas,
    seed: Option<u64>,
) -> impl FnOnce(&mut Backend<B, L>) -> Result<Outputs> + Send + 'static
where
    B: Block + 'static,
    L: Loss + Send + Sync + 'static,
    L::Target: Target,
{
    move |backend: &mut Backend<B, L>| {
        let size = batch.len();
        if let Some(seed) = seed {
            // Each device its own stream (the main device's is the one-device run's), so that
            // no two shards draw the same Dropout masks.
            for (index, device) in replicas.devices().iter().enumerate().rev() {
                device.seed(match index {
                    0 => seed,
                    _ => step_seed(seed, index as u64),
                });
            }
        }
        let net = backend.net.as_ref().ok_or_else(lost)?;
        let (grads, losses, correct) = gradients(net, &backend.loss, &batch, &replicas)?;
        drop(batch);
        if let Some(correct) = correct {
            backend.counted += size;
            backend.correct = Some(tally(backend.correct.take(), correct));
        }
        let net = backend.net.take().ok_or_else(lost)?;
        backend.net = Some(backend.trainer.step_params(net, grads, size)?);
        Ok(Outputs(losses))
    }
}

/// The step's gradients of `net` on `batch`, summed over the replicas (on the main device),
/// with each device's per-example loss and the examples they got right (on the main device).
type StepGradients = (GradientsParams, Vec<Tensor<1>>, Option<Tensor<1, Int>>);

/// Forward and backward of `net` on `batch`: on the main device alone, or split across the
/// replicas with burn's fork, gradient transfer and accumulation ([`Replicas::backward`]).
fn gradients<B, L>(net: &B, loss: &L, batch: &Batch, replicas: &Replicas) -> Result<StepGradients>
where
    B: Block,
    L: Loss + Sync,
    L::Target: Target,
{
    let main = replicas.main();
    if replicas.len() == 1 {
        let (l, correct) = loss_of(net, loss, batch, main)?;
        let grads = GradientsParams::from_grads(l.backward(), net);
        return Ok((grads, vec![l], correct));
    }
    let shards = batch.split(replicas.len())?;
    let (grads, shares) = replicas.backward(net, |replica: &B, index, device| {
        loss_of(replica, loss, &shards[index], device)
    })?;
    let mut correct = None;
    let mut losses = Vec::with_capacity(shares.len());
    for (l, right) in shares {
        losses.push(l);
        if let Some(right) = right {
            correct = Some(tally(correct, right.to_device(main)));
        }
    }
    Ok((grads, losses, correct))
}

/// The error for a network a failed step took away.
fn lost() -> Error {
    Error::Execution("the network was lost in a failed step".to_string())
}

/// The per-example loss of `net` on `batch` (upload, forward, check the targets, loss), and
/// how many examples it got right where the targets say ([`Target::correct`]).
fn loss_of<B, L>(
    net: &B,
    loss: &L,
    batch: &Batch,
    device: &Device,
) -> Result<(Tensor<1>, Option<Tensor<1, Int>>)>
where
    B: Block,
    L: Loss,
    L::Target: Target,
{
    let x = batch.x_on(device)?;
    let y = L::Target::upload(batch, device)?;
    let pred: Tensor<2> = net.forward(x).into_rank()?;
    L::Target::check(batch, pred.dims()[1])?;
    let correct = L::Target::correct(&pred, &y);
    Ok((loss.forward(pred, y)?, correct))
}

/// The name of the training accuracy in the epoch records.
pub const TRAIN_ACC: &str = "train_acc";

/// The share of this epoch's examples its steps classified right (`None` for targets without
/// classes), read once; the count starts again for the next epoch.
fn train_accuracy<B, L>(backend: &mut Backend<B, L>) -> Result<Option<f64>> {
    let counted = std::mem::take(&mut backend.counted);
    let Some(correct) = backend.correct.take() else {
        return Ok(None);
    };
    Ok(Some(read_count(correct)? as f64 / counted.max(1) as f64))
}

/// `sum + more` on the device, `more` where there is no sum yet.
pub(crate) fn tally(sum: Option<Tensor<1, Int>>, more: Tensor<1, Int>) -> Tensor<1, Int> {
    match sum {
        Some(sum) => sum + more,
        None => more,
    }
}

/// Reads back a count summed on the device ([`Target::correct`]'s).
pub(crate) fn read_count(count: Tensor<1, Int>) -> Result<i64> {
    count
        .into_data()
        .convert::<i64>()
        .try_to_vec::<i64>()
        .map_err(|e| Error::Execution(format!("reading a count back: {e:?}")))?
        .first()
        .copied()
        .ok_or_else(|| Error::Execution("reading a count back: no value".to_string()))
}

/// The warm-up: the book's forward pass and loss (`loss(y, net(X)).wait_to_read()`), then a
/// backward pass and an optimizer step, on every replica, so that every kernel and buffer a
/// training step uses exists before the clock starts. All of it runs on copies: the network's
/// (`valid().train()`: its own tensors and running statistics) and the trainer's (its own
/// optimizer state). The network, its running statistics and the optimizer state stay as they
/// are. Returns the loss.
fn warmup<B, L>(
    net: &B,
    loss: &L,
    trainer: &Trainer,
    batch: &Batch,
    replicas: &Replicas,
) -> Result<Outputs>
where
    B: Block,
    L: Loss + Sync,
    L::Target: Target,
{
    let copy = net.valid().train();
    let (grads, losses, _) = gradients(&copy, loss, batch, replicas)?;
    let stepped = trainer.clone().step_params(copy, grads, batch.len())?;
    drop(stepped);
    Ok(Outputs(losses))
}
