//! The training recipe's flags (the optimizer and its options, the learning-rate schedule,
//! gradient clipping, accumulation, the precision), shared by `train`, `bench` and `compare` as
//! part of the workload, and mapped onto [`RecipeSettings`]. Each flag's name is [`Flag`]'s;
//! each option's meaning is [`ember::OptimizerKind`]'s.

use clap::Args;
use ember_trainer::run::flags::Flag;
use ember_trainer::run::recipe::RecipeSettings;

/// The optimizer, its options, the schedule and clipping, as given.
#[derive(Debug, Args)]
pub struct RecipeArgs {
    /// The optimizer, with PyTorch's defaults: sgd, adam, adamw (decoupled weight decay,
    /// --wd 0.01 by default), rmsprop or adagrad.
    #[arg(long = Flag::OPTIMIZER.name, default_value = "sgd")]
    pub optimizer: String,
    /// Momentum, for sgd (PyTorch's, no dampening) and rmsprop [default: 0].
    #[arg(long = Flag::MOMENTUM.name, allow_negative_numbers = true)]
    pub momentum: Option<f64>,
    /// Nesterov's momentum, for sgd with --momentum.
    #[arg(long = Flag::NESTEROV.name, num_args = 0..=1, default_missing_value = "true")]
    pub nesterov: Option<bool>,
    /// Weight decay: L2 on the gradient, decoupled for adamw [default: 0; adamw 0.01].
    #[arg(long = Flag::WD.name, allow_negative_numbers = true)]
    pub wd: Option<f64>,
    /// Adam's and AdamW's β₁ [default: 0.9].
    #[arg(long = Flag::BETA1.name, allow_negative_numbers = true)]
    pub beta1: Option<f64>,
    /// Adam's and AdamW's β₂ [default: 0.999].
    #[arg(long = Flag::BETA2.name, allow_negative_numbers = true)]
    pub beta2: Option<f64>,
    /// ε, for adam, adamw, rmsprop [default: 1e-8] and adagrad [default: 1e-10].
    #[arg(long = Flag::EPS.name, allow_negative_numbers = true)]
    pub eps: Option<f64>,
    /// The learning rate of every batch, from --lr: `constant` (--lr at every batch),
    /// `cosine` (to 0 over the run, PyTorch's
    /// CosineAnnealingLR stepped per batch), `cosine:warmup=N` (first N batches rising
    /// linearly), `step:EVERY:FACTOR` and `multistep:E1,E2,...:FACTOR` (counted in epochs, as
    /// PyTorch's StepLR and MultiStepLR stepped per epoch), `poly:POWER` (PolynomialLR), or
    /// `onecycle:MAX_LR` (PyTorch's OneCycleLR without its momentum cycling; it ignores --lr).
    /// The trace records each batch's rate. With --accumulate, batches become updates here: the
    /// schedule counts updates. A resumed run may give it another value, as --lr, but not add
    /// or drop it: a run resumed without it would go on at a constant rate.
    #[arg(long = Flag::LR_SCHEDULE.name)]
    pub lr_schedule: Option<String>,
    /// Scale all gradients together so that their global L2 norm is at most X (PyTorch's
    /// clip_grad_norm_, Gluon's clip_global_norm). Computed on the device: no barrier.
    #[arg(long = Flag::CLIP_NORM.name, allow_negative_numbers = true)]
    pub clip_norm: Option<f64>,
    /// Clamp every gradient element to [-X, X] (Gluon's clip_gradient), after --clip-norm.
    #[arg(long = Flag::CLIP_VALUE.name, allow_negative_numbers = true)]
    pub clip_value: Option<f64>,
    /// Sum the gradients of N batches before each optimizer step, which divides them by all
    /// their examples: under SGD the update of one batch N times as large, in the memory of
    /// one (BatchNorm and Dropout still see each batch). An epoch's last group may be shorter.
    /// --lr-schedule counts updates. Clipping applies to the summed gradients. The sync policy
    /// still counts batches: under t+2, batch t+2 starts once batch t is done, whatever group
    /// they are in, so the lead and the memory in flight stay a batch's; checkpoints
    /// (--checkpoint-every counts batches) and SIGINT/SIGTERM wait for the group's last batch
    /// [default: 1].
    #[arg(long = Flag::ACCUMULATE.name, value_name = "N", allow_negative_numbers = true)]
    pub accumulate: Option<i64>,
    /// Mixed precision, with PyTorch's autocast semantics: `bf16` computes Dense's and the
    /// convolutions' products in bf16 (inputs and weights rounded to bf16, products
    /// accumulated in f32), while the parameters (f32 master weights), their gradients, the
    /// optimizer's state, the loss, softmax, BatchNorm, the metrics, the evaluation and the
    /// saved files stay in f32. It runs on flex through oneDNN's bf16 kernels where the CPU has
    /// bf16 instructions (AVX512_BF16, AMX; `ember devices` says), and on cuda, through burn's
    /// CUDA backend (not yet timed on a card). It is refused elsewhere on the CPU, with the
    /// reason (no such instructions, --cpu-kernels flex, oneDNN capped below them), on ndarray,
    /// on wgpu (burn's wgpu has no bf16 arithmetic) and on a remote device. A resumed run may
    /// change it [default: f32].
    #[arg(long = Flag::PRECISION.name, value_name = "f32|bf16")]
    pub precision: Option<String>,
    /// Record the training step (forward, loss, backward, the optimizer's update) once and
    /// replay it for every batch of the first one's shape, as Gluon's hybridize() and CUDA
    /// graphs do: a graph on cuda and wgpu, the recorded code run again on flex. The numbers
    /// are the eager step's (bit for bit on flex and on wgpu through lavapipe; not yet run on a
    /// card), BatchNorm's running statistics included, and the sync policy still decides where
    /// the frontend waits. A short last batch runs the same code outside the graph. Every
    /// step runs eagerly instead, and the run says why once, with several devices or ranks,
    /// --accumulate, checkpoints or --resume, --precision bf16, rmsprop or adagrad, clipping
    /// and Dropout (a replay repeats its mask).
    #[arg(long = Flag::HYBRIDIZE.name, num_args = 0..=1, default_missing_value = "true")]
    pub hybridize: Option<bool>,
}

impl From<&RecipeArgs> for RecipeSettings {
    fn from(args: &RecipeArgs) -> Self {
        Self {
            optimizer: args.optimizer.clone(),
            momentum: args.momentum,
            nesterov: args.nesterov,
            wd: args.wd,
            beta1: args.beta1,
            beta2: args.beta2,
            eps: args.eps,
            lr_schedule: args.lr_schedule.clone(),
            clip_norm: args.clip_norm,
            clip_value: args.clip_value,
            accumulate: args.accumulate,
            precision: args.precision.clone(),
            hybridize: args.hybridize.unwrap_or(false),
        }
    }
}
