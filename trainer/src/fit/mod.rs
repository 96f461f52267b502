//! The training loop: the frontend prepares and issues batches through the [`Engine`], the
//! [`SyncPolicy`] decides how far it may run ahead, and every batch lands in the [`Trace`].
//! A run is set up with [`Fit`], and can keep checkpoints and resume from them:
//!
//! ```
//! use burn::prelude::*;
//! use ember::{Activation, Block, Dense, Init, L2Loss, Sequential, Optimizer};
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
//! let optimizer = Optimizer::new(&net, "adam", 0.01).unwrap();
//! Fit::new(net, L2Loss, optimizer, &device)
//!     .epochs(1)
//!     .checkpoint(Checkpointing::new(dir.path()).every(3))
//!     .run(&mut data)
//!     .unwrap();
//!
//! // A new process: the same network, then the newest checkpoint (after step 3, and the
//! // run's last, 5), and a second epoch.
//! let last = Checkpoint::latest(dir.path()).unwrap().unwrap();
//! assert_eq!((last.position.epoch, last.position.next_batch), (1, 0));
//! let net = build();
//! let optimizer = Optimizer::new(&net, "adam", 0.01).unwrap();
//! let run = Fit::new(net, L2Loss, optimizer, &device)
//!     .epochs(2)
//!     .resume(last)
//!     .run(&mut data)
//!     .unwrap();
//! assert_eq!(run.trace.batches.len(), 10);
//! ```

mod backend;
mod best;
mod callback;
mod epoch;
mod frontend;
mod groups;
mod job;
mod lr_find;
mod progress;
mod rates;
mod resume;
mod source;
mod target;
mod watched;

use std::time::Instant;

use burn::tensor::Device;
use ember::engine::Engine;
use ember::optim::LrSchedule;
use ember::{Block, Loss, Optimizer, Precision, Replicas, Result};
use ember_datasets::{Batch, DataLoader};

use crate::metric::{Accuracy, Metric, column};

pub use crate::metric::Goal;
pub use best::SaveFn;
pub use callback::{Action, Callback};
pub use epoch::{Evaluate, Evaluation};
pub use lr_find::{LrFinding, LrPoint, LrSweep, Suggestion, SweepEnd, SweepMode};
pub use progress::Progress;
pub use source::{BatchSource, SyntheticEpochs};
pub use target::Target;
pub use watched::{EarlyStopping, ReduceLrOnPlateau, Watched};

use crate::checkpoint::{Checkpoint, Checkpointing};
use crate::policy::SyncPolicy;
use crate::signals::{RunInProgress, Signal};
use crate::trace::{EpochRecord, Trace};
use backend::Backend;
use frontend::Frontend;
use groups::Groups;
use rates::Rates;

/// What a run hands back.
pub struct FitRun<B> {
    /// The trained network.
    pub net: B,
    /// The optimizer, with its state.
    pub optimizer: Optimizer,
    /// Every batch and epoch.
    pub trace: Trace,
    /// The signal that stopped the run before its last epoch ended (see [`crate::signals`]);
    /// `None` when it ran to the end.
    pub stopped: Option<Signal>,
    /// Why a callback ended the run before its last epoch ([`EarlyStopping`]).
    pub ended_early: Option<String>,
}

