//! Loss targets: what a host batch's `y` becomes on a device, how it is checked against the
//! network's outputs, and what counts as a correct prediction.

use burn::tensor::{Device, Int, Tensor};
use ember::{Error, NdTensor, Result};
use ember_datasets::Batch;

/// A loss target built from a host batch's `y` on a device.
pub trait Target: Sized {
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

    /// How many of the batch's examples the network's outputs got right, on the device, where
    /// "right" means something (class labels: the largest output is the label). The loop sums
    /// it over an epoch's steps and reads it once, as `train_acc`: d2l's `train_ch3` metric,
    /// from the forward passes the steps already made.
    fn correct(_outputs: &Tensor<2>, _target: &Self) -> Option<Tensor<1, Int>> {
        None
    }
}

impl Target for Tensor<2> {
    fn upload(batch: &Batch, device: &Device) -> Result<Self> {
        NdTensor::from_host(&batch.y, &batch.y_shape, device)?.into_rank()
    }
}

impl Target for Tensor<1, Int> {
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

    fn correct(outputs: &Tensor<2>, labels: &Self) -> Option<Tensor<1, Int>> {
        let [rows, _] = outputs.dims();
        let predicted = outputs.clone().detach().argmax(1).reshape([rows]);
        Some(predicted.equal(labels.clone()).int().sum())
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

/// `sum + more` on the device, `more` where there is no sum yet.
pub(crate) fn tally(sum: Option<Tensor<1, Int>>, more: Tensor<1, Int>) -> Tensor<1, Int> {
    match sum {
        Some(sum) => sum + more,
        None => more,
    }
}

/// Reads back a count summed on the device ([`Target::correct`]'s).
///
/// # Errors
/// [`Error::Execution`] with burn's own words when the read fails.
pub(crate) fn read_count(count: Tensor<1, Int>) -> Result<i64> {
    count
        .into_data()
        .convert::<i64>()
        .try_to_vec::<i64>()
        .map_err(|e| Error::Readback {
            what: "a count".to_string(),
            reason: format!("{e:?}"),
        })?
        .first()
        .copied()
        .ok_or_else(|| Error::Readback {
            what: "a count".to_string(),
            reason: "no value".to_string(),
        })
}
