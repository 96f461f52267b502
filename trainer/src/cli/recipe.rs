//! The training recipe's flags: the optimizer and its options, the learning-rate schedule,
//! gradient clipping, accumulation and the precision, shared by `train`, `bench` and `compare`
//! as part of the workload. Each flag's name is [`Flag`]'s; each option's meaning is
//! [`OptimizerKind`]'s.

use anyhow::bail;
use clap::Args;
use ember::optim::{Clipping, OPTIMIZERS, Schedule};
use ember::{Error, OptimizerKind, Precision};

use super::flags::{Flag, number};

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
}

/// The checked recipe.
#[derive(Debug, Clone, PartialEq)]
pub struct Recipe {
    pub optimizer: OptimizerKind,
    pub schedule: Option<Schedule>,
    pub clipping: Clipping,
    /// Batches a step's gradients sum over.
    pub accumulate: usize,
    /// The precision of the forward passes' products.
    pub precision: Precision,
}

impl Default for Recipe {
    /// The book's: plain SGD, no schedule, no clipping.
    fn default() -> Self {
        Self {
            optimizer: OptimizerKind::sgd(),
            schedule: None,
            clipping: Clipping::NONE,
            accumulate: 1,
            precision: Precision::F32,
        }
    }
}

/// The reason of a refused value, without the library's own naming of it.
fn reason(error: Error) -> String {
    match error {
        Error::InvalidValue { reason, .. } => reason,
        other => other.to_string(),
    }
}

impl TryFrom<&RecipeArgs> for Recipe {
    type Error = anyhow::Error;

    fn try_from(args: &RecipeArgs) -> anyhow::Result<Self> {
        let Ok(mut optimizer) = args.optimizer.parse::<OptimizerKind>() else {
            bail!(
                "invalid --{} {:?}: expected {OPTIMIZERS}",
                Flag::OPTIMIZER.name,
                args.optimizer
            );
        };
        type Set = fn(OptimizerKind, f64) -> ember::Result<OptimizerKind>;
        let options: [(&Flag, Option<f64>, Set); 5] = [
            (&Flag::MOMENTUM, args.momentum, OptimizerKind::with_momentum),
            (&Flag::WD, args.wd, OptimizerKind::with_weight_decay),
            (&Flag::BETA1, args.beta1, OptimizerKind::with_beta1),
            (&Flag::BETA2, args.beta2, OptimizerKind::with_beta2),
            (&Flag::EPS, args.eps, OptimizerKind::with_epsilon),
        ];
        let name = optimizer.name();
        let takes = |optimizer: &OptimizerKind| {
            let flags: Vec<String> = Flag::OPTIMIZER_OPTIONS
                .iter()
                .filter(|flag| optimizer.options().contains(&flag.name))
                .map(ToString::to_string)
                .collect();
            flags.join(", ")
        };
        for (flag, value, set) in options {
            let Some(value) = value else { continue };
            if !optimizer.options().contains(&flag.name) {
                bail!(
                    "{flag} does not apply to --optimizer {name}, which takes {}",
                    takes(&optimizer)
                );
            }
            optimizer = set(optimizer, value).map_err(|e| {
                let value = super::flags::number(value);
                anyhow::anyhow!("invalid {flag} {value}: {}", reason(e))
            })?;
        }
        if let Some(nesterov) = args.nesterov {
            if !optimizer.options().contains(&Flag::NESTEROV.name) {
                bail!(
                    "{} does not apply to --optimizer {name}, which takes {}",
                    Flag::NESTEROV,
                    takes(&optimizer)
                );
            }
            optimizer = optimizer.with_nesterov(nesterov)?;
            if optimizer.check().is_err() {
                bail!(
                    "{} needs a momentum: give --momentum above 0 with it",
                    Flag::NESTEROV
                );
            }
        }
        let schedule = match &args.lr_schedule {
            Some(spec) => Some(spec.parse::<Schedule>().map_err(|e| {
                anyhow::anyhow!("invalid {} {spec:?}: {}", Flag::LR_SCHEDULE, reason(e))
            })?),
            None => None,
        };
        // `constant` is no schedule: the same run, recorded the same way.
        let schedule = schedule.filter(|s| *s != Schedule::Constant);
        let mut clipping = Clipping::NONE;
        if let Some(norm) = args.clip_norm {
            clipping = clipping.with_global_norm(norm).map_err(|e| {
                anyhow::anyhow!(
                    "invalid {} {}: {}",
                    Flag::CLIP_NORM,
                    number(norm),
                    reason(e)
                )
            })?;
        }
        if let Some(value) = args.clip_value {
            clipping = clipping.with_value(value).map_err(|e| {
                anyhow::anyhow!(
                    "invalid {} {}: {}",
                    Flag::CLIP_VALUE,
                    number(value),
                    reason(e)
                )
            })?;
        }
        let accumulate = match args.accumulate {
            None => 1,
            Some(n) if n >= 1 => n as usize,
            Some(n) => bail!(
                "invalid {} {n}: an update sums the gradients of 1 batch or more",
                Flag::ACCUMULATE
            ),
        };
        let precision = match &args.precision {
            None => Precision::F32,
            Some(p) => p
                .parse()
                .map_err(|e| anyhow::anyhow!("invalid {} {p:?}: {}", Flag::PRECISION, reason(e)))?,
        };
        Ok(Self {
            optimizer,
            schedule,
            clipping,
            accumulate,
            precision,
        })
    }
}

