//! `--tensorboard DIR` ([`TensorBoard`]): a run's scalars in TensorBoard's own event files, as
//! Keras' `TensorBoard` callback and PyTorch's `SummaryWriter` write them, for `tensorboard
//! --logdir DIR`.
//!
//! Per batch, when the loop learns that it is done (see [`crate::fit::Callback`]):
//! `batch/loss`, `batch/lr` and `batch/in_flight` (the batches issued and not yet done right
//! after it was issued), at the run's batch count as the step. Per epoch: `epoch/mean_loss`,
//! `epoch/time_per_epoch` (seconds), `epoch/peak_growth_mb` and every metric of the epoch
//! (`epoch/test_acc`, …), at the epoch (from 1) as the step.
//!
//! The file is TFRecord-framed (`record`) protobuf `Event`s (`proto`), the first one naming
//! the format's version; it is a new file in DIR (`events.out.tfevents.<seconds>.<host>.<pid>`),
//! never one that was there, so that runs logged into one directory are each kept. It is
//! flushed at every epoch's end and at the run's end.
//!
//! ```no_run
//! use ember_trainer::tensorboard::TensorBoard;
//! # fn fit(f: ember_trainer::fit::Fit<'_, ember::Sequential, ember::L2Loss>) -> ember::Result<()> {
//! let fit = f.callback(TensorBoard::new("runs/first".as_ref())?);
//! # Ok(()) }
//! ```

mod proto;
mod record;

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use ember::{Error, Result};
use protobuf::Message;

use self::proto::tensorboard::{Event, Summary, summary};
use crate::fit::{Action, Callback};
use crate::trace::{BatchRecord, EpochRecord, Trace};

pub use record::{frame, masked_crc};

/// The version record every event file begins with.
const FILE_VERSION: &str = "brain.Event:2";

/// Writes a run's scalars into a new TensorBoard event file (see the module's documentation).
pub struct TensorBoard {
    path: PathBuf,
    file: BufWriter<File>,
    /// Batches done so far in the run, a resumed run's earlier ones included: the next batch's
    /// step is one more.
    steps: i64,
}

impl TensorBoard {
    /// A new event file in `dir`, which is created if it is missing.
    ///
    /// # Errors
    /// [`Error::Io`] naming the directory or the file, where they cannot be made.
    pub fn new(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let seconds = now().floor() as u64;
        let stem = format!(
            "events.out.tfevents.{seconds}.{}.{}",
            host(),
            std::process::id()
        );
        // A name that is taken is never opened: the next free one is.
        for n in 0.. {
            let path = match n {
                0 => dir.join(&stem),
                n => dir.join(format!("{stem}.{n}")),
            };
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(file) => {
                    let mut writer = Self {
                        path,
                        file: BufWriter::new(file),
                        steps: 0,
                    };
                    let mut event = Event::new();
                    event.set_file_version(FILE_VERSION.to_string());
                    writer.write(event)?;
                    writer.flush()?;
                    return Ok(writer);
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Error::io(path, e)),
            }
        }
        unreachable!("some name is free")
    }

    /// The event file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `scalars` as one summary at `step`.
    fn scalars(&mut self, step: i64, scalars: &[(String, f64)]) -> Result<()> {
        let mut summary = Summary::new();
        for (tag, value) in scalars.iter().filter(|(_, v)| v.is_finite()) {
            let mut entry = summary::Value::new();
            entry.tag = tag.clone();
            entry.set_simple_value(*value as f32);
            summary.value.push(entry);
        }
        let mut event = Event::new();
        event.step = step;
        event.set_summary(summary);
        self.write(event)
    }

    fn write(&mut self, mut event: Event) -> Result<()> {
        event.wall_time = now();
        let data = event
            .write_to_bytes()
            .map_err(|e| Error::io(&self.path, std::io::Error::other(e)))?;
        self.file
            .write_all(&frame(&data))
            .map_err(|e| Error::io(&self.path, e))
    }

    fn flush(&mut self) -> Result<()> {
        self.file.flush().map_err(|e| Error::io(&self.path, e))
    }
}

impl Callback for TensorBoard {
    fn train_begin(&mut self, trace: &Trace) -> Result<()> {
        self.steps = trace.batches.len() as i64;
        Ok(())
    }

    fn batch_end(&mut self, batch: &BatchRecord) -> Result<Action> {
        self.steps += 1;
        let mut scalars = vec![
            ("batch/loss".to_string(), f64::from(batch.loss)),
            ("batch/in_flight".to_string(), batch.depth as f64),
        ];
        if let Some(lr) = batch.lr {
            scalars.push(("batch/lr".to_string(), lr));
        }
        self.scalars(self.steps, &scalars)?;
        Ok(Action::go_on())
    }

    fn epoch_end(&mut self, epoch: &EpochRecord) -> Result<Action> {
        let mut scalars = vec![
            ("epoch/mean_loss".to_string(), epoch.mean_loss),
            ("epoch/time_per_epoch".to_string(), epoch.time),
            ("epoch/peak_growth_mb".to_string(), epoch.peak_growth_mb),
        ];
        scalars.extend(
            epoch
                .metrics
                .iter()
                .map(|(name, value)| (format!("epoch/{name}"), *value)),
        );
        self.scalars(epoch.epoch as i64 + 1, &scalars)?;
        self.flush()?;
        Ok(Action::go_on())
    }

    fn train_end(&mut self, _trace: &Trace) -> Result<()> {
        self.flush()
    }

    /// A resumed run's earlier epochs are in the file the earlier run wrote: none is written
    /// again.
    fn replay(&mut self, epochs: &[EpochRecord]) -> Result<Vec<Action>> {
        Ok(epochs.iter().map(|_| Action::go_on()).collect())
    }
}

/// Seconds since the Unix epoch.
fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// This machine's name, as TensorBoard's writers put it in the file's name.
fn host() -> String {
    let mut buffer = [0u8; 256];
    // SAFETY: the buffer is writable for its whole length, which is passed.
    let status = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) };
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    match (status, std::str::from_utf8(&buffer[..end])) {
        (0, Ok(name)) if !name.is_empty() => name.replace(['/', '\\'], "_"),
        _ => "localhost".to_string(),
    }
}
