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
    (&Flag::HYBRIDIZE, |w| {
        w.recipe.hybridize.then(|| "true".to_string())
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
