//! A minibatch held in host memory, before it is uploaded to a device.

use burn::tensor::Device;
use ember::NdTensor;

/// Features and targets of one minibatch, row-major, in host memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// Features, as many values as `x_shape` holds, row-major.
    pub x: Vec<f32>,
    /// `[batch, features]`, or `[batch, channels, height, width]` for images: the batch size,
    /// then each example's shape.
    pub x_shape: Vec<usize>,
    /// Targets, one row per example: `y_shape[0] × y_shape[1]` values.
    pub y: Vec<f32>,
    /// `[batch, outputs]`.
    pub y_shape: [usize; 2],
}

impl Batch {
    /// Number of examples.
    pub fn len(&self) -> usize {
        self.x_shape[0]
    }

    /// Whether the batch has no example.
    pub fn is_empty(&self) -> bool {
        self.x_shape[0] == 0
    }

    /// The features on `device`, in their shape (`[batch, features]`, or `[batch, channels,
    /// height, width]` for images): the one upload of a batch's inputs.
    ///
    /// # Errors
    /// [`ember::Error::Shape`] when `x` does not hold as many values as `x_shape` says.
    pub fn x_on(&self, device: &Device) -> ember::Result<NdTensor> {
        NdTensor::from_host(&self.x, &self.x_shape, device)
    }

    /// [`Batch::x_on`] that moves the features instead of copying them (on the CPU backends
    /// the tensor keeps their memory): afterwards `x` is empty, and the targets and
    /// `x_shape` stay.
    ///
    /// # Errors
    /// As [`Batch::x_on`].
    pub fn take_x_on(&mut self, device: &Device) -> ember::Result<NdTensor> {
        NdTensor::from_host_vec(std::mem::take(&mut self.x), &self.x_shape, device)
    }

    /// The batch cut into `parts` contiguous shards, one per device, as Gluon's
    /// `split_and_load` with `even_split=False`: shard sizes differ by at most one, larger
    /// shards first, and together they hold every example once, in order.
    ///
    /// # Errors
    /// [`ember::Error::InvalidValue`] naming the batch size when it is smaller than `parts`
    /// (every device needs at least one example), or `parts` is 0.
    pub fn split(&self, parts: usize) -> ember::Result<Vec<Batch>> {
        let len = self.len();
        if parts == 0 || len < parts {
            return Err(ember::Error::InvalidValue {
                name: "batch size",
                value: len.to_string(),
                reason: format!(
                    "a batch is split across {parts} devices and each needs at least one \
                     example: use a batch size of at least {parts}"
                ),
            });
        }
        let x_row: usize = self.x_shape[1..].iter().product();
        let y_row = self.y_shape[1];
        if self.x.len() != len * x_row || self.y.len() != len * y_row {
            return Err(ember::Error::Shape {
                what: "a batch to split".to_string(),
                expected: format!("{} feature and {} target values", len * x_row, len * y_row),
                got: vec![self.x.len(), self.y.len()],
            });
        }
        let mut start = 0;
        Ok((0..parts)
            .map(|part| {
                let rows = len / parts + usize::from(part < len % parts);
                let range = start..start + rows;
                start += rows;
                let mut x_shape = self.x_shape.clone();
                x_shape[0] = rows;
                Batch {
                    x: self.x[range.start * x_row..range.end * x_row].to_vec(),
                    x_shape,
                    y: self.y[range.start * y_row..range.end * y_row].to_vec(),
                    y_shape: [rows, y_row],
                }
            })
            .collect())
    }

    /// Bytes of host memory the batch holds.
    pub fn bytes(&self) -> usize {
        (self.x.len() + self.y.len()) * std::mem::size_of::<f32>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(rows: usize) -> Batch {
        Batch {
            x: (0..rows * 3).map(|v| v as f32).collect(),
            x_shape: vec![rows, 3],
            y: (0..rows).map(|v| v as f32).collect(),
            y_shape: [rows, 1],
        }
    }

    #[test]
    fn take_x_on_uploads_what_x_on_does_and_keeps_the_targets() {
        let device = Device::flex();
        let mut taken = batch(4);
        let values = |x: NdTensor| x.flatten().into_data().try_to_vec::<f32>().unwrap();
        let copied = values(taken.x_on(&device).unwrap());
        let moved = taken.take_x_on(&device).unwrap();
        assert_eq!(moved.dims(), [4, 3]);
        assert_eq!(values(moved), copied);
        assert_eq!(copied, batch(4).x);
        assert!(taken.x.is_empty());
        let kept = batch(4);
        assert_eq!((taken.x_shape, taken.y), (kept.x_shape, kept.y));
        // A shape that does not fit the values is an error, as for `x_on`.
        let mut wrong = batch(2);
        wrong.x_shape = vec![3, 3];
        assert!(wrong.take_x_on(&device).is_err());
    }

    #[test]
    fn split_keeps_every_example_once_in_order() {
        let whole = batch(7);
        let parts = whole.split(3).unwrap();
        let sizes: Vec<usize> = parts.iter().map(Batch::len).collect();
        assert_eq!(sizes, [3, 2, 2]);
        let x: Vec<f32> = parts.iter().flat_map(|p| p.x.clone()).collect();
        let y: Vec<f32> = parts.iter().flat_map(|p| p.y.clone()).collect();
        assert_eq!((x, y), (whole.x.clone(), whole.y.clone()));
        assert_eq!(parts[1].x_shape, [2, 3]);
        assert_eq!(parts[2].y_shape, [2, 1]);
    }

    #[test]
    fn a_batch_smaller_than_the_device_count_is_an_error_naming_it() {
        let err = batch(2).split(3).unwrap_err().to_string();
        assert!(err.contains("invalid batch size 2:"), "{err}");
        assert!(err.contains("3 devices"), "{err}");
        assert!(batch(2).split(0).is_err());
    }
}
