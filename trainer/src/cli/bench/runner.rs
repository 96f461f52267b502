//! The chapter's [`Runner`]: each run in a fresh `ember` process, `ember train` for the
//! training loops and the hidden `ember bench hybridize-child` for 12.1's modes.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use clap::Args;
use ember::DeviceName;
use ember_trainer::chapter::Runner;
use ember_trainer::chapter::hybridize::{self, Measured, Request};
use ember_trainer::policy::PolicyKind;
use ember_trainer::run::workload::Workload;
use ember_trainer::summary::PolicyRun;

use crate::cli::child::{self, Child};

/// Runs in child processes of this `ember`.
pub struct Children;

impl Runner for Children {
    fn train(
        &self,
        policy: &PolicyKind,
        repeat: usize,
        workload: &Workload,
        scratch: &Path,
    ) -> anyhow::Result<Vec<PolicyRun>> {
        crate::cli::compare::run_all(std::slice::from_ref(policy), repeat, 1, workload, scratch)
    }

    fn hybridize(&self, request: &Request) -> anyhow::Result<Measured> {
        let fusion = Switch::from(request.fusion).as_str();
        let graph = Switch::from(request.graph).as_str();
        let training = Switch::from(request.training).as_str();
        let (passes, repeat) = (request.passes.to_string(), request.repeat.to_string());
        let flags = [
            ("--fusion", OsStr::new(fusion)),
            ("--graph", OsStr::new(graph)),
            ("--training", OsStr::new(training)),
            ("--device", OsStr::new(request.device.as_str())),
            ("--params", request.params.as_os_str()),
            ("--passes", OsStr::new(&passes)),
            ("--repeat", OsStr::new(&repeat)),
        ];
        let args = flags
            .into_iter()
            .flat_map(|(flag, value)| [OsStr::new(flag), value]);
        Child::ember(
            format!("the run with fusion {fusion}, graph {graph}, training {training}"),
            [OsStr::new("bench"), OsStr::new(super::HYBRIDIZE_CHILD)]
                .into_iter()
                .chain(args),
        )?
        .result()
    }
}

/// Options of the hidden `ember bench hybridize-child`: a [`Request`].
#[derive(Debug, Args)]
pub struct ChildArgs {
    #[arg(long, value_enum)]
    fusion: Switch,
    /// The pass recorded once and replayed (`on`), or run eagerly (`off`).
    #[arg(long, value_enum)]
    graph: Switch,
    /// Training steps (`on`) rather than forward passes (`off`).
    #[arg(long, value_enum)]
    training: Switch,
    #[arg(long)]
    device: DeviceName,
    #[arg(long)]
    params: PathBuf,
    /// Forward passes per measurement.
    #[arg(long)]
    passes: usize,
    #[arg(long)]
    repeat: usize,
}

/// A mode's switch: kernel fusion's optimizers kept (`on`, burn's hybridization) or removed
/// (`off`); the pass recorded and replayed (`on`) or eager (`off`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Switch {
    On,
    Off,
}

impl From<bool> for Switch {
    fn from(on: bool) -> Self {
        if on { Switch::On } else { Switch::Off }
    }
}

impl Switch {
    fn as_str(self) -> &'static str {
        match self {
            Switch::On => "on",
            Switch::Off => "off",
        }
    }
}

/// The child: [`hybridize::measure`] of its flags, reported as one JSON line.
pub fn hybridize_child(args: ChildArgs) -> anyhow::Result<()> {
    let measured = hybridize::measure(&Request {
        fusion: args.fusion == Switch::On,
        graph: args.graph == Switch::On,
        training: args.training == Switch::On,
        device: args.device,
        params: args.params,
        passes: args.passes,
        repeat: args.repeat,
    })?;
    child::report(&measured)
}
