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

    /// Bytes of host memory the batch holds.
    pub fn bytes(&self) -> usize {
        (self.x.len() + self.y.len()) * std::mem::size_of::<f32>()
    }
}
