//! The chapter workload's options, shared by `train` and `bench`.

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;
use ember::{DeviceList, DeviceName, DeviceSpec, Init, Loss, Optimizer, PickedDevice};
use ember_datasets::Synthetic;
use ember_trainer::fit::{Fit, SyntheticEpochs, Target};

use super::devices;
use super::flags::{Flag, number};
use super::list::{self, List, Size};
use super::model::{ModelSpec, Net};
use super::recipe::{Recipe, RecipeArgs};

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
    /// column, an optional header); or `npy:X.npy,Y.npy` (features of any shape, targets).
    #[arg(long = Flag::DATA.name, default_value = "synthetic")]
    pub data: DataSpec,
    /// Hold out this share of the training examples (a shuffle seeded by --seed) as a
    /// validation set: each epoch prints its valid_loss and --eval's metrics on it (valid_acc
    /// by default for classes), which --early-stop, --reduce-lr-on-plateau and --best-on can
    /// watch. Not for synthetic data.
    #[arg(long = Flag::VALID_SPLIT.name, allow_negative_numbers = true)]
    pub valid_split: Option<f64>,
    /// With `csv:` or `npy:` data: the targets are class indices in 0..N (softmax
    /// cross-entropy); without it they are values to regress (L2).
    #[arg(long = Flag::CLASSES.name)]
    pub classes: Option<usize>,
}

/// Where the examples come from.
#[derive(Debug, Clone, PartialEq)]
pub enum DataSpec {
    /// The chapter's seeded synthetic data.
    Synthetic,
    /// Fashion-MNIST's four IDX files in a directory.
    FashionMnist(PathBuf),
    /// A CSV table, the label in its last column.
    Csv(PathBuf),
    /// Features and targets in two NumPy `.npy` files.
    Npy(PathBuf, PathBuf),
}

impl std::str::FromStr for DataSpec {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        match s.split_once(':') {
            None if s == "synthetic" => Ok(DataSpec::Synthetic),
            None if s == "fashion-mnist" => Ok(DataSpec::FashionMnist(
                ember_datasets::fashion_mnist::DEFAULT_DIR.into(),
            )),
            Some(("fashion-mnist", dir)) if !dir.is_empty() => {
                Ok(DataSpec::FashionMnist(dir.into()))
            }
            Some(("csv", path)) if !path.is_empty() => Ok(DataSpec::Csv(path.into())),
            Some(("npy", pair)) => match pair.split_once(',') {
                Some((x, y)) if !x.is_empty() && !y.is_empty() && !y.contains(',') => {
                    Ok(DataSpec::Npy(x.into(), y.into()))
                }
                _ => bail!("expected npy:X.npy,Y.npy"),
            },
            _ => bail!("expected synthetic, fashion-mnist[:DIR], csv:PATH or npy:X.npy,Y.npy"),
        }
    }
}

impl std::fmt::Display for DataSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DataSpec::Synthetic => write!(f, "synthetic"),
            DataSpec::FashionMnist(dir) => write!(f, "fashion-mnist:{}", dir.display()),
            DataSpec::Csv(path) => write!(f, "csv:{}", path.display()),
            DataSpec::Npy(x, y) => write!(f, "npy:{},{}", x.display(), y.display()),
        }
    }
}

/// The checked workload.
#[derive(Debug, Clone)]
pub struct Workload {
    pub device: DeviceSpec,
    /// `--devices`: data parallelism over these.
    pub devices: Option<DeviceList>,
    pub data: DataSpec,
    pub batches: usize,
    pub batch_size: usize,
    pub features: usize,
    pub hidden: Vec<usize>,
    pub lr: f64,
    pub seed: u64,
    /// With csv or npy data: the number of classes.
    pub classes: Option<usize>,
    /// `--valid-split`: the share of the training examples held out.
    pub valid_split: Option<f64>,
    /// The optimizer, its schedule and clipping.
    pub recipe: Recipe,
    /// The flags given that only synthetic data reads (`--features`, …).
    pub synthetic_flags: Vec<&'static Flag>,
}

/// A count that must be at least 1.
pub fn positive(name: &str, value: usize) -> anyhow::Result<usize> {
    if value == 0 {
        bail!("invalid --{name} 0: must be at least 1");
    }
    Ok(value)
}

impl TryFrom<WorkloadArgs> for Workload {
    type Error = anyhow::Error;

