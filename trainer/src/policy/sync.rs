//! What a policy is, and what it waits on: the [`SyncPolicy`] trait and the batches in flight.

use std::collections::VecDeque;
use std::time::Instant;

use ember::engine::{Completed, Handle};
use ember::{Error, Result, StepAt};

use super::kind::PolicyKind;
use crate::memory::rss_bytes;

/// Decides, before each batch is issued, which in-flight batches must finish first.
pub trait SyncPolicy: Send {
    /// What the policy is, for logs, traces and plots.
    fn kind(&self) -> PolicyKind;

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

    /// The window in force (batch t starts after batch t−K finished), for the trace, where
    /// the policy keeps one; `None` by default.
    fn window(&self) -> Option<usize> {
        None
    }
}

impl<P: SyncPolicy + ?Sized> SyncPolicy for &mut P {
    fn kind(&self) -> PolicyKind {
        (**self).kind()
    }
    fn before_issue(&mut self, batch: usize, flight: &mut InFlight) -> Result<()> {
        (**self).before_issue(batch, flight)
    }
    fn window(&self) -> Option<usize> {
        (**self).window()
    }
}

impl<P: SyncPolicy + ?Sized> SyncPolicy for Box<P> {
    fn kind(&self) -> PolicyKind {
        (**self).kind()
    }
    fn before_issue(&mut self, batch: usize, flight: &mut InFlight) -> Result<()> {
        (**self).before_issue(batch, flight)
    }
    fn window(&self) -> Option<usize> {
        (**self).window()
    }
}

/// A batch whose completion the loop has observed.
pub(crate) struct Observed {
    pub(crate) batch: usize,
    pub(crate) handle: Handle<f32>,
    pub(crate) done: Completed<f32>,
    pub(crate) at: Instant,
}

/// Batches issued but not yet observed by the policy, oldest first.
///
/// Every wait checks the batch's loss: a NaN or infinite loss is an error naming the batch, at
/// the first point the policy observes it.
pub struct InFlight {
    epoch: usize,
    queue: VecDeque<(usize, Handle<f32>)>,
    rss_baseline: u64,
    observed: Vec<Observed>,
    /// Batches the policy has waited for so far (each `wait_oldest` that had one).
    waits: usize,
}

impl InFlight {
    pub(crate) fn new(epoch: usize, rss_baseline: u64) -> Self {
        Self {
            epoch,
            queue: VecDeque::new(),
            rss_baseline,
            observed: Vec::new(),
            waits: 0,
        }
    }

    pub(crate) fn push(&mut self, batch: usize, handle: Handle<f32>) {
        self.queue.push_back((batch, handle));
    }

    /// Batches waited for so far: a policy's call that leaves it as it was waited for none.
    pub(crate) fn waits(&self) -> usize {
        self.waits
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
    /// [`Error::Step`] naming the batch, around the error its unit failed with on the
    /// backend; [`Error::NonFiniteLoss`] when its loss is NaN or infinite.
    pub fn wait_oldest(&mut self) -> Result<()> {
        let Some((batch, handle)) = self.queue.pop_front() else {
            return Ok(());
        };
        self.waits += 1;
        let at = StepAt {
            epoch: self.epoch,
            batch,
        };
        let done = handle.wait_completed().map_err(|e| e.at_step(at))?;
        if !done.value.is_finite() {
            return Err(Error::NonFiniteLoss {
                at,
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
