//! Loss targets: what a host batch's `y` becomes on a device, how it is checked against the
//! network's outputs, and what metrics see of it.

use burn::tensor::{Device, Int, Tensor};
use ember::hybrid::Slot;
use ember::{Error, NdTensor, Result};
use ember_datasets::Batch;

use crate::metric::Truth;

/// A loss target built from a host batch's `y` on a device.
pub trait Target: Sized + Clone + Send {
    /// Uploads the targets of `batch` to `device`.
    ///
    /// # Errors
    /// [`Error::Shape`] when the targets do not have the shape this kind of target needs.
    fn upload(batch: &Batch, device: &Device) -> Result<Self>;

    /// Checks the host targets against the width of the network's output, before the loss
    /// sees them (class labels must index an output). Needs no device read.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] naming the first target the output cannot take.
    fn check(_batch: &Batch, _outputs: usize) -> Result<()> {
        Ok(())
    }

    /// Whether the targets are class labels, for which `Fit` counts accuracy by default.
    const LABELS: bool = false;

    /// The targets as a metric takes them.
    fn truth(&self) -> Truth<'_>;

    /// The targets on `device` (a replica's, for the main device's metrics).
    #[must_use]
    fn to_device(self, device: &Device) -> Self;

    /// Several batches' targets as one, in order.
    fn cat(parts: Vec<Self>) -> Self;

    /// The device buffer a recorded step reads targets like these from
    /// ([`crate::fit::Fit::hybridize`]).
    type Slot;

    /// A slot holding a copy of these targets.
    fn slot(self) -> Self::Slot;

    /// Writes these targets into `slot`, in place.
    ///
    /// # Errors
    /// As [`Slot::write`]: another shape, or the slot still read.
    fn write_slot(self, slot: &mut Self::Slot) -> Result<()>;

    /// The targets `slot` holds, for a step to read (sharing its buffer).
    fn read_slot(slot: &Self::Slot) -> Self;

    /// The bytes `slot` holds.
    fn slot_bytes(slot: &Self::Slot) -> usize;
}

/// A target's slot is a [`Slot`] of its rank and kind.
macro_rules! slotted {
    ($rank:literal $(, $kind:ty)?) => {
        type Slot = Slot<$rank $(, $kind)?>;

        fn slot(self) -> Self::Slot {
            Slot::new(self)
        }

        fn write_slot(self, slot: &mut Self::Slot) -> Result<()> {
            slot.write(self)
        }

        fn read_slot(slot: &Self::Slot) -> Self {
            slot.read()
        }

        fn slot_bytes(slot: &Self::Slot) -> usize {
            slot.bytes()
        }
    };
}

impl Target for Tensor<2> {
    slotted!(2);

    fn upload(batch: &Batch, device: &Device) -> Result<Self> {
        NdTensor::from_host(&batch.y, &batch.y_shape, device)?.into_rank()
    }

    fn truth(&self) -> Truth<'_> {
        Truth::Values(self)
    }

    fn to_device(self, device: &Device) -> Self {
        Tensor::to_device(self, device)
    }

    fn cat(parts: Vec<Self>) -> Self {
        Tensor::cat(parts, 0)
    }
}

impl Target for Tensor<1, Int> {
    slotted!(1, Int);

    /// Class indices, one per example (`y_shape` must be `[batch, 1]`).
    fn upload(batch: &Batch, device: &Device) -> Result<Self> {
        if batch.y_shape[1] != 1 {
            return Err(Error::Shape {
                what: "class labels".to_string(),
                expected: "[batch, 1]".to_string(),
                got: batch.y_shape.to_vec(),
            });
        }
        let labels: Vec<i64> = batch.y.iter().map(|&y| y as i64).collect();
        Ok(Tensor::<1, Int>::from_ints(labels.as_slice(), device))
    }

    const LABELS: bool = true;

    fn truth(&self) -> Truth<'_> {
        Truth::Labels(self)
    }

    fn to_device(self, device: &Device) -> Self {
        Tensor::to_device(self, device)
    }

    fn cat(parts: Vec<Self>) -> Self {
        Tensor::cat(parts, 0)
    }

    /// Every label must be a class index below the network's output width.
    fn check(batch: &Batch, outputs: usize) -> Result<()> {
        match batch
            .y
            .iter()
            .enumerate()
            .find(|(_, y)| !(y.fract() == 0.0 && **y >= 0.0 && (**y as usize) < outputs))
        {
            Some((row, y)) => Err(Error::InvalidValue {
                name: "class label",
                value: y.to_string(),
                reason: format!(
                    "example {row} of the batch: the network has {outputs} outputs, so labels \
                     must be in 0..{outputs}"
                ),
            }),
            None => Ok(()),
        }
    }
}
