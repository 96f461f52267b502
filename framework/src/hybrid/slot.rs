//! A device buffer that a recorded step reads, written in place between replays.

use std::marker::PhantomData;
use std::ops::Range;

use burn::tensor::kind::Basic;
use burn::tensor::{Float, Int, Tensor};

use crate::error::{Error, Result};

/// A device buffer a recorded step reads, written in place so that the next replay reads the
/// new values: of floats (parameters, features, float targets) or integers (class labels).
/// It holds its own copy of what it was made from, and stays on the thread that made it, so
/// that its writes go to that thread's stream (a replay goes to the stream of the thread that
/// recorded it).
#[derive(Debug)]
pub struct Slot<const D: usize, K: SlotKind = Float> {
    tensor: Option<Tensor<D, K>>,
    _thread: PhantomData<*const ()>,
}

/// What a slot may hold: floats, detached from any gradient tape, or integers.
pub trait SlotKind: Basic {
    /// `t` without a gradient tape (floats), or as it is.
    fn detached<const D: usize>(t: Tensor<D, Self>) -> Tensor<D, Self>;
}

impl SlotKind for Float {
    fn detached<const D: usize>(t: Tensor<D, Self>) -> Tensor<D, Self> {
        t.detach()
    }
}

impl SlotKind for Int {
    fn detached<const D: usize>(t: Tensor<D, Self>) -> Tensor<D, Self> {
        t
    }
}

impl<const D: usize, K: SlotKind> Slot<D, K> {
    /// A slot holding a copy of `initial` (detached), in a buffer of its own.
    pub fn new(initial: Tensor<D, K>) -> Self {
        Slot {
            tensor: Some(copy(K::detached(initial))),
            _thread: PhantomData,
        }
    }

    /// The slot's tensor, for the step to read: it shares the slot's buffer, so drop it before
    /// the slot is written, and before a replay writes it. Outside a step, [`Slot::value`]
    /// gives a copy that later writes do not change.
    pub fn read(&self) -> Tensor<D, K> {
        self.held().clone()
    }

    /// A copy of the values the slot holds now.
    pub fn value(&self) -> Tensor<D, K> {
        copy(self.read())
    }

    /// The slot's shape.
    pub fn dims(&self) -> [usize; D] {
        self.held().dims()
    }

    /// The bytes the slot's buffer holds.
    pub fn bytes(&self) -> usize {
        self.dims().iter().product::<usize>() * self.held().dtype().size()
    }

    /// Writes `values` into the slot's buffer, in place.
    ///
    /// # Errors
    /// [`Error::Shape`] when `values` has another shape; [`Error::InvalidValue`] when a tensor
    /// read from the slot is still alive: the write would then go to a copy, and a recorded
    /// step would go on reading the old buffer (wrong numbers, silently).
    pub fn write(&mut self, values: Tensor<D, K>) -> Result<()> {
        let dims = self.dims();
        if values.dims() != dims {
            return Err(Error::Shape {
                what: "a slot's new values".into(),
                expected: format!("{dims:?}, the slot's"),
                got: values.dims().to_vec(),
            });
        }
        let tensor = self
            .tensor
            .take()
            .expect("a slot holds its tensor between calls");
        if !tensor.can_mut() {
            self.tensor = Some(tensor);
            return Err(Error::InvalidValue {
                name: "slot write",
                value: format!("{dims:?}"),
                reason: "a tensor read from the slot is still alive, so the write would go to \
                         a copy that a recorded step never reads: drop what `read` gave first"
                    .into(),
            });
        }
        self.tensor = Some(tensor.slice_assign(whole(dims), K::detached(values)));
        Ok(())
    }

    fn held(&self) -> &Tensor<D, K> {
        self.tensor
            .as_ref()
            .expect("a slot holds its tensor between calls")
    }
}

/// Every index of a tensor of shape `dims`.
fn whole<const D: usize>(dims: [usize; D]) -> [Range<usize>; D] {
    std::array::from_fn(|axis| 0..dims[axis])
}

/// `t`'s values, bit for bit, in a new buffer: a plain copy into an empty tensor (where an
/// arithmetic copy, `t · 1`, might flush subnormals to zero). Outside a step, it keeps what a
/// recorded step returned (whose buffer the next replay overwrites).
pub fn copy<const D: usize, K: Basic>(t: Tensor<D, K>) -> Tensor<D, K> {
    let dims = t.dims();
    Tensor::empty(dims, &t.device()).slice_assign(whole(dims), t)
}
