//! The completion handle of one issued unit: Gluon's `wait_to_read` on what the unit returned.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::device::remote;
use crate::error::{Error, Result};

/// Device memory as burn's pool reports it, sampled when a unit completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolSample {
    /// Bytes handed out to live tensors.
    pub in_use: u64,
    /// Bytes the pool holds from the device.
    pub reserved: u64,
}

/// A completed unit: what it returned, and when each device finished it.
#[derive(Debug, Clone, PartialEq)]
pub struct Completed<V> {
    /// What the unit returned ([`Computed::Value`](super::Computed::Value)).
    pub value: V,
    /// When the watcher saw the last device finish it.
    pub at: Instant,
    /// When each fence was read back, in device order (one entry for a unit on one device,
    /// none for a host value).
    pub devices: Vec<Instant>,
}

#[derive(Debug)]
struct Slot<V> {
    result: Option<Result<Completed<V>>>,
    /// `Some` once sampled: the device pool just after the completion (`Some(None)` on devices
    /// without a pool, and for units that failed).
    pool: Option<Option<PoolSample>>,
}

/// An engine's progress: how many units completed, and since when the devices have owed it
/// an answer (the last completion, or the issue that ended a time with nothing in flight).
/// Where a remote device is open, a wait that sees no progress for its bound ends.
#[derive(Debug)]
pub(super) struct Progress {
    completed: AtomicU64,
    since: Mutex<Instant>,
    /// Set once a wait ended on a silent device: the worker may be stuck on it for good.
    silent: AtomicBool,
    /// Whether the engine works on a remote device: only then do its waits have a bound.
    remote: AtomicBool,
}

impl Progress {
    pub(super) fn new() -> Self {
        Self {
            completed: AtomicU64::new(0),
            since: Mutex::new(Instant::now()),
            silent: AtomicBool::new(false),
            remote: AtomicBool::new(false),
        }
    }

    /// The engine works on a remote device (its device, or a fence's).
    pub(super) fn on_remote(&self) {
        self.remote.store(true, Ordering::SeqCst);
    }

    fn since(&self) -> MutexGuard<'_, Instant> {
        self.since.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Unit `index` is being issued: with nothing in flight, the devices owe an answer from now.
    pub(super) fn issuing(&self, index: u64) {
        if self.completed.load(Ordering::SeqCst) >= index {
            *self.since() = Instant::now();
        }
    }

    fn completed_one(&self, silent: bool) {
        self.completed.fetch_add(1, Ordering::SeqCst);
        *self.since() = Instant::now();
        if self.remote.load(Ordering::SeqCst) && !silent {
            remote::progressed();
        }
        if silent {
            self.silent.store(true, Ordering::SeqCst);
        }
    }

    /// Whether a wait ended on a silent remote device.
    pub(super) fn went_silent(&self) -> bool {
        self.silent.load(Ordering::SeqCst)
    }

    /// When a waiter gives up, where the engine works on a remote device: the bound after the
    /// last progress, and a tenth more, so that the watcher, which knows which device it waits
    /// on, names it first.
    fn deadline(&self) -> Option<Instant> {
        self.remote.load(Ordering::SeqCst).then(|| {
            let bound = remote::answer_within();
            *self.since() + bound + (bound / 10).max(Duration::from_millis(100))
        })
    }

    /// The error of a waiter that gave up, or of an engine that leaves its stuck worker.
    pub(super) fn silent_error(&self) -> Error {
        self.silent.store(true, Ordering::SeqCst);
        remote::silent(
            &remote::names().join(", "),
            "finishing the work queued on it",
        )
    }
}

/// Where a unit's result lands: written once by the engine, read by every waiter.
#[derive(Debug)]
pub(super) struct Completion<V> {
    slot: Mutex<Slot<V>>,
    ready: Condvar,
    progress: Arc<Progress>,
}

