//! The two orders in which ember's oneDNN layers keep an activation `[batch, channels,
//! spatial…]` in memory: burn-flex's row-major order, and channels last (NHWC), which oneDNN's
//! convolutions choose for few channels. A layer writes its output in the order it computed it
//! in, as a strided burn-flex view, and the next oneDNN layer reads it as it is: a chain of
//! convolutions, BatchNorm, activations and pooling runs without reordering between layers.
//! burn's own operations read such a view as they read any transposed tensor.

use burn::backend::flex::{FlexTensor, Layout};
use burn::tensor::Shape;

use super::library::{dnnl_data_type_t, dnnl_f32};
use super::primitive::{Md, Result};

/// An activation's order in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Row-major: burn-flex's contiguous arrays.
    Plain,
    /// Batch, then the spatial axes, then the channels innermost.
    ChannelsLast,
}

impl Format {
    /// The stride of each dimension, in elements.
    pub fn strides(self, dims: &[usize]) -> Vec<usize> {
        let mut order: Vec<usize> = (0..dims.len()).collect();
        if self == Format::ChannelsLast && dims.len() > 2 {
            order.remove(1);
            order.push(1);
        }
        let mut strides = vec![0; dims.len()];
        let mut size = 1;
        for &axis in order.iter().rev() {
            strides[axis] = size;
            size *= dims[axis].max(1);
        }
        strides
    }

    /// oneDNN's descriptor of an f32 array of these dimensions in this order.
    pub fn md(self, dims: &[usize]) -> Result<Md> {
        self.md_of(dnnl_f32, dims)
    }

    /// The same, of `element`s (`dnnl_f32`, `dnnl_bf16`).
    pub fn md_of(self, element: dnnl_data_type_t, dims: &[usize]) -> Result<Md> {
        Md::strided_of(element, dims, &self.strides(dims))
    }

    /// Whether `t`'s elements lie in this order from the start of its storage (the stride of an
    /// axis of size 1 does not matter).
    pub fn holds(self, t: &FlexTensor) -> bool {
        let layout = t.layout();
        let dims = layout.shape().to_vec();
        layout.start_offset() == 0
            && dims
                .iter()
                .zip(layout.strides())
                .zip(self.strides(&dims))
                .all(|((&d, &s), e)| d == 1 || s == e as isize)
    }

    /// The order `t` is in, where it is one of the two.
    pub fn of(t: &FlexTensor) -> Option<Format> {
        [Format::Plain, Format::ChannelsLast]
            .into_iter()
            .find(|f| f.holds(t))
    }
}

/// An array of `dims` in `format` over `data` (every element written).
pub fn array(data: Vec<f32>, dims: Vec<usize>, format: Format) -> FlexTensor {
    let strides = format.strides(&dims).iter().map(|&s| s as isize).collect();
    FlexTensor::new(
        burn::tensor::Bytes::from_elems(data),
        Layout::new(Shape::from(dims), strides, 0),
        burn::tensor::DType::F32,
    )
}