impl Recipe {
    /// `option`'s value (`momentum`, …) where it differs from the optimizer's default: what
    /// the command line must give to make this recipe again.
    pub fn changed(&self, option: &str) -> Option<String> {
        let default: OptimizerKind = self.optimizer.name().parse().ok()?;
        let (value, default) = (
            option_of(&self.optimizer, option)?,
            option_of(&default, option)?,
        );
        (value != default).then(|| value.to_string())
    }

    /// The flag that sets the rate, for a run that must go on at a lower one: `--lr`, or
    /// `--lr-schedule onecycle:` where one cycle ignores `--lr`; with this run's value.
    pub fn rate_flag(&self, lr: f64) -> (String, String) {
        match self.schedule {
            // Short past 12 digits: 1e30 was printed with its 31 digits (hostile pass).
            Some(Schedule::OneCycle { max_lr }) => (
                format!("{} onecycle:", Flag::LR_SCHEDULE),
                ember::error::number(max_lr),
            ),
            _ => (format!("{} ", Flag::LR), ember::error::number(lr)),
        }
    }

    /// Whether the schedule spans the run (cosine, poly, one cycle): its rates depend on the
    /// number of epochs, which a resumed run must then keep.
    pub fn spans_run(&self) -> bool {
        use ember::optim::LrSchedule;
        self.schedule.as_ref().is_some_and(LrSchedule::spans_run)
    }

    /// The recipe in a few words: `adamw(...), cosine, clip norm 1`.
    pub fn describe(&self) -> String {
        let mut words = self.optimizer.to_string();
        if let Some(schedule) = &self.schedule {
            words.push_str(&format!(", schedule {schedule}"));
        }
        if self.clipping != Clipping::NONE {
            words.push_str(&format!(", clip {}", self.clipping));
        }
        if self.accumulate > 1 {
            words.push_str(&format!(", {} batches an update", self.accumulate));
        }
        if self.precision != Precision::F32 {
            words.push_str(&format!(", {} products", self.precision));
        }
        words
    }
}

/// An option's value in `kind`, as its flag writes it; `None` where `kind` has not the option.
fn option_of(kind: &OptimizerKind, option: &str) -> Option<String> {
    use OptimizerKind as K;
    let value = match (option, *kind) {
        ("momentum", K::Sgd { momentum, .. } | K::RmsProp { momentum, .. }) => momentum,
        ("nesterov", K::Sgd { nesterov, .. }) => return Some(nesterov.to_string()),
        ("wd", K::Sgd { weight_decay, .. })
        | ("wd", K::Adam { weight_decay, .. })
        | ("wd", K::AdamW { weight_decay, .. })
        | ("wd", K::RmsProp { weight_decay, .. })
        | ("wd", K::AdaGrad { weight_decay, .. }) => weight_decay,
        ("beta1", K::Adam { beta1, .. } | K::AdamW { beta1, .. }) => beta1,
        ("beta2", K::Adam { beta2, .. } | K::AdamW { beta2, .. }) => beta2,
        ("eps", K::Adam { epsilon, .. })
        | ("eps", K::AdamW { epsilon, .. })
        | ("eps", K::RmsProp { epsilon, .. })
        | ("eps", K::AdaGrad { epsilon, .. }) => epsilon,
        _ => return None,
    };
    Some(value.to_string())
}

/// `recipe`'s schedule against a run of `epochs` of `per_epoch` batches (fewer updates with
/// --accumulate), before anything is written: a warm-up as long as the run is refused, naming --lr-schedule.
pub fn check_schedule(recipe: &Recipe, per_epoch: usize, epochs: usize) -> anyhow::Result<()> {
    use ember::optim::LrSchedule;
    let Some(schedule) = &recipe.schedule else {
        return Ok(());
    };
    let steps = (per_epoch.div_ceil(recipe.accumulate) * epochs) as u64;
    let updates = match recipe.accumulate {
        1 => String::new(),
        n => format!(" (updates of --accumulate {n} batches: {steps} in the run)"),
    };
    schedule.check(steps).map_err(|e| match e {
        ember::Error::InvalidValue { reason, .. } => {
            anyhow::anyhow!("invalid --lr-schedule {schedule}: {reason}{updates}")
        }
        other => other.into(),
    })
}

/// The recipe on the run's first line, where it is not the book's plain SGD.
pub fn recipe_words(recipe: &Recipe) -> String {
    if *recipe == Recipe::default() {
        return String::new();
    }
    format!(", {}", recipe.describe())
}
