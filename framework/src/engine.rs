//! The frontend/backend engine: MXNet's threaded engine, for burn.
//!
//! The frontend (the caller's thread) hands each unit of work to a **backend worker** thread,
//! which owns the state (model, optimizer) and runs burn in order. `issue` returns at once with
//! a [`Handle`]: `wait()` is Gluon's `wait_to_read` on that unit's result, `is_done()` asks
//! without blocking, and [`Engine::wait_all`] is `waitall`.
//!
//! The engine's queue has **no bound of its own**: only the caller's sync policy bounds how
//! far the frontend runs ahead, so host data queued behind a busy backend really piles up.
//!
//! "Done" means the device finished the work: after running a unit, the worker starts an
//! asynchronous readback of its result (burn's `into_data_async`, polled once so that the read
//! is queued behind that unit's kernels, not behind later ones) and hands it to a **completion
//! watcher** thread, which blocks on it while the worker goes on issuing. On wgpu the read
//! finishes when the device has run everything before it; on flex and ndarray, which execute on
//! the worker's thread, it is ready at once. Completions are published in issue order.
//!
//! A unit that ran on several devices (a data-parallel step) returns one tensor per device
//! ([`Outputs`]): each is read back behind its own device's kernels, the handle records when
//! each device finished ([`Completed::devices`]), and the unit is done when all are.
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
//! assert_eq!(handles[2].wait().unwrap(), 6.0); // 1 + 2 + 3
//! engine.wait_all().unwrap();
//! assert!(handles.iter().all(|h| h.is_done()));
//! let acc = engine.finish().unwrap();
//! assert_eq!(acc.into_scalar::<f32>(), 6.0);
//! ```

use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, JoinHandle, Thread};
use std::time::Instant;

use burn::tensor::{Device, Tensor, TensorData};

use crate::error::{Error, Result};

/// A unit of work for the backend: it runs burn operations on the state and returns the
/// tensors whose readbacks mark the unit as done (a batch's loss, one per device it ran on).
pub type Work<S> = Box<dyn FnOnce(&mut S) -> Result<Outputs> + Send>;

/// What a unit returns: one tensor per device it ran on (a batch's per-example loss, or each
/// device's share of it), in device order. A single tensor converts into it.
#[derive(Debug, Clone)]
pub struct Outputs(pub Vec<Tensor<1>>);

impl From<Tensor<1>> for Outputs {
    fn from(tensor: Tensor<1>) -> Self {
        Self(vec![tensor])
    }
}

impl From<Vec<Tensor<1>>> for Outputs {
    fn from(tensors: Vec<Tensor<1>>) -> Self {
        Self(tensors)
    }
}

/// Device memory as burn's pool reports it, sampled when a unit completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolSample {
    /// Bytes handed out to live tensors.
    pub in_use: u64,
    /// Bytes the pool holds from the device.
    pub reserved: u64,
}

/// What a completed unit reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Completed {
    /// The mean of the returned tensors' values, all together (a batch's mean loss).
    pub value: f32,
    /// When the watcher saw the last device finish it.
    pub at: Instant,
    /// When each device's output was read back, in the order the unit returned them (one
    /// entry for a unit on one device).
    pub devices: Vec<Instant>,
}

#[derive(Debug, Default)]
struct Slot {
    result: Option<std::result::Result<Completed, String>>,
    /// `Some` once sampled: the device pool just after the completion (`Some(None)` on devices
    /// without a pool, and for units that failed).
    pool: Option<Option<PoolSample>>,
}

#[derive(Debug, Default)]
struct Completion {
    slot: Mutex<Slot>,
    ready: Condvar,
}

impl Completion {
    fn lock(&self) -> MutexGuard<'_, Slot> {
        // A poisoned lock only means another thread panicked while holding it; the slot itself
        // is always in a consistent state.
        self.slot
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    fn complete(&self, result: std::result::Result<Completed, String>) {
        let mut slot = self.lock();
        if result.is_err() {
            slot.pool = Some(None);
        }
        slot.result = Some(result);
        drop(slot);
        self.ready.notify_all();
    }

    fn set_pool(&self, pool: Option<PoolSample>) {
        self.lock().pool = Some(pool);
        self.ready.notify_all();
    }

