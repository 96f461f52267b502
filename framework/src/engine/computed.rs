//! What a unit of work returns, and how the engine tells that the device has computed it.

use burn::tensor::Tensor;

use crate::block::Block;
use crate::error::{Error, Result};

/// A unit's result. The engine reads back one scalar per **fence** (its mean), each queued
/// right behind the unit's kernels on the fence's device: the unit is done when every read
/// has come back, and its handle then gives [`Computed::value`].
///
/// - A tensor is fenced by itself, and its handle gives it back, computed.
/// - A value made on the host (a count, a flag, a network or optimizer snapshot) has no
///   fence: it is done as soon as the unit returns it.
/// - A unit that ran on several devices returns a type of its own with one fence per device,
///   so that the handle records when each device finished.
pub trait Computed: Send + 'static {
    /// What the unit's handle gives once the device is done.
    type Value: Clone + Send + 'static;

    /// The tensors whose readback marks the unit as done, one per device it ran on, in device
    /// order. Empty for a host value.
    fn fences(&self) -> Vec<Tensor<1>>;

    /// The value, given the mean of each fence as read back (in the order of
    /// [`Computed::fences`]).
    fn value(self, means: &[f32]) -> Self::Value;

    /// Run on the worker once the unit has returned, before the value leaves it: what a value
    /// whose tensors another thread will compute with needs done first. Nothing by default.
    ///
    /// # Errors
    /// A device that failed while finishing the worker's work.
    fn settle(&self) -> Result<()> {
        Ok(())
    }
}

impl<const D: usize> Computed for Tensor<D> {
    type Value = Tensor<D>;

    fn fences(&self) -> Vec<Tensor<1>> {
        let count = self.shape().num_elements();
        vec![self.clone().reshape([count])]
    }

    fn value(self, _means: &[f32]) -> Tensor<D> {
        self
    }
}

/// A network (any [`Block`]) handed back by a unit, as it stands after every earlier unit:
/// its devices have finished every kernel the worker launched before it is handed over.
///
/// The caller computes with it on its own thread (an evaluation, a file written), and on a
/// CUDA card each thread issues on a stream of its own: the worker's kernels that write the
/// network in place run on the worker's stream, and cubecl makes another stream wait for them
/// only for buffers allocated since it last waited for that stream. Waiting here leaves
/// nothing of the worker's in flight under the caller's reads.
impl<B: Block + 'static> Computed for B {
    type Value = B;

    fn fences(&self) -> Vec<Tensor<1>> {
        Vec::new()
    }

    fn value(self, _means: &[f32]) -> B {
        self
    }

    fn settle(&self) -> Result<()> {
        settle(self)
    }
}

/// Waits until every device `module` lives on has run every kernel launched so far: what a
/// unit that hands tensors of the worker's to another thread calls first (see the
/// [`Computed`] impl for a [`Block`], which does).
///
/// # Errors
/// [`Error::Device`] naming the device that failed.
pub fn settle<M: burn::module::Module>(module: &M) -> Result<()> {
    for device in module.devices() {
        device.sync().map_err(|e| Error::Device {
            device: format!("{device:?}"),
            reason: format!("finishing the work queued on it: {e:?}"),
        })?;
    }
    Ok(())
}

/// Any other host value, for a type this crate does not know: `Host(snapshot)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Host<T>(pub T);

impl<T: Clone + Send + 'static> Computed for Host<T> {
    type Value = T;

    fn fences(&self) -> Vec<Tensor<1>> {
        Vec::new()
    }

    fn value(self, _means: &[f32]) -> T {
        self.0
    }
}

macro_rules! host_values {
    ($($t:ty),*) => {$(
        impl Computed for $t {
            type Value = $t;

            fn fences(&self) -> Vec<Tensor<1>> {
                Vec::new()
            }

            fn value(self, _means: &[f32]) -> $t {
                self
            }
        }
    )*};
}

host_values!((), bool, i32, i64, u32, u64, usize, f32, f64, String);
