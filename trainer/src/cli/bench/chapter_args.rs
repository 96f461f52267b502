//! The chapter's options of `ember bench`: its devices, repeats and sizes, which may come
//! before an experiment's name as well as after it.

use std::path::PathBuf;

use clap::error::{Error, ErrorKind};
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, FromArgMatches};
use ember::DeviceName;

use super::super::devices;

/// Devices, repeats and sizes of the chapter's experiments.
#[derive(Debug, Clone, Args)]
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

/// The options' ids, as clap names them: their fields' names.
const IDS: [&str; 8] = [
    "device", "cpu", "gpu", "repeat", "quick", "report", "profile", "list",
];

/// The chapter's options given on the command line at the level `matches` parsed.
pub(super) fn given(matches: &ArgMatches) -> Vec<&'static str> {
    IDS.into_iter()
        .filter(|id| matches.value_source(id) == Some(ValueSource::CommandLine))
        .collect()
}

/// `id`'s value as it was typed at the level `matches` parsed.
fn typed(matches: &ArgMatches, id: &str) -> String {
    matches
        .get_raw(id)
        .map(|values| {
            values
                .map(|v| v.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// An experiment's options: those given after its name (`after`, the experiment's matches),
/// and those given only before it (`before`, the bench's): `ember bench --quick exercise-2` is
/// `ember bench exercise-2 --quick`.
///
/// # Errors
/// An option given both ways with other values, named, with both values as typed.
pub(super) fn experiments(before: &ArgMatches, after: &ArgMatches) -> Result<ChapterArgs, Error> {
    let mut args = ChapterArgs::from_arg_matches(after)?;
    let mut earlier = ChapterArgs::from_arg_matches(before)?;
    let later = given(after);
    for id in given(before) {
        if later.contains(&id) {
            let (first, second) = (typed(before, id), typed(after, id));
            if first != second {
                return Err(Error::raw(
                    ErrorKind::ArgumentConflict,
                    format!(
                        "--{id} is given before the experiment's name as {first:?} and after it \
                         as {second:?}: give it once"
                    ),
                ));
            }
            continue;
        }
        match id {
            "device" => args.device = earlier.device,
            "cpu" => args.cpu = earlier.cpu,
            "gpu" => args.gpu = earlier.gpu,
            "repeat" => args.repeat = earlier.repeat,
            "quick" => args.quick = earlier.quick,
            "report" => args.report = earlier.report.take(),
            "profile" => args.profile = earlier.profile.take(),
            "list" => args.list = earlier.list,
            other => unreachable!("{other} is not among IDS"),
        }
    }
    Ok(args)
}

/// A subcommand of `bench` other than the chapter's experiments (`name`) refuses the chapter's
/// options given before it, naming them.
///
/// # Errors
/// The refusal, when any was given.
pub(super) fn none_before(before: &ArgMatches, name: &str) -> Result<(), Error> {
    let given = given(before);
    if given.is_empty() {
        return Ok(());
    }
    let flags: Vec<String> = given.iter().map(|id| format!("--{id}")).collect();
    Err(Error::raw(
        ErrorKind::ArgumentConflict,
        format!(
            "{} before `{name}`: options before a name there are the chapter experiments'; \
             give `{name}` its own after its name (see `ember bench {name} --help`)",
            flags.join(", ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field of the options is in [`IDS`]: one added without it would never be taken
    /// from before an experiment's name.
    #[test]
    fn ids_name_every_option() {
        let command = ChapterArgs::augment_args(clap::Command::new("bench"));
        let mut ids: Vec<&str> = command
            .get_arguments()
            .map(|a| a.get_id().as_str())
            .filter(|id| *id != "help")
            .collect();
        ids.sort_unstable();
        let mut expected = IDS.to_vec();
        expected.sort_unstable();
        assert_eq!(ids, expected);
    }
}
