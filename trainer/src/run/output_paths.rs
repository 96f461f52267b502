//! Where `ember train` writes and reads (parameters, the trace, checkpoints), checked before
//! any work; what it writes when the run ends is [`super::written`]'s.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::checkpoint::{self, Checkpoint, Checkpointing};
use crate::trace::Trace;
use anyhow::{Context, bail};
use ember::io;

use super::clash::Files;
use super::notes::Notes;
use super::workload::DataSpec;

/// Where `ember train` writes and reads parameters, traces and checkpoints; checked before
/// any work starts.
pub struct OutputPaths {
    /// `--save`: the parameters at the end.
    pub save: Option<PathBuf>,
    /// `--save-best`: written after each epoch that improves the watched metric.
    pub save_best: Option<PathBuf>,
    /// `--metrics`: the per-batch trace, and its epochs beside it.
    pub metrics: Option<PathBuf>,
    /// `--profile`: the run as Chrome's trace-event JSON.
    pub profile: Option<PathBuf>,
    /// `--tensorboard`: the directory TensorBoard's event file goes into.
    pub tensorboard: Option<PathBuf>,
    /// The devices the run trains on, by name, for the profile's tracks.
    pub devices: Vec<String>,
    /// `--load`: the parameters the run starts from.
    pub load: Option<PathBuf>,
    /// Where the checkpoints go, and how often.
    pub checkpoint: Option<Checkpointing>,
    /// The checkpoint `--resume` goes on from, found and verified.
    pub resume: Option<Checkpoint>,
    /// What `--save` records of the network in its metadata, for `ember export`.
    pub recorded: BTreeMap<String, String>,
    /// The directories [`OutputPaths::make_dirs`] made, outermost first.
    made: Vec<PathBuf>,
}

impl OutputPaths {
    /// Checks every output path (a regular file, or new in a writable directory) and the
    /// checkpoint directory, making nothing, and finds the checkpoint to resume from. A process that `writes`
    /// not (a job's rank other than 0, given no outputs) leaves the checkpoint directory to
    /// the one that does: it only keeps its schedule.
    #[allow(clippy::too_many_arguments)]
    pub fn check(
        writes: bool,
        data: &DataSpec,
        load: Option<PathBuf>,
        [save, save_best]: [Option<PathBuf>; 2],
        [metrics, profile, tensorboard]: [Option<PathBuf>; 3],
        checkpoint: Option<PathBuf>,
        every: Option<usize>,
        resume: Option<PathBuf>,
        notes: &Notes,
    ) -> anyhow::Result<Self> {
        for (flag, path) in [
            ("--save", &save),
            ("--save-best", &save_best),
            ("--profile", &profile),
        ] {
            if let Some(path) = path {
                io::check(path).with_context(|| format!("invalid {flag} {}", path.display()))?;
            }
        }
        if let Some(path) = &metrics {
            for file in Trace::paths(path) {
                io::check(&file)
                    .with_context(|| format!("invalid --metrics {}", path.display()))?;
            }
        }
        if let Some(load) = &load
            && let Err(e) = std::fs::File::open(load)
        {
            bail!("invalid --load {}: {e}", load.display());
        }
        if let (Some(load), Some(dir)) = (&load, &resume) {
            bail!(
                "--load {} and --resume {}: a resumed run goes on from its checkpoint's \
                 parameters, which --load would replace; leave --load out",
                load.display(),
                dir.display()
            );
        }
        if every == Some(0) {
            bail!(
                "invalid --checkpoint-every 0: checkpoints come after at least one step; give 1 or more"
            );
        }
        // `--resume DIR` goes on from DIR's newest sound checkpoint, `--resume DIR/step-N`
        // from that one; checkpoints keep going to DIR unless --checkpoint names another.
        let (resume, resume_dir) = match &resume {
            Some(path) => {
                let (found, dir) = find_resume(path, notes)?;
                (found, Some(dir))
            }
            None => (None, None),
        };
        // The flag that named the checkpoint directory, for the errors about it.
        let (flag, checkpoint_dir) = match (checkpoint, resume_dir) {
            (Some(dir), _) => ("--checkpoint", Some(dir)),
            (None, Some(dir)) => ("--resume", Some(dir)),
            (None, None) => ("--checkpoint", None),
        };
        clashes(
            data,
            &load,
            [&save, &save_best, &profile],
            [&metrics, &tensorboard],
            checkpoint_dir.as_ref().map(|dir| (flag, dir)),
            resume.as_ref(),
        )?;
        // Nothing is made here ([`OutputPaths::make_dirs`] makes the directories).
        if let Some(dir) = &tensorboard {
            io::check_dir_unmade(dir)
                .with_context(|| format!("invalid --tensorboard {}", dir.display()))?;
        }
        let checkpoint = match checkpoint_dir {
            Some(dir) => {
                let mut checkpointing = Checkpointing::new(dir);
                checkpointing.every = every;
                if writes {
                    checkpointing
                        .check(resume.as_ref())
                        .with_context(|| format!("invalid {flag}"))?;
                }
                Some(checkpointing)
            }
            None if every.is_some() => {
                bail!("--checkpoint-every needs --checkpoint DIR (or --resume DIR)")
            }
            None => None,
        };
        Ok(Self {
            save,
            save_best,
            metrics,
            profile,
            tensorboard,
            devices: Vec::new(),
            load,
            checkpoint,
            resume,
            recorded: BTreeMap::new(),
            made: Vec::new(),
        })
    }
}

