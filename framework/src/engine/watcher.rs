//! Readbacks and the threads that wait on them: the completion watcher publishes units in
//! issue order as their devices finish, and the pool sampler asks the device for its memory.
//!
//! A remote device answers within [`answer_within`] of the watcher's turning to the unit (the
//! one before it is done by then), or the unit fails with [`Error::Silent`] naming it; every
//! later unit on that device fails at once with the same error, since its server is gone.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::Instant;

use burn::tensor::{Device, Tensor, TensorData};

use super::handle::{PoolSample, Progress, Waitable};
use crate::block_on::Unpark;
use crate::device::remote::{self, answer_within};
use crate::error::{Error, Result};

type Readback = Pin<Box<dyn Future<Output = Result<TensorData>> + Send>>;

/// One fence of a unit: its readback (with the name of its device when that is remote), or
/// what it read and when, once done.
enum Part {
    Pending(Readback, Option<String>),
    Done(Result<TensorData>, Instant),
}

/// Hands a unit's fence means (or the error of its readbacks) to its completion, and returns
/// the completion for the pool sampler when the unit succeeded.
pub(super) type Deliver =
    Box<dyn FnOnce(Result<Vec<(f32, Instant)>>) -> Option<Arc<dyn Waitable>> + Send>;

/// A unit's readbacks, one per fence, for the watcher; each was polled once by the worker.
pub(super) struct Watch {
    parts: Vec<Part>,
    deliver: Deliver,
}

impl Watch {
    /// Starts reading back the mean of each fence. The first poll queues each read right
    /// behind the unit's kernels on the fence's device, not behind later units'.
    pub(super) fn start(fences: Vec<Tensor<1>>, deliver: Deliver) -> Self {
        let parts =
            fences
                .into_iter()
                .map(|fence| {
                    // Where it fails, the device is named: a remote one names its server.
                    let device = fence.device();
                    let remote = remote::name(&device);
                    let named = remote.clone().unwrap_or_else(|| format!("{device:?}"));
                    let mut readback: Readback =
                        Box::pin(async move {
                            fence.detach().mean().into_data_async().await.map_err(|e| {
                                Error::Readback {
                                    what: format!("a unit's result on {named}"),
                                    reason: e.to_string(),
                                }
                            })
                        });
                    match readback
                        .as_mut()
                        .poll(&mut Context::from_waker(Waker::noop()))
                    {
                        Poll::Ready(data) => Part::Done(data, Instant::now()),
                        Poll::Pending => Part::Pending(readback, remote),
                    }
                })
                .collect();
        Self { parts, deliver }
    }
}

/// Publishes completions in issue order, blocking on each device readback in turn, then asks
/// the sampler for the device pool (none without a sampler).
pub(super) fn completion_watcher(
    items: Receiver<Watch>,
    sampler: Option<Sender<Arc<dyn Waitable>>>,
    progress: Arc<Progress>,
) {
    // The remote devices that were silent for the whole bound.
    let mut silent = BTreeSet::new();
    for Watch { parts, deliver } in items {
        // A fence on a remote device: the engine's waits have a bound from now on.
        if parts.iter().any(|p| matches!(p, Part::Pending(_, Some(_)))) {
            progress.on_remote();
        }
        let parts = block_on_all(parts, &mut silent);
        let several = parts.len() > 1;
        let read: Vec<Result<(f32, Instant)>> = parts
            .into_iter()
            .enumerate()
            .map(|(device, (data, at))| {
                data.and_then(first_value)
                    .map(|mean| (mean, at))
                    // Which device failed, where the unit ran on several.
                    .map_err(|e| if several { e.on_device(device) } else { e })
            })
            .collect();
        // Every device that failed, not only the first: a device that waited on another's
        // data fails with it.
        let mut failures: Vec<Error> = read.iter().filter_map(|r| r.clone().err()).collect();
        let result = match failures.len() {
            0 => Ok(read.into_iter().flatten().collect()),
            1 => Err(failures.remove(0)),
            _ => Err(Error::Several(failures)),
        };
        if let Some(completion) = deliver(result) {
            match &sampler {
                Some(sampler) => {
                    if let Err(unsent) = sampler.send(completion) {
                        unsent.0.set_pool(None);
                    }
                }
                None => completion.set_pool(None),
            }
        }
    }
}

/// The one value of a read-back mean.
fn first_value(data: TensorData) -> Result<f32> {
    data.try_to_vec::<f32>()
        .map_err(|e| Error::Readback {
            what: "a unit's fence".to_string(),
            reason: format!("{e:?}"),
        })?
        .first()
        .copied()
        .ok_or_else(|| Error::Readback {
            what: "a unit's fence".to_string(),
            reason: "no value".to_string(),
        })
}

/// Samples the device pool for completed units. Requests that queue up while a sample is
/// taken share the next one.
pub(super) fn pool_sampler(requests: Receiver<Arc<dyn Waitable>>, device: Device) {
    while let Ok(first) = requests.recv() {
        let mut waiting = vec![first];
        waiting.extend(requests.try_iter());
        let sample = device.memory_pool_usage().map(|usage| PoolSample {
            in_use: usage.bytes_in_use,
            reserved: usage.bytes_reserved,
        });
        for completion in waiting {
            completion.set_pool(sample);
        }
    }
}

/// Drives every pending readback to completion on this thread, parking between polls, and
/// notes when each finished: devices finish in their own order. A remote device in `silent`,
/// or one that gives no answer within the bound, fails its readback (and joins `silent`).
fn block_on_all(
    parts: Vec<Part>,
    silent: &mut BTreeSet<String>,
) -> Vec<(Result<TensorData>, Instant)> {
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut parts = parts;
    let deadline = Instant::now() + answer_within();
    loop {
        let mut remote_pending = false;
        for part in &mut parts {
            if let Part::Pending(readback, remote) = part {
                if let Poll::Ready(data) = readback.as_mut().poll(&mut cx) {
                    *part = Part::Done(data, Instant::now());
                } else if let Some(name) = remote.as_ref() {
                    if silent.contains(name) || Instant::now() >= deadline {
                        silent.insert(name.clone());
                        let error = remote::silent(name, "reading a unit's result back");
                        *part = Part::Done(Err(error), Instant::now());
                    } else {
                        remote_pending = true;
                    }
                }
            }
        }
        if parts.iter().all(|part| matches!(part, Part::Done(..))) {
            return parts
                .into_iter()
                .filter_map(|part| match part {
                    Part::Done(data, at) => Some((data, at)),
                    Part::Pending(..) => None,
                })
                .collect();
        }
        if remote_pending {
            thread::park_timeout(deadline.saturating_duration_since(Instant::now()));
        } else {
            thread::park();
        }
    }
}
