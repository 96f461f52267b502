//! The chapter workload's options, shared by `train` and `bench`.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Args;
use ember::{Activation, Block, Dense, DeviceName, Init, L2Loss, Sequential, Trainer};
use ember_datasets::Synthetic;
use ember_trainer::fit::{FitOptions, FitRun, Progress, SyntheticEpochs, fit};
use ember_trainer::policy::SyncPolicy;

/// The chapter's MLP on the chapter's synthetic data.
#[derive(Debug, Args)]
pub struct WorkloadArgs {
    /// auto, wgpu, flex or ndarray.
    #[arg(long, default_value = "auto")]
    pub device: String,
    /// Batches per epoch.
    #[arg(long, default_value_t = 150)]
    pub batches: usize,
    /// Examples per batch.
    #[arg(long, default_value_t = 1024)]
    pub batch_size: usize,
    /// Features per example.
    #[arg(long, default_value_t = 512)]
    pub features: usize,
    /// Hidden layer sizes, comma separated (the chapter: 2048,512).
    #[arg(long, default_value = "2048,512")]
    pub hidden: String,
    /// Learning rate (SGD).
    #[arg(long, default_value_t = 0.01, allow_negative_numbers = true)]
    pub lr: f64,
    /// Seed of the data (synthetic batches, shuffling) and of the weights' initialization.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Data: `synthetic` (the chapter's X ~ N(0,1), y = 1), or `fashion-mnist[:DIR]` (IDX
    /// files, gzipped or raw; DIR defaults to Debian's /usr/share/datasets/fashion-mnist from
    /// `apt-get install dataset-fashion-mnist`).
    #[arg(long, default_value = "synthetic")]
    pub data: String,
}

impl WorkloadArgs {
    /// The same options as command-line arguments, for a child process.
    pub fn to_args(&self) -> Vec<String> {
        [
            ("--device", self.device.clone()),
            ("--batches", self.batches.to_string()),
            ("--batch-size", self.batch_size.to_string()),
            ("--features", self.features.to_string()),
            ("--hidden", self.hidden.clone()),
            ("--lr", self.lr.to_string()),
            ("--seed", self.seed.to_string()),
            ("--data", self.data.clone()),
        ]
        .into_iter()
        .flat_map(|(flag, value)| [flag.to_string(), value])
        .collect()
    }
}

/// Where the examples come from.
#[derive(Debug, Clone, PartialEq)]
pub enum DataSpec {
    /// The chapter's seeded synthetic data.
    Synthetic,
    /// Fashion-MNIST's four IDX files in a directory.
    FashionMnist(PathBuf),
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
            _ => bail!(
                "invalid --data {s:?}: expected synthetic, fashion-mnist or fashion-mnist:DIR"
            ),
        }
    }
}

/// The checked workload.
#[derive(Debug, Clone)]
pub struct Workload {
    pub device: DeviceName,
    pub data: DataSpec,
    pub batches: usize,
    pub batch_size: usize,
    pub features: usize,
    pub hidden: Vec<usize>,
    pub lr: f64,
    pub seed: u64,
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
        let hidden = args
            .hidden
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|s| {
                s.trim()
                    .parse::<usize>()
                    .ok()
                    .filter(|n| *n > 0)
                    .with_context(|| {
                        format!(
                            "invalid --hidden {:?}: expected positive sizes like 2048,512",
                            args.hidden
                        )
                    })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        if !(args.lr.is_finite() && args.lr > 0.0) {
            bail!("invalid --lr {}: must be a finite number above 0", args.lr);
        }
        Ok(Self {
            device: args.device.parse()?,
            data: args.data.parse()?,
            batches: positive("batches", args.batches)?,
            batch_size: positive("batch-size", args.batch_size)?,
            features: positive("features", args.features)?,
            hidden,
            lr: args.lr,
            seed: args.seed,
        })
    }
}

impl Workload {
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

    /// Trains `net` (see [`Workload::net`]) on `device` (an autodiff device) for `epochs`
    /// epochs under `policy`, with SGD at the workload's rate.
    pub fn fit(
        &self,
        net: Sequential,
        device: &burn::tensor::Device,
        policy: &mut dyn SyncPolicy,
        epochs: usize,
        progress: &mut dyn Progress,
    ) -> anyhow::Result<FitRun<Sequential>> {
        let trainer = Trainer::new(&net, "sgd", self.lr)?;
        let mut data = SyntheticEpochs::new(self.data()?, self.batches);
        let options = FitOptions::epochs(epochs);
        Ok(fit(
            net, L2Loss, trainer, device, &mut data, policy, &options, progress,
        )?)
    }

    /// Dense(h, relu) for each hidden size, then Dense(1), initialized on `device`.
    pub fn net(&self, device: &burn::tensor::Device) -> Sequential {
        mlp(&self.hidden, 1, Init::default(), device)
    }
}

/// Dense(h, relu) for each hidden size, then Dense(outputs), initialized with `init` on
/// `device`.
pub fn mlp(
    hidden: &[usize],
    outputs: usize,
    init: Init,
    device: &burn::tensor::Device,
) -> Sequential {
    let mut net: Sequential = Sequential::new();
    for &units in hidden {
        net = net.add(Dense::new(units).activation(Activation::Relu));
    }
    net.add(Dense::new(outputs)).initialize(init, device)
}