impl OutputPaths {
    /// Makes the checkpoint directory (where this process `writes`) and the TensorBoard
    /// directory, where missing: before the work starts, so that a run killed at once leaves a
    /// directory that `--resume` goes on from. What this makes goes again when the
    /// `OutputPaths` is dropped, after its lock, where it is still empty: a run refused or
    /// failed before it wrote anything there leaves no directory behind.
    pub fn make_dirs(&mut self, writes: bool) -> anyhow::Result<()> {
        let checkpoint = self.checkpoint.as_ref().filter(|_| writes);
        let dirs = [
            checkpoint.map(|c| ("--checkpoint", c.dir.clone())),
            (self.tensorboard.clone()).map(|dir| ("--tensorboard", dir)),
        ];
        for (flag, dir) in dirs.into_iter().flatten() {
            // Each directory that is missing, the outermost first.
            let missing: Vec<PathBuf> = dir
                .ancestors()
                .take_while(|a| !a.as_os_str().is_empty() && std::fs::symlink_metadata(a).is_err())
                .map(Path::to_path_buf)
                .collect();
            self.made.extend(missing.into_iter().rev());
            io::check_dir(&dir).with_context(|| format!("invalid {flag} {}", dir.display()))?;
        }
        Ok(())
    }
}

/// The checkpoint `--resume` names, and the directory the run's checkpoints go on in
/// ([`checkpoint::resume_from`]), saying what it did to damaged ones on the way.
fn find_resume(path: &Path, notes: &Notes) -> anyhow::Result<(Option<Checkpoint>, PathBuf)> {
    let found = checkpoint::resume_from(path).map_err(|e| match e {
        ember::Error::InvalidValue {
            name: "resume",
            value,
            reason,
        } => anyhow::anyhow!("invalid --resume {value}: {reason}"),
        e => anyhow::Error::from(e),
    })?;
    for note in found.notes {
        note!(notes, "{note}");
    }
    Ok((found.checkpoint, found.dir))
}

