//! A state the network carries from one batch to the next ([`super::Fit::carry`]): d2l's
//! sequential partitioning, where row r of batch t+1 goes on where row r of batch t stopped,
//! and the recurrent network's final state of batch t is batch t+1's initial one, detached.
//!
//! The state lives on the backend's worker with the network. Steps run there one after the
//! other in the order the frontend issued them, whatever the sync policy lets the frontend
//! run ahead: batch t+1's forward pass takes the tensors batch t's forward pass made, so on an
//! asynchronous device its kernels are queued behind theirs. No policy adds a barrier for it,
//! and none can let batch t+1 read a state batch t has not written.

use std::sync::Arc;

use crate::checkpoint::{SavedState, SavedTensor};
use burn::tensor::{Device, Tensor};
use ember::{Error, NdTensor, Result};

/// What a network carries from batch to batch: a recurrent layer's states (`Vec<Tensor<3>>`,
/// as [`ember::Recurrent::forward_state`] gives them), a cell's (`Vec<Tensor<2>>`), or one
/// tensor.
pub trait Carried: Sized + 'static {
    /// The tensors, in order.
    fn into_tensors(self) -> Vec<NdTensor>;

    /// The state again from [`Carried::into_tensors`]'s tensors (after a detach, or from a
    /// checkpoint).
    ///
    /// # Errors
    /// [`Error::Shape`] where a tensor has another rank, or the count is not this state's.
    fn from_tensors(tensors: Vec<NdTensor>) -> Result<Self>;
}

macro_rules! carried_ranks {
    ($($d:literal),*) => {$(
        impl Carried for Vec<Tensor<$d>> {
            fn into_tensors(self) -> Vec<NdTensor> {
                self.into_iter().map(NdTensor::from).collect()
            }

            fn from_tensors(tensors: Vec<NdTensor>) -> Result<Self> {
                tensors.into_iter().map(NdTensor::into_rank).collect()
            }
        }

        impl Carried for Tensor<$d> {
            fn into_tensors(self) -> Vec<NdTensor> {
                vec![self.into()]
            }

            fn from_tensors(tensors: Vec<NdTensor>) -> Result<Self> {
                let count = tensors.len();
                match <[NdTensor; 1]>::try_from(tensors) {
                    Ok([tensor]) => tensor.into_rank(),
                    Err(_) => Err(Error::Shape {
                        what: "a carried state".to_string(),
                        expected: "1 tensor".to_string(),
                        got: vec![count],
                    }),
                }
            }
        }
    )*};
}

carried_ranks!(1, 2, 3, 4, 5);

/// The network's forward pass with the state, its types erased.
pub(super) type Forward<B> = Arc<
    dyn Fn(&B, NdTensor, Option<Vec<NdTensor>>) -> Result<(NdTensor, Vec<NdTensor>)> + Send + Sync,
>;

/// Wraps a typed forward pass for [`Carry`].
pub(super) fn erase<B, S: Carried>(
    forward: impl Fn(&B, NdTensor, Option<S>) -> (NdTensor, S) + Send + Sync + 'static,
) -> Forward<B> {
    Arc::new(move |net, x, state| {
        let state = state.map(S::from_tensors).transpose()?;
        let (y, state) = forward(net, x, state);
        Ok((y, state.into_tensors()))
    })
}

/// The forward pass with the state, and the state the next batch starts from.
pub(super) struct Carry<B> {
    forward: Forward<B>,
    /// Detached, with the number of examples of the batch that made it.
    state: Option<(Vec<NdTensor>, usize)>,
}

impl<B> Carry<B> {
    pub(super) fn new(forward: Forward<B>) -> Self {
        Self {
            forward,
            state: None,
        }
    }

    /// The same forward pass, from no state (for the warm-up, which changes nothing).
    pub(super) fn fresh(&self) -> Self {
        Self::new(self.forward.clone())
    }

    /// An epoch starts from the network's initial state.
    pub(super) fn reset(&mut self) {
        self.state = None;
    }

    /// The forward pass of `net` on `x`, a batch of `examples`, from the state the last one
    /// left; keeps the state it ends in, detached, for the next.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] where the batch has another number of examples than the one
    /// before it; the network's own errors.
    pub(super) fn forward(&mut self, net: &B, x: NdTensor, examples: usize) -> Result<NdTensor> {
        let state = match self.state.take() {
            Some((_, made_by)) if made_by != examples => {
                return Err(Error::InvalidValue {
                    name: "batch for a carried state",
                    value: format!("of {examples} examples"),
                    reason: format!(
                        "the state it goes on from is the batch before's, of {made_by}: a \
                         state carried across batches needs batches of one size (sequential \
                         partitioning makes them so)"
                    ),
                });
            }
            Some((state, _)) => Some(state),
            None => None,
        };
        let (y, state) = (self.forward)(net, x, state)?;
        self.state = Some((state.into_iter().map(detach).collect(), examples));
        Ok(y)
    }

    /// The state as it stands, read back, for a checkpoint (none at an epoch's start).
    ///
    /// # Errors
    /// [`Error::Readback`] where the device fails.
    pub(super) fn saved(&self) -> Result<Option<SavedState>> {
        let Some((state, examples)) = &self.state else {
            return Ok(None);
        };
        let tensors = state
            .iter()
            .map(|t| {
                let shape = t.dims();
                let flat = t.clone().flatten();
                let values = flat.reshape([shape.iter().product::<usize>()]);
                let values = crate::metric::read_floats(values, "a carried state")?;
                Ok(SavedTensor {
                    shape,
                    values: values.into_iter().map(|v| v as f32).collect(),
                })
            })
            .collect::<Result<_>>()?;
        Ok(Some(SavedState {
            examples: *examples,
            tensors,
        }))
    }

    /// Goes on from a checkpoint's `saved` state, on `device`.
    ///
    /// # Errors
    /// [`Error::Shape`] where a tensor's values do not fill its shape.
    pub(super) fn restore(&mut self, saved: &SavedState, device: &Device) -> Result<()> {
        let tensors = saved
            .tensors
            .iter()
            .map(|t| NdTensor::from_host(&t.values, &t.shape, device))
            .collect::<Result<_>>()?;
        self.state = Some((tensors, saved.examples));
        Ok(())
    }
}

/// The same values, out of the autodiff graph: batch t+1's backward pass stops at its start.
fn detach(t: NdTensor) -> NdTensor {
    match t {
        NdTensor::R1(t) => NdTensor::R1(t.detach()),
        NdTensor::R2(t) => NdTensor::R2(t.detach()),
        NdTensor::R3(t) => NdTensor::R3(t.detach()),
        NdTensor::R4(t) => NdTensor::R4(t.detach()),
        NdTensor::R5(t) => NdTensor::R5(t.detach()),
    }
}