    /// Blocks until `ready` holds for the slot.
    fn wait_for<T>(&self, mut ready: impl FnMut(&Slot) -> Option<T>) -> T {
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
}

/// The completion handle of one issued unit.
#[derive(Debug, Clone)]
pub struct Handle {
    index: u64,
    completion: Arc<Completion>,
}

impl Handle {
    /// The unit's position in issue order, from 0.
    pub fn index(&self) -> u64 {
        self.index
    }

    /// Gluon's `wait_to_read`: blocks until the device finished this unit, and returns its
    /// result (the batch's loss), or the error that stopped it.
    pub fn wait(&self) -> Result<f32> {
        self.wait_completed().map(|done| done.value)
    }

    /// Like [`Handle::wait`], with the completion time.
    pub fn wait_completed(&self) -> Result<Completed> {
        self.completion
            .wait_for(|slot| slot.result.clone())
            .map_err(Error::Execution)
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
    pub fn try_completed(&self) -> Option<Result<Completed>> {
        self.completion
            .lock()
            .result
            .clone()
            .map(|r| r.map_err(Error::Execution))
    }
}

struct Job<S> {
    work: Work<S>,
    completion: Arc<Completion>,
}

type Readback = Pin<Box<dyn Future<Output = std::result::Result<TensorData, String>> + Send>>;

/// One device's output of a unit: its readback, or what it read and when, once done.
enum Part {
    Pending(Readback),
    Done(std::result::Result<TensorData, String>, Instant),
}

/// A unit's readbacks, one per device, for the watcher; each was polled once by the worker.
struct Watch {
    parts: Vec<Part>,
    /// Examples per part, to weigh each part's mean.
    sizes: Vec<usize>,
    completion: Arc<Completion>,
}

/// The frontend's side of the engine. The backend state `S` lives on the worker thread until
/// [`Engine::finish`] hands it back.
pub struct Engine<S: Send + 'static> {
    jobs: Option<Sender<Job<S>>>,
    worker: Option<JoinHandle<S>>,
    watcher: Option<JoinHandle<()>>,
    sampler: Option<JoinHandle<()>>,
    next_index: std::cell::Cell<u64>,
    last: std::cell::RefCell<Option<Handle>>,
}

impl<S: Send + 'static> Engine<S> {
    /// Starts the backend worker and the completion watcher. `device`, when given, is sampled
    /// for its memory pool at each completion.
    pub fn new(state: S, device: Option<Device>) -> Self {
        let (jobs, job_rx) = mpsc::channel::<Job<S>>();
        let (watch_tx, watch_rx) = mpsc::channel::<Watch>();
        let (sample_tx, sample_rx) = mpsc::channel::<Arc<Completion>>();
        let worker = thread::Builder::new()
            .name("ember-backend".into())
            .spawn(move || backend_worker(state, job_rx, watch_tx))
            .expect("spawning the backend worker thread");
        let watcher = thread::Builder::new()
            .name("ember-watcher".into())
            .spawn(move || completion_watcher(watch_rx, sample_tx))
            .expect("spawning the completion watcher thread");
        let sampler = thread::Builder::new()
            .name("ember-pool-sampler".into())
            .spawn(move || pool_sampler(sample_rx, device))
            .expect("spawning the pool sampler thread");
        Self {
            jobs: Some(jobs),
            worker: Some(worker),
            watcher: Some(watcher),
            sampler: Some(sampler),
            next_index: std::cell::Cell::new(0),
            last: std::cell::RefCell::new(None),
        }
    }

    /// Hands a unit of work to the backend and returns at once with its handle.
    pub fn issue<R: Into<Outputs>>(
        &self,
        work: impl FnOnce(&mut S) -> Result<R> + Send + 'static,
    ) -> Handle {
        let index = self.next_index.get();
        self.next_index.set(index + 1);
        let handle = Handle {
            index,
            completion: Arc::new(Completion::default()),
        };
        let job = Job {
            work: Box::new(move |state: &mut S| work(state).map(Into::into)),
            completion: handle.completion.clone(),
        };
        let sent = self.jobs.as_ref().map(|jobs| jobs.send(job));
        if !matches!(sent, Some(Ok(()))) {
            handle
                .completion
                .complete(Err("the backend worker has stopped".to_string()));
        }
        *self.last.borrow_mut() = Some(handle.clone());
        handle
    }

    /// Number of units issued so far.
    pub fn issued(&self) -> u64 {
        self.next_index.get()
    }

