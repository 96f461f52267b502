//! Sync policies: how far the frontend may run ahead of the backend.
//!
//! Before the frontend starts batch `t`, the loop asks the policy, which may wait on batches
//! still in flight through [`InFlight`]. At the end of every epoch the loop waits for all of
//! them (`waitall`), whatever the policy.
//!
//! The built-ins are [`Window`], [`NoSync`], [`EveryN`], [`MemoryBudget`] and [`Auto`]. Each
//! says what it is as data, a [`PolicyKind`]: traces record it, plots and comparisons read it
//! back, and it parses from and prints as the names that [`BUILT_INS`] lists, each with its
//! rule (the table `ember train --help` prints).
//!
//! A user's own policy implements [`SyncPolicy`]:
//!
//! ```
//! use ember_trainer::policy::{InFlight, PolicyKind, SyncPolicy};
//!
//! /// A barrier every 10 batches, and never more than 4 in flight.
//! struct Tens;
//! impl SyncPolicy for Tens {
//!     fn kind(&self) -> PolicyKind { PolicyKind::Custom("tens".into()) }
//!     fn before_issue(&mut self, batch: usize, flight: &mut InFlight) -> ember::Result<()> {
//!         if batch % 10 == 0 { flight.wait_all() } else { flight.wait_while_longer_than(4) }
//!     }
//! }
//! ```

use std::collections::VecDeque;
use std::time::Instant;

use ember::engine::{Completed, Handle};
use ember::{Error, Result, StepAt};

use crate::memory::rss_bytes;

pub mod auto;
mod kind;
pub use auto::Auto;
pub use kind::{BUILT_INS, BuiltIn, PolicyKind, forms};

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
    fn kind(&self) -> PolicyKind {
        PolicyKind::Window(self.0)
    }

    fn window(&self) -> Option<usize> {
        Some(self.0)
    }

    fn before_issue(&mut self, batch: usize, flight: &mut InFlight) -> Result<()> {
        match batch.checked_sub(self.0) {
            Some(last_needed) => flight.wait_through(last_needed),
            None => Ok(()),
        }
    }
}

impl SyncPolicy for NoSync {
    fn kind(&self) -> PolicyKind {
        PolicyKind::NoSync
    }

    fn before_issue(&mut self, _batch: usize, _flight: &mut InFlight) -> Result<()> {
        Ok(())
    }
}

impl SyncPolicy for EveryN {
    fn kind(&self) -> PolicyKind {
        PolicyKind::EveryN(self.0)
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
    fn kind(&self) -> PolicyKind {
        PolicyKind::MemoryBudget(self.0)
    }

    fn before_issue(&mut self, _batch: usize, flight: &mut InFlight) -> Result<()> {
        let budget = self.0 * 1024.0 * 1024.0;
        while !flight.is_empty() && flight.memory_growth() as f64 > budget {
            flight.wait_oldest()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_built_in_reports_its_own_kind_and_names_round_trip_through_a_trace() {
        for kind in [
            PolicyKind::Window(1),
            PolicyKind::Window(3),
            PolicyKind::NoSync,
            PolicyKind::EveryN(4),
            PolicyKind::MemoryBudget(12.5),
            PolicyKind::Auto(None),
            PolicyKind::Auto(Some(300.0)),
        ] {
            assert_eq!(kind.build().unwrap().kind(), kind);
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(
                serde_json::from_str::<PolicyKind>(&json).unwrap(),
                kind,
                "{json}"
            );
        }
        let mine = PolicyKind::Custom("tens".to_string());
        assert!(mine.build().is_err());
        assert_eq!(PolicyKind::from_name("tens"), mine);
    }
}
