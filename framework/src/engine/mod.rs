//! The frontend/backend engine: MXNet's threaded engine, for burn.
//!
//! The frontend (the caller's thread) hands each unit of work to a **backend worker** thread,
//! which owns the state (model, optimizer) and runs burn in order. A unit is a closure on that
//! state that returns any [`Computed`] value: a tensor, a count, the network itself. `issue`
//! returns at once with a typed [`Handle`]: `wait()` is Gluon's `wait_to_read` and gives the
//! unit's value, `is_done()` asks without blocking, and [`Engine::wait_all`] is `waitall`.
//! A unit's error reaches every waiter as the [`Error`](crate::Error) it was, variant intact.
//!
//! The engine's queue has **no bound of its own**: only the caller's sync policy bounds how
//! far the frontend runs ahead, so host data queued behind a busy backend really piles up.
//!
//! "Done" means the device finished the work: after running a unit, the worker starts an
//! asynchronous readback of each of its result's fences (burn's `into_data_async`, polled once
//! so that the read is queued behind that unit's kernels, not behind later ones) and hands them
//! to a **completion watcher** thread, which blocks on them while the worker goes on issuing.
//! On wgpu the read finishes when the device has run everything before it; on flex and
//! ndarray, which execute on the worker's thread, it is ready at once. A host value has no
//! fence. Completions are published in issue order.
//!
//! A unit that ran on several devices (a data-parallel step) returns one fence per device
//! ([`Computed::fences`]): each is read back behind its own device's kernels, the handle
//! records when each device finished ([`Completed::devices`]), and the unit is done when all
//! are.
//!
//! ```
//! use burn::prelude::*;
//! use ember::engine::Engine;
//!
//! let device = Device::flex();
//! let engine = Engine::new(Tensor::<1>::zeros([1], &device), Some(device.clone()));
//! let handles: Vec<_> = (1..=3)
//!     .map(|i| engine.issue(move |acc: &mut Tensor<1>| {
//!         *acc = acc.clone().add_scalar(i as f32);
//!         Ok(acc.clone())
//!     }))
//!     .collect();
//! assert_eq!(handles[2].wait().unwrap().into_scalar::<f32>(), 6.0); // 1 + 2 + 3
//! engine.wait_all().unwrap();
//! assert!(handles.iter().all(|h| h.is_done()));
//! // A unit may return any value: here a count, read on the backend.
//! let count = engine.issue(|acc: &mut Tensor<1>| Ok(acc.dims()[0]));
//! assert_eq!(count.wait().unwrap(), 1);
//! let acc = engine.finish().unwrap();
//! assert_eq!(acc.into_scalar::<f32>(), 6.0);
//! ```

mod computed;
mod handle;
mod watcher;

use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::{self, JoinHandle};
use std::time::Instant;

use burn::tensor::Device;

pub use computed::{Computed, Host, settle};
pub use handle::{Completed, Handle, PoolSample};

use crate::error::{Error, Result, panic_text};
use handle::{Completion, Progress, Waitable};
use watcher::{Deliver, Watch, completion_watcher, pool_sampler};

/// A unit of work for the worker: `run` runs it and starts its readbacks, `fail` completes its
/// handle with an error instead (a unit after a failed one is never run).
struct Job<S> {
    run: Run<S>,
    fail: Box<dyn FnOnce(Error) + Send>,
}

/// A job's work on the backend state: what it does, then the readbacks to watch.
type Run<S> = Box<dyn FnOnce(&mut S) -> Result<Watch> + Send>;

/// The frontend's side of the engine. The backend state `S` lives on the worker thread until
/// [`Engine::finish`] hands it back.
pub struct Engine<S: Send + 'static> {
    jobs: Option<Sender<Job<S>>>,
    worker: Option<JoinHandle<S>>,
    watcher: Option<JoinHandle<()>>,
    sampler: Option<JoinHandle<()>>,
    next_index: std::cell::Cell<u64>,
    last: std::cell::RefCell<Option<Arc<dyn Waitable>>>,
    progress: Arc<Progress>,
}

