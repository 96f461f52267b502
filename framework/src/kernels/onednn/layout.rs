//! burn-flex's arrays and the layouts oneDNN's primitives choose (blocked channels for a
//! convolution's weights; channels last for a row-major input): a [`Slot`] per argument
//! reorders between them where they differ, and a [`Pass`] runs a primitive on burn-flex's
//! arrays through its slots.

use super::library::*;
use super::primitive::{Attr, Error, Md, Primitive, Result, to_dims};

impl Md {
    /// Dimensions whose layout the primitive chooses (`format_tag_any`): blocked channels for a
    /// convolution's weights.
    pub fn any(dims: &[usize]) -> Result<Md> {
        Md::any_of(dnnl_f32, dims)
    }

    /// The same, of `element`s (`dnnl_f32`, `dnnl_bf16`).
    pub fn any_of(element: dnnl_data_type_t, dims: &[usize]) -> Result<Md> {
        let rt = runtime()?;
        let mut md = std::mem::MaybeUninit::<dnnl_memory_desc_t>::zeroed();
        let dims = to_dims(dims);
        // SAFETY: `md` is a valid out-pointer.
        check(
            unsafe {
                rt.api.dnnl_memory_desc_init_by_tag(
                    md.as_mut_ptr(),
                    dims.1,
                    dims.0.as_ptr().cast_mut(),
                    element,
                    dnnl_format_tag_any,
                )
            },
            "describing an array",
        )?;
        Ok(Md(unsafe { md.assume_init() }))
    }

    /// Whether two descriptors describe the same layout.
    pub fn same(&self, other: &Md) -> bool {
        let rt = runtime().expect("a descriptor exists only once the library is open");
        // SAFETY: both are initialized descriptors.
        unsafe { rt.api.dnnl_memory_desc_equal(&self.0, &other.0) != 0 }
    }
}

/// One argument of a primitive: the plain layout burn-flex keeps, the layout the primitive
/// chose, and the reorders between them where they differ.
pub struct Slot {
    pub plain: Md,
    pub chosen: Md,
    to_chosen: Option<Primitive>,
    to_plain: Option<Primitive>,
}

impl Slot {
    pub fn new(plain: Md, chosen: Md) -> Result<Slot> {
        let (to_chosen, to_plain) = if plain.same(&chosen) {
            (None, None)
        } else {
            (
                Some(Primitive::reorder(&plain, &chosen)?),
                Some(Primitive::reorder(&chosen, &plain)?),
            )
        };
        Ok(Slot {
            plain,
            chosen,
            to_chosen,
            to_plain,
        })
    }

    /// The array in the chosen layout: `data` itself, or a reordered copy.
    pub fn input(&self, data: *mut f32) -> Result<Buffer> {
        match &self.to_chosen {
            None => Ok(Buffer::Borrowed(data)),
            Some(reorder) => {
                // Written by the reorder before the primitive reads it; Rust never reads it.
                let mut copy = Vec::with_capacity(self.chosen.size().div_ceil(4));
                reorder.execute(&[
                    (DNNL_ARG_FROM, &self.plain, data),
                    (DNNL_ARG_TO, &self.chosen, copy.as_mut_ptr()),
                ])?;
                Ok(Buffer::Owned(copy))
            }
        }
    }

    /// Where the primitive writes: `data` itself, or a buffer `finish` reorders into `data`.
    pub fn output(&self, data: *mut f32) -> Buffer {
        match &self.to_plain {
            None => Buffer::Borrowed(data),
            // Written by the primitive, read by the reorder in `finish`; never by Rust.
            Some(_) => Buffer::Owned(Vec::with_capacity(self.chosen.size().div_ceil(4))),
        }
    }

    /// Copies an output written in the chosen layout into `data`.
    pub fn finish(&self, mut buffer: Buffer, data: *mut f32) -> Result<()> {
        match (&self.to_plain, &mut buffer) {
            (Some(reorder), Buffer::Owned(v)) => reorder.execute(&[
                (DNNL_ARG_FROM, &self.chosen, v.as_mut_ptr()),
                (DNNL_ARG_TO, &self.plain, data),
            ]),
            _ => Ok(()),
        }
    }
}

/// An array in a primitive's layout.
pub enum Buffer {
    Borrowed(*mut f32),
    Owned(Vec<f32>),
}

impl Buffer {
    pub fn ptr(&mut self) -> *mut f32 {
        match self {
            Buffer::Borrowed(p) => *p,
            Buffer::Owned(v) => v.as_mut_ptr(),
        }
    }
}

impl Primitive {
    /// A reorder from one layout to another.
    pub fn reorder(from: &Md, to: &Md) -> Result<Primitive> {
        let rt = runtime()?;
        let attr = Attr::none()?;
        let mut pd = std::ptr::null_mut();
        // SAFETY: both descriptors are initialized; `pd` is a valid out-pointer.
        check(
            unsafe {
                rt.api.dnnl_reorder_primitive_desc_create(
                    &mut pd, &from.0, rt.engine, &to.0, rt.engine, attr.0,
                )
            },
            "creating a reorder",
        )?;
        Primitive::from_pd(pd, "reorder")
    }
}

/// A primitive with a slot per argument: it reads and writes burn-flex's plain arrays, whatever
/// layouts it chose.
pub struct Pass {
    primitive: Primitive,
    slots: Vec<(u32, Slot)>,
}

impl Pass {
    /// `args`: each argument's index, its plain layout, and the query for the layout the
    /// primitive chose (`None`: the plain one, as biases take).
    pub fn new(primitive: Primitive, args: Vec<(u32, Md, Option<dnnl_query_t>)>) -> Result<Pass> {
        let slots = args
            .into_iter()
            .map(|(arg, plain, query)| {
                let chosen = query.map_or_else(|| plain.clone(), |q| primitive.md(q));
                Ok((arg, Slot::new(plain, chosen)?))
            })
            .collect::<Result<_>>()?;
        Ok(Pass { primitive, slots })
    }

    /// Runs it on plain arrays: `inputs` are read, `outputs` written.
    pub fn run(&self, inputs: &[(u32, *mut f32)], outputs: &[(u32, *mut f32)]) -> Result<()> {
        let slot = |arg: u32| {
            self.slots
                .iter()
                .find(|(a, _)| *a == arg)
                .map(|(_, s)| s)
                .ok_or(Error::NoSlot(arg))
        };
        let mut buffers = Vec::with_capacity(inputs.len() + outputs.len());
        for &(arg, data) in inputs {
            buffers.push((arg, slot(arg)?.input(data)?));
        }
        for &(arg, data) in outputs {
            buffers.push((arg, slot(arg)?.output(data)));
        }
        let mut args = Vec::with_capacity(buffers.len());
        for (arg, buffer) in &mut buffers {
            args.push((*arg, &slot(*arg)?.chosen, buffer.ptr()));
        }
        self.primitive.execute(&args)?;
        for ((arg, buffer), &(_, data)) in buffers.into_iter().skip(inputs.len()).zip(outputs) {
            slot(arg)?.finish(buffer, data)?;
        }
        Ok(())
    }
}
