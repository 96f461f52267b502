//! Reorders: a copy of an array into the other [`Format`], through oneDNN's reorder primitive.

use burn::backend::flex::FlexTensor;

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
    let reorder = bridge::cached(format!("arrange {dims:?} {format:?}"), || {
        let (from, to) = (Format::Plain.md(&dims)?, format.md(&dims)?);
        let primitive = Primitive::reorder(&from, &to)?;
        Ok(Reorder {
            from,
            to,
            primitive,
        })
    })?;
    let mut out = bridge::Out::new(&dims);
    reorder.run(bridge::read(&plain), out.ptr())?;
    // SAFETY: the reorder wrote every element.
    Ok(unsafe { out.written_in(format) })
}

/// A reorder from row-major order into another, with its two layouts.
struct Reorder {
    from: Md,
    to: Md,
    primitive: Primitive,
}

impl Reorder {
    fn run(&self, from: *mut f32, to: *mut f32) -> Result<()> {
        self.primitive.execute(&[
            (DNNL_ARG_FROM, &self.from, from),
            (DNNL_ARG_TO, &self.to, to),
        ])
    }
}
