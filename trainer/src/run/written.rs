//! What `ember train` writes when the run ends: the parameters first, then the trace and the
//! profile, each whatever became of the others.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::fit::FitRun;
use crate::profile::Profile;
use crate::signals::Signal;
use crate::trace::Trace;
use anyhow::bail;
use ember::Block;
use ember::io;

use super::model::Net;
use super::notes::Notes;
use super::output_paths::OutputPaths;
use super::rescued::save_elsewhere;

/// A run stopped by SIGINT or SIGTERM, its outputs written as far as they go: `ember` exits
/// with 128 + the signal's number.
#[derive(Debug)]
pub struct Interrupted(pub Signal);

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stopped by {}", self.0)
    }
}

impl std::error::Error for Interrupted {}

/// Writes the parameters first, then the trace: a failure writing one never keeps the other
/// from being written. A run stopped by a signal writes its trace so far and no parameters
/// (its checkpoint holds them), and ends with the signal's exit status.
pub fn finish(run: FitRun<Net>, outputs: &OutputPaths, notes: &Notes) -> anyhow::Result<()> {
    let save = outputs.save.as_ref().filter(|_| run.stopped.is_none());
    let failures = write(Some(&run.net), &run.trace, save, outputs.traces(), notes);
    if let Some(signal) = run.stopped {
        if let Some(path) = &outputs.save {
            note!(
                notes,
                "--save {} not written: the run was stopped before its end{}",
                path.display(),
                match &outputs.checkpoint {
                    Some(_) => ", and its checkpoint holds the parameters",
                    None => " (--checkpoint DIR keeps them)",
                }
            );
        }
        let resume = match &outputs.checkpoint {
            Some(c) => format!("; go on with --resume {}", c.dir.display()),
            None => String::new(),
        };
        note!(
            notes,
            "stopped by {signal} after batch {} of epoch {}{resume}",
            run.trace.batches.last().map_or(0, |b| b.batch + 1),
            run.trace.batches.last().map_or(0, |b| b.epoch + 1)
        );
        return Err(Interrupted(signal).into());
    }
    note!(notes, "parameters: {}", run.net.collect_params().total());
    match failures.len() {
        0 => Ok(()),
        _ => bail!("{}", failures.join("\n")),
    }
}

/// Where a run's parameters' metadata and its trace go: what [`write`] needs beside the
/// network, owned, for [`super::rescue_file::rescue`] too.
#[derive(Clone)]
pub struct Traces {
    recorded: BTreeMap<String, String>,
    metrics: Option<PathBuf>,
    profile: Option<PathBuf>,
    devices: Vec<String>,
}

impl Traces {
    /// Whether a trace file is asked for (`--metrics`, `--profile`).
    pub fn any(&self) -> bool {
        self.metrics.is_some() || self.profile.is_some()
    }
}

impl OutputPaths {
    /// What [`write`] needs of these paths beside the network.
    pub fn traces(&self) -> Traces {
        Traces {
            recorded: self.recorded.clone(),
            metrics: self.metrics.clone(),
            profile: self.profile.clone(),
            devices: self.devices.clone(),
        }
    }
}

/// `--save`, `--metrics` and `--profile`, each written whatever became of the others; the
/// failures, one per output.
pub fn write(
    net: Option<&Net>,
    trace: &Trace,
    save: Option<&PathBuf>,
    to: Traces,
    notes: &Notes,
) -> Vec<String> {
    let Traces {
        recorded,
        metrics,
        profile,
        devices,
    } = to;
    let mut failures = Vec::new();
    if let (Some(path), Some(net)) = (save, net) {
        match io::safetensors::save_parameters_with(net, path, &recorded) {
            Ok(()) => note!(notes, "parameters saved to {}", path.display()),
            // A diverged network is never written over the user's file.
            Err(e @ ember::Error::NonFiniteParameter { .. }) => failures.push(format!(
                "--save {} not written: {e}; {}",
                path.display(),
                left_as_it_was(path)
            )),
            // What it trained is kept elsewhere, and the message says where.
            Err(e) => failures.push(match save_elsewhere(net, path, &recorded) {
                Ok(place) => format!(
                    "--save {}: {e}; what the run trained went to {} instead",
                    path.display(),
                    place.display()
                ),
                Err(errors) => format!(
                    "--save {}: {e}; what the run trained could not be kept anywhere ({})",
                    path.display(),
                    errors.join("; ")
                ),
            }),
        }
    }
    if let Some(path) = metrics {
        match trace.write(&path) {
            Ok(written) => {
                for file in written {
                    note!(notes, "metrics: {}", file.display());
                }
            }
            Err(e) => failures.push(format!("--metrics {}: {e}", path.display())),
        }
    }
    if let Some(path) = profile {
        let name = match trace.policy() {
            Some(policy) => format!("ember train (--sync {policy})"),
            None => "ember train".to_string(),
        };
        let mut file = Profile::new();
        file.add_run(&name, trace, &devices);
        match file.write(&path) {
            Ok(()) => note!(
                notes,
                "profile: {} (open it in ui.perfetto.dev)",
                path.display()
            ),
            Err(e) => failures.push(format!("--profile {}: {e}", path.display())),
        }
    }
    failures
}

/// What became of an output that was not written: an old file, or none.
pub fn left_as_it_was(path: &Path) -> &'static str {
    match path.exists() {
        true => "the file keeps its old content",
        false => "no file was made",
    }
}