    /// Gluon's `waitall`: blocks until every unit issued so far has completed. Completions are
    /// in issue order, so this waits for the last one; an earlier failure is reported here too.
    pub fn wait_all(&self) -> Result<()> {
        let last = self.last.borrow().clone();
        match last {
            Some(handle) => handle.wait().map(drop),
            None => Ok(()),
        }
    }

    /// Waits for all work, stops both threads and returns the backend state.
    pub fn finish(mut self) -> Result<S> {
        let waited = self.wait_all();
        let state = self.shutdown();
        waited.and(state)
    }

    fn shutdown(&mut self) -> Result<S> {
        self.jobs.take();
        let state = self.worker.take().map(|worker| {
            worker.join().map_err(|panic| {
                Error::Execution(format!("backend worker panicked: {}", panic_text(&panic)))
            })
        });
        if let Some(watcher) = self.watcher.take() {
            let _ = watcher.join();
        }
        if let Some(sampler) = self.sampler.take() {
            let _ = sampler.join();
        }
        state.unwrap_or_else(|| Err(Error::Execution("engine already stopped".to_string())))
    }
}

impl<S: Send + 'static> Drop for Engine<S> {
    fn drop(&mut self) {
        if self.worker.is_some() {
            let _ = self.shutdown();
        }
    }
}

pub(crate) fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".to_string())
}

/// Runs the jobs in order. After the first failure, later jobs are not run: their handles
/// report the failure.
fn backend_worker<S>(mut state: S, jobs: Receiver<Job<S>>, watch: Sender<Watch>) -> S {
    let mut failed: Option<String> = None;
    for job in jobs {
        if let Some(reason) = &failed {
            job.completion
                .complete(Err(format!("not run: an earlier unit failed: {reason}")));
            continue;
        }
        let outcome =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (job.work)(&mut state)));
        let outputs = match outcome {
            Ok(Ok(Outputs(outputs))) if !outputs.is_empty() => outputs,
            Ok(Ok(_)) => {
                let text = "the unit returned no tensor to read back".to_string();
                failed = Some(text.clone());
                job.completion.complete(Err(text));
                continue;
            }
            Ok(Err(err)) => {
                failed = Some(err.to_string());
                job.completion.complete(Err(err.to_string()));
                continue;
            }
            Err(panic) => {
                let text = format!("backend work panicked: {}", panic_text(&panic));
                failed = Some(text.clone());
                job.completion.complete(Err(text));
                continue;
            }
        };
        let sizes = outputs.iter().map(|t| t.dims()[0]).collect();
        let parts = outputs
            .into_iter()
            .map(|tensor| {
                let mut readback: Readback = Box::pin(async move {
                    tensor
                        .detach()
                        .mean()
                        .into_data_async()
                        .await
                        .map_err(|e| e.to_string())
                });
                // The first poll queues the read right behind this unit's kernels on the
                // tensor's device.
                match readback
                    .as_mut()
                    .poll(&mut Context::from_waker(Waker::noop()))
                {
                    Poll::Ready(data) => Part::Done(data, Instant::now()),
                    Poll::Pending => Part::Pending(readback),
                }
            })
            .collect();
        let item = Watch {
            parts,
            sizes,
            completion: job.completion,
        };
        if watch.send(item).is_err() {
            break;
        }
    }
    state
}

/// Publishes completions in issue order, blocking on each device readback in turn, then asks
/// the sampler for the device pool.
fn completion_watcher(items: Receiver<Watch>, sampler: Sender<Arc<Completion>>) {
    for Watch {
        parts,
        sizes,
        completion,
    } in items
    {
        let parts = block_on_all(parts);
        let several = parts.len() > 1;
        let result = parts
            .into_iter()
            .enumerate()
            .map(|(device, (data, at))| {
                data.and_then(|data| {
                    data.try_to_vec::<f32>()
                        .map_err(|e| format!("{e:?}"))
                        .and_then(|v| v.first().copied().ok_or_else(|| "empty result".to_string()))
                })
                .map(|mean| (mean, at))
                // Which device failed, where the unit ran on several.
                .map_err(|e| match several {
                    true => format!("device {device}: {e}"),
                    false => e,
                })
            })
            .collect::<Vec<_>>();
        // Every device that failed, not only the first: a device that waited on another's
        // data fails with it.
        let failures: Vec<String> = result.iter().filter_map(|r| r.clone().err()).collect();
        let result = match failures.is_empty() {
            true => Ok(result.into_iter().flatten().collect::<Vec<_>>()),
            false => Err(failures.join("; ")),
        }
        .map(|parts| {
            let devices: Vec<Instant> = parts.iter().map(|&(_, at)| at).collect();
            let value = match parts[..] {
                [(mean, _)] => mean,
                _ => {
                    let total: usize = sizes.iter().sum();
                    let sum: f64 = parts
                        .iter()
                        .zip(&sizes)
                        .map(|(&(mean, _), &n)| f64::from(mean) * n as f64)
                        .sum();
                    (sum / total.max(1) as f64) as f32
                }
            };
            Completed {
                value,
                at: devices.iter().copied().max().unwrap_or_else(Instant::now),
                devices,
            }
        });
        let failed = result.is_err();
        completion.complete(result);
        if !failed && let Err(unsent) = sampler.send(completion) {
            unsent.0.set_pool(None);
        }
    }
}

