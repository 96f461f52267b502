//! oneDNN's objects as Rust values: memory descriptors of plain (strided) f32 arrays, and
//! primitives, each kept with its descriptor and destroyed when dropped.

use std::ffi::c_void;

use super::library::*;

pub use super::error::Error;

/// What the oneDNN path returns: its value, or why it cannot run.
pub type Result<T> = std::result::Result<T, Error>;

/// The element type a product reads its operands in under `precision`: f32, or bf16.
pub fn operands(precision: crate::precision::Precision) -> dnnl_data_type_t {
    match precision {
        crate::precision::Precision::F32 => dnnl_f32,
        crate::precision::Precision::Bf16 => dnnl_bf16,
    }
}

/// The layout of a plain array (f32 unless said otherwise): its dimensions and the stride of
/// each, in elements.
#[derive(Clone)]
pub struct Md(pub dnnl_memory_desc_t);

impl Md {
    /// A row-major f32 array of these dimensions.
    pub fn plain(dims: &[usize]) -> Result<Md> {
        Md::plain_of(dnnl_f32, dims)
    }

    /// A row-major array of `element`s (`dnnl_f32`, `dnnl_bf16`).
    pub fn plain_of(element: dnnl_data_type_t, dims: &[usize]) -> Result<Md> {
        let mut strides = vec![1usize; dims.len()];
        for i in (0..dims.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * dims[i + 1].max(1);
        }
        Md::strided_of(element, dims, &strides)
    }

    /// An array of `element`s whose element `[i, j, …]` is at `i·strides[0] + j·strides[1] + …`.
    pub fn strided_of(element: dnnl_data_type_t, dims: &[usize], strides: &[usize]) -> Result<Md> {
        let rt = runtime()?;
        let mut md = std::mem::MaybeUninit::<dnnl_memory_desc_t>::zeroed();
        let dims = to_dims(dims);
        let strides = to_dims(strides);
        // SAFETY: `md` is a valid out-pointer, the arrays hold DNNL_MAX_NDIMS entries.
        check(
            unsafe {
                rt.api.dnnl_memory_desc_init_by_strides(
                    md.as_mut_ptr(),
                    dims.1,
                    dims.0.as_ptr().cast_mut(),
                    element,
                    strides.0.as_ptr().cast_mut(),
                )
            },
            "describing an array",
        )?;
        // SAFETY: initialized by the call above.
        Ok(Md(unsafe { md.assume_init() }))
    }

    /// Bytes of memory the array spans.
    pub fn size(&self) -> usize {
        let rt = runtime().expect("a descriptor exists only once the library is open");
        // SAFETY: `self.0` is an initialized descriptor.
        unsafe { rt.api.dnnl_memory_desc_get_size(&self.0) }
    }
}

/// The propagation kind of a forward pass: training keeps what the backward pass reads.
pub fn forward_prop(training: bool) -> dnnl_prop_kind_t {
    if training {
        dnnl_forward_training
    } else {
        dnnl_forward_inference
    }
}

/// dnnl's dimension array and its length.
pub fn to_dims(values: &[usize]) -> ([i64; DNNL_MAX_NDIMS as usize], i32) {
    let mut dims = [0i64; DNNL_MAX_NDIMS as usize];
    for (d, v) in dims.iter_mut().zip(values) {
        *d = *v as i64;
    }
    (dims, values.len() as i32)
}

/// The attributes of a primitive: ember passes each its scratch memory (oneDNN's own
/// scratchpad is per thread and sized when a primitive is made, so a primitive made on one
/// thread and run on another, as the engine's backend thread does, would overrun it), and
/// optionally a post-op.
pub struct Attr(pub(super) dnnl_primitive_attr_t);

impl Attr {
    /// No post-op.
    pub fn none() -> Result<Attr> {
        let rt = runtime()?;
        let mut attr = std::ptr::null_mut();
        // SAFETY: valid out-pointer; the attribute is destroyed by `Drop`.
        unsafe {
            check(
                rt.api.dnnl_primitive_attr_create(&mut attr),
                "creating attributes",
            )?;
            let attr = Attr(attr);
            check(
                rt.api
                    .dnnl_primitive_attr_set_scratchpad_mode(attr.0, dnnl_scratchpad_mode_user),
                "asking for a user scratchpad",
            )?;
            Ok(attr)
        }
    }