impl<S: Send + 'static> Engine<S> {
    /// Starts the backend worker and the completion watcher. `device`, when given, is sampled
    /// for its memory pool at each completion, on a thread of its own; flex keeps no pool
    /// (burn's `memory_pool_usage` is `None`) and is not sampled.
    pub fn new(state: S, device: Option<Device>) -> Self {
        let (jobs, job_rx) = mpsc::channel::<Job<S>>();
        let (watch_tx, watch_rx) = mpsc::channel::<Watch>();
        let progress = Arc::new(Progress::new());
        if device
            .as_ref()
            .is_some_and(|d| crate::device::remote::name(d).is_some())
        {
            progress.on_remote();
        }
        let watched = progress.clone();
        // burn-flex's work and oneDNN's team share the CPU's cores (`kernels::one_pool`).
        // burn's devices compare equal with and without autodiff.
        let on_flex = device.as_ref().is_some_and(|d| *d == Device::flex());
        let worker = thread::Builder::new()
            .name("ember-backend".into())
            .spawn(move || {
                let work = move || backend_worker(state, job_rx, watch_tx);
                match on_flex {
                    true => crate::kernels::one_pool(work),
                    false => work(),
                }
            })
            .expect("spawning the backend worker thread");
        // A sampler woken at every completion to find no pool would only take a core from
        // the backend's team.
        let (sample_tx, sampler) = match device.filter(|_| !on_flex) {
            Some(device) => {
                let (sample_tx, sample_rx) = mpsc::channel::<Arc<dyn Waitable>>();
                let sampler = thread::Builder::new()
                    .name("ember-pool-sampler".into())
                    .spawn(move || pool_sampler(sample_rx, device))
                    .expect("spawning the pool sampler thread");
                (Some(sample_tx), Some(sampler))
            }
            None => (None, None),
        };
        let watcher = thread::Builder::new()
            .name("ember-watcher".into())
            .spawn(move || completion_watcher(watch_rx, sample_tx, watched))
            .expect("spawning the completion watcher thread");
        Self {
            jobs: Some(jobs),
            worker: Some(worker),
            watcher: Some(watcher),
            sampler,
            next_index: std::cell::Cell::new(0),
            last: std::cell::RefCell::new(None),
            progress,
        }
    }

    /// Hands a unit of work to the backend and returns at once with its handle.
    pub fn issue<O: Computed>(
        &self,
        work: impl FnOnce(&mut S) -> Result<O> + Send + 'static,
    ) -> Handle<O::Value> {
        let index = self.next_index.get();
        self.next_index.set(index + 1);
        self.progress.issuing(index);
        let completion = Arc::new(Completion::<O::Value>::new(self.progress.clone()));
        let delivered = completion.clone();
        let job = Job {
            run: Box::new(move |state: &mut S| {
                let output = work(state)?;
                output.settle()?;
                Ok(Watch::start(output.fences(), deliver(output, delivered)))
            }),
            fail: {
                let completion = completion.clone();
                Box::new(move |error| completion.complete(Err(error)))
            },
        };
        let unsent = match &self.jobs {
            Some(jobs) => jobs.send(job).err().map(|mpsc::SendError(job)| job),
            None => Some(job),
        };
        if let Some(job) = unsent {
            (job.fail)(Error::BackendStopped);
        }
        *self.last.borrow_mut() = Some(completion.clone());
        Handle { index, completion }
    }

    /// Number of units issued so far.
    pub fn issued(&self) -> u64 {
        self.next_index.get()
    }

    /// Gluon's `waitall`: blocks until every unit issued so far has completed. Completions are
    /// in issue order, so this waits for the last one; an earlier failure is reported here too.
    ///
    /// # Errors
    /// The error of the last unit, which is the first failure's [`Error::NotRun`] when an
    /// earlier unit failed.
    pub fn wait_all(&self) -> Result<()> {
        let last = self.last.borrow().clone();
        match last {
            Some(completion) => completion.wait_done(),
            None => Ok(()),
        }
    }

    /// Waits for all work, stops both threads and returns the backend state.
    ///
    /// # Errors
    /// As [`Engine::wait_all`], and [`Error::Panic`] when the worker itself panicked.
    pub fn finish(mut self) -> Result<S> {
        let waited = self.wait_all();
        let state = self.shutdown();
        waited.and(state)
    }

    /// Stops both threads once the work queued so far has run, whatever it gave, and returns
    /// the backend state: what a failed run still holds (a network as the last completed unit
    /// left it). `None` when the worker itself panicked.
    pub fn salvage(mut self) -> Option<S> {
        let _ = self.wait_all();
        self.shutdown().ok()
    }

    fn shutdown(&mut self) -> Result<S> {
        self.jobs.take();
        if self.progress.went_silent() && !self.stops_soon() {
            // The worker waits on a server that stopped answering, maybe for good: leave it
            // (and the threads fed by it) to the process's end rather than wait with it.
            self.worker.take();
            self.watcher.take();
            self.sampler.take();
            return Err(self.progress.silent_error());
        }
        let state = self.worker.take().map(|worker| {
            worker
                .join()
                .map_err(|panic| Error::Panic(panic_text(&panic)))
        });
        if let Some(watcher) = self.watcher.take() {
            let _ = watcher.join();
        }
        if let Some(sampler) = self.sampler.take() {
            let _ = sampler.join();
        }
        state.unwrap_or_else(|| Err(Error::Panic("the engine was already stopped".to_string())))
    }
}