/// Samples the device pool for completed units. Requests that queue up while a sample is
/// taken share the next one.
fn pool_sampler(requests: Receiver<Arc<Completion>>, device: Option<Device>) {
    while let Ok(first) = requests.recv() {
        let mut waiting = vec![first];
        waiting.extend(requests.try_iter());
        let sample = device
            .as_ref()
            .and_then(Device::memory_pool_usage)
            .map(|usage| PoolSample {
                in_use: usage.bytes_in_use,
                reserved: usage.bytes_reserved,
            });
        for completion in waiting {
            completion.set_pool(sample);
        }
    }
}

struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Drives one future to completion on this thread, parking between polls.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        thread::park();
    }
}

/// Drives every pending readback to completion on this thread, parking between polls, and
/// notes when each finished: devices finish in their own order.
fn block_on_all(parts: Vec<Part>) -> Vec<(std::result::Result<TensorData, String>, Instant)> {
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut parts = parts;
    loop {
        for part in &mut parts {
            if let Part::Pending(readback) = part
                && let Poll::Ready(data) = readback.as_mut().poll(&mut cx)
            {
                *part = Part::Done(data, Instant::now());
            }
        }
        if parts.iter().all(|part| matches!(part, Part::Done(..))) {
            return parts
                .into_iter()
                .filter_map(|part| match part {
                    Part::Done(data, at) => Some((data, at)),
                    Part::Pending(_) => None,
                })
                .collect();
        }
        thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_unit_fails_its_handle_and_every_later_one() {
        let device = Device::flex();
        let engine = Engine::new(0u32, Some(device.clone()));
        let d = device.clone();
        let ok = engine.issue(move |_| Ok(Tensor::<1>::ones([2], &d)));
        let bad = engine.issue(|_| {
            Err::<Tensor<1>, _>(Error::InvalidValue {
                name: "test",
                value: "x".into(),
                reason: "injected".into(),
            })
        });
        let d = device.clone();
        let later = engine.issue(move |_| Ok(Tensor::<1>::ones([2], &d)));
        assert_eq!(ok.wait().unwrap(), 1.0);
        assert!(bad.wait().unwrap_err().to_string().contains("injected"));
        assert!(
            later
                .wait()
                .unwrap_err()
                .to_string()
                .contains("earlier unit failed")
        );
        assert!(engine.wait_all().is_err());
    }

    #[test]
    fn a_unit_on_several_devices_is_done_when_all_are_and_weighs_their_means() {
        let device = Device::flex();
        let engine = Engine::new((), None);
        let d = device.clone();
        let handle = engine.issue(move |_| {
            Ok(vec![
                Tensor::<1>::ones([3], &d),
                Tensor::<1>::full([1], 4.0, &d),
            ])
        });
        let done = handle.wait_completed().unwrap();
        assert_eq!(done.value, 1.75); // (1 + 1 + 1 + 4) / 4, not (1 + 4) / 2
        assert_eq!(done.devices.len(), 2);
        assert_eq!(done.at, *done.devices.iter().max().unwrap());
        let empty = engine.issue(|_| Ok(Vec::<Tensor<1>>::new()));
        assert!(empty.wait().unwrap_err().to_string().contains("no tensor"));
    }

    #[test]
    fn a_panicking_unit_is_an_error_not_a_crash() {
        let engine = Engine::new((), None);
        let h = engine.issue(|_| -> Result<Tensor<1>> { panic!("boom") });
        assert!(h.wait().unwrap_err().to_string().contains("boom"));
        assert!(engine.finish().is_err());
    }
}
