//! The workload's flags, shared by `train`, `bench` and `compare`, each named once: in
//! [`Flag::ALL`]. clap's [`WorkloadArgs`] takes each flag's name from there,
//! [`Workload::to_args`] writes a workload back as these flags for a child process, and
//! [`Workload::description`] says which of them a resumed run must match, all by walking the
//! same table.

use std::fmt;

use super::list;
use super::workload::{Workload, WorkloadArgs};

pub use ember::error::number;

/// One flag of the workload.
pub struct Flag {
    /// The long name, without `--`.
    pub name: &'static str,
    /// For a flag that only synthetic data reads: whether the command line gave it. Other
    /// data refuses such a flag, and [`Workload::to_args`] writes it for synthetic data only.
    pub synthetic_only: Option<fn(&WorkloadArgs) -> bool>,
    /// What a checkpoint records of it, for a resumed run to match.
    pub resume: Resume,
    /// Its value in a checked workload, as the flag takes it; `None` leaves the flag out.
    pub value: fn(&Workload) -> Option<String>,
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
    const fn new(
        name: &'static str,
        resume: Resume,
        value: fn(&Workload) -> Option<String>,
    ) -> Self {
        Self {
            name,
            synthetic_only: None,
            resume,
            value,
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

    /// The same flag, read by synthetic data only; `given` says whether the command line gave it.
    const fn synthetic_only(self, given: fn(&WorkloadArgs) -> bool) -> Self {
        Self {
            synthetic_only: Some(given),
            ..self
        }
    }

    pub const DEVICE: Flag = Flag::new("device", Resume::Opened, |w| {
        w.devices.is_none().then(|| w.device.to_string())
    });
    pub const DEVICES: Flag = Flag::new("devices", Resume::Value, |w| {
        w.devices.as_ref().map(ToString::to_string)
    });
    pub const DATA: Flag = Flag::new("data", Resume::Value, |w| Some(w.data.to_string()));
    pub const BATCH_SIZE: Flag = Flag::new("batch-size", Resume::Value, |w| {
        Some(w.batch_size.to_string())
    });
    pub const LR: Flag = Flag::new("lr", Resume::Changeable, |w| Some(w.lr.to_string()));
    /// The recipe's flags ([`super::recipe`]) are written where they differ from the
    /// defaults only, so that checkpoints written before they existed still resume.
    pub const OPTIMIZER: Flag = Flag::new("optimizer", Resume::Value, |w| {
        let name = w.recipe.optimizer.name();
        (name != "sgd").then(|| name.to_string())
    });
    pub const MOMENTUM: Flag =
        Flag::new("momentum", Resume::Value, |w| w.recipe.changed("momentum"));
    pub const NESTEROV: Flag =
        Flag::new("nesterov", Resume::Value, |w| w.recipe.changed("nesterov"));
    pub const WD: Flag = Flag::new("wd", Resume::Value, |w| w.recipe.changed("wd"));
    pub const BETA1: Flag = Flag::new("beta1", Resume::Value, |w| w.recipe.changed("beta1"));
    pub const BETA2: Flag = Flag::new("beta2", Resume::Value, |w| w.recipe.changed("beta2"));
    pub const EPS: Flag = Flag::new("eps", Resume::Value, |w| w.recipe.changed("eps"));
    /// Changeable as --lr: one cycle sets the rate itself, so it is the way back from a
    /// one-cycle run that diverged.
    pub const LR_SCHEDULE: Flag = Flag::new("lr-schedule", Resume::Changeable, |w| {
        w.recipe.schedule.as_ref().map(ToString::to_string)
    });
    pub const CLIP_NORM: Flag = Flag::new("clip-norm", Resume::Value, |w| {
        w.recipe.clipping.global_norm.map(|n| n.to_string())
    });
    pub const CLIP_VALUE: Flag = Flag::new("clip-value", Resume::Value, |w| {
        w.recipe.clipping.value.map(|v| v.to_string())
    });
    pub const ACCUMULATE: Flag = Flag::new("accumulate", Resume::Value, |w| {
        (w.recipe.accumulate > 1).then(|| w.recipe.accumulate.to_string())
    });
    /// Changeable: the parameters are f32 either way. Written where it is not f32, so that
    /// checkpoints written before it existed still resume.
    pub const PRECISION: Flag = Flag::new("precision", Resume::Changeable, |w| {
        (w.recipe.precision != ember::Precision::F32).then(|| w.recipe.precision.to_string())
    })
    .unset_means("f32");
    pub const SEED: Flag = Flag::new("seed", Resume::Value, |w| Some(w.seed.to_string()));
    pub const VALID_SPLIT: Flag = Flag::new("valid-split", Resume::Value, |w| {
        w.valid_split.map(|f| f.to_string())
    });
    /// Not recorded: checkpoints have never held it, and a new key would refuse to resume the
    /// ones written so far.
    pub const CLASSES: Flag = Flag::new("classes", Resume::Nothing, |w| {
        w.classes.map(|n| n.to_string())
    });
    pub const BATCHES: Flag = Flag::new("batches", Resume::Value, |w| Some(w.batches.to_string()))
        .synthetic_only(|a| a.batches.is_some());
    pub const FEATURES: Flag =
        Flag::new("features", Resume::Value, |w| Some(w.features.to_string()))
            .synthetic_only(|a| a.features.is_some());
    /// Not recorded: `--model`'s value, which `ember train` records, holds the sizes.
    pub const HIDDEN: Flag = Flag::new("hidden", Resume::Nothing, |w| Some(list::join(&w.hidden)))
        .synthetic_only(|a| a.hidden.is_some());

    /// The optimizer's options, each a flag named as [`ember::OptimizerKind::options`] names it.
    pub const OPTIMIZER_OPTIONS: &'static [Flag] = &[
        Self::MOMENTUM,
        Self::NESTEROV,
        Self::WD,
        Self::BETA1,
        Self::BETA2,
        Self::EPS,
    ];

    /// Every flag of the workload, in the order [`Workload::to_args`] writes them.
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
        Self::SEED,
        Self::VALID_SPLIT,
        Self::CLASSES,
        Self::BATCHES,
        Self::FEATURES,
        Self::HIDDEN,
    ];

