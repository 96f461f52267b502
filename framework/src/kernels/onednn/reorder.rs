//! Reorders: a copy of an array into the other [`Format`], or rounded to bf16, through oneDNN's
//! reorder primitive.

use std::sync::Arc;

use burn::backend::flex::FlexTensor;
use burn::tensor::{DType, Shape, bf16};

use super::bridge;
use super::format::Format;
use super::library::*;
use super::primitive::{Md, Primitive, Result};

/// `t` in `format`: itself, or a copy in that order.
pub fn arrange(t: &FlexTensor, format: Format) -> Result<FlexTensor> {
    if format.holds(t) {
        return Ok(t.clone());
    }
    let plain = bridge::dense(t);
    if format == Format::Plain {
        return Ok(plain);
    }
    let dims = bridge::dims(&plain);
    let reorder = Reorder::cached(format!("arrange {dims:?} {format:?}"), || {
        Ok((Format::Plain.md(&dims)?, format.md(&dims)?))
    })?;
    let mut out = bridge::Out::new(&dims);
    reorder.run(bridge::read(&plain), out.ptr())?;
    // SAFETY: the reorder wrote every element.
    Ok(unsafe { out.written_in(format) })
}

/// A plain f32 array rounded to bf16 (to nearest, ties to even, as PyTorch's casts round), for
/// the products autocast runs in bf16: a burn-flex array of dtype BF16.
pub fn to_bf16(t: &FlexTensor) -> Result<FlexTensor> {
    // The reorder reads an f32 array; a bf16 one would be read past its end.
    assert_eq!(t.dtype(), DType::F32, "to_bf16 takes f32 arrays");
    let plain = bridge::dense(t);
    let dims = bridge::dims(&plain);
    let reorder = Reorder::cached(format!("bf16 {dims:?}"), || {
        Ok((Md::plain(&dims)?, Md::plain_of(dnnl_bf16, &dims)?))
    })?;
    let mut out = FlexTensor::empty(Shape::from(dims), DType::BF16);
    let to = out.storage_mut::<bf16>().as_mut_ptr().cast::<f32>();
    reorder.run(bridge::read(&plain), to)?;
    Ok(out)
}

/// The view `t` of `dims` and `strides` (from its first element) copied into row-major order.
pub fn strided_to_plain(t: &FlexTensor, dims: &[usize], strides: &[usize]) -> Result<FlexTensor> {
    let reorder = Reorder::cached(format!("strided {dims:?} {strides:?} to plain"), || {
        Ok((Md::strided_of(dnnl_f32, dims, strides)?, Md::plain(dims)?))
    })?;
    let mut out = bridge::Out::new(dims);
    // SAFETY: the view's first element is within its storage.
    let from = unsafe { bridge::read(t).add(t.layout().start_offset()) };
    reorder.run(from, out.ptr())?;
    // SAFETY: the reorder wrote every element.
    Ok(unsafe { out.written() })
}

/// The row-major array `t` of `dims` written into a new array of as many elements, in the
/// order `strides` gives (a permutation of row-major order's).
pub fn plain_to_strided(t: &FlexTensor, dims: &[usize], strides: &[usize]) -> Result<Vec<f32>> {
    let reorder = Reorder::cached(format!("plain to strided {dims:?} {strides:?}"), || {
        Ok((Md::plain(dims)?, Md::strided_of(dnnl_f32, dims, strides)?))
    })?;
    let n = dims.iter().product();
    let mut out = Vec::with_capacity(n);
    reorder.run(bridge::read(t), out.as_mut_ptr())?;
    // SAFETY: the strides are a permutation of row-major order's: the reorder wrote all `n`.
    unsafe { out.set_len(n) };
    Ok(out)
}

/// A reorder from row-major order into another, with its two layouts.
struct Reorder {
    from: Md,
    to: Md,
    primitive: Primitive,
}

impl Reorder {
    /// The reorder between the two layouts `layouts` makes, made once per `key`.
    fn cached(key: String, layouts: impl FnOnce() -> Result<(Md, Md)>) -> Result<Arc<Reorder>> {
        bridge::cached(key, || {
            let (from, to) = layouts()?;
            let primitive = Primitive::reorder(&from, &to)?;
            Ok(Reorder {
                from,
                to,
                primitive,
            })
        })
    }

    /// `from` and `to` point to arrays of the layouts' element types.
    fn run(&self, from: *mut f32, to: *mut f32) -> Result<()> {
        self.primitive.execute(&[
            (DNNL_ARG_FROM, &self.from, from),
            (DNNL_ARG_TO, &self.to, to),
        ])
    }
}
