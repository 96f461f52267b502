//! The training loop: the frontend prepares and issues batches through the
//! [`Engine`](ember::engine::Engine), the [`SyncPolicy`] decides how far it may run ahead, and
//! every batch lands in the [`Trace`]. A run is set up with [`Fit`], and can keep checkpoints
//! and resume from them:
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
mod carry;
mod devices;
mod epoch;
mod frontend;
mod groups;
mod hybridize;
mod job;
mod lr_find;
mod metrics;
mod progress;
mod rates;
mod resume;
mod run;
mod source;
mod watched;

use burn::tensor::Device;
use ember::optim::LrSchedule;
use ember::{Block, Loss, Optimizer, Precision, Replicas, Result};
use ember_datasets::Batch;

use crate::metric::Metric;

pub use crate::metric::Goal;
pub use crate::target::Target;
pub use best::SaveFn;
pub use callback::{Action, Callback};
pub use carry::Carried;
pub use epoch::{Evaluate, Evaluation};
pub use lr_find::{LrFinding, LrPoint, LrSweep, Suggestion, SweepEnd, SweepMode};
pub use progress::Progress;
pub use source::{BatchSource, SyntheticEpochs};
pub use watched::{EarlyStopping, ReduceLrOnPlateau, Watched};

use crate::checkpoint::{Checkpoint, Checkpointing};
use crate::policy::SyncPolicy;
use crate::signals::Signal;
use crate::trace::{EpochRecord, Trace};

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
    carry: Option<carry::Forward<B>>,
    /// Whether the step is recorded once and replayed ([`Fit::hybridize`]).
    hybridize: bool,
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
            carry: None,
            hybridize: false,
        }
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

    /// Carries a state from each batch into the next (d2l's sequential partitioning, 9.7):
    /// every step's forward pass is `forward(net, x, state)`, from `None` at each epoch's
    /// first batch and from the state the batch before ended in, detached, after it, so that
    /// backpropagation stops at the batch's start. Steps run in the order they were issued on
    /// the backend's worker, which holds the state; whatever the sync policy lets the
    /// frontend run ahead, batch t+1 reads the state batch t wrote, and no barrier is added
    /// for it. A checkpoint in the middle of an epoch holds the state, so that a resume goes
    /// on as the unbroken run does. Batches must all be of one size; the evaluations and the
    /// check of the last update's loss run [`Block::forward`], from the initial state. Not with
    /// replicas ([`Fit::replicas`]), which would each need their rows' share of the state.
    ///
    /// ```
    /// use burn::prelude::*;
    /// use ember::{Block, Init, Layout, Optimizer, Recurrent, SequenceCrossEntropyLoss};
    /// # use ember::{Dense, Embedding, NdTensor, Result};
    /// # #[derive(Module, Debug)]
    /// # struct Lm { embed: Embedding, lstm: Recurrent, out: Dense }
    /// # impl Lm {
    /// #     fn scores(&self, x: NdTensor, s: Option<Vec<Tensor<3>>>) -> (NdTensor, Vec<Tensor<3>>) {
    /// #         let (h, s) = self.lstm.forward_state(self.embed.forward(x).rank(), s);
    /// #         let [b, t, c] = h.dims();
    /// #         (self.out.forward(h.reshape([b * t, c]).into()), s)
    /// #     }
    /// # }
    /// # impl Block for Lm {
    /// #     fn forward(&self, x: NdTensor) -> NdTensor { self.scores(x, None).0 }
    /// # }
    /// use ember_datasets::text::{Partition, Subsequences};
    /// use ember_trainer::fit::Fit;
    ///
    /// let device = Device::flex().autodiff();
    /// # let lm = Lm {
    /// #     embed: Embedding::new(5, 4).initialize(Init::Xavier, &device),
    /// #     lstm: Recurrent::lstm(8).layout(Layout::Ntc).input_size(4).initialize(Init::Xavier, &device),
    /// #     out: Dense::new(5).in_units(8).initialize(Init::Xavier, &device),
    /// # };
    /// let corpus: Vec<usize> = (0..200).map(|i| i * 7 % 5).collect();
    /// let mut data = Subsequences::new(corpus, 4, 5, Partition::Sequential, 0).unwrap();
    /// let optimizer = Optimizer::new(&lm, "sgd", 1.0).unwrap();
    /// let run = Fit::new(lm, SequenceCrossEntropyLoss, optimizer, &device)
    ///     .carry(|lm: &Lm, x, state| lm.scores(x, state))
    ///     .run(&mut data)
    ///     .unwrap();
    /// assert!(run.trace.batches.len() > 1);
    /// ```
    pub fn carry<S: Carried>(
        mut self,
        forward: impl Fn(&B, ember::NdTensor, Option<S>) -> (ember::NdTensor, S) + Send + Sync + 'static,
    ) -> Self {
        self.carry = Some(carry::erase(forward));
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
