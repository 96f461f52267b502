//! The chapter's options of `ember bench`: its devices, repeats and sizes, which may come
//! before an experiment's name as well as after it.

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;
use ember::DeviceName;

use super::super::devices;

/// Devices, repeats and sizes of the chapter's experiments.
#[derive(Debug, Clone, PartialEq, Args)]
pub struct ChapterArgs {
    #[arg(long, default_value = "auto", help = devices::help(
        "Where the training loops (memory-footprint, exercise-2) run", false
    ))]
    pub(super) device: DeviceName,
    #[arg(long, default_value = "flex", help = devices::help(
        "The book's CPU, the NumPy baseline", false
    ))]
    pub(super) cpu: DeviceName,
    #[arg(long, default_value = "auto", help = format!(
        "The book's GPU: {}; `auto` here is wgpu when an adapter exists (a card, or \
         lavapipe), else flex",
        devices::names(false)
    ))]
    pub(super) gpu: DeviceName,
    /// Measurements per timing; medians are reported.
    #[arg(long, default_value_t = 3)]
    pub(super) repeat: usize,
    /// Small sizes, so that everything runs in seconds (for tests).
    #[arg(long)]
    pub(super) quick: bool,
    /// Also write chapter.md and its figures into this directory.
    #[arg(long)]
    pub(super) report: Option<PathBuf>,
    /// Also write the experiments' training runs (12.2.3's memory footprint and exercise 2:
    /// every policy, every repeat) as Chrome's trace-event JSON here, one process a run, as
    /// `ember train --profile` does. The other experiments time whole operations, not batches,
    /// and are in the report's lines.
    #[arg(long, value_name = "FILE")]
    pub(super) profile: Option<PathBuf>,
    /// Print the experiments' keys and titles, one per line, and run nothing.
    #[arg(long)]
    pub(super) list: bool,
}

impl ChapterArgs {
    /// The options with none given.
    fn defaults() -> Self {
        let matches = Self::augment_args(clap::Command::new("bench")).get_matches_from(["bench"]);
        <Self as clap::FromArgMatches>::from_arg_matches(&matches).expect("the defaults parse")
    }

    /// The options given before an experiment's name that differ from the defaults, by flag.
    pub(super) fn given(&self) -> Vec<&'static str> {
        let d = Self::defaults();
        [
            ("--device", self.device != d.device),
            ("--cpu", self.cpu != d.cpu),
            ("--gpu", self.gpu != d.gpu),
            ("--repeat", self.repeat != d.repeat),
            ("--quick", self.quick != d.quick),
            ("--report", self.report != d.report),
            ("--profile", self.profile != d.profile),
            ("--list", self.list != d.list),
        ]
        .into_iter()
        .filter_map(|(flag, given)| given.then_some(flag))
        .collect()
    }

    /// An experiment's own options (`self`), with each one it leaves at its default taken from
    /// those given before its name: `ember bench --quick exercise-2` is `ember bench
    /// exercise-2 --quick`. An option given both ways, differently, is an error naming it.
    pub(super) fn before(self, before: ChapterArgs) -> anyhow::Result<Self> {
        let d = Self::defaults();
        fn pick<T: PartialEq + std::fmt::Debug>(
            flag: &str,
            after: T,
            before: T,
            default: T,
        ) -> anyhow::Result<T> {
            match (after == default, before == default) {
                (_, true) => Ok(after),
                (true, false) => Ok(before),
                (false, false) if after == before => Ok(after),
                (false, false) => bail!(
                    "{flag} is given before the experiment's name as {before:?} and after it as {after:?}: \
                     give it once"
                ),
            }
        }
        Ok(Self {
            device: pick("--device", self.device, before.device, d.device)?,
            cpu: pick("--cpu", self.cpu, before.cpu, d.cpu)?,
            gpu: pick("--gpu", self.gpu, before.gpu, d.gpu)?,
            repeat: pick("--repeat", self.repeat, before.repeat, d.repeat)?,
            quick: pick("--quick", self.quick, before.quick, d.quick)?,
            report: pick("--report", self.report, before.report, d.report)?,
            profile: pick("--profile", self.profile, before.profile, d.profile)?,
            list: pick("--list", self.list, before.list, d.list)?,
        })
    }
}
