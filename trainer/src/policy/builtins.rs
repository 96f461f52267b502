//! The built-in policies with a fixed rule: a window, none, every N, a memory budget. (The
//! self-sizing window is `auto.rs`.)

use ember::Result;

use super::kind::PolicyKind;
use super::sync::{InFlight, SyncPolicy};

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
