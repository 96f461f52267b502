//! No output of a command is one of its inputs, or another of its outputs.
//!
//! Every command lists what it will read (the data files, `--load`, the checkpoint it resumes)
//! and what it will write (`--save`, `--metrics` and its epochs file, the checkpoint
//! directory, `export --out`, `compare --out`'s files), and the two lists are compared before
//! any work, by identity: device and inode where the file exists, so that `./m`, a symbolic
//! link to `m` and a hard link to `m` are all `m`. A clash names both flags. The process's
//! standard output and error count as outputs.

use std::fmt::Display;
use std::path::{Path, PathBuf};

use anyhow::bail;
use ember::io::{self, Identity};

use super::workload::DataSpec;

const STDOUT: &str = "the standard output";

/// An input of the command is one of its own standard streams (`>> data.csv`): what it
/// prints would be written into it. The caller prints nothing more on the streams named, not
/// even this error where it is both.
#[derive(Debug, thiserror::Error)]
#[error(
    "{input} is the same file as {stream}: what the command prints would be written into its \
     own input; print elsewhere"
)]
pub struct PrintsIntoInput {
    /// The input, as the command line names it.
    pub input: String,
    /// The first stream that is the input.
    pub stream: String,
    /// Whether the standard output is the input.
    pub stdout: bool,
    /// Whether the standard error is the input.
    pub stderr: bool,
}

/// What one command reads and writes.
#[derive(Default)]
pub struct Files {
    inputs: Vec<(String, PathBuf)>,
    /// Files beside the inputs that no output may replace, though the command does not read
    /// them (the rest of a data directory).
    beside: Vec<(String, PathBuf)>,
    outputs: Vec<(String, PathBuf)>,
}

impl Files {
    /// A file (or directory) the command reads, as `what` (`--load m.st`).
    pub fn input(&mut self, what: impl Display, path: &Path) -> &mut Self {
        self.inputs.push((what.to_string(), path.to_path_buf()));
        self
    }

    /// A file (or directory) the command writes, as `what`.
    pub fn output(&mut self, what: impl Display, path: &Path) -> &mut Self {
        self.outputs.push((what.to_string(), path.to_path_buf()));
        self
    }

    /// Every file `--data` reads.
    pub fn data(&mut self, data: &DataSpec) -> &mut Self {
        match data {
            DataSpec::Synthetic => {}
            DataSpec::Text(_) => {
                for file in data.files() {
                    self.input(format!("--data {data}"), &file);
                }
            }
            DataSpec::Csv(path) => {
                self.input(format!("--data {data}"), path);
            }
            DataSpec::Npy(x, y) => {
                self.input(format!("--data {data} (its features)"), x);
                self.input(format!("--data {data} (its targets)"), y);
            }
            // Every name the loader reads the IDX files by, with or without `.gz`, there or
            // not (an output `train-images-idx3-ubyte.gz` beside the raw file would be read in
            // its place), and beside them every other file in the directory. A directory in it
            // is none of them (`--tensorboard runs` beside the files).
            DataSpec::FashionMnist(dir) => {
                let mut read = Vec::new();
                for file in ember_datasets::fashion_mnist::FILES {
                    for name in ember_datasets::fashion_mnist::names(file) {
                        let path = dir.join(&name);
                        let what = match path.exists() {
                            true => format!("--data {data} (its {name})"),
                            false => format!("--data {data} (where it reads {name})"),
                        };
                        self.input(what, &path);
                        read.push(name);
                    }
                }
                for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                    let file = entry.file_name().to_string_lossy().into_owned();
                    if entry.file_type().is_ok_and(|kind| kind.is_dir()) || read.contains(&file) {
                        continue;
                    }
                    let what = format!("--data {data} (the {file} beside its files)");
                    self.beside.push((what, entry.path()));
                }
            }
        }
        self
    }

    /// Refuses an output that is an input, or another output: the later write would replace
    /// the other file.
    pub fn check(&self) -> anyhow::Result<()> {
        let ids = |list: &[(String, PathBuf)]| -> Vec<(String, Identity)> {
            list.iter()
                .map(|(what, path)| (what.clone(), io::identity(path)))
                .collect()
        };
        // The process's own stdout and stderr are written too: `--save /dev/stdout` with
        // stdout redirected to a log would replace the log.
        let streams: Vec<(String, Identity)> = [(STDOUT, 1), ("the standard error", 2)]
            .into_iter()
            .map(|(what, fd)| (what, PathBuf::from(format!("/proc/self/fd/{fd}"))))
            .filter(|(_, path)| std::fs::metadata(path).is_ok())
            .map(|(what, path)| (what.to_string(), io::identity(&path)))
            .collect();
        let (inputs, outputs) = (ids(&self.inputs), ids(&self.outputs));
        let beside = ids(&self.beside);
        // `>> data.csv`: what the command prints would be added to its own input. The error
        // goes to the other stream only, or nowhere (`&>> data.csv`).
        let into_input: Vec<(&String, &String)> = streams
            .iter()
            .filter_map(|(stream, id)| {
                let (input, _) = inputs.iter().find(|(_, other)| other == id)?;
                Some((stream, input))
            })
            .collect();
        if let Some((stream, input)) = into_input.first() {
            return Err(PrintsIntoInput {
                input: input.to_string(),
                stream: stream.to_string(),
                stdout: into_input.iter().any(|(s, _)| s.as_str() == STDOUT),
                stderr: into_input.iter().any(|(s, _)| s.as_str() != STDOUT),
            }
            .into());
        }
        for (i, (output, id)) in outputs.iter().enumerate() {
            if let Some((input, _)) = inputs.iter().chain(&beside).find(|(_, other)| other == id) {
                bail!(
                    "{output} is the same file as {input}: writing it would destroy the run's \
                     own input; give the output a path of its own"
                );
            }
            if let Some((stream, _)) = streams.iter().find(|(_, other)| other == id) {
                bail!(
                    "{output} is the same file as {stream}: the file written would replace what \
                     the command prints there; give the output a path of its own"
                );
            }
            if let Some((other, _)) = outputs[i + 1..].iter().find(|(_, other)| other == id) {
                bail!(
                    "{output} and {other} are the same file: the one written last would replace \
                     the other; give each output a path of its own"
                );
            }
        }
        Ok(())
    }
}
