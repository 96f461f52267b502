//! Sync policies: how far the frontend may run ahead of the backend.
//!
//! Before the frontend starts batch `t`, the loop asks the policy, which may wait on batches
//! still in flight through [`InFlight`]. At the end of every epoch the loop waits for all of
//! them (`waitall`), whatever the policy.
//!
//! | policy            | name (CLI, trace) | rule                                               |
//! |-------------------|----------------|-------------------------------------------------------|
//! | [`Window`]`(1)`   | `barrier`      | batch t starts after t−1 finished (`wait_to_read`)    |
//! | [`Window`]`(2)`   | `t+2`, `window:2` | batch t starts after t−2 finished (exercise 2)     |
//! | [`Window`]`(k)`   | `window:K`     | batch t starts after t−k finished                     |
//! | [`NoSync`]        | `none`         | no wait until the end of the epoch                    |
//! | [`EveryN`]`(n)`   | `every:N`      | a full barrier before every n-th batch                |
//! | [`MemoryBudget`]  | `memory:MB`    | wait for the oldest batch while RSS growth > MB       |
//!
//! Each policy says what it is as data, a [`PolicyKind`]: traces record it, plots and
//! comparisons read it back, and it parses from and prints as the names above.
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
use std::fmt;
use std::str::FromStr;
use std::time::Instant;

use ember::engine::{Completed, Handle};
use ember::{Error, Result, StepAt};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::memory::rss_bytes;

/// What a policy is, as data: a built-in with its parameter, or a user's policy by name.
/// It prints as the policy's name (`barrier`, `window:2`, `none`, `every:10`, `memory:256`),
/// parses from it ([`POLICY_FORMS`]), and is stored in traces that way.
#[derive(Debug, Clone, PartialEq)]
pub enum PolicyKind {
    /// [`Window`]: `barrier` for 1, `window:K` (`t+2` for 2).
    Window(usize),
    /// [`NoSync`]: `none`.
    NoSync,
    /// [`EveryN`]: `every:N`.
    EveryN(usize),
    /// [`MemoryBudget`]: `memory:MB`.
    MemoryBudget(f64),
    /// A policy of the user's own, by its name.
    Custom(String),
}

/// The forms a built-in policy's name takes, for help texts and errors.
pub const POLICY_FORMS: &str =
    "barrier | t+2 | window:K (K >= 1) | none | every:N (N >= 1) | memory:MB (MB > 0)";

impl PolicyKind {
    /// The built-in policy of this kind.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for a user's own policy, which only its own code can build.
    pub fn build(&self) -> Result<Box<dyn SyncPolicy>> {
        Ok(match self {
            PolicyKind::Window(k) => Box::new(Window(*k)),
            PolicyKind::NoSync => Box::new(NoSync),
            PolicyKind::EveryN(n) => Box::new(EveryN(*n)),
            PolicyKind::MemoryBudget(mb) => Box::new(MemoryBudget(*mb)),
            PolicyKind::Custom(name) => {
                return Err(Error::InvalidValue {
                    name: "sync policy",
                    value: name.clone(),
                    reason: format!("not a built-in one ({POLICY_FORMS})"),
                });
            }
        })
    }

    /// The kind a trace names: a built-in where the name is one, else a user's policy.
    pub fn from_name(name: &str) -> Self {
        name.parse()
            .unwrap_or_else(|_| PolicyKind::Custom(name.to_string()))
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyKind::Window(1) => f.write_str("barrier"),
            PolicyKind::Window(k) => write!(f, "window:{k}"),
            PolicyKind::NoSync => f.write_str("none"),
            PolicyKind::EveryN(n) => write!(f, "every:{n}"),
            PolicyKind::MemoryBudget(mb) => write!(f, "memory:{mb}"),
            PolicyKind::Custom(name) => f.write_str(name),
        }
    }
}

/// A built-in policy's name, as [`POLICY_FORMS`] lists them (case and spaces aside).
impl FromStr for PolicyKind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let text = s.trim().to_ascii_lowercase();
        let bad = || Error::InvalidValue {
            name: "sync policy",
            value: s.to_string(),
            reason: format!("expected one of: {POLICY_FORMS}"),
        };
        let count = |v: &str| v.parse::<usize>().ok().filter(|n| *n >= 1).ok_or_else(bad);
        match text.split_once(':') {
            None => match text.as_str() {
                "barrier" => Ok(PolicyKind::Window(1)),
                "t+2" | "overlap" => Ok(PolicyKind::Window(2)),
                "none" => Ok(PolicyKind::NoSync),
                _ => Err(bad()),
            },
            Some(("window", k)) => count(k).map(PolicyKind::Window),
            Some(("every", n)) => count(n).map(PolicyKind::EveryN),
            Some(("memory", mb)) => mb
                .parse::<f64>()
                .ok()
                .filter(|mb| mb.is_finite() && *mb > 0.0)
                .map(PolicyKind::MemoryBudget)
                .ok_or_else(bad),
            Some(_) => Err(bad()),
        }
    }
}

impl Serialize for PolicyKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PolicyKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        String::deserialize(deserializer).map(|name| PolicyKind::from_name(&name))
    }
}

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
}

impl<P: SyncPolicy + ?Sized> SyncPolicy for &mut P {
    fn kind(&self) -> PolicyKind {
        (**self).kind()
    }
    fn before_issue(&mut self, batch: usize, flight: &mut InFlight) -> Result<()> {
        (**self).before_issue(batch, flight)
    }
}

impl<P: SyncPolicy + ?Sized> SyncPolicy for Box<P> {
    fn kind(&self) -> PolicyKind {
        (**self).kind()
    }
    fn before_issue(&mut self, batch: usize, flight: &mut InFlight) -> Result<()> {
        (**self).before_issue(batch, flight)
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

    pub(crate) fn push(&mut self, batch: usize, handle: Handle<f32>) {
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
    /// [`Error::Step`] naming the batch, around the error its unit failed with on the
    /// backend; [`Error::NonFiniteLoss`] when its loss is NaN or infinite.
    pub fn wait_oldest(&mut self) -> Result<()> {
        let Some((batch, handle)) = self.queue.pop_front() else {
            return Ok(());
        };
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
    fn policies_parse_and_bad_ones_list_the_valid_forms() {
        assert_eq!(
            "barrier".parse::<PolicyKind>().unwrap(),
            PolicyKind::Window(1)
        );
        assert_eq!("T+2".parse::<PolicyKind>().unwrap(), PolicyKind::Window(2));
        assert_eq!(
            "window:8".parse::<PolicyKind>().unwrap(),
            PolicyKind::Window(8)
        );
        assert_eq!(
            "every:10".parse::<PolicyKind>().unwrap(),
            PolicyKind::EveryN(10)
        );
        assert_eq!(
            "memory:256".parse::<PolicyKind>().unwrap(),
            PolicyKind::MemoryBudget(256.0)
        );
        assert_eq!("none".parse::<PolicyKind>().unwrap().to_string(), "none");
        assert_eq!(PolicyKind::Window(1).to_string(), "barrier");
        for bad in [
            "window:0",
            "sometimes",
            "every:x",
            "memory:-5",
            "window:",
            "t+3",
        ] {
            let err = bad.parse::<PolicyKind>().unwrap_err().to_string();
            assert!(
                err.contains(bad) && err.contains("window:K"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn each_built_in_reports_its_own_kind_and_names_round_trip_through_a_trace() {
        for kind in [
            PolicyKind::Window(1),
            PolicyKind::Window(3),
            PolicyKind::NoSync,
            PolicyKind::EveryN(4),
            PolicyKind::MemoryBudget(12.5),
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
