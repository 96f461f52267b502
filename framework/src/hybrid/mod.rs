//! Gluon's `hybridize()` for a step of one's own: the step's launches recorded once as a graph
//! (burn's [`capture`]) and replayed for every batch, so that the host pays for them once.
//!
//! A replay re-runs the recorded launches, not the Rust code that issued them: every launch
//! reads and writes the buffers it read and wrote while it was recorded, and every scalar it
//! was given (a learning rate passed as a number, Adam's bias correction) stays what it was
//! then. So what changes between replays lives in [`Slot`]s, device buffers written in place:
//! - the batch: [`Slot::write`] before each replay;
//! - the parameters and the optimizer's state: the step writes their new values into their
//!   slots, so the next replay reads them;
//! - a value that changes per step (a scheduled learning rate, a bias correction): a slot of
//!   one element the host writes before the replay, multiplied in as a tensor.
//!
//! Where the device has graphs (a CUDA graph on cuda, cubecl's recorded dispatches on wgpu:
//! [`crate::Capabilities::graphs`]), [`Hybrid::run`] replays them; elsewhere (burn-flex,
//! ndarray) it runs the step again, so the same code runs everywhere. The tests replay on wgpu
//! (lavapipe); cuda's graphs are burn's and cubecl's, not yet run by ember on a card.
//!
//! ```
//! use std::{cell::RefCell, rc::Rc};
//! use burn::prelude::*;
//! use ember::hybrid::{Hybrid, Slot};
//!
//! let device = Device::flex();
//! let w = Rc::new(RefCell::new(Slot::new(Tensor::<2>::ones([3, 1], &device))));
//! let x = Rc::new(RefCell::new(Slot::new(Tensor::<2>::zeros([4, 3], &device))));
//! let (ws, xs) = (w.clone(), x.clone());
//! // One SGD step of a linear model on whatever batch `x` holds.
//! let mut step = Hybrid::capture(&device, move || {
//!     let wa = Tensor::<2>::from_inner(ws.borrow().read()).require_grad();
//!     let loss = Tensor::<2>::from_inner(xs.borrow().read()).matmul(wa.clone()).mean();
//!     let g = wa.grad(&loss.backward()).unwrap();
//!     let new = ws.borrow().read() - g * 0.1;
//!     drop(wa);
//!     ws.borrow_mut().write(new).unwrap();
//! });
//! // Capturing ran the step four times: set the parameters, then train.
//! w.borrow_mut().write(Tensor::ones([3, 1], &device)).unwrap();
//! for batch in 0..3 {
//!     x.borrow_mut().write(Tensor::full([4, 3], batch as f32, &device)).unwrap();
//!     // SAFETY: nothing read from the slots outlives a run, and the step's slots stay.
//!     unsafe { step.run() };
//! }
//! assert!(!step.is_graph()); // burn-flex has no graphs: the step ran again each time
//! ```

mod params;
mod slot;
mod update;

pub use params::ParamSlots;
pub use slot::{Slot, SlotKind, copy};
pub use update::Update;

use std::marker::PhantomData;

use burn::tensor::{Device, Graph, capture};

/// How many times [`Hybrid::capture`] runs the step: burn's three warm-up runs, which fill the
/// device's memory pools so that the recording allocates nothing, and the recording itself.
pub const CAPTURE_RUNS: usize = 4;

/// A step recorded as a graph of launches where the device has graphs, and run again
/// elsewhere. It stays on the thread that captured it, as its slots do.
pub struct Hybrid<T, F: FnMut() -> T> {
    graph: Graph<T, F>,
    _thread: PhantomData<*const ()>,
}

impl<T, F: FnMut() -> T + 'static> Hybrid<T, F> {
    /// Records `step` on `device`: runs it [`CAPTURE_RUNS`] times (so its writes to slots
    /// happen that often: write the state it starts from afterwards), the last under the
    /// device's recording. An autodiff device's launches are recorded on its inner device:
    /// burn's autodiff declares graphs unsupported because a replay does not record a tape,
    /// but the backward pass's launches, issued while the step runs, are recorded as any
    /// other. `step` owns what it reads (`'static`), so everything the graph touches lives as
    /// long as it does.
    pub fn capture(device: &Device, step: F) -> Self {
        let device = device.clone().inner();
        Hybrid {
            graph: capture(&device, step),
            _thread: PhantomData,
        }
    }

    /// Whether a run replays the recorded launches (cuda, wgpu) rather than the step's code.
    pub fn is_graph(&self) -> bool {
        self.graph.is_hardware()
    }

    /// One step: the recorded launches replayed, or the step run again. Its output is, on a
    /// replay, the recording's tensors, holding this replay's values.
    ///
    /// # Safety
    /// burn's contract for a replay ([`Graph::replay`]), which a replay's writes in place make
    /// the caller's:
    /// - every tensor the step touched is alive: the slots it reads stay in place (a slot
    ///   replaced by another is not read by a replay, which goes on with the old buffer);
    /// - no tensor read from a slot or from an earlier output is held across the run: the
    ///   replay overwrites their buffers, so their values would change under their holder
    ///   (copy them first: [`Slot::value`]);
    /// - nothing on another thread uses those tensors while the run is queued.
    ///
    /// # Panics
    /// When the device fails to launch a recorded graph (burn's `replay` expects it to).
    pub unsafe fn run(&mut self) -> &T {
        // SAFETY: the caller's, above.
        unsafe { self.graph.replay() }
    }

    /// What the last run returned.
    pub fn output(&self) -> &T {
        self.graph.output()
    }
}
