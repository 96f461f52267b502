//! The chapter workload's flags, shared by `train`, `bench`, `compare`, `lr-find` and
//! `summary`, and mapped onto [`WorkloadSettings`].

use clap::Args;
use ember::{DeviceList, DeviceSpec};
use ember_trainer::run::flags::Flag;
use ember_trainer::run::list::{self, List, Size};
use ember_trainer::run::workload::{DataSpec, Workload, WorkloadSettings};

use super::devices;
use super::recipe::RecipeArgs;

/// The chapter's MLP on the chapter's synthetic data. Each flag's name is [`Flag`]'s.
#[derive(Debug, Args)]
pub struct WorkloadArgs {
    #[arg(
        long = Flag::DEVICE.name,
        default_value = "auto",
        value_parser = devices::parse_device::<DeviceSpec>,
        help = devices::help("The device", true)
    )]
    pub device: DeviceSpec,
    /// Data parallelism: each batch is split across these devices, comma separated, the first
    /// one main (it keeps the parameters and sums the gradients): `flex,flex`, `wgpu,wgpu`
    /// (several devices on the first wgpu adapter), `wgpu:0,wgpu:1` (two adapters).
    #[arg(
        long = Flag::DEVICES.name,
        conflicts_with = "device",
        value_parser = devices::parse_device::<DeviceList>
    )]
    pub devices: Option<DeviceList>,
    /// Batches per epoch, on synthetic data [default: 150].
    #[arg(long = Flag::BATCHES.name)]
    pub batches: Option<usize>,
    /// Examples per batch.
    #[arg(long = Flag::BATCH_SIZE.name, default_value_t = 1024)]
    pub batch_size: usize,
    /// Features per example, on synthetic data [default: 512].
    #[arg(long = Flag::FEATURES.name)]
    pub features: Option<usize>,
    /// Hidden layer sizes of the chapter's MLP on synthetic data, comma separated [default:
    /// 2048,512].
    #[arg(long = Flag::HIDDEN.name)]
    pub hidden: Option<List<Size>>,
    /// Learning rate: the optimizer's, or the base that --lr-schedule starts from (`ember
    /// lr-find` suggests one).
    #[arg(long = Flag::LR.name, default_value_t = 0.01, allow_negative_numbers = true)]
    pub lr: f64,
    #[command(flatten)]
    pub recipe: RecipeArgs,
    /// Seed of the data (synthetic batches, shuffling) and of the weights' initialization.
    #[arg(long = Flag::SEED.name, default_value_t = 0)]
    pub seed: u64,
    /// Data: `synthetic` (the chapter's X ~ N(0,1), y = 1); `fashion-mnist[:DIR]` (IDX
    /// files, gzipped or raw; DIR defaults to Debian's /usr/share/datasets/fashion-mnist from
    /// `apt-get install dataset-fashion-mnist`); `csv:PATH` (numbers, the label in the last
    /// column, an optional header); `npy:X.npy,Y.npy` (features of any shape, targets); or
    /// `text:fortunes[,steps=S][,tokens=N][,random][,offset=K][,dir=PATH]` (d2l's character
    /// language model on Debian's fortunes, `apt-get install fortunes`: subsequences of S
    /// tokens, 35 by default, of the first N characters; sequential partitioning carries the
    /// state from batch to batch, `random` draws them in a random order; `offset` starts every
    /// epoch at token K instead of one drawn per epoch; `dir` reads the fortunes' files from
    /// PATH instead of /usr/share/games/fortunes; --valid-split holds out the text's end).
    #[arg(long = Flag::DATA.name, default_value = "synthetic")]
    pub data: DataSpec,
    /// Hold out this share of the training examples (a shuffle seeded by --seed; for text, the
    /// text's end) as a validation set: each epoch prints its valid_loss and --eval's metrics on
    /// it (valid_acc by default for classes, valid_perplexity for text), which --early-stop, --reduce-lr-on-plateau and --best-on can
    /// watch. Not for synthetic data.
    #[arg(long = Flag::VALID_SPLIT.name, allow_negative_numbers = true)]
    pub valid_split: Option<f64>,
    /// With `csv:` or `npy:` data: the targets are class indices in 0..N (softmax
    /// cross-entropy); without it they are values to regress (L2).
    #[arg(long = Flag::CLASSES.name)]
    pub classes: Option<usize>,
}

impl From<&WorkloadArgs> for WorkloadSettings {
    fn from(args: &WorkloadArgs) -> Self {
        Self {
            device: args.device.clone(),
            devices: args.devices.clone(),
            batches: args.batches,
            batch_size: args.batch_size,
            features: args.features,
            hidden: args.hidden.as_ref().map(list::sizes),
            lr: args.lr,
            recipe: (&args.recipe).into(),
            seed: args.seed,
            data: args.data.clone(),
            valid_split: args.valid_split,
            classes: args.classes,
        }
    }
}

impl TryFrom<WorkloadArgs> for Workload {
    type Error = anyhow::Error;

    /// [`WorkloadSettings::check`] of the flags.
    fn try_from(args: WorkloadArgs) -> anyhow::Result<Self> {
        WorkloadSettings::from(&args).check()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use clap::{CommandFactory, Parser};

    use ember_trainer::run::described::VALUES;

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
                             --clip-norm 1 --accumulate 3 --precision bf16 \
                             --hybridize true";
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
