//! `--tensorboard DIR` ([`TensorBoard`]): a run's scalars in TensorBoard's own event files, as
//! Keras' `TensorBoard` callback and PyTorch's `SummaryWriter` write them, for `tensorboard
//! --logdir DIR`.
//!
//! Per batch, when the loop learns that it is done (see [`crate::fit::Callback`]):
//! `batch/loss`, `batch/lr` and `batch/in_flight` (the batches issued and not yet done right
//! after it was issued), at the batch's number in the run, from 1, as the step (a resumed run
//! goes on with the steps after its checkpoint's). Per epoch: `epoch/mean_loss`,
//! `epoch/time_per_epoch` (seconds), `epoch/peak_growth_mb` and every metric of the epoch
//! (`epoch/test_acc`, …), at the epoch (from 1) as the step.
//!
//! The file is TFRecord-framed (`record`) protobuf `Event`s (`proto`), the first one naming
//! the format's version; it is a new file in DIR (`events.out.tfevents.<seconds>.<host>.<pid>`),
//! never one that was there, so that runs logged into one directory are each kept. It is
//! flushed every 32 events, at every epoch's end and at the run's end.
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
    /// The event file: the name chosen when made, then the one opened.
    path: PathBuf,
    /// Open from the run's start ([`Callback::train_begin`]) or the first event.
    file: Option<BufWriter<File>>,
    /// The batches of the epochs before the current one: a batch's step is these plus its
    /// number in the epoch, plus one, in a resumed run too.
    before_epoch: i64,
    /// Events written since the file was last flushed.
    unflushed: usize,
}

/// Events between flushes: a run killed mid-epoch loses at most these.
const FLUSH_EVERY: usize = 32;

impl TensorBoard {
    /// A new event file in `dir`, which is created if it is missing, both once the run starts
    /// ([`Callback::train_begin`]): a run refused before it trains leaves neither.
    ///
    /// # Errors
    /// [`Error::Output`] where `dir` cannot be, or become, a directory that takes files.
    pub fn new(dir: &Path) -> Result<Self> {
        ember::io::check_dir_unmade(dir)?;
        let seconds = now().floor() as u64;
        let stem = format!(
            "events.out.tfevents.{seconds}.{}.{}",
            host(),
            std::process::id()
        );
        Ok(Self {
            path: dir.join(stem),
            file: None,
            before_epoch: 0,
            unflushed: 0,
        })
    }

    /// Opens the event file, where it is not open yet, and writes the version record first.
    fn open(&mut self) -> Result<()> {
        if self.file.is_none() {
            let dir = self.path.parent().unwrap_or(Path::new("."));
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
            let stem = self.path.clone();
            // A name that is taken is never opened: the next free one is.
            for n in 0.. {
                let path = match n {
                    0 => stem.clone(),
                    n => PathBuf::from(format!("{}.{n}", stem.display())),
                };
                match OpenOptions::new().write(true).create_new(true).open(&path) {
                    Ok(file) => {
                        self.path = path;
                        self.file = Some(BufWriter::new(file));
                        break;
                    }
                    Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
                    Err(e) => return Err(Error::io(path, e)),
                }
            }
            let mut event = Event::new();
            event.set_file_version(FILE_VERSION.to_string());
            self.write(event)?;
            self.flush()?;
        }
        Ok(())
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
        if self.file.is_none() {
            self.open()?;
        }
        let file = self.file.as_mut().expect("opened above");
        file.write_all(&frame(&data))
            .map_err(|e| Error::io(&self.path, e))?;
        self.unflushed += 1;
        match self.unflushed >= FLUSH_EVERY {
            true => self.flush(),
            false => Ok(()),
        }
    }

    fn flush(&mut self) -> Result<()> {
        self.unflushed = 0;
        match &mut self.file {
            Some(file) => file.flush().map_err(|e| Error::io(&self.path, e)),
            None => Ok(()),
        }
    }
}

impl Callback for TensorBoard {
    /// A resumed run's trace holds the epochs it finished before: the steps go on after them.
    fn train_begin(&mut self, trace: &Trace) -> Result<()> {
        self.before_epoch = trace.epochs.iter().map(|e| e.batches as i64).sum();
        self.open()
    }

    fn batch_end(&mut self, batch: &BatchRecord) -> Result<Action> {
        let step = self.before_epoch + batch.batch as i64 + 1;
        let mut scalars = vec![
            ("batch/loss".to_string(), f64::from(batch.loss)),
            ("batch/in_flight".to_string(), batch.depth as f64),
        ];
        if let Some(lr) = batch.lr {
            scalars.push(("batch/lr".to_string(), lr));
        }
        self.scalars(step, &scalars)?;
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
        self.before_epoch += epoch.batches as i64;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::examples::{batch, epoch};

    /// The events of an event file: its records' data, decoded.
    fn events(path: &Path) -> Vec<Event> {
        let bytes = std::fs::read(path).unwrap();
        let mut events = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let length = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
            let data = &bytes[at + 12..at + 12 + length];
            let crc = u32::from_le_bytes(
                bytes[at + 12 + length..at + 16 + length]
                    .try_into()
                    .unwrap(),
            );
            assert_eq!(crc, masked_crc(data));
            events.push(Event::parse_from_bytes(data).unwrap());
            at += 16 + length;
        }
        events
    }

    /// A run resumed in the middle of its second epoch of 5 batches: its batch 3 (from 0) is
    /// the run's 9th, as in the run that was never stopped.
    #[test]
    fn a_resumed_run_goes_on_with_the_steps_after_its_checkpoints() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = TensorBoard::new(dir.path()).unwrap();
        let so_far = Trace {
            batches: (0..5).map(|b| batch(0, b, b as f64)).collect(),
            epochs: vec![epoch(0, 5)],
        };
        writer.train_begin(&so_far).unwrap();
        writer.batch_end(&batch(1, 3, 8.0)).unwrap();
        writer.batch_end(&batch(1, 4, 9.0)).unwrap();
        writer.epoch_end(&epoch(1, 5)).unwrap();
        writer.batch_end(&batch(2, 0, 10.0)).unwrap();
        writer.train_end(&so_far).unwrap();
        let path = writer.path().to_path_buf();
        drop(writer);
        let events = events(&path);
        assert_eq!(events[0].file_version(), FILE_VERSION);
        let steps: Vec<(i64, String)> = events[1..]
            .iter()
            .map(|e| (e.step, e.summary().value[0].tag.clone()))
            .collect();
        assert_eq!(
            steps,
            [
                (9, "batch/loss".to_string()),
                (10, "batch/loss".to_string()),
                (2, "epoch/mean_loss".to_string()),
                (11, "batch/loss".to_string()),
            ]
        );
    }
}
