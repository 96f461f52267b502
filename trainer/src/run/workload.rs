//! The workload of a run: the device, the data, the sizes and the rate, with the recipe; the
//! chapter's by default.

use std::path::PathBuf;

use crate::fit::{Fit, SyntheticEpochs, Target};
use anyhow::bail;
use ember::{DeviceList, DeviceName, DeviceSpec, Init, Loss, Optimizer, PickedDevice};
use ember_datasets::Synthetic;

use super::flags::{Flag, number};
use super::model::{ModelSpec, Net};
use super::notes::Notes;
use super::recipe::{Recipe, RecipeSettings};

/// The workload as `ember train` is given it, unchecked: the device, the data, the sizes, the
/// rate and the recipe. [`WorkloadSettings::check`] makes the [`Workload`]. Each field is the
/// flag of its name; `None` is the flag left out. The default is `ember train`'s: the chapter's
/// MLP on its synthetic data, batches of 1024, SGD at 0.01, on the device `auto` picks.
#[derive(Debug, Clone)]
pub struct WorkloadSettings {
    /// `--device`.
    pub device: DeviceSpec,
    /// `--devices`: data parallelism over these (replaces `device`).
    pub devices: Option<DeviceList>,
    /// `--batches`, on synthetic data [default: 150].
    pub batches: Option<usize>,
    /// `--batch-size`.
    pub batch_size: usize,
    /// `--features`, on synthetic data [default: 512].
    pub features: Option<usize>,
    /// `--hidden`, on synthetic data [default: 2048, 512].
    pub hidden: Option<Vec<usize>>,
    /// `--lr`.
    pub lr: f64,
    /// The recipe's flags.
    pub recipe: RecipeSettings,
    /// `--seed`.
    pub seed: u64,
    /// `--data`.
    pub data: DataSpec,
    /// `--valid-split`.
    pub valid_split: Option<f64>,
    /// `--classes`.
    pub classes: Option<usize>,
}

impl Default for WorkloadSettings {
    fn default() -> Self {
        Self {
            device: DeviceName::Auto.into(),
            devices: None,
            batches: None,
            batch_size: 1024,
            features: None,
            hidden: None,
            lr: 0.01,
            recipe: RecipeSettings::default(),
            seed: 0,
            data: DataSpec::Synthetic,
            valid_split: None,
            classes: None,
        }
    }
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
    /// Text for a language model ([`super::text_data`]).
    Text(super::text_data::TextSpec),
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
            Some(("text", text)) => Ok(DataSpec::Text(super::text_data::TextSpec::parse(text)?)),
            _ => bail!(
                "expected synthetic, fashion-mnist[:DIR], csv:PATH, npy:X.npy,Y.npy or {}",
                super::text_data::FORM
            ),
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
            DataSpec::Text(text) => write!(f, "text:{text}"),
        }
    }
}

/// The checked workload.
#[derive(Debug, Clone)]
pub struct Workload {
    /// `--device`.
    pub device: DeviceSpec,
    /// `--devices`: data parallelism over these.
    pub devices: Option<DeviceList>,
    /// Where the examples come from.
    pub data: DataSpec,
    /// Batches per epoch, on synthetic data.
    pub batches: usize,
    /// Examples per batch.
    pub batch_size: usize,
    /// Features per example, on synthetic data.
    pub features: usize,
    /// The chapter's MLP's hidden sizes, on synthetic data.
    pub hidden: Vec<usize>,
    /// The learning rate, or the base of the schedule.
    pub lr: f64,
    /// The seed of the data and of the weights' initialization.
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

impl WorkloadSettings {
    /// The workload, each value checked as `ember train` checks it, alone and beside the
    /// others (a flag of synthetic data on other data, a batch too small for `--devices`).
    ///
    /// # Errors
    /// A value refused in `ember train`'s words, naming its flag.
    pub fn check(self) -> anyhow::Result<Workload> {
        let args = self;
        let hidden = args.hidden.clone().unwrap_or_else(|| vec![2048, 512]);
        // The command line's parser refuses these; code may give them.
        if hidden.is_empty() || hidden.contains(&0) {
            let given = match hidden.is_empty() {
                true => "(an empty list)".to_string(),
                false => super::list::join(&hidden),
            };
            bail!(
                "invalid {} {given}: expected whole numbers of at least 1, comma separated",
                Flag::HIDDEN
            );
        }
        if let Err(ember::Error::InvalidValue { reason, .. }) =
            ember::optim::positive("--lr", args.lr)
        {
            bail!("invalid --lr {}: {reason}", super::flags::number(args.lr));
        }
        let data = args.data.clone();
        let recipe = args.recipe.check()?;
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
                    "invalid {} {}: the share held out must lie in (0, 1)",
                    Flag::VALID_SPLIT,
                    number(split)
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
        Ok(Workload {
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
    pub fn open_devices(&self, notes: &Notes) -> anyhow::Result<Vec<PickedDevice>> {
        // burn-remote tries a server that does not answer for about 15 s before it gives up:
        // said first, so that the wait is not a hang.
        let specs = self
            .devices
            .as_ref()
            .map_or_else(|| vec![self.device.clone()], |l| l.0.clone());
        for spec in specs.iter().filter(|s| s.name == DeviceName::Remote) {
            warn_note!(
                notes,
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
    pub fn open_seeded_devices(&self, notes: &Notes) -> anyhow::Result<Vec<PickedDevice>> {
        let picked = self.open_devices(notes)?;
        for (index, device) in picked.iter().enumerate() {
            match picked.len() {
                1 => note!(notes, "device: {}", device.reason),
                _ => note!(notes, "device {index}: {}", device.reason),
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

/// The one place a run of `ember` is built: `net` trained with `loss` on `device` (an
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
        .precision(recipe.precision)
        .hybridize(recipe.hybridize);
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
