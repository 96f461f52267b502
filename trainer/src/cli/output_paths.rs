//! Where `ember train` writes and reads (parameters, the trace, checkpoints), checked before
//! any work, and what it writes when the run ends.

use std::path::PathBuf;

use anyhow::{Context, bail};
use ember::io;
use ember::{Block, Sequential};
use ember_trainer::checkpoint::{Checkpoint, Checkpointing};
use ember_trainer::fit::FitRun;
use ember_trainer::trace::Trace;

/// Where `ember train` writes and reads parameters, traces and checkpoints; checked before
/// any work starts.
pub struct OutputPaths {
    pub save: Option<PathBuf>,
    pub metrics: Option<PathBuf>,
    pub load: Option<PathBuf>,
    pub checkpoint: Option<Checkpointing>,
    pub resume: Option<Checkpoint>,
}

impl OutputPaths {
    /// Checks every output path (a regular file, or new in a writable directory), prepares the
    /// checkpoint directory, and finds the checkpoint to resume from.
    pub fn check(
        load: Option<PathBuf>,
        save: Option<PathBuf>,
        metrics: Option<PathBuf>,
        checkpoint: Option<PathBuf>,
        every: Option<usize>,
        resume: Option<PathBuf>,
    ) -> anyhow::Result<Self> {
        if let Some(path) = &save {
            io::check(path).with_context(|| format!("invalid --save {}", path.display()))?;
        }
        if let Some(path) = &metrics {
            for file in Trace::paths(path) {
                io::check(&file)
                    .with_context(|| format!("invalid --metrics {}", path.display()))?;
            }
        }
        distinct(&save, &metrics, checkpoint.as_ref().or(resume.as_ref()))?;
        if let (Some(load), Some(dir)) = (&load, &resume) {
            bail!(
                "--load {} and --resume {}: a resumed run goes on from its checkpoint's \
                 parameters, which --load would replace; leave --load out",
                load.display(),
                dir.display()
            );
        }
        if let Some(dir) = &resume
            && !dir.is_dir()
        {
            bail!(
                "invalid --resume {}: no such directory of checkpoints",
                dir.display()
            );
        }
        let checkpoint = match checkpoint.or_else(|| resume.clone()) {
            Some(dir) => {
                let mut checkpointing = Checkpointing::new(dir);
                checkpointing.every = every;
                checkpointing
                    .prepare()
                    .with_context(|| "invalid --checkpoint".to_string())?;
                Some(checkpointing)
            }
            None if every.is_some() => {
                bail!("--checkpoint-every needs --checkpoint DIR (or --resume DIR)")
            }
            None => None,
        };
        let resume = match &resume {
            Some(dir) => {
                let found = Checkpoint::latest(dir)?;
                if found.is_none() {
                    say!(
                        "no complete checkpoint in {} yet: starting from the beginning",
                        dir.display()
                    );
                }
                found
            }
            None => None,
        };
        Ok(Self {
            save,
            metrics,
            load,
            checkpoint,
            resume,
        })
    }
}

/// Refuses two outputs on one file: `--save X --metrics X`, or `--save k.epochs.csv
/// --metrics k.csv` (the metrics' second file), or an output at the checkpoint directory:
/// the later write would replace the earlier one.
fn distinct(
    save: &Option<PathBuf>,
    metrics: &Option<PathBuf>,
    checkpoint: Option<&PathBuf>,
) -> anyhow::Result<()> {
    let mut outputs: Vec<(String, PathBuf)> = Vec::new();
    if let Some(path) = save {
        outputs.push((format!("--save {}", path.display()), path.clone()));
    }
    if let Some(path) = metrics {
        for file in Trace::paths(path) {
            let flag = match &file == path {
                true => format!("--metrics {}", path.display()),
                false => format!(
                    "--metrics {} (its epochs, {})",
                    path.display(),
                    file.display()
                ),
            };
            outputs.push((flag, file));
        }
    }
    if let Some(dir) = checkpoint {
        outputs.push((
            format!("the checkpoint directory {}", dir.display()),
            dir.clone(),
        ));
    }
    for (i, (first, a)) in outputs.iter().enumerate() {
        for (second, b) in &outputs[i + 1..] {
            if io::place(a) == io::place(b) {
                bail!(
                    "{first} and {second} are the same file: the one written last would replace \
                     the other; give each output a path of its own"
                );
            }
        }
    }
    Ok(())
}

/// Writes the parameters first, then the trace: a failure writing one never keeps the other
/// from being written. A run stopped by a signal writes its trace so far and no parameters
/// (its checkpoint holds them), and ends with the signal's exit status.
pub fn finish(run: FitRun<Sequential>, outputs: &OutputPaths) -> anyhow::Result<()> {
    let save = outputs.save.as_ref().filter(|_| run.stopped.is_none());
    let failures = write(&run.net, &run.trace, save, outputs.metrics.as_ref());
    if let Some(signal) = run.stopped {
        if let Some(path) = &outputs.save {
            say!(
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
        say!(
            "stopped by {signal} after batch {} of epoch {}{resume}",
            run.trace.batches.last().map_or(0, |b| b.batch + 1),
            run.trace.batches.last().map_or(0, |b| b.epoch + 1)
        );
        return Err(super::Interrupted(signal).into());
    }
    say!("parameters: {}", run.net.collect_params().total());
    match failures.len() {
        0 => Ok(()),
        _ => bail!("{}", failures.join("\n")),
    }
}

/// `--save` and `--metrics`, each written whatever became of the other; the failures, one per
/// output.
fn write(
    net: &Sequential,
    trace: &Trace,
    save: Option<&PathBuf>,
    metrics: Option<&PathBuf>,
) -> Vec<String> {
    let mut failures = Vec::new();
    if let Some(path) = save {
        match net.save_parameters(path) {
            Ok(()) => say!("parameters saved to {}", path.display()),
            Err(e) => failures.push(format!("--save {}: {e}", path.display())),
        }
    }
    if let Some(path) = metrics {
        match trace.write(path) {
            Ok(written) => {
                for file in written {
                    say!("metrics: {}", file.display());
                }
            }
            Err(e) => failures.push(format!("--metrics {}: {e}", path.display())),
        }
    }
    failures
}

/// What `ember train` does when its run fails after training began (`Fit::rescue`): the
/// network as the last completed step left it goes to `--save`, the trace so far to
/// `--metrics`, and the place of the last checkpoint is said; the run's error follows, and
/// the exit status is non-zero.
pub fn rescue(outputs: &OutputPaths) -> impl FnOnce(&Sequential, &Trace) + 'static {
    let save = outputs.save.clone();
    let metrics = outputs.metrics.clone();
    let checkpoints = outputs.checkpoint.as_ref().map(|c| c.dir.clone());
    move |net, trace| {
        let at = trace.batches.last().map_or(String::new(), |b| {
            format!(" after batch {} of epoch {}", b.batch + 1, b.epoch + 1)
        });
        say!("the run failed{at}: writing what it had trained");
        for failure in write(net, trace, save.as_ref(), metrics.as_ref()) {
            eprintln!("error: {failure}");
        }
        if let Some(dir) = checkpoints {
            match Checkpoint::latest(&dir) {
                Ok(Some(last)) => say!(
                    "its last checkpoint is {}: go on with --resume {}",
                    last.dir.display(),
                    dir.display()
                ),
                _ => say!("no checkpoint of it is complete in {}", dir.display()),
            }
        }
    }
}