    fn try_from(args: WorkloadArgs) -> anyhow::Result<Self> {
        let hidden = args.hidden.as_ref().map_or(vec![2048, 512], list::sizes);
        if let Err(ember::Error::InvalidValue { reason, .. }) =
            ember::optim::positive("--lr", args.lr)
        {
            bail!("invalid --lr {}: {reason}", super::flags::number(args.lr));
        }
        let data = args.data.clone();
        let recipe = Recipe::try_from(&args.recipe)?;
        // The flags of synthetic data only ([`Flag::synthetic_only`]) the command line gave.
        let synthetic_flags: Vec<&'static Flag> = [
            (&Flag::BATCHES, args.batches.is_some()),
            (&Flag::FEATURES, args.features.is_some()),
            (&Flag::HIDDEN, args.hidden.is_some()),
        ]
        .into_iter()
        .filter_map(|(flag, given)| given.then_some(flag))
        .collect();
        if data != DataSpec::Synthetic
            && let Some(flag) = synthetic_flags.first()
        {
            bail!(
                "{flag} applies to --data synthetic only, and --data {} ignores it: leave it out",
                args.data
            );
        }
        if let Some(split) = args.valid_split {
            if data == DataSpec::Synthetic {
                bail!(
                    "{} applies to fashion-mnist:, csv: and npy: data: synthetic data draws new \
                     batches every epoch",
                    Flag::VALID_SPLIT
                );
            }
            if !(split > 0.0 && split < 1.0) {
                bail!(
                    "invalid {} {split}: the share held out must lie in (0, 1)",
                    Flag::VALID_SPLIT
                );
            }
        }
        if args.classes.is_some() && !matches!(data, DataSpec::Csv(_) | DataSpec::Npy(..)) {
            bail!(
                "--classes applies to csv: and npy: data only, and --data {} ignores it: leave \
                 it out",
                args.data
            );
        }
        if let Some(devices) = &args.devices
            && args.batch_size < devices.len()
        {
            bail!(
                "invalid --batch-size {}: --devices {devices} splits each batch across {} \
                 devices, and each needs at least one example",
                args.batch_size,
                devices.len()
            );
        }
        if let Some(classes @ (0 | 1)) = args.classes {
            bail!(
                "invalid --{} {classes}: softmax cross-entropy needs 2 or more classes (over \
                 one it is 0 whatever the network outputs, so it would train nothing); give 2 \
                 or more, or leave --{} out to regress the targets",
                Flag::CLASSES.name,
                Flag::CLASSES.name
            );
        }
        Ok(Self {
            device: args.device,
            devices: args.devices,
            data,
            batches: positive(Flag::BATCHES.name, args.batches.unwrap_or(150))?,
            batch_size: positive(Flag::BATCH_SIZE.name, args.batch_size)?,
            features: positive(Flag::FEATURES.name, args.features.unwrap_or(512))?,
            hidden,
            lr: args.lr,
            seed: args.seed,
            classes: args.classes,
            valid_split: args.valid_split,
            recipe,
            synthetic_flags,
        })
    }
}

impl Workload {
    /// The chapter's workload of the book: 150 batches of 1024 × 512, MLP 2048-512, SGD at
    /// 0.01, on `device`.
    pub fn chapter(device: DeviceName) -> Self {
        Self {
            device: device.into(),
            devices: None,
            data: DataSpec::Synthetic,
            batches: 150,
            batch_size: 1024,
            features: 512,
            hidden: vec![2048, 512],
            lr: 0.01,
            seed: 0,
            classes: None,
            valid_split: None,
            recipe: Recipe::default(),
            synthetic_flags: Vec::new(),
        }
    }

    /// Whether the command line gave `flag`, one that only synthetic data reads.
    pub fn gave(&self, flag: &Flag) -> bool {
        self.synthetic_flags
            .iter()
            .any(|given| given.name == flag.name)
    }

    /// Opens the devices: `--devices`' list, or `--device` alone.
    ///
    /// # Errors
    /// A device that cannot be opened, named, or one that cannot train in the workload's
    /// precision here ([`super::precision::check`]).
    pub fn open_devices(&self) -> anyhow::Result<Vec<PickedDevice>> {
        // burn-remote tries a server that does not answer for about 15 s before it gives up:
        // said first, so that the wait is not a hang.
        let specs = self
            .devices
            .as_ref()
            .map_or_else(|| vec![self.device.clone()], |l| l.0.clone());
        for spec in specs.iter().filter(|s| s.name == DeviceName::Remote) {
            say_err!(
                "connecting to {spec} (burn-remote retries for about {} s where it does not \
                 answer)",
                ember::device::remote::answer_within()
                    .as_secs_f64()
                    .min(15.0)
            );
        }
        let picked = match &self.devices {
            Some(list) => list.open()?,
            None => vec![self.device.open()?],
        };
        let names: Vec<DeviceName> = picked.iter().map(|p| p.name).collect();
        super::precision::check(self.recipe.precision, &names)?;
        Ok(picked)
    }