    /// An element-wise function applied to the result, in the same pass over memory.
    pub fn eltwise(alg: dnnl_alg_kind_t, alpha: f32) -> Result<Attr> {
        let rt = runtime()?;
        let mut ops = std::ptr::null_mut();
        // SAFETY: valid out-pointer; `ops` is copied into `attr` and destroyed here.
        unsafe {
            let attr = Attr::none()?;
            check(rt.api.dnnl_post_ops_create(&mut ops), "creating post-ops")?;
            let appended = check(
                rt.api
                    .dnnl_post_ops_append_eltwise(ops, 1.0, alg, alpha, 0.0),
                "appending an element-wise post-op",
            );
            let set = appended.and_then(|()| {
                check(
                    rt.api.dnnl_primitive_attr_set_post_ops(attr.0, ops),
                    "setting post-ops",
                )
            });
            rt.api.dnnl_post_ops_destroy(ops);
            set.map(|()| attr)
        }
    }
}

impl Drop for Attr {
    fn drop(&mut self) {
        if let Ok(rt) = runtime() {
            // SAFETY: created by dnnl_primitive_attr_create, destroyed once.
            unsafe { rt.api.dnnl_primitive_attr_destroy(self.0) };
        }
    }
}

/// A primitive with the descriptor it was made from (kept as the hint for its backward passes).
pub struct Primitive {
    raw: dnnl_primitive_t,
    pd: dnnl_primitive_desc_t,
    /// The scratch memory it needs on each run.
    scratchpad: Md,
    /// Made and run on the calling thread alone ([`Primitive::alone`]).
    alone: bool,
}

// oneDNN's primitives may be executed from several threads at once; each thread has its stream.
unsafe impl Send for Primitive {}
unsafe impl Sync for Primitive {}

impl Primitive {
    /// The primitive for an operation that `init` describes: `init` calls one of oneDNN's
    /// `dnnl_*_desc_init` functions (from the library's functions it is given) on the descriptor
    /// it is pointed to. `hint` is the forward primitive of a backward pass; `what` names the
    /// operation in errors ("a convolution").
    pub fn describe<D>(
        what: &str,
        attr: &Attr,
        hint: Option<&Primitive>,
        init: impl FnOnce(&Dnnl, *mut D) -> dnnl_status_t,
    ) -> Result<Primitive> {
        let rt = runtime()?;
        let mut desc = std::mem::MaybeUninit::<D>::zeroed();
        check(
            init(&rt.api, desc.as_mut_ptr()),
            &format!("describing {what}"),
        )?;
        // SAFETY: a plain C struct, zeroed and then filled in by `init`: valid either way.
        let desc = unsafe { desc.assume_init() };
        let mut pd = std::ptr::null_mut();
        // SAFETY: `desc` is an initialized operation descriptor; `pd` is a valid out-pointer.
        check(
            unsafe {
                rt.api.dnnl_primitive_desc_create(
                    &mut pd,
                    &desc as *const D as *const c_void,
                    attr.0,
                    rt.engine,
                    hint.map_or(std::ptr::null(), |h| h.pd),
                )
            },
            what,
        )?;
        Primitive::from_pd(pd, what)
    }