/// Refuses an output that is one of the run's inputs (the data, `--load`, the checkpoint
/// resumed) or another of its outputs: `--save X --metrics X`, `--save k.epochs.csv
/// --metrics k.csv` (the metrics' second file), `--metrics data.csv`, or an output at the
/// checkpoint directory.
fn clashes(
    data: &DataSpec,
    load: &Option<PathBuf>,
    [save, save_best, profile]: [&Option<PathBuf>; 3],
    [metrics, tensorboard]: [&Option<PathBuf>; 2],
    checkpoint: Option<(&str, &PathBuf)>,
    resume: Option<&Checkpoint>,
) -> anyhow::Result<()> {
    let mut files = Files::default();
    files.data(data);
    if let Some(path) = load {
        files.input(format!("--load {}", path.display()), path);
    }
    if let Some(resumed) = resume {
        for entry in std::fs::read_dir(&resumed.dir)
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = entry.file_name();
            let what = format!(
                "the checkpoint resumed ({})",
                resumed.dir.join(&name).display()
            );
            files.input(what, &entry.path());
        }
    }
    for (flag, path) in [
        ("--save", save),
        ("--save-best", save_best),
        ("--profile", profile),
    ] {
        if let Some(path) = path {
            files.output(format!("{flag} {}", path.display()), path);
        }
    }
    if let Some(dir) = tensorboard {
        files.output(
            format!("--tensorboard {} (a directory)", dir.display()),
            dir,
        );
    }
    if let Some(path) = metrics {
        for file in Trace::paths(path) {
            let what = match &file == path {
                true => format!("--metrics {}", path.display()),
                false => format!(
                    "--metrics {} (its epochs, {})",
                    path.display(),
                    file.display()
                ),
            };
            files.output(what, &file);
        }
    }
    if let Some((flag, dir)) = checkpoint {
        files.output(format!("{flag} {} (its checkpoints)", dir.display()), dir);
        files.output(
            format!("{flag} {} (its lock)", dir.display()),
            &dir.join("lock"),
        );
    }
    // The clashes first: an output that is one of the inputs says which.
    files.check()?;
    if let Some((flag, dir)) = checkpoint {
        // An output in the checkpoints' directory, at any depth, would be in their way: under
        // a name they take, or inside one of them, which rotation deletes and a resume checks.
        // A directory of event files is in their way at that directory itself too.
        let dir_is = io::identity(dir);
        for (what, path, is_dir) in [
            ("--save", save, false),
            ("--save-best", save_best, false),
            ("--metrics", metrics, false),
            ("--profile", profile, false),
            ("--tensorboard", tensorboard, true),
        ] {
            let Some(path) = path else { continue };
            let inside = path.ancestors().skip(usize::from(!is_dir)).any(|above| {
                let above = match above.as_os_str().is_empty() {
                    true => Path::new("."),
                    false => above,
                };
                io::identity(above) == dir_is
            });
            if inside {
                bail!(
                    "{what} {} is inside {flag} {}, where the run's checkpoints are written, \
                     rotated and checked; give it a path outside that directory",
                    path.display(),
                    dir.display()
                );
            }
        }
        // The same rule for the checkpoints themselves: inside another run's directory of
        // checkpoints (in one of its step-N), its rotation would delete them.
        let holder = dir.ancestors().skip(1).find(|above| {
            let above = match above.as_os_str().is_empty() {
                true => Path::new("."),
                false => above,
            };
            holds_checkpoints(above)
        });
        if let Some(holder) = holder {
            bail!(
                "{flag} {} is inside {}, a directory of checkpoints, where they are rotated \
                 and checked; give a directory of its own",
                dir.display(),
                match holder.as_os_str().is_empty() {
                    true => Path::new("."),
                    false => holder,
                }
                .display()
            );
        }
    }
    Ok(())
}

/// Whether `dir` holds checkpoints: a `step-N` directory.
fn holds_checkpoints(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|entry| {
            entry.file_type().is_ok_and(|t| t.is_dir())
                && checkpoint::step_of(&entry.file_name().to_string_lossy()).is_some()
        })
}

/// A run that fails before its training starts (on its data, its model) gives the directory
/// back too: the lock goes with the `OutputPaths` that took it, then each directory it made
/// that is still empty.
impl Drop for OutputPaths {
    fn drop(&mut self) {
        if let Some(checkpointing) = &self.checkpoint {
            checkpointing.unlock();
        }
        for dir in self.made.iter().rev() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}