    /// [`Workload::open_devices`] for a run that trains: each device's line printed, and each
    /// seeded with `--seed`, which fixes the weights' initialization as well as the data.
    ///
    /// # Errors
    /// A device that cannot be opened, named.
    pub fn open_seeded_devices(&self) -> anyhow::Result<Vec<PickedDevice>> {
        let picked = self.open_devices()?;
        for (index, device) in picked.iter().enumerate() {
            match picked.len() {
                1 => say!("device: {}", device.reason),
                _ => say!("device {index}: {}", device.reason),
            }
            device.device.seed(self.seed);
            device.device.clone().autodiff().seed(self.seed);
        }
        Ok(picked)
    }

    /// `--device` for a command that runs on one device: `--devices` is refused, naming
    /// `command`.
    pub fn one_device(&self, command: &str) -> anyhow::Result<&DeviceSpec> {
        match &self.devices {
            Some(list) => bail!(
                "--devices {list}: {command} runs on one device; data parallelism is for \
                 `ember train` and `ember compare`"
            ),
            None => Ok(&self.device),
        }
    }

    /// The chapter's data; other data is refused by the commands that only run the chapter.
    pub fn data(&self) -> anyhow::Result<Synthetic> {
        match &self.data {
            DataSpec::Synthetic => Ok(Synthetic::chapter(
                self.batch_size,
                self.features,
                self.seed,
            )),
            other => bail!(
                "invalid --data {other:?}: this command runs the chapter's synthetic data only"
            ),
        }
    }

    /// The chapter's batches, numbered from the seed.
    pub fn epochs(&self) -> anyhow::Result<SyntheticEpochs> {
        Ok(SyntheticEpochs::new(self.data()?, self.batches))
    }

    /// The workload in a few words, for reports: the chapter's sizes on synthetic data, the
    /// data and batch size otherwise, then the recipe where it is not plain SGD in f32.
    pub fn describe(&self) -> String {
        let what = match self.data {
            DataSpec::Synthetic => format!(
                "{} batches x {} x {} features, hidden {:?}",
                self.batches, self.batch_size, self.features, self.hidden
            ),
            ref data => format!("{data}, batch {}, lr {}", self.batch_size, number(self.lr)),
        };
        what + &super::recipe::recipe_words(&self.recipe)
    }

    /// `net` trained with `loss` on `device` (an autodiff device) by the workload's recipe.
    pub fn fit<'a, L>(
        &self,
        net: Net,
        loss: L,
        device: &burn::tensor::Device,
    ) -> anyhow::Result<Fit<'a, Net, L>>
    where
        L: Loss + Send + Sync + 'static,
        L::Target: Target,
    {
        fit(&self.recipe, self.lr, net, loss, device)
    }

    /// Dense(h, relu) for each hidden size, then Dense(1), initialized on `device`.
    pub fn net(&self, device: &burn::tensor::Device) -> Net {
        mlp(&self.hidden, 1, Init::default(), device)
    }
}

/// The one place the command line builds a run: `net` trained with `loss` on `device` (an
/// autodiff device) by `recipe` at `lr`.
pub fn fit<'a, L>(
    recipe: &Recipe,
    lr: f64,
    net: Net,
    loss: L,
    device: &burn::tensor::Device,
) -> anyhow::Result<Fit<'a, Net, L>>
where
    L: Loss + Send + Sync + 'static,
    L::Target: Target,
{
    let optimizer = Optimizer::new(&net, recipe.optimizer, lr)?.clip(recipe.clipping);
    let fit = Fit::new(net, loss, optimizer, device)
        .accumulate(recipe.accumulate)
        .precision(recipe.precision);
    Ok(match &recipe.schedule {
        Some(schedule) => fit.lr_schedule(schedule.clone()),
        None => fit,
    })
}

/// Dense(h, relu) for each hidden size, then Dense(outputs), initialized with `init` on
/// `device`; the input size is deferred until the first batch.
pub fn mlp(hidden: &[usize], outputs: usize, init: Init, device: &burn::tensor::Device) -> Net {
    ModelSpec::Mlp(hidden.to_vec()).build(outputs, init, device)
}
