//! The training recipe, part of the workload: the optimizer and its options, the learning-rate
//! schedule, gradient clipping, accumulation and the precision, as given
//! ([`RecipeSettings`]) and checked ([`Recipe`]). Each flag's name is [`Flag`]'s; each
//! option's meaning is [`OptimizerKind`]'s.

use anyhow::bail;
use ember::optim::{Clipping, OPTIMIZERS, Schedule};
use ember::{Error, OptimizerKind, Precision};

use super::flags::{Flag, number};

/// The optimizer, its options, the schedule, clipping, accumulation and the precision, as
/// `ember train` is given them and unchecked: [`RecipeSettings::check`] makes the [`Recipe`].
/// Each field is the flag of its name (`--clip-norm` for `clip_norm`); `None` is the flag left
/// out. The default is plain SGD in f32.
#[derive(Debug, Clone, PartialEq)]
pub struct RecipeSettings {
    /// `--optimizer`: sgd, adam, adamw, rmsprop or adagrad.
    pub optimizer: String,
    /// `--momentum`.
    pub momentum: Option<f64>,
    /// `--nesterov`.
    pub nesterov: Option<bool>,
    /// `--wd`.
    pub wd: Option<f64>,
    /// `--beta1`.
    pub beta1: Option<f64>,
    /// `--beta2`.
    pub beta2: Option<f64>,
    /// `--eps`.
    pub eps: Option<f64>,
    /// `--lr-schedule`, as its flag is written (`cosine:warmup=5`).
    pub lr_schedule: Option<String>,
    /// `--clip-norm`.
    pub clip_norm: Option<f64>,
    /// `--clip-value`.
    pub clip_value: Option<f64>,
    /// `--accumulate`: signed, so that a negative count is refused naming it.
    pub accumulate: Option<i64>,
    /// `--precision`: `f32` or `bf16`.
    pub precision: Option<String>,
    /// `--hybridize`.
    pub hybridize: bool,
}

impl Default for RecipeSettings {
    fn default() -> Self {
        Self {
            optimizer: "sgd".to_string(),
            momentum: None,
            nesterov: None,
            wd: None,
            beta1: None,
            beta2: None,
            eps: None,
            lr_schedule: None,
            clip_norm: None,
            clip_value: None,
            accumulate: None,
            precision: None,
            hybridize: false,
        }
    }
}

/// The checked recipe.
#[derive(Debug, Clone, PartialEq)]
pub struct Recipe {
    /// The optimizer with its options.
    pub optimizer: OptimizerKind,
    /// The learning rate's schedule; `None` is a constant rate.
    pub schedule: Option<Schedule>,
    /// Gradient clipping.
    pub clipping: Clipping,
    /// Batches a step's gradients sum over.
    pub accumulate: usize,
    /// The precision of the forward passes' products.
    pub precision: Precision,
    /// Whether the training step is recorded once and replayed ([`crate::fit::Fit::hybridize`]).
    pub hybridize: bool,
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
            hybridize: false,
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

impl RecipeSettings {
    /// The recipe, each value checked as `ember train` checks it.
    ///
    /// # Errors
    /// A value refused in `ember train`'s words, naming its flag: an unknown optimizer, an
    /// option it does not take, a value out of range, a schedule that does not parse.
    pub fn check(&self) -> anyhow::Result<Recipe> {
        let args = self;
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
        Ok(Recipe {
            optimizer,
            schedule,
            clipping,
            accumulate,
            precision,
            hybridize: args.hybridize,
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
        if self.hybridize {
            words.push_str(", hybridized");
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