impl<S: Send + 'static> Engine<S> {
    /// Whether the worker stops within a second (it had nothing left to run).
    fn stops_soon(&self) -> bool {
        let start = Instant::now();
        while start.elapsed() < std::time::Duration::from_secs(1) {
            if self.worker.as_ref().is_none_or(JoinHandle::is_finished) {
                return true;
            }
            thread::sleep(std::time::Duration::from_millis(10));
        }
        false
    }
}

impl<S: Send + 'static> Drop for Engine<S> {
    fn drop(&mut self) {
        if self.worker.is_some() {
            let _ = self.shutdown();
        }
    }
}

/// What the watcher does once `output`'s fences are read: completes its handle with the
/// output's value and the times each device finished, or with the readbacks' error.
fn deliver<O: Computed>(output: O, completion: Arc<Completion<O::Value>>) -> Deliver {
    Box::new(move |read| match read {
        Ok(read) => {
            let means: Vec<f32> = read.iter().map(|&(mean, _)| mean).collect();
            let devices: Vec<Instant> = read.iter().map(|&(_, at)| at).collect();
            completion.complete(Ok(Completed {
                value: output.value(&means),
                at: devices.iter().copied().max().unwrap_or_else(Instant::now),
                devices,
            }));
            Some(completion as Arc<dyn Waitable>)
        }
        Err(error) => {
            completion.complete(Err(error));
            None
        }
    })
}

/// Runs the jobs in order. After the first failure, later jobs are not run: their handles
/// report [`Error::NotRun`] with that failure.
fn backend_worker<S>(mut state: S, jobs: Receiver<Job<S>>, watch: Sender<Watch>) -> S {
    let mut failed: Option<Error> = None;
    for Job { run, fail } in jobs {
        if let Some(first) = &failed {
            fail(Error::NotRun(Box::new(first.clone())));
            continue;
        }
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&mut state)));
        let item = match outcome {
            Ok(Ok(item)) => item,
            Ok(Err(error)) => {
                failed = Some(error.clone());
                fail(error);
                continue;
            }
            Err(panic) => {
                let error = Error::Panic(panic_text(&panic));
                failed = Some(error.clone());
                fail(error);
                continue;
            }
        };
        if watch.send(item).is_err() {
            break;
        }
    }
    state
}

#[cfg(test)]
mod tests;