    /// Whether a workload on `synthetic` data or not reads this flag.
    pub fn read_by(&self, synthetic: bool) -> bool {
        synthetic || self.synthetic_only.is_none()
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

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use clap::{CommandFactory, Parser};

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        workload: WorkloadArgs,
    }

    fn parse(args: &str) -> Result<Workload, clap::Error> {
        let cli = Cli::try_parse_from(["ember"].into_iter().chain(args.split_whitespace()))?;
        Ok(Workload::try_from(cli.workload).unwrap())
    }

    /// `--flag value` pairs, as a description holds them.
    fn pairs(args: &str) -> BTreeMap<String, String> {
        let words: Vec<&str> = args.split_whitespace().collect();
        let pairs = words
            .chunks(2)
            .map(|p| (p[0].to_string(), p[1].to_string()));
        pairs.collect()
    }

    /// Two command lines that between them give every flag of the workload.
    const SYNTHETIC: &str = "--device flex --data synthetic --batch-size 16 --lr 0.5 --seed 9 \
                             --batches 7 --features 5 --hidden 3,2 --momentum 0.9 \
                             --nesterov true --wd 0.001 --lr-schedule cosine:warmup=5 \
                             --clip-norm 1 --accumulate 3 --precision bf16";
    const CSV: &str = "--devices flex,flex --data csv:x.csv --batch-size 8 --lr 0.25 --seed 1 \
                       --valid-split 0.2 --classes 3 --optimizer adamw --beta1 0.8 --beta2 0.99 --eps 0.000001 \
                       --clip-value 0.5";

    #[test]
    fn the_table_names_every_flag_the_parser_has_and_no_other() {
        let parsed: BTreeSet<String> = Cli::command()
            .get_arguments()
            .filter_map(|arg| arg.get_long())
            .map(|long| format!("--{long}"))
            .collect();
        let table: BTreeSet<String> = Flag::ALL.iter().map(Flag::to_string).collect();
        assert_eq!(parsed, table);
        assert_eq!(table.len(), Flag::ALL.len(), "a flag is in the table twice");
        let given = pairs(SYNTHETIC).into_keys().chain(pairs(CSV).into_keys());
        assert_eq!(
            given.collect::<BTreeSet<_>>(),
            table,
            "the round trip must give each"
        );
    }

    #[test]
    fn to_args_writes_every_flag_of_the_table_and_parses_back_to_the_same_workload() {
        for args in [SYNTHETIC, CSV] {
            let first = parse(args).unwrap();
            let written = first.to_args().join(" ");
            // The same flags and values, in the table's order.
            assert_eq!(pairs(&written), pairs(args));
            let order: Vec<String> = Flag::ALL.iter().map(Flag::to_string).collect();
            let at = |flag: &String| order.iter().position(|f| f == flag);
            let written_order: Vec<_> = written.split(' ').step_by(2).map(String::from).collect();
            assert!(written_order.is_sorted_by_key(at), "{written}");
            let again = parse(&written).unwrap();
            assert_eq!(format!("{again:?}"), format!("{first:?}"));
        }
        // Synthetic data's sizes, given or not, are written for synthetic data.
        assert_eq!(
            parse("--device flex").unwrap().to_args().join(" "),
            "--device flex --data synthetic --batch-size 1024 --lr 0.01 --seed 0 --batches 150 \
             --features 512 --hidden 2048,512"
        );
        // clap still knows the two device flags as one choice.
        assert!(parse("--device flex --devices flex,flex").is_err());
    }

    #[test]
    fn a_checkpoint_records_the_flags_of_the_table_that_a_resume_must_match() {
        let opened = ember::DeviceName::Flex;
        let synthetic = parse("--device auto --batches 7 --hidden 3").unwrap();
        assert_eq!(
            synthetic.description(opened),
            pairs(
                "--device flex --data synthetic --batch-size 1024 --lr 0.01 --seed 0 \
                 --batches 7 --features 512"
            )
        );
        assert_eq!(
            parse(CSV).unwrap().description(opened),
            pairs(
                "--devices flex,flex --data csv:x.csv --batch-size 8 --lr 0.25 --seed 1 \
                 --valid-split 0.2 --optimizer adamw --beta1 0.8 --beta2 0.99 --eps 0.000001 --clip-value 0.5"
            )
        );
    }
}
