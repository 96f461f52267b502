//! The backend's recorded step ([`crate::fit::Fit::hybridize`]): the network's parameters and
//! the optimizer's state in slots ([`ParamSlots`], [`Update`]), the batch's features (flat) and
//! targets in slots of the first batch's shape, and the step recorded once on them
//! ([`Hybrid`]). A batch of that shape is written into the slots and the recording run; a batch
//! of another shape runs the same step on the same parameter and optimizer slots, eagerly. The
//! network the rest of the loop reads (evaluations, the result, a rescue) is copied out of the
//! slots when asked for.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::thread::ThreadId;

use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor};
use ember::hybrid::{self, Hybrid, ParamSlots, Update};
use ember::{Block, Error, Loss, NdTensor, Optimizer, Result};
use ember_datasets::Batch;

use crate::target::Target;

/// A step's per-example loss and outputs (detached).
type Out = (Tensor<1>, Tensor<2>);

/// A step's outputs and targets, for the training metrics.
type Metered<T> = (Tensor<2>, T);

/// The recording: it returns the step's loss and outputs, or `None` where the step failed (the
/// error waits in [`Slots::error`]).
type Recording = Hybrid<Option<Out>, Box<dyn FnMut() -> Option<Out>>>;

/// What the recorded step reads and writes.
struct Slots<T: Target> {
    params: ParamSlots,
    update: Update,
    /// The features, flat (a view gives them the batch's shape).
    x: hybrid::Slot<1>,
    y: T::Slot,
    /// The first error of a step run inside the recording.
    error: Option<Error>,
}

/// What a recording holds on its device for the run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(in crate::fit) struct Holds {
    /// Its slots' bytes: the parameters, the running statistics, the update's state and
    /// numbers, the batch's features and targets.
    pub slots: usize,
    /// What the device's memory pool grew by while the step was recorded and its slots set
    /// (wgpu, cuda; `None` on flex, which has no pool): the slots, the buffers a graph keeps
    /// for its replays, and whatever else the process allocated or freed on the device
    /// meanwhile (the pool is the device's, shared by every thread), so a bound, not a count.
    pub pool: Option<u64>,
}

impl Holds {
    /// The MB the recording's slots hold.
    pub fn mb(&self) -> f64 {
        crate::memory::mb(self.slots as f64)
    }
}

/// The recorded step and what it runs on.
pub(super) struct Recorded<B, L: Loss>
where
    L::Target: Target,
{
    slots: Rc<RefCell<Slots<L::Target>>>,
    recording: Recording,
    /// The network's structure: its parameters are views of the slots during a step.
    template: B,
    loss: Arc<L>,
    device: Device,
    /// The shapes the recording was made for: the features', the targets'.
    shapes: (Vec<usize>, [usize; 2]),
    /// The steps that ran the recording, and those of batches of another shape.
    pub(super) counts: (usize, usize),
    /// What the recording holds on the device.
    pub(super) holds: Holds,
    /// The network's outputs per example, for [`Target::check`].
    outputs: usize,
    /// The worker thread: slots and recordings belong to the thread that made them (its
    /// stream), so [`Recorded::on_worker`] refuses any other.
    thread: ThreadId,
}

// SAFETY: a `Recorded` is made on the engine's worker, and its steps run only there
// (`Recorded::on_worker`). Its `Rc`s are shared only between its own fields, so moving the
// whole value to another thread leaves no reference behind on the first. That happens to a
// failed run's backend, after the worker stopped and its work finished (`Engine::salvage`):
// the slots are then read (a rescue) and dropped there, with no thread left to race.
unsafe impl<B: Send, L: Loss + Send + Sync> Send for Recorded<B, L> where L::Target: Target {}