/// A training run, set up by name in the style of burn-train's `Learner`, then [`Fit::run`]
/// on a data source. Any Block, any Loss, any policy.
///
/// ```
/// use burn::prelude::*;
/// use ember::{Activation, Block, Dense, Init, L2Loss, Sequential, Optimizer};
/// use ember_datasets::Synthetic;
/// use ember_trainer::fit::{Fit, SyntheticEpochs};
/// use ember_trainer::policy::Window;
///
/// let device = Device::flex().autodiff();
/// let net: Sequential = Sequential::new()
///     .add(Dense::new(16).activation(Activation::Relu))
///     .add(Dense::new(1))
///     .initialize(Init::default(), &device);
/// let optimizer = Optimizer::new(&net, "sgd", 0.01).unwrap();
/// let mut data = SyntheticEpochs::new(Synthetic::chapter(8, 4, 0), 5);
/// let run = Fit::new(net, L2Loss, optimizer, &device)
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
    optimizer: Optimizer,
    replicas: Replicas,
    policy: Box<dyn SyncPolicy + 'a>,
    epochs: usize,
    warmup: bool,
    evaluations: Vec<Evaluation<B>>,
    metrics: Option<Vec<Box<dyn Metric>>>,
    progress: Box<dyn Progress + 'a>,
    seed: Option<u64>,
    checkpointing: Option<Checkpointing>,
    resume: Option<Checkpoint>,
    rescue: Option<Rescue<'a, B>>,
    schedule: Option<Box<dyn LrSchedule + 'a>>,
    callbacks: Vec<Box<dyn Callback + 'a>>,
    best: Option<best::Best<'a, B>>,
    accumulate: usize,
    distributed: Option<ember::parallel::mpi::Collective>,
    precision: Precision,
}

/// What [`Fit::rescue`] is given.
type Rescue<'a, B> = Box<dyn FnOnce(Option<&B>, &Trace, &ember::Error) + 'a>;