impl<V: Clone> Completion<V> {
    pub(super) fn new(progress: Arc<Progress>) -> Self {
        Self {
            slot: Mutex::new(Slot {
                result: None,
                pool: None,
            }),
            ready: Condvar::new(),
            progress,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slot<V>> {
        // A poisoned lock only means another thread panicked while holding it; the slot itself
        // is always in a consistent state.
        self.slot
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    pub(super) fn complete(&self, result: Result<Completed<V>>) {
        let mut slot = self.lock();
        if slot.result.is_some() {
            return;
        }
        if result.is_err() {
            slot.pool = Some(None);
        }
        let silent = matches!(&result, Err(e) if matches!(e.root(), Error::Silent { .. }));
        self.progress.completed_one(silent);
        slot.result = Some(result);
        drop(slot);
        self.ready.notify_all();
    }

    /// Blocks until `ready` holds for the slot.
    fn wait_for<T>(&self, mut ready: impl FnMut(&Slot<V>) -> Option<T>) -> T {
        let mut slot = self.lock();
        loop {
            if let Some(value) = ready(&slot) {
                return value;
            }
            slot = self
                .ready
                .wait(slot)
                .unwrap_or_else(|poison| poison.into_inner());
        }
    }

    /// Blocks until the unit's result is in, or, where a remote device is open, until the
    /// engine made no progress for the bound.
    fn wait_result<T>(&self, mut ready: impl FnMut(&Slot<V>) -> Option<Result<T>>) -> Result<T> {
        let mut slot = self.lock();
        loop {
            if let Some(result) = ready(&slot) {
                return result;
            }
            slot = match self.progress.deadline() {
                None => self
                    .ready
                    .wait(slot)
                    .unwrap_or_else(|poison| poison.into_inner()),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Err(self.progress.silent_error());
                    }
                    self.ready
                        .wait_timeout(slot, deadline - now)
                        .unwrap_or_else(|poison| poison.into_inner())
                        .0
                }
            };
        }
    }

    pub(super) fn wait(&self) -> Result<Completed<V>> {
        self.wait_result(|slot| slot.result.clone())
    }
}

/// What the engine needs of a completion whatever its value: `waitall` waits on the last one,
/// and the pool sampler fills each one in.
pub(super) trait Waitable: Send + Sync {
    /// Blocks until the unit completed; its error, if it failed.
    fn wait_done(&self) -> Result<()>;
    /// Records the device pool sampled after the unit completed.
    fn set_pool(&self, pool: Option<PoolSample>);
}

impl<V: Clone + Send> Waitable for Completion<V> {
    fn wait_done(&self) -> Result<()> {
        self.wait_result(|slot| {
            slot.result
                .as_ref()
                .map(|r| r.as_ref().map(drop).map_err(Error::clone))
        })
    }

    fn set_pool(&self, pool: Option<PoolSample>) {
        self.lock().pool = Some(pool);
        self.ready.notify_all();
    }
}

/// The completion handle of one issued unit, typed by what the unit returns.
#[derive(Debug)]
pub struct Handle<V> {
    pub(super) index: u64,
    pub(super) completion: Arc<Completion<V>>,
}

impl<V> Clone for Handle<V> {
    fn clone(&self) -> Self {
        Self {
            index: self.index,
            completion: self.completion.clone(),
        }
    }
}

impl<V: Clone + Send + 'static> Handle<V> {
    /// The unit's position in issue order, from 0.
    pub fn index(&self) -> u64 {
        self.index
    }

    /// Gluon's `wait_to_read`: blocks until the device finished this unit, and returns what it
    /// returned.
    ///
    /// # Errors
    /// The unit's own error, with its variant; [`Error::Panic`] when it panicked;
    /// [`Error::NotRun`] when an earlier unit failed, so this one never ran.
    pub fn wait(&self) -> Result<V> {
        self.wait_completed().map(|done| done.value)
    }

    /// Like [`Handle::wait`], with the completion times.
    ///
    /// # Errors
    /// As [`Handle::wait`].
    pub fn wait_completed(&self) -> Result<Completed<V>> {
        self.completion.wait()
    }

    /// The device pool sampled just after this unit completed (`None` on flex and ndarray).
    /// Sampling runs on a thread of its own, so that asking the device (a round trip through
    /// its queue) never delays the completions themselves; this waits for that sample.
    pub fn pool(&self) -> Option<PoolSample> {
        self.completion.wait_for(|slot| slot.pool)
    }

    /// Whether the unit has completed (successfully or not), without blocking.
    pub fn is_done(&self) -> bool {
        self.completion.lock().result.is_some()
    }

    /// The completion, if there is one yet.
    pub fn try_completed(&self) -> Option<Result<Completed<V>>> {
        self.completion.lock().result.clone()
    }
}