impl<B: Block + 'static, L: Loss + 'static> Recorded<B, L>
where
    L::Target: Target,
{
    /// Records `net`'s training step under `optimizer` on `batch`'s shape, on `device`, or
    /// says why it cannot be recorded. The recording's own runs are undone: the slots hold
    /// `net`'s parameters and no optimizer state afterwards.
    pub(super) fn record(
        net: &B,
        optimizer: &Optimizer,
        loss: Arc<L>,
        batch: &Batch,
        device: &Device,
    ) -> std::result::Result<Self, String> {
        // What a refusal names and why, without the library's framing of it.
        let text = |e: Error| match e {
            Error::InvalidValue { value, reason, .. } => format!("{value}: {reason}"),
            other => other.to_string(),
        };
        let pool_before = pool_in_use(device);
        let params = ParamSlots::new(net).map_err(text)?;
        let mut update = Update::new(optimizer, &params, device).map_err(text)?;
        update.prepare(optimizer.learning_rate()).map_err(text)?;
        let x = flat(batch, device).map_err(text)?;
        let y = L::Target::upload(batch, device).map_err(text)?;
        let slots = Rc::new(RefCell::new(Slots {
            params,
            update,
            x: hybrid::Slot::new(x),
            y: y.slot(),
            error: None,
        }));
        let (rows, x_shape) = (batch.len(), batch.x_shape.clone());
        let (s, template, l) = (slots.clone(), net.clone(), loss.clone());
        let shape = x_shape.clone();
        let step: Box<dyn FnMut() -> Option<Out>> = Box::new(move || {
            let s = &mut *s.borrow_mut();
            let x = NdTensor::from_flat(s.x.read(), &shape);
            let y = L::Target::read_slot(&s.y);
            let out =
                x.and_then(|x| train(&template, &*l, &mut s.params, &mut s.update, x, y, rows));
            out.map_err(|e| s.error.get_or_insert(e)).ok()
        });
        let masks = ember::random::masks_drawn();
        let recording = Hybrid::capture(device, step);
        if ember::random::masks_drawn() != masks {
            return Err("Dropout: a replay would repeat the mask it drew while recording".into());
        }
        let (outputs, slot_bytes) = {
            let s = &mut *slots.borrow_mut();
            if let Some(error) = s.error.take() {
                return Err(text(error));
            }
            // The recording's runs trained: start again from the network.
            s.params.load(net).map_err(text)?;
            s.update.restart().map_err(text)?;
            let outputs = recording
                .output()
                .as_ref()
                .map_or(0, |(_, out)| out.dims()[1]);
            let bytes =
                s.params.bytes() + s.update.bytes() + s.x.bytes() + L::Target::slot_bytes(&s.y);
            (outputs, bytes)
        };
        let pool_after = pool_in_use(device);
        let holds = Holds {
            slots: slot_bytes,
            pool: pool_after
                .zip(pool_before)
                .map(|(after, before)| after.saturating_sub(before)),
        };
        Ok(Recorded {
            slots,
            recording,
            template: net.clone(),
            loss,
            device: device.clone(),
            shapes: (x_shape, batch.y_shape),
            counts: (0, 0),
            holds,
            outputs,
            thread: std::thread::current().id(),
        })
    }

    /// Whether a run replays a graph (wgpu, cuda) rather than the step's code (flex).
    pub(super) fn is_graph(&self) -> bool {
        self.recording.is_graph()
    }

    /// Refuses a thread other than the one that recorded the step.
    fn on_worker(&self) -> Result<()> {
        if std::thread::current().id() == self.thread {
            return Ok(());
        }
        Err(Error::InvalidValue {
            name: "thread for a recorded step",
            value: format!("{:?}", std::thread::current().id()),
            reason: "a recorded step runs on the thread that recorded it".into(),
        })
    }

    /// One step on `batch` at `rate`: its per-example loss and, where `metered`, its outputs
    /// (copies of their own), with its targets.
    pub(super) fn step(
        &mut self,
        batch: &Batch,
        rate: f64,
        metered: bool,
    ) -> Result<(Tensor<1>, Option<Metered<L::Target>>)> {
        self.on_worker()?;
        L::Target::check(batch, self.outputs)?;
        let y = L::Target::upload(batch, &self.device)?;
        let mut s = self.slots.borrow_mut();
        s.update.prepare(rate)?;
        if (&batch.x_shape, batch.y_shape) != (&self.shapes.0, self.shapes.1) {
            self.counts.1 += 1;
            let x = batch.x_on(&self.device)?;
            let s = &mut *s;
            let (l, out) = train(
                &self.template,
                &*self.loss,
                &mut s.params,
                &mut s.update,
                x,
                y.clone(),
                batch.len(),
            )?;
            return Ok((l, metered.then_some((out, y))));
        }
        self.counts.0 += 1;
        s.x.write(flat(batch, &self.device)?)?;
        y.clone().write_slot(&mut s.y)?;
        drop(s);
        // SAFETY: the slots stay in place for the recording's life; what a run returns is
        // copied before the next one, and nothing read from a slot is held across it.
        let out = unsafe { self.recording.run() };
        let (l, out) = match out {
            Some((l, out)) => (
                hybrid::copy(l.clone()),
                metered.then(|| hybrid::copy(out.clone())),
            ),
            None => {
                let error = self.slots.borrow_mut().error.take();
                return Err(error.unwrap_or_else(|| Error::InvalidValue {
                    name: "recorded step",
                    value: "no output".into(),
                    reason: "the step failed while it was recorded".into(),
                }));
            }
        };
        Ok((l, out.map(|out| (out, y))))
    }

    /// `net` (the network the recording was made from, or one of its structure) with the
    /// parameters the slots hold now, copied. On the worker; or on another thread once the
    /// worker's work is done (a failed run's backend, which `Engine::salvage` waited for), so
    /// that a rescue gets the network the last step left.
    pub(super) fn trained(&self, net: B) -> Result<B> {
        self.slots.borrow().params.copied_net(net)
    }
}

/// The bytes in use in `device`'s memory pool (`None` without one), once its queued work, frees
/// included, is done.
fn pool_in_use(device: &Device) -> Option<u64> {
    let usage = device.memory_pool_usage()?;
    match device.sync() {
        Ok(()) => device.memory_pool_usage().map(|u| u.bytes_in_use),
        Err(_) => Some(usage.bytes_in_use),
    }
}

/// The batch's features as one flat tensor on `device`.
fn flat(batch: &Batch, device: &Device) -> Result<Tensor<1>> {
    NdTensor::from_host(&batch.x, &[batch.x.len()], device)?.into_rank()
}

/// The step itself, inside the recording and outside it: forward from the slots' parameters,
/// the per-example loss, backward, and the update and the running statistics written into the
/// slots.
fn train<B: Block, L: Loss>(
    template: &B,
    loss: &L,
    params: &mut ParamSlots,
    update: &mut Update,
    x: NdTensor,
    y: L::Target,
    rows: usize,
) -> Result<Out> {
    let net = params.net(template.clone())?;
    let pred: Tensor<2> = net.forward(x).into_rank()?;
    let out = pred.clone().detach();
    let l = loss.forward(pred, y)?;
    let grads = GradientsParams::from_grads(l.backward(), &net);
    let grads = params.gradients(&net, &grads)?;
    params.write_running(net)?;
    let new = update.apply(params.values(), grads, rows)?;
    params.write(new)?;
    Ok((l.detach(), out))
}