impl<'a, B, L> Fit<'a, B, L>
where
    B: Block + 'static,
    L: Loss + Send + Sync + 'static,
    L::Target: Target,
{
    /// Trains `net` with `loss` and `optimizer` on `device` (an autodiff device): one epoch
    /// under a barrier, with the warm-up batch, until other settings say otherwise.
    pub fn new(net: B, loss: L, optimizer: Optimizer, device: &Device) -> Self {
        Self {
            net,
            loss,
            optimizer,
            replicas: Replicas::single(device.clone()),
            policy: Box::new(crate::policy::Window(1)),
            epochs: 1,
            warmup: true,
            evaluations: Vec::new(),
            metrics: None,
            progress: Box::new(()),
            seed: None,
            checkpointing: None,
            resume: None,
            rescue: None,
            schedule: None,
            callbacks: Vec::new(),
            best: None,
            accumulate: 1,
            distributed: None,
            precision: Precision::F32,
        }
    }

    /// Data parallelism over `replicas` (see [`ember::parallel`]): each step splits its
    /// batch across the devices, and the policy bounds the steps in flight across all of them.
    /// They replace the device given to [`Fit::new`]; the network must live on the first
    /// one, the main device. Every batch needs at least one example per device.
    ///
    /// ```
    /// use burn::prelude::*;
    /// use ember::{Block, Dense, Init, L2Loss, Replicas, Sequential, Optimizer};
    /// use ember_datasets::Synthetic;
    /// use ember_trainer::fit::{Fit, SyntheticEpochs};
    ///
    /// let device = Device::flex().autodiff();
    /// let net: Sequential = Sequential::new().add(Dense::new(1)).initialize(Init::default(), &device);
    /// let optimizer = Optimizer::new(&net, "sgd", 0.01).unwrap();
    /// let replicas = Replicas::new(vec![device.clone(), device.clone()]).unwrap();
    /// let mut data = SyntheticEpochs::new(Synthetic::chapter(8, 4, 0), 3);
    /// let run = Fit::new(net, L2Loss, optimizer, &device)
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

    /// How many epochs to run.
    pub fn epochs(mut self, epochs: usize) -> Self {
        self.epochs = epochs;
        self
    }

    /// Whether to run one unmeasured pass on the first batch before the clock starts (on by
    /// default), so that initialization (kernel compilation, allocation) is not counted, as
    /// the book's `loss(y, net(X)).wait_to_read()` does. It runs on copies of the network and
    /// of the optimizer: no parameter, running statistic or optimizer state changes, and the
    /// first batch's recorded loss is its loss before its own update.
    pub fn warmup(mut self, warmup: bool) -> Self {
        self.warmup = warmup;
        self
    }

    /// Adds a metric computed after each epoch on a snapshot of the network without autodiff,
    /// on the caller's thread; its time does not count in the epoch's.
    pub fn evaluate(
        mut self,
        name: impl Into<String>,
        metric: impl Fn(&B) -> Result<f64> + 'static,
    ) -> Self {
        self.evaluations.push(Evaluation {
            names: vec![name.into()],
            compute: Box::new(move |net| Ok(vec![metric(net)?])),
        });
        self
    }

    /// The metrics the training steps update, read at each epoch's end as `train_<name>`
    /// ([`crate::metric`]). They add no barrier: each step adds to sums on the device, read
    /// where the epoch ends. By default, accuracy where the loss takes class labels, and none
    /// otherwise; an empty list turns them off. A checkpoint written in the middle of an epoch
    /// keeps their sums so far ([`Metric::state`]), and a run resumed from it goes on from them,
    /// so that the epoch's counts (`acc`, `topK`, `f1`) are the uninterrupted run's, and its
    /// float sums (`ce`, `mse`, `mae`) are to the rounding of where the sums were cut. A metric
    /// of one's own that keeps no state, or whose sum is not finite, counts that epoch from
    /// the resume on.
    ///
    /// ```
    /// use burn::prelude::*;
    /// use ember::{Block, Dense, Init, Optimizer, Sequential, SoftmaxCrossEntropyLoss};
    /// use ember_datasets::{DataLoader, Examples};
    /// use ember_trainer::fit::Fit;
    /// use ember_trainer::metric::MetricKind;
    ///
    /// let device = Device::flex().autodiff();
    /// let x: Vec<f32> = (0..64).map(|i| (i as f32 * 0.37).sin()).collect();
    /// let labels: Vec<usize> = (0..32).map(|i| i % 3).collect();
    /// let data = Examples::classification(x, 2, labels, 3).unwrap();
    /// let net: Sequential = Sequential::new().add(Dense::new(3)).initialize(Init::default(), &device);
    /// let optimizer = Optimizer::new(&net, "sgd", 0.1).unwrap();
    /// let kinds = MetricKind::parse_list("acc,top2,ce").unwrap();
    /// let test = DataLoader::new(data.clone(), 16).unwrap();
    /// let mut train = DataLoader::new(data, 8).unwrap();
    /// let run = Fit::new(net, SoftmaxCrossEntropyLoss, optimizer, &device)
    ///     .metrics(kinds.iter().map(|k| k.build()))
    ///     .evaluate_metrics("test", test, kinds.iter().map(|k| k.build()), &Device::flex())
    ///     .run(&mut train)
    ///     .unwrap();
    /// let epoch = &run.trace.epochs[0];
    /// assert!((0.0..=1.0).contains(&epoch.metrics["train_top2"]));
    /// assert!(epoch.metrics["test_ce"] > 0.0);
    /// assert!(epoch.metrics["test_acc"] <= epoch.metrics["test_top2"]);
    /// ```
    pub fn metrics(mut self, metrics: impl IntoIterator<Item = Box<dyn Metric>>) -> Self {
        self.metrics = Some(metrics.into_iter().collect());
        self
    }

    /// After each epoch, `metrics` over every example of `data`, on a snapshot of the network
    /// without autodiff, which lives on `device` (the training device without autodiff,
    /// `device.inner()`), as `<set>_<name>`
    /// columns (`test_acc`): one pass over the data for all of them. Its time does not count
    /// in the epoch's.
    pub fn evaluate_metrics(
        mut self,
        set: &str,
        data: DataLoader,
        metrics: impl IntoIterator<Item = Box<dyn Metric>>,
        device: &Device,
    ) -> Self {
        let metrics: Vec<Box<dyn Metric>> = metrics.into_iter().collect();
        let names = metrics.iter().map(|m| column(set, &m.name())).collect();
        let device = device.clone();
        let metrics = std::cell::RefCell::new(metrics);
        self.evaluations.push(Evaluation {
            names,
            compute: Box::new(move |net: &B| {
                crate::evaluate::metrics::<B, L::Target>(
                    net,
                    &mut metrics.borrow_mut(),
                    &data,
                    &device,
                )
            }),
        });
        self
    }

    /// Sets every step's learning rate from the optimizer's by `schedule`, over the run's
    /// `epochs × batches per epoch` steps (the data source must tell its batches per epoch,
    /// [`BatchSource::batches_per_epoch`]). Each batch's rate is in the trace (`lr`). A resumed
    /// run gives each step the rate the uninterrupted one did.
    ///
    /// ```
    /// use burn::prelude::*;
    /// use ember::optim::Schedule;
    /// use ember::{Block, Dense, Init, L2Loss, Sequential, Optimizer};
    /// use ember_datasets::Synthetic;
    /// use ember_trainer::fit::{Fit, SyntheticEpochs};
    ///
    /// let device = Device::flex().autodiff();
    /// let net: Sequential = Sequential::new().add(Dense::new(1)).initialize(Init::default(), &device);
    /// let optimizer = Optimizer::new(&net, "adamw", 0.01).unwrap();
    /// let mut data = SyntheticEpochs::new(Synthetic::chapter(8, 4, 0), 5);
    /// let run = Fit::new(net, L2Loss, optimizer, &device)
    ///     .lr_schedule("cosine:warmup=2".parse::<Schedule>().unwrap())
    ///     .epochs(2)
    ///     .run(&mut data)
    ///     .unwrap();
    /// let rates: Vec<f64> = run.trace.batches.iter().filter_map(|b| b.lr).collect();
    /// assert_eq!(&rates[..3], &[0.005, 0.01, 0.01]);
    /// assert!(rates[9] < 0.001);
    /// ```
    pub fn lr_schedule(mut self, schedule: impl LrSchedule + 'a) -> Self {
        self.schedule = Some(Box::new(schedule));
        self
    }

    /// Adds a callback ([`Callback`]), called at the run's, each epoch's and each batch's
    /// begin and end: [`EarlyStopping`], [`ReduceLrOnPlateau`], or one's own.
    pub fn callback(mut self, callback: impl Callback + 'a) -> Self {
        self.callbacks.push(Box::new(callback));
        self
    }

    /// After every epoch where `watched` improves (by more than its `min_delta`; NaN never
    /// does, nor an epoch whose loss or any metric is NaN or infinite), before the epoch's
    /// checkpoint, `save` gets a snapshot of the network without autodiff and the epoch's record:
    /// Keras' `ModelCheckpoint(save_best_only=True)`. It runs where the epoch's metrics were
    /// read, adding no barrier; its error stops the run. A resumed run knows the best so far
    /// from its checkpoint's epochs. The watched metric's patience plays no part.
    pub fn save_best(
        mut self,
        watched: Watched,
        save: impl FnMut(&B, &EpochRecord) -> Result<()> + 'a,
    ) -> Self {
        self.best = Some(best::Best {
            watched,
            save: Box::new(save),
        });
        self
    }

    /// Sums the gradients of `batches` batches before each optimizer step, which then divides
    /// them by all their examples: under SGD, the same update as one batch `batches` times as
    /// large, with the memory of one (BatchNorm's statistics and Dropout's masks stay per
    /// batch). The last group of an epoch that `batches` does not divide is shorter, as
    /// Lightning's `accumulate_grad_batches`. A learning-rate schedule counts updates, not
    /// batches (a run of `epochs × ⌈batches per epoch / batches⌉`).
    ///
    /// The sync policy still counts batches: `Window(2)` lets batch t+2 start once batch t is
    /// done, whatever group they are in, so the frontend's lead and the memory in flight are a
    /// batch's, as without accumulation. Checkpoints (`every` counts batches) and stops wait
    /// for the group's last batch (or the epoch's end), so that a checkpoint holds whole
    /// updates; resume with the same `batches`, or the groups form elsewhere. A run that fails
    /// inside a group hands [`Fit::rescue`] the network of the last whole update: the group's
    /// gradients are never applied.
    ///
    /// ```
    /// use burn::prelude::*;
    /// use ember::{Block, Dense, Init, L2Loss, Sequential, Optimizer};
    /// use ember_datasets::Synthetic;
    /// use ember_trainer::fit::{Fit, SyntheticEpochs};
    ///
    /// let device = Device::flex().autodiff();
    /// let net: Sequential = Sequential::new().add(Dense::new(1)).initialize(Init::default(), &device);
    /// let optimizer = Optimizer::new(&net, "sgd", 0.01).unwrap();
    /// let mut data = SyntheticEpochs::new(Synthetic::chapter(8, 4, 0), 5);
    /// let run = Fit::new(net, L2Loss, optimizer, &device)
    ///     .accumulate(2)
    ///     .run(&mut data)
    ///     .unwrap();
    /// // Five batches, three updates: (0, 1), (2, 3) and (4).
    /// assert_eq!(run.trace.batches.len(), 5);
    /// ```
    pub fn accumulate(mut self, batches: usize) -> Self {
        self.accumulate = batches;
        self
    }

    /// Mixed precision, PyTorch's `torch.autocast`: each step's forward pass runs under
    /// [`ember::autocast`]`(precision)`, so that with [`Precision::Bf16`] Dense's and the
    /// convolutions' products are in bf16 ([`ember::precision`]). The parameters (the master
    /// weights), their gradients, the optimizer's state, the loss and the training metrics
    /// stay in f32; so do the evaluations ([`Fit::evaluate`]) and the parameter files. Every
    /// replica's device must have the precision's arithmetic ([`Precision::check`]): burn's
    /// wgpu has no bf16.
    ///
    /// ```
    /// use burn::prelude::*;
    /// use ember::{Block, Dense, Init, L2Loss, Precision, Sequential, Optimizer};
    /// use ember_datasets::Synthetic;
    /// use ember_trainer::fit::{Fit, SyntheticEpochs};
    ///
    /// let device = Device::flex().autodiff();
    /// let net: Sequential = Sequential::new().add(Dense::new(1)).initialize(Init::default(), &device);
    /// let optimizer = Optimizer::new(&net, "sgd", 0.01).unwrap();
    /// let mut data = SyntheticEpochs::new(Synthetic::chapter(8, 4, 0), 3);
    /// let run = Fit::new(net, L2Loss, optimizer, &device)
    ///     .precision(Precision::Bf16)
    ///     .run(&mut data)
    ///     .unwrap();
    /// assert_eq!(run.trace.batches.len(), 3);
    /// ```
    pub fn precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self
    }

    /// Where progress goes (a `&mut` one works too).
    pub fn progress(mut self, progress: impl Progress + 'a) -> Self {
        self.progress = Box::new(progress);
        self
    }

    /// Re-seeds Dropout's random stream before every step from `seed` and the step's number,
    /// so that a resumed run draws what the uninterrupted one would have. The stream belongs to
    /// the thread running the step, one per replica ([`ember::random`]), so that no other
    /// thread's draws change it; burn's own generator is re-seeded too.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Trains as one rank of `collective`'s job (`mpirun -np N`), as PyTorch's DDP does: the
    /// data given to [`Fit::run`] is this rank's share (`DataLoader::shard`), each update sums
    /// the gradients over the ranks and divides by all their examples, so that N ranks of
    /// batch b step as one process of batch N·b, and every rank steps alike. The epoch's mean
    /// loss and training metrics are the job's. Rank 0 alone writes checkpoints (every rank
    /// takes part in reading the metrics' sums for them); a resumed job reads them on every
    /// rank, from a directory they all see. Every rank must make the same calls to the same
    /// collectives: the same settings, and no stop that one rank could take alone (a
    /// callback's stop at a batch's end, [`crate::signals`]: `ember train` installs no signal
    /// handler in a job). Epoch-end decisions are safe: every rank takes rank 0's metrics.
    pub fn distributed(mut self, collective: ember::parallel::mpi::Collective) -> Self {
        self.distributed = Some(collective);
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

    /// What becomes of the network when the run fails after training began (a step, an
    /// evaluation, a checkpoint or the data failing): `rescue` gets it as the last completed
    /// step left it, with the trace so far and the error, before [`Fit::run`] returns the
    /// error. `ember train` writes `--save` and `--metrics` there, so that a failure never
    /// loses what was trained (and never writes parameters that diverged). The network is
    /// `None` when it cannot be had: the backend worker panicked, or waits on a remote device
    /// that stopped answering.
    pub fn rescue(mut self, rescue: impl FnOnce(Option<&B>, &Trace, &ember::Error) + 'a) -> Self {
        self.rescue = Some(Box::new(rescue));
        self
    }

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
        // The rank that writes checkpoints; the others only keep the same schedule.
        let rank = self.distributed.as_ref().map(|c| c.rank());
        let writes = rank.unwrap_or(0) == 0;
        if let Some(checkpointing) = &self.checkpointing
            && writes
        {
            checkpointing.prepare(self.resume.as_ref())?;
        }
        let first = data.batches(0).next().transpose()?;
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
        for callback in &mut self.callbacks {
            let actions = callback.replay(&start.trace.epochs)?;
            for action in &actions {
                if let Some((scale, _)) = &action.scale_lr {
                    base = rates::scaled(base, *scale).unwrap_or(base);
                }
            }
            if let Some(why) = actions.last().and_then(|a| a.stop.clone()) {
                ended_early = Some(why);
            }
        }
        if let Some(best) = &mut self.best {
            best.replay(&start.trace.epochs)?;
        }
        // Before anything is written: a schedule whose rate underflows trains nothing.
        if let Some(schedule) = &self.schedule {
            rates::refuse_underflow(schedule.as_ref(), base, total, self.epochs)?;
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
                if let Some(state) = checkpoint.position.metrics.get(&metric.name()) {
                    metric.restore(state, &device)?;
                }
            }
        }
        let groups = Groups::start(self.accumulate, &start.at, &start.trace);
        let mut frontend = Frontend {
            engine: Engine::new(
                Backend::new(start.net, start.optimizer, self.loss, metrics)
                    .distributed(self.distributed, &device)
                    .precision(self.precision),
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
            },
            example_shape,
            at: start.at,
            trace: start.trace,
            jsonl: Default::default(),
            start: Instant::now(),
            stopped: None,
            last_checkpoint: None,
            callbacks: self.callbacks,
            best: self.best,
            ended_early,
            halted: false,
            groups,
        };
        if self.warmup
            && let Some(batch) = first
        {
            frontend.warmup(batch)?;
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
                .issue(|b: &mut Backend<B, L>| ember::engine::settle(&b.net))
                .wait()
        });
        if let Err(error) = trained {
            // Where a remote server went, every device that waits on it fails alike: say which.
            let error = ember::device::remote::diagnosed(error);
            if let Some(rescue) = self.rescue
                && frontend.at.steps > 0
            {
                let backend = frontend.engine.salvage();
                rescue(backend.as_ref().map(|b| &b.net), &frontend.trace, &error);
            }
            return Err(error);
        }
        let backend = frontend.engine.finish()?;
        for callback in &mut frontend.callbacks {
            callback.train_end(&frontend.trace)?;
        }
        Ok(FitRun {
            net: backend.net,
            optimizer: backend.optimizer,
            trace: frontend.trace,
            stopped: frontend.stopped,
            ended_early: frontend.ended_early,
        })
    }
}

/// `net` with every deferred size taken from `first`, checked against it; a batch too small to
/// give every replica an example is refused first.
fn infer<B: Block>(net: B, first: &Batch, replicas: &Replicas) -> Result<B> {
    if first.len() < replicas.len() {
        first.split(replicas.len())?;
    }
    let x = first.x_on(replicas.main())?;
    net.infer_shape(x)
}