    /// The primitive of a descriptor just created (destroyed with it).
    pub(super) fn from_pd(pd: dnnl_primitive_desc_t, what: &str) -> Result<Primitive> {
        let rt = runtime()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: `pd` was just created; `raw` is a valid out-pointer.
        if let Err(e) = check(unsafe { rt.api.dnnl_primitive_create(&mut raw, pd) }, what) {
            unsafe { rt.api.dnnl_primitive_desc_destroy(pd) };
            return Err(e);
        }
        // SAFETY: `pd` is alive; the returned descriptor is copied.
        let scratchpad = Md(unsafe {
            *rt.api
                .dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0)
        });
        Ok(Primitive {
            raw,
            pd,
            scratchpad,
            alone: false,
        })
    }

    /// The primitive `make` makes, made and run on the calling thread alone rather than on
    /// OpenMP's team: for work too small to pay for the team's wake-up ([`super::threads`]).
    pub fn alone(make: impl FnOnce() -> Result<Primitive>) -> Result<Primitive> {
        let mut primitive = super::threads::alone(make)?;
        primitive.alone = true;
        Ok(primitive)
    }

    /// The layout the primitive chose for one of its arguments (`dnnl_query_*_md`).
    pub fn md(&self, what: dnnl_query_t) -> Md {
        let rt = runtime().expect("a primitive exists only once the library is open");
        // SAFETY: `pd` is alive; the returned pointer is valid while it is.
        let md = unsafe { rt.api.dnnl_primitive_desc_query_md(self.pd, what, 0) };
        Md(unsafe { *md })
    }

    /// Runs it on this thread's stream and waits for it; each argument is oneDNN's argument
    /// index, the layout of its memory, and a pointer to that memory.
    pub fn execute(&self, args: &[(u32, &Md, *mut f32)]) -> Result<()> {
        #[cfg(test)]
        if tests::FAIL.with(std::cell::Cell::get) {
            return Err(Error::Status {
                what: "executing (made to fail by a test)".to_string(),
                status: dnnl_runtime_error as i64,
                reason: "runtime error",
            });
        }
        thread_local! {
            static SCRATCH: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        let size = self.scratchpad.size();
        if size == 0 {
            return self.run(args);
        }
        SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            let floats = size.div_ceil(4);
            if scratch.len() < floats {
                scratch.resize(floats, 0.0);
            }
            let mut all = args.to_vec();
            all.push((DNNL_ARG_SCRATCHPAD, &self.scratchpad, scratch.as_mut_ptr()));
            self.run(&all)
        })
    }

    fn run(&self, args: &[(u32, &Md, *mut f32)]) -> Result<()> {
        if self.alone {
            super::threads::alone(|| self.run_here(args))
        } else {
            self.run_here(args)
        }
    }

    fn run_here(&self, args: &[(u32, &Md, *mut f32)]) -> Result<()> {
        let rt = runtime()?;
        let stream = stream(rt)?;
        let mut memories = Vec::with_capacity(args.len());
        let mut exec = Vec::with_capacity(args.len());
        let mut result = Ok(());
        for &(arg, md, ptr) in args {
            let mut memory = std::ptr::null_mut();
            // SAFETY: `md` is initialized and `ptr` points to `md.size()` bytes the caller owns.
            let created = check(
                unsafe {
                    rt.api
                        .dnnl_memory_create(&mut memory, &md.0, rt.engine, ptr as *mut c_void)
                },
                "wrapping an array",
            );
            if let Err(e) = created {
                result = Err(e);
                break;
            }
            memories.push(memory);
            exec.push(dnnl_exec_arg_t {
                arg: arg as i32,
                memory,
            });
        }
        if result.is_ok() {
            // SAFETY: every memory in `exec` is alive until destroyed below.
            result = check(
                unsafe {
                    rt.api.dnnl_primitive_execute(
                        self.raw,
                        stream,
                        exec.len() as i32,
                        exec.as_ptr(),
                    )
                },
                "executing",
            )
            .and_then(|()| check(unsafe { rt.api.dnnl_stream_wait(stream) }, "waiting"));
        }
        for memory in memories {
            // SAFETY: created above, destroyed once.
            unsafe { rt.api.dnnl_memory_destroy(memory) };
        }
        result
    }
}

impl Drop for Primitive {
    fn drop(&mut self) {
        if let Ok(rt) = runtime() {
            // SAFETY: created in `new`, destroyed once.
            unsafe {
                rt.api.dnnl_primitive_destroy(self.raw);
                rt.api.dnnl_primitive_desc_destroy(self.pd);
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    thread_local! {
        /// Every execution on this thread fails, as one may at run time (out of memory).
        pub static FAIL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
}
