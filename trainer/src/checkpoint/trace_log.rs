//! The checkpoints' trace, appended to rather than written whole each time.
//!
//! Every checkpoint needs the trace so far. Writing it whole into each made the bytes a run's
//! checkpoints write grow with the square of its length: 3.1 GB for 4,000 steps with
//! `--checkpoint-every 1` (issue 62). Now a run appends each checkpoint's new records to a log
//! beside the checkpoints and links the log into the checkpoint as its `trace.jsonl`;
//! `state.json` records how many of its bytes are the checkpoint's (`trace_bytes`) and their
//! CRC. Later checkpoints append after those bytes and never change them, so each checkpoint
//! stays whole and stands alone (copy its directory anywhere), while the bytes written grow with
//! the run's length.
//!
//! Two logs take the checkpoints in turn, each written in full: a damaged byte in one (a
//! hard link is one file under two names) leaves the checkpoint before, on the other, sound to
//! fall back to, as separate files did. A log's own name is a temporary of this process
//! ([`ember::io::ScratchFile`]), removed when the run ends, when a second signal stops it at
//! once, or by the next run once this process is dead; the checkpoints keep their links.
//! Where the file system takes no hard link, the checkpoint gets a copy of its bytes.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::Path;

use ember::io::ScratchFile;
use ember::{Error, Result};

use crate::trace::{BatchRecord, Jsonl, Trace};

/// A run's checkpoint trace: the records' JSON Lines, and the two logs they are appended to.
#[derive(Default)]
pub struct TraceLog {
    jsonl: Jsonl,
    logs: Vec<ScratchFile>,
    /// The bytes each log holds, and their CRC so far.
    len: u64,
    crc: crc32fast::Hasher,
    /// The log the next checkpoint links.
    next: usize,
}

impl TraceLog {
    /// Forgets the lines written: records that checkpoints already hold changed, so the next
    /// checkpoint starts new logs with the whole trace (the ones before keep theirs).
    pub fn restart(&mut self) {
        self.close();
        self.jsonl = Jsonl::default();
    }

    /// Appends the records of `trace` and `more` (an epoch's so far) that the logs lack, and
    /// puts the trace at `to`, a checkpoint's `trace.jsonl` being made in the directory `dir`
    /// holds. Returns the trace's length in bytes and their CRC-32.
    ///
    /// # Errors
    /// [`Error::Io`] naming the log or `to`. A log a write failed on is not written to again.
    pub(super) fn put(
        &mut self,
        dir: &Path,
        to: &Path,
        (trace, more): (&Trace, &[BatchRecord]),
    ) -> Result<(u64, u32)> {
        let stays = self
            .logs
            .first()
            .is_some_and(|log| log.path().parent() == Some(dir));
        if !stays {
            self.restart();
        }
        let (afresh, lines) = self.jsonl.added(trace, more);
        if afresh || self.logs.is_empty() {
            self.open(dir)?;
        }
        let appended = self.logs.iter_mut().try_for_each(|log| {
            let path = log.path().to_path_buf();
            let file = log.file();
            (file.write_all(&lines))
                .and_then(|()| file.sync_data())
                .map_err(|e| Error::io(&path, e))
        });
        if let Err(error) = appended {
            // What the failed write left after the logs' last whole checkpoint is not theirs.
            self.restart();
            return Err(error);
        }
        self.len += lines.len() as u64;
        self.crc.update(&lines);
        let log = &self.logs[self.next % self.logs.len()];
        self.next += 1;
        if fs::hard_link(log.path(), to).is_err() {
            let mut bytes = Vec::with_capacity(self.len as usize);
            File::open(log.path())
                .and_then(|file| file.take(self.len).read_to_end(&mut bytes))
                .map_err(|e| Error::io(log.path(), e))?;
            ember::io::write_atomic_bytes(to, &bytes)?;
        }
        Ok((self.len, self.crc.clone().finalize()))
    }

    /// Two new logs in `dir`, empty.
    fn open(&mut self, dir: &Path) -> Result<()> {
        self.close();
        for _ in 0..2 {
            (self.logs).push(ScratchFile::beside(&dir.join("trace-log.jsonl"))?);
        }
        Ok(())
    }

    /// Removes the logs' own names; the checkpoints keep their links.
    fn close(&mut self) {
        self.logs.clear();
        (self.len, self.crc, self.next) = (0, crc32fast::Hasher::new(), 0);
    }
}

/// The first `bytes` bytes of the file at `path` (all of it for `None`: a checkpoint written
/// before the logs).
///
/// # Errors
/// [`Error::Io`] naming the path, for a file that cannot be read or is shorter.
pub(super) fn read(path: &Path, bytes: Option<u64>) -> Result<Vec<u8>> {
    let failed = |e| Error::io(path, e);
    let mut file = File::open(path).map_err(failed)?;
    let mut out = Vec::new();
    match bytes {
        None => file.read_to_end(&mut out),
        Some(n) => file.take(n).read_to_end(&mut out),
    }
    .map_err(failed)?;
    if let Some(n) = bytes
        && (out.len() as u64) < n
    {
        let message = format!(
            "it holds {} bytes, and the checkpoint's trace is {n}: the file was cut short",
            out.len()
        );
        return Err(failed(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            message,
        )));
    }
    Ok(out)
}
