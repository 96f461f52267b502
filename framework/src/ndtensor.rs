//! `NdTensor`: a float tensor whose rank is known at run time, as Gluon's `NDArray` is.
//!
//! Blocks pass `NdTensor`s to one another, so a `Sequential` can chain a `Conv2D` (rank 4) into
//! a `Dense` (rank 2). Inside a block, [`NdTensor::rank`] turns it into burn's typed
//! `Tensor<D>`, and `.into()` turns a `Tensor<D>` back.
//!
//! ```
//! use burn::prelude::*;
//! use ember::NdTensor;
//!
//! let device = Device::flex();
//! let x = NdTensor::from_host(&[1.0, 2.0, 3.0, 4.0], &[1, 1, 2, 2], &device).unwrap();
//! assert_eq!(x.dims(), [1, 1, 2, 2]);
//! let image: Tensor<4> = x.clone().rank();
//! assert_eq!(image.dims(), [1, 1, 2, 2]);
//! assert_eq!(x.flatten().dims(), [1, 4]);
//! assert!(NdTensor::from(Tensor::<2>::ones([2, 3], &device)).into_rank::<4>().is_err());
//! ```

use burn::tensor::{Device, Gradients, Tensor, TensorData};

use crate::error::{Error, Result};

/// A float tensor of rank 1 to 5, the rank chosen at run time.
#[derive(Debug, Clone)]
pub enum NdTensor {
    /// `[n]`
    R1(Tensor<1>),
    /// `[n, features]`
    R2(Tensor<2>),
    /// `[n, channels, width]`, or `[n, steps, features]`
    R3(Tensor<3>),
    /// `[n, channels, height, width]`
    R4(Tensor<4>),
    /// `[n, channels, depth, height, width]`
    R5(Tensor<5>),
}

/// Applies `$body` to the typed tensor inside, whatever its rank, and wraps the result back.
macro_rules! nd_map {
    ($x:expr, $t:ident => $body:expr) => {
        match $x {
            $crate::NdTensor::R1($t) => $crate::NdTensor::R1($body),
            $crate::NdTensor::R2($t) => $crate::NdTensor::R2($body),
            $crate::NdTensor::R3($t) => $crate::NdTensor::R3($body),
            $crate::NdTensor::R4($t) => $crate::NdTensor::R4($body),
            $crate::NdTensor::R5($t) => $crate::NdTensor::R5($body),
        }
    };
}
pub(crate) use nd_map;

/// Evaluates `$body` on the typed tensor inside, whatever its rank.
macro_rules! nd_with {
    ($x:expr, $t:ident => $body:expr) => {
        match $x {
            $crate::NdTensor::R1($t) => $body,
            $crate::NdTensor::R2($t) => $body,
            $crate::NdTensor::R3($t) => $body,
            $crate::NdTensor::R4($t) => $body,
            $crate::NdTensor::R5($t) => $body,
        }
    };
}
pub(crate) use nd_with;

impl NdTensor {
    /// Uploads host values in row-major order with the given shape (rank 1 to 5): the one way
    /// a host batch becomes a device tensor.
    ///
    /// # Errors
    /// [`Error::Shape`] when the shape's rank is not 1 to 5 or its element count is not the
    /// number of values.
    pub fn from_host(values: &[f32], shape: &[usize], device: &Device) -> Result<Self> {
        Self::from_host_vec(values.to_vec(), shape, device)
    }

    /// [`NdTensor::from_host`] on values the caller gives up: on the CPU backends the tensor
    /// keeps their memory, with no copy.
    ///
    /// # Errors
    /// As [`NdTensor::from_host`].
    pub fn from_host_vec(values: Vec<f32>, shape: &[usize], device: &Device) -> Result<Self> {
        if shape.iter().product::<usize>() != values.len() {
            return Err(Error::Shape {
                what: format!("{} host values", values.len()),
                expected: "a shape with that many elements".to_string(),
                got: shape.to_vec(),
            });
        }
        // burn's host data takes the values' memory as it is, in its shape.
        let data = TensorData::new(values, shape.to_vec());
        Ok(match shape.len() {
            1 => Self::R1(Tensor::from_data(data, device)),
            2 => Self::R2(Tensor::from_data(data, device)),
            3 => Self::R3(Tensor::from_data(data, device)),
            4 => Self::R4(Tensor::from_data(data, device)),
            5 => Self::R5(Tensor::from_data(data, device)),
            _ => {
                return Err(Error::Shape {
                    what: "a tensor".to_string(),
                    expected: "rank 1 to 5".to_string(),
                    got: shape.to_vec(),
                });
            }
        })
    }

