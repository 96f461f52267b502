//! The workload's flags, shared by `train`, `bench` and `compare`, each named once: in
//! [`Flag::ALL`], with what a resumed run must match of it. clap's `WorkloadArgs` takes each
//! flag's name from there, and the checks of a workload name the flags they refuse; what each
//! flag's value is in a checked workload, and the walks over the table that write a workload
//! back as flags, are [`super::described`]'s, a floor above the workload.

use std::fmt;

pub use ember::error::number;

/// One flag of the workload.
pub struct Flag {
    /// The long name, without `--`.
    pub name: &'static str,
    /// A flag that only synthetic data reads: other data refuses it, and
    /// [`super::described`] writes it for synthetic data only.
    pub synthetic_only: bool,
    /// What a checkpoint records of it, for a resumed run to match.
    pub resume: Resume,
    /// What a record without the flag means, for a flag written only where it is not its
    /// default (`--precision`: f32), so that a resumed run may give or drop it.
    pub unset: Option<&'static str>,
}

/// What a checkpoint records of a flag, for `--resume` to compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// Its value, which a resumed run must match.
    Value,
    /// Its value, which a resumed run may change (the learning rate: the way back from a run
    /// that diverged); the change is printed.
    Changeable,
    /// The device it opened (`--device auto` records what auto picked).
    Opened,
    /// Nothing.
    Nothing,
}

impl Flag {
    const fn new(name: &'static str, resume: Resume) -> Self {
        Self {
            name,
            synthetic_only: false,
            resume,
            unset: None,
        }
    }

    /// The same flag, whose absence from a record means `value`.
    const fn unset_means(self, value: &'static str) -> Self {
        Self {
            unset: Some(value),
            ..self
        }
    }

    /// The same flag, read by synthetic data only.
    const fn synthetic_only(self) -> Self {
        Self {
            synthetic_only: true,
            ..self
        }
    }

    /// `--device`.
    pub const DEVICE: Flag = Flag::new("device", Resume::Opened);
    /// `--devices`.
    pub const DEVICES: Flag = Flag::new("devices", Resume::Value);
    /// `--data`.
    pub const DATA: Flag = Flag::new("data", Resume::Value);
    /// `--batch-size`.
    pub const BATCH_SIZE: Flag = Flag::new("batch-size", Resume::Value);
    /// `--lr`.
    pub const LR: Flag = Flag::new("lr", Resume::Changeable);
    /// The recipe's flags ([`super::recipe`]) are written where they differ from the
    /// defaults only, so that checkpoints written before they existed still resume.
    pub const OPTIMIZER: Flag = Flag::new("optimizer", Resume::Value);
    /// `--momentum`.
    pub const MOMENTUM: Flag = Flag::new("momentum", Resume::Value);
    /// `--nesterov`.
    pub const NESTEROV: Flag = Flag::new("nesterov", Resume::Value);
    /// `--wd`.
    pub const WD: Flag = Flag::new("wd", Resume::Value);
    /// `--beta1`.
    pub const BETA1: Flag = Flag::new("beta1", Resume::Value);
    /// `--beta2`.
    pub const BETA2: Flag = Flag::new("beta2", Resume::Value);
    /// `--eps`.
    pub const EPS: Flag = Flag::new("eps", Resume::Value);
    /// Changeable as --lr: one cycle sets the rate itself, so it is the way back from a
    /// one-cycle run that diverged.
    pub const LR_SCHEDULE: Flag = Flag::new("lr-schedule", Resume::Changeable);
    /// `--clip-norm`.
    pub const CLIP_NORM: Flag = Flag::new("clip-norm", Resume::Value);
    /// `--clip-value`.
    pub const CLIP_VALUE: Flag = Flag::new("clip-value", Resume::Value);
    /// `--accumulate`.
    pub const ACCUMULATE: Flag = Flag::new("accumulate", Resume::Value);
    /// Changeable: the parameters are f32 either way. Written where it is not f32, so that
    /// checkpoints written before it existed still resume.
    pub const PRECISION: Flag = Flag::new("precision", Resume::Changeable).unset_means("f32");
    /// Not recorded: a recorded step computes what the eager one does, and a resumed run
    /// (whose optimizer has a state) runs eagerly.
    pub const HYBRIDIZE: Flag = Flag::new("hybridize", Resume::Nothing);
    /// `--seed`.
    pub const SEED: Flag = Flag::new("seed", Resume::Value);
    /// `--valid-split`.
    pub const VALID_SPLIT: Flag = Flag::new("valid-split", Resume::Value);
    /// Not recorded: checkpoints have never held it, and a new key would refuse to resume the
    /// ones written so far.
    pub const CLASSES: Flag = Flag::new("classes", Resume::Nothing);
    /// `--batches`.
    pub const BATCHES: Flag = Flag::new("batches", Resume::Value).synthetic_only();
    /// `--features`.
    pub const FEATURES: Flag = Flag::new("features", Resume::Value).synthetic_only();
    /// Not recorded: `--model`'s value, which `ember train` records, holds the sizes.
    pub const HIDDEN: Flag = Flag::new("hidden", Resume::Nothing).synthetic_only();

    /// The optimizer's options, each a flag named as [`ember::OptimizerKind::options`] names it.
    pub const OPTIMIZER_OPTIONS: &'static [Flag] = &[
        Self::MOMENTUM,
        Self::NESTEROV,
        Self::WD,
        Self::BETA1,
        Self::BETA2,
        Self::EPS,
    ];

    /// Every flag of the workload, in the order `Workload::to_args` writes them.
    pub const ALL: &'static [Flag] = &[
        Self::DEVICE,
        Self::DEVICES,
        Self::DATA,
        Self::BATCH_SIZE,
        Self::LR,
        Self::OPTIMIZER,
        Self::MOMENTUM,
        Self::NESTEROV,
        Self::WD,
        Self::BETA1,
        Self::BETA2,
        Self::EPS,
        Self::LR_SCHEDULE,
        Self::CLIP_NORM,
        Self::CLIP_VALUE,
        Self::ACCUMULATE,
        Self::PRECISION,
        Self::HYBRIDIZE,
        Self::SEED,
        Self::VALID_SPLIT,
        Self::CLASSES,
        Self::BATCHES,
        Self::FEATURES,
        Self::HIDDEN,
    ];

    /// Whether a workload on `synthetic` data or not reads this flag.
    pub fn read_by(&self, synthetic: bool) -> bool {
        synthetic || !self.synthetic_only
    }
}

/// `--name`, as a command line writes the flag.
impl fmt::Display for Flag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "--{}", self.name)
    }
}

impl fmt::Debug for Flag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
