//! Sync policies: how far the frontend may run ahead of the backend.
//!
//! Before the frontend starts batch `t`, the loop asks the policy, which may wait on batches
//! still in flight through [`InFlight`]. At the end of every epoch the loop waits for all of
//! them (`waitall`), whatever the policy.
//!
//! | policy            | CLI            | rule                                                  |
//! |-------------------|----------------|-------------------------------------------------------|
//! | [`Window`]`(1)`   | `barrier`      | batch t starts after t−1 finished (`wait_to_read`)    |
//! | [`Window`]`(2)`   | `t+2`, `window:2` | batch t starts after t−2 finished (exercise 2)     |
//! | [`Window`]`(k)`   | `window:K`     | batch t starts after t−k finished                     |
//! | [`NoSync`]        | `none`         | no wait until the end of the epoch                    |
//! | [`EveryN`]`(n)`   | `every:N`      | a full barrier before every n-th batch                |
//! | [`MemoryBudget`]  | `memory:MB`    | wait for the oldest batch while RSS growth > MB       |
//!
//! A user's own policy implements [`SyncPolicy`]:
//!
//! ```
//! use ember_trainer::policy::{InFlight, SyncPolicy};
//!
//! /// A barrier every 10 batches, and never more than 4 in flight.
//! struct Tens;
//! impl SyncPolicy for Tens {
//!     fn name(&self) -> String { "tens".into() }
//!     fn before_issue(&mut self, batch: usize, flight: &mut InFlight) -> ember::Result<()> {
//!         if batch % 10 == 0 { flight.wait_all() } else { flight.wait_while_longer_than(4) }
//!     }
//! }
//! ```

use std::collections::VecDeque;
use std::time::Instant;

use ember::engine::{Completed, Handle};
use ember::{Error, Result};

use crate::memory::rss_bytes;

/// Decides, before each batch is issued, which in-flight batches must finish first.
pub trait SyncPolicy: Send {
    /// A short name for logs, traces and plots (`barrier`, `window:2`, …).
    fn name(&self) -> String;

    /// Called before the frontend starts batch `batch` (counted from 0 in each epoch), before
    /// the batch is prepared. When the data source cannot tell where its epoch ends (its
    /// iterator's `size_hint` has no upper bound), it is also called once with the epoch's
    /// batch count, just before the end-of-epoch `waitall`. `DataLoader` and the synthetic
    /// sources always tell.
    ///
    /// # Errors
    /// Whatever a wait on `flight` returns (a failed unit, a non-finite loss); the loop stops
    /// with it.
    fn before_issue(&mut self, batch: usize, flight: &mut InFlight) -> Result<()>;
}

impl<P: SyncPolicy + ?Sized> SyncPolicy for &mut P {
    fn name(&self) -> String {
        (**self).name()
    }
    fn before_issue(&mut self, batch: usize, flight: &mut InFlight) -> Result<()> {
        (**self).before_issue(batch, flight)
    }
}

impl<P: SyncPolicy + ?Sized> SyncPolicy for Box<P> {
    fn name(&self) -> String {
        (**self).name()
    }
    fn before_issue(&mut self, batch: usize, flight: &mut InFlight) -> Result<()> {
        (**self).before_issue(batch, flight)
    }
}

/// A batch whose completion the loop has observed.
pub(crate) struct Observed {
    pub(crate) batch: usize,
    pub(crate) handle: Handle,
    pub(crate) done: Completed,
    pub(crate) at: Instant,
}

/// Batches issued but not yet observed by the policy, oldest first.
///
/// Every wait checks the batch's loss: a NaN or infinite loss is an error naming the batch, at
/// the first point the policy observes it.
pub struct InFlight {
    epoch: usize,
    queue: VecDeque<(usize, Handle)>,
    rss_baseline: u64,
    observed: Vec<Observed>,
}