    /// `flat`'s values in `shape` (rank 1 to 5): a view that shares its buffer, as a recorded
    /// step reads a batch of any rank from one flat slot.
    ///
    /// # Errors
    /// [`Error::Shape`] when the shape's rank is not 1 to 5 or its element count is not
    /// `flat`'s.
    pub fn from_flat(flat: Tensor<1>, shape: &[usize]) -> Result<Self> {
        if shape.iter().product::<usize>() != flat.dims()[0] {
            return Err(Error::Shape {
                what: format!("{} values", flat.dims()[0]),
                expected: "a shape with that many elements".to_string(),
                got: shape.to_vec(),
            });
        }
        let at = |axis: usize| shape.get(axis).copied().unwrap_or(1);
        Ok(match shape.len() {
            1 => Self::R1(flat),
            2 => Self::R2(flat.reshape([at(0), at(1)])),
            3 => Self::R3(flat.reshape([at(0), at(1), at(2)])),
            4 => Self::R4(flat.reshape([at(0), at(1), at(2), at(3)])),
            5 => Self::R5(flat.reshape([at(0), at(1), at(2), at(3), at(4)])),
            _ => {
                return Err(Error::Shape {
                    what: "a tensor".to_string(),
                    expected: "rank 1 to 5".to_string(),
                    got: shape.to_vec(),
                });
            }
        })
    }

    /// Zeros of the given shape (rank 1 to 5).
    ///
    /// # Errors
    /// [`Error::Shape`] for any other rank.
    pub fn zeros(shape: &[usize], device: &Device) -> Result<Self> {
        let n = shape.iter().product();
        Self::from_host(&vec![0.0; n], shape, device)
    }

    /// The shape.
    pub fn dims(&self) -> Vec<usize> {
        nd_with!(self, t => t.dims().to_vec())
    }

    /// The rank (number of axes).
    pub fn ndim(&self) -> usize {
        nd_with!(self, t => t.dims().len())
    }

    /// The device the tensor lives on.
    pub fn device(&self) -> Device {
        nd_with!(self, t => t.device())
    }

    /// The typed tensor of rank `D`.
    ///
    /// # Errors
    /// [`Error::Shape`] naming both ranks when the tensor has another rank.
    pub fn into_rank<const D: usize>(self) -> Result<Tensor<D>> {
        let dims = self.dims();
        if dims.len() != D {
            return Err(Error::Shape {
                what: "a block's tensor".to_string(),
                expected: format!("rank {D}"),
                got: dims,
            });
        }
        Ok(nd_with!(self, t => same_rank(t)))
    }

    /// The typed tensor of rank `D`, for a block's `forward`.
    ///
    /// # Panics
    /// When the tensor has another rank: a forward pass given the wrong rank is a bug in the
    /// model. [`Block::infer_shape`](crate::Block::infer_shape) and `fit` check shapes first
    /// and report such a mismatch as an error naming the block.
    pub fn rank<const D: usize>(self) -> Tensor<D> {
        match self.into_rank() {
            Ok(t) => t,
            Err(err) => panic!("{err}"),
        }
    }

    /// The same tensor, its gradient tracked (on an autodiff device).
    pub fn require_grad(self) -> Self {
        nd_map!(self, t => t.require_grad())
    }

    /// Its gradient in `grads`, when it was tracked (Gluon's `x.grad`).
    pub fn grad(&self, grads: &Gradients) -> Option<NdTensor> {
        nd_with!(self, t => t.grad(grads).map(NdTensor::from))
    }

    /// `[batch, d1, d2, …]` → `[batch, d1·d2·…]`, as Gluon's `Flatten` and `Dense` do. A rank-1
    /// tensor becomes `[n, 1]`.
    pub fn flatten(self) -> Tensor<2> {
        let dims = self.dims();
        let batch = dims[0];
        let rest = dims[1..].iter().product::<usize>();
        nd_with!(self, t => t.reshape([batch, rest]))
    }
}

macro_rules! from_rank {
    ($($d:literal => $variant:ident),*) => {$(
        impl From<Tensor<$d>> for NdTensor {
            fn from(t: Tensor<$d>) -> Self {
                NdTensor::$variant(t)
            }
        }
    )*};
}
from_rank!(1 => R1, 2 => R2, 3 => R3, 4 => R4, 5 => R5);

/// `t`, whose rank is `D`, typed as such. On burn-flex the tensor moves over as it is; a reshape
/// to its own shape would copy a strided view (a channels-last activation of ember's CPU
/// kernels) into row-major order, forward and backward.
fn same_rank<const K: usize, const D: usize>(t: Tensor<K>) -> Tensor<D> {
    use burn::backend::{Autodiff, Flex};
    debug_assert_eq!(K, D);
    if let Ok(p) = t.clone().try_into_primitive::<Autodiff<Flex>>() {
        return Tensor::from_primitive::<Autodiff<Flex>>(p);
    }
    if let Ok(p) = t.clone().try_into_primitive::<Flex>() {
        return Tensor::from_primitive::<Flex>(p);
    }
    let dims = t.dims();
    t.reshape::<D, _>(std::array::from_fn::<usize, D, _>(|i| dims[i]))
}
