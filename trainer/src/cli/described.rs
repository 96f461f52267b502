//! A checked workload written back as its flags: each flag's value ([`VALUES`]), the command
//! line that makes the same workload for a child process ([`Workload::to_args`]), and what a
//! checkpoint records of it for a resumed run to match ([`Workload::description`]). A floor
//! above the workload, whose checks name the flags of [`Flag::ALL`].

use std::collections::BTreeMap;

use anyhow::bail;
use ember::DeviceName;

use super::flags::{Flag, Resume};
use super::list;
use super::recipe::Recipe;
use super::workload::{DataSpec, Workload};

/// A flag's value in a checked workload, as the flag takes it; `None` leaves the flag out.
type Value = fn(&Workload) -> Option<String>;

/// Each flag of [`Flag::ALL`] with its value.
pub const VALUES: &[(&Flag, Value)] = &[
    (&Flag::DEVICE, |w| {
        w.devices.is_none().then(|| w.device.to_string())
    }),
    (&Flag::DEVICES, |w| {
        w.devices.as_ref().map(ToString::to_string)
    }),
    (&Flag::DATA, |w| Some(w.data.to_string())),
    (&Flag::BATCH_SIZE, |w| Some(w.batch_size.to_string())),
    (&Flag::LR, |w| Some(w.lr.to_string())),
    // The recipe's flags are written where they differ from the defaults only, so that
    // checkpoints written before they existed still resume.
    (&Flag::OPTIMIZER, |w| {
        let name = w.recipe.optimizer.name();
        (name != "sgd").then(|| name.to_string())
    }),
    (&Flag::MOMENTUM, |w| w.recipe.changed("momentum")),
    (&Flag::NESTEROV, |w| w.recipe.changed("nesterov")),
    (&Flag::WD, |w| w.recipe.changed("wd")),
    (&Flag::BETA1, |w| w.recipe.changed("beta1")),
    (&Flag::BETA2, |w| w.recipe.changed("beta2")),
    (&Flag::EPS, |w| w.recipe.changed("eps")),
    (&Flag::LR_SCHEDULE, |w| {
        w.recipe.schedule.as_ref().map(ToString::to_string)
    }),
    (&Flag::CLIP_NORM, |w| {
        w.recipe.clipping.global_norm.map(|n| n.to_string())
    }),
    (&Flag::CLIP_VALUE, |w| {
        w.recipe.clipping.value.map(|v| v.to_string())
    }),
    (&Flag::ACCUMULATE, |w| {
        (w.recipe.accumulate > 1).then(|| w.recipe.accumulate.to_string())
    }),
    // Written where it is not f32 ([`Flag::PRECISION`]).
    (&Flag::PRECISION, |w| {
        (w.recipe.precision != ember::Precision::F32).then(|| w.recipe.precision.to_string())
    }),
    (&Flag::SEED, |w| Some(w.seed.to_string())),
    (&Flag::VALID_SPLIT, |w| w.valid_split.map(|f| f.to_string())),
    (&Flag::CLASSES, |w| w.classes.map(|n| n.to_string())),
    (&Flag::BATCHES, |w| Some(w.batches.to_string())),
    (&Flag::FEATURES, |w| Some(w.features.to_string())),
    (&Flag::HIDDEN, |w| Some(list::join(&w.hidden))),
];

/// `flag`'s value in `w` ([`VALUES`]).
fn value(flag: &Flag, w: &Workload) -> Option<String> {
    let (_, value) = VALUES.iter().find(|(f, _)| f.name == flag.name)?;
    value(w)
}

impl Workload {
    /// The same workload as `ember` flags, for a child process: the flags that make it, the
    /// synthetic data's sizes only for synthetic data.
    pub fn to_args(&self) -> Vec<String> {
        self.flags()
            .flat_map(|(flag, value)| [flag.to_string(), value])
            .collect()
    }

    /// What makes two runs of this workload the same run, flag by flag: what a checkpoint
    /// records and a resumed run must match, with `opened`, what `--device` opened.
    pub fn description(&self, opened: DeviceName) -> BTreeMap<String, String> {
        self.flags()
            .filter_map(|(flag, value)| match flag.resume {
                Resume::Value | Resume::Changeable => Some((flag.to_string(), value)),
                Resume::Opened => Some((flag.to_string(), opened.to_string())),
                Resume::Nothing => None,
            })
            .collect()
    }

    /// Each flag this workload reads, with its value, in [`Flag::ALL`]'s order.
    fn flags(&self) -> impl Iterator<Item = (&'static Flag, String)> {
        let synthetic = self.data == DataSpec::Synthetic;
        Flag::ALL
            .iter()
            .filter(move |flag| flag.read_by(synthetic))
            .filter_map(|flag| Some((flag, value(flag, self)?)))
    }

    /// The workload, for `command`, which measures ember's loop beside raw burn's plain SGD
    /// loop: a recipe other than plain SGD is refused, naming its flags.
    pub fn plain_sgd(self, command: &str) -> anyhow::Result<Self> {
        let plain = Workload {
            recipe: Recipe::default(),
            ..self.clone()
        };
        let plain: Vec<_> = plain.flags().collect();
        let given: Vec<String> = self
            .flags()
            .filter(|(flag, value)| !plain.iter().any(|(f, v)| f.name == flag.name && v == value))
            .map(|(flag, _)| flag.to_string())
            .collect();
        if !given.is_empty() {
            bail!(
                "{} applies to `ember train` and `ember compare`: {command} measures the loop \
                 beside raw burn's plain SGD, so it trains with plain SGD; leave it out",
                given.join(", ")
            );
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use clap::{CommandFactory, Parser};

    use super::*;
    use crate::cli::workload::WorkloadArgs;

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
    fn every_flag_has_one_value_and_other_data_refuses_the_synthetic_ones() {
        for flag in Flag::ALL {
            let found = VALUES.iter().filter(|(f, _)| f.name == flag.name).count();
            assert_eq!(found, 1, "{flag} has {found} values");
        }
        assert_eq!(VALUES.len(), Flag::ALL.len());
        // The workload's list of those the command line gave holds each of them.
        for flag in Flag::ALL.iter().filter(|f| f.synthetic_only) {
            let value = if flag.name == "hidden" { "3" } else { "4" };
            let args = format!("--device flex --data csv:x.csv {flag} {value}");
            let cli = Cli::try_parse_from(["ember"].into_iter().chain(args.split_whitespace()));
            let err = Workload::try_from(cli.unwrap().workload).unwrap_err();
            assert!(
                err.to_string().starts_with(&format!("{flag} applies to")),
                "{err}"
            );
        }
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