impl InFlight {
    pub(crate) fn new(epoch: usize, rss_baseline: u64) -> Self {
        Self {
            epoch,
            queue: VecDeque::new(),
            rss_baseline,
            observed: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, batch: usize, handle: Handle) {
        self.queue.push_back((batch, handle));
    }

    pub(crate) fn take_observed(&mut self) -> Vec<Observed> {
        std::mem::take(&mut self.observed)
    }

    /// Batches issued and not yet observed.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether nothing is waiting to be observed.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Batches the device has not finished yet: the in-flight depth.
    pub fn depth(&self) -> usize {
        self.queue.iter().filter(|(_, h)| !h.is_done()).count()
    }

    /// The number of the oldest batch not yet observed.
    pub fn oldest(&self) -> Option<usize> {
        self.queue.front().map(|(batch, _)| *batch)
    }

    /// The latest batch this epoch whose completion was observed, with its mean loss: what a
    /// policy that prints the loss has just waited for.
    pub fn last_observed(&self) -> Option<(usize, f32)> {
        self.observed.last().map(|o| (o.batch, o.done.value))
    }

    /// Growth of the process's resident memory since the epoch started, in bytes.
    pub fn memory_growth(&self) -> i64 {
        rss_bytes() as i64 - self.rss_baseline as i64
    }

    /// Waits for the oldest batch (Gluon's `wait_to_read` on its loss).
    ///
    /// # Errors
    /// [`Error::Execution`] when its unit failed on the backend, [`Error::NonFiniteLoss`]
    /// when its loss is NaN or infinite.
    pub fn wait_oldest(&mut self) -> Result<()> {
        let Some((batch, handle)) = self.queue.pop_front() else {
            return Ok(());
        };
        let done = handle.wait_completed().map_err(|e| match e {
            Error::Execution(text) => {
                Error::Execution(format!("batch {batch} of epoch {}: {text}", self.epoch))
            }
            other => other,
        })?;
        if !done.value.is_finite() {
            return Err(Error::NonFiniteLoss {
                at: format!("batch {batch} of epoch {}", self.epoch),
                value: done.value,
            });
        }
        self.observed.push(Observed {
            batch,
            handle,
            done,
            at: Instant::now(),
        });
        Ok(())
    }

    /// Waits for every batch numbered `batch` or lower.
    ///
    /// # Errors
    /// As [`InFlight::wait_oldest`], for the first batch that fails.
    pub fn wait_through(&mut self, batch: usize) -> Result<()> {
        while self.oldest().is_some_and(|oldest| oldest <= batch) {
            self.wait_oldest()?;
        }
        Ok(())
    }

    /// Waits until at most `n` batches remain unobserved.
    ///
    /// # Errors
    /// As [`InFlight::wait_oldest`], for the first batch that fails.
    pub fn wait_while_longer_than(&mut self, n: usize) -> Result<()> {
        while self.len() > n {
            self.wait_oldest()?;
        }
        Ok(())
    }

    /// `waitall`: waits for every batch in flight.
    ///
    /// # Errors
    /// As [`InFlight::wait_oldest`], for the first batch that fails.
    pub fn wait_all(&mut self) -> Result<()> {
        self.wait_while_longer_than(0)
    }
}

/// Batch t starts only after batch t−k finished. `Window(1)` is the barrier, `Window(2)` the
/// book's t/t+2 overlap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window(pub usize);

/// No wait until the end of the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoSync;

/// A full barrier before every n-th batch (Keras' `steps_per_execution`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EveryN(pub usize);

/// Waits for the oldest batch while the process has grown by more than this many MB since the
/// epoch began.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryBudget(pub f64);

impl SyncPolicy for Window {
    fn name(&self) -> String {
        match self.0 {
            1 => "barrier".to_string(),
            k => format!("window:{k}"),
        }
    }

    fn before_issue(&mut self, batch: usize, flight: &mut InFlight) -> Result<()> {
        match batch.checked_sub(self.0) {
            Some(last_needed) => flight.wait_through(last_needed),
            None => Ok(()),
        }
    }
}

impl SyncPolicy for NoSync {
    fn name(&self) -> String {
        "none".to_string()
    }

    fn before_issue(&mut self, _batch: usize, _flight: &mut InFlight) -> Result<()> {
        Ok(())
    }
}

impl SyncPolicy for EveryN {
    fn name(&self) -> String {
        format!("every:{}", self.0)
    }

    fn before_issue(&mut self, batch: usize, flight: &mut InFlight) -> Result<()> {
        if batch > 0 && batch.is_multiple_of(self.0) {
            flight.wait_all()
        } else {
            Ok(())
        }
    }
}

impl SyncPolicy for MemoryBudget {
    fn name(&self) -> String {
        format!("memory:{}", self.0)
    }

    fn before_issue(&mut self, _batch: usize, flight: &mut InFlight) -> Result<()> {
        let budget = self.0 * 1024.0 * 1024.0;
        while !flight.is_empty() && flight.memory_growth() as f64 > budget {
            flight.wait_oldest()?;
        }
        Ok(())
    }
}
