//! From burn's tensors to burn-flex's arrays and back, under autodiff or not: the one place the
//! oneDNN path meets burn's dispatch layer.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::ops::{Backward, OpsKind};
use burn::backend::flex::FlexTensor;
use burn::backend::{Autodiff, BackendTypes, Flex};
use burn::tensor::{DType, Shape, Tensor};

use super::format::Format;
use super::primitive::{Error, Result};

/// burn's autodiff over burn-flex, as `Device::flex().autodiff()` makes it.
pub type Ad = Autodiff<Flex>;
/// A tensor of the autodiff graph over burn-flex.
pub type AdTensor = <Ad as BackendTypes>::FloatTensorPrimitive;

/// The inputs of one operation, all on burn-flex: plain arrays, or tensors of the autodiff graph.
pub enum Inputs<const N: usize> {
    /// Outside autodiff (inference, `module.valid()`).
    Plain([FlexTensor; N]),
    /// On an autodiff device (tracked or not).
    Graph([AdTensor; N]),
}

/// One input, as either kind.
pub enum Input {
    Plain(FlexTensor),
    Graph(AdTensor),
}

/// A tensor of any rank on burn-flex, in f32.
pub fn input<const D: usize>(t: &Tensor<D>) -> Option<Input> {
    if let Ok(ad) = t.clone().try_into_primitive::<Ad>() {
        return (ad.primitive().dtype() == DType::F32).then_some(Input::Graph(ad));
    }
    let flex = t.clone().try_into_primitive::<Flex>().ok()?;
    (flex.dtype() == DType::F32).then_some(Input::Plain(flex))
}

/// The bias as an input, or, without one, an untracked stand-in of `x`'s kind that is never read.
pub fn bias_or_stand_in(bias: Option<&Tensor<1>>, x: &Input) -> Option<Input> {
    match (bias, x) {
        (Some(b), _) => input(b),
        (None, Input::Plain(_)) => Some(Input::Plain(output(&[0]))),
        (None, Input::Graph(_)) => Some(Input::Graph(AdTensor::new(output(&[0])))),
    }
}

/// The same kind for every input, or `None` for a mix.
pub fn same_kind<const N: usize>(inputs: [Input; N]) -> Option<Inputs<N>> {
    if inputs.iter().all(|i| matches!(i, Input::Plain(_))) {
        Some(Inputs::Plain(inputs.map(|i| match i {
            Input::Plain(t) => t,
            Input::Graph(_) => unreachable!(),
        })))
    } else if inputs.iter().all(|i| matches!(i, Input::Graph(_))) {
        Some(Inputs::Graph(inputs.map(|i| match i {
            Input::Graph(t) => t,
            Input::Plain(_) => unreachable!(),
        })))
    } else {
        None
    }
}

/// An operation whose forward pass runs in `forward` and whose backward pass `op` holds.
/// Untracked inputs run the forward pass alone (`training` false); tracked ones record `op`
/// with the state `forward` returns (it must return one when `training`).
pub fn run<const N: usize, const D: usize, O, S>(
    op: O,
    inputs: Inputs<N>,
    forward: impl FnOnce(&[FlexTensor; N], bool) -> Result<(FlexTensor, Option<S>)>,
) -> Result<Tensor<D>>
where
    O: Backward<Flex, N, State = S>,
    S: Clone + Send + std::fmt::Debug + 'static,
{
    match inputs {
        Inputs::Plain(arrays) => {
            let (y, _) = forward(&arrays, false)?;
            Ok(Tensor::from_primitive::<Flex>(y))
        }
        Inputs::Graph(tensors) => {
            let nodes = tensors.each_ref().map(|t| t.node());
            let arrays = tensors.each_ref().map(|t| t.primitive().clone());
            match op
                .prepare::<NoCheckpointing>(nodes)
                .compute_bound()
                .stateful()
            {
                OpsKind::Tracked(prep) => {
                    let (y, state) = forward(&arrays, true)?;
                    let state = state.ok_or(Error::NoBackwardState)?;
                    Ok(Tensor::from_primitive::<Ad>(prep.finish(state, y)))
                }
                OpsKind::UnTracked(prep) => {
                    let (y, _) = forward(&arrays, false)?;
                    Ok(Tensor::from_primitive::<Ad>(prep.finish(y)))
                }
            }
        }
    }
}

/// The array in row-major order from its first element (a view is copied once).
pub fn dense(t: &FlexTensor) -> FlexTensor {
    if t.is_contiguous() && t.layout().start_offset() == 0 {
        t.clone()
    } else {
        t.to_contiguous()
    }
}

/// A new f32 array of these dimensions, for a primitive to write.
pub fn output(dims: &[usize]) -> FlexTensor {
    FlexTensor::empty(Shape::from(dims.to_vec()), DType::F32)
}

/// The pointer a primitive reads an array through: an f32 or a bf16 array (oneDNN reads it as
/// the layout passed with it says).
pub fn read(t: &FlexTensor) -> *mut f32 {
    match t.dtype() {
        DType::BF16 => t.storage::<burn::tensor::bf16>().as_ptr() as *mut f32,
        _ => t.storage::<f32>().as_ptr() as *mut f32,
    }
}

/// A new f32 array for a primitive to write, not zeroed first: every output of ember's
/// primitives is written whole.
pub struct Out {
    data: Vec<f32>,
    dims: Vec<usize>,
}

impl Out {
    pub fn new(dims: &[usize]) -> Out {
        Out {
            data: Vec::with_capacity(dims.iter().product()),
            dims: dims.to_vec(),
        }
    }

    /// The pointer the primitive writes through.
    pub fn ptr(&mut self) -> *mut f32 {
        self.data.as_mut_ptr()
    }

    /// The array, once written.
    ///
    /// # Safety
    /// A primitive has written every element through [`Out::ptr`].
    pub unsafe fn written(self) -> FlexTensor {
        // SAFETY: the caller's contract.
        unsafe { self.written_in(Format::Plain) }
    }

    /// The array, once written in `format`'s order.
    ///
    /// # Safety
    /// A primitive has written every element through [`Out::ptr`].
    pub unsafe fn written_in(mut self, format: Format) -> FlexTensor {
        let n = self.data.capacity().min(self.dims.iter().product());
        // SAFETY: the caller's contract: the first `n` elements are initialized.
        unsafe { self.data.set_len(n) };
        super::format::array(self.data, self.dims, format)
    }
}

/// The dimensions of an array.
pub fn dims(t: &FlexTensor) -> Vec<usize> {
    t.layout().shape().to_vec()
}

/// Primitives made once per configuration (shapes and options) and OpenMP width, as oneDNN's
/// own frameworks keep them; a configuration oneDNN cannot run is remembered as such. A
/// primitive splits its work and sizes its scratch for the threads there were when it was
/// made, so a thread of another width (a data-parallel replica's) gets a primitive of its own.
pub fn cached<T: Send + Sync + 'static>(
    mut key: String,
    make: impl FnOnce() -> Result<T>,
) -> Result<Arc<T>> {
    use std::fmt::Write;
    let _ = write!(key, " on {} threads", super::threads::width());
    type Entry = std::result::Result<Arc<dyn Any + Send + Sync>, Error>;
    static CACHE: Mutex<Option<HashMap<String, Entry>>> = Mutex::new(None);
    if let Some(entry) = CACHE.lock().unwrap().get_or_insert_default().get(&key) {
        return match entry {
            Ok(any) => Ok(any.clone().downcast::<T>().expect("one type per key")),
            Err(e) => Err(e.clone()),
        };
    }
    let made = make().map(Arc::new);
    let entry: Entry = match &made {
        Ok(t) => Ok(t.clone() as Arc<dyn Any + Send + Sync>),
        Err(e) => Err(e.clone()),
    };
    CACHE
        .lock()
        .unwrap()
        .get_or_insert_default()
        .insert(key, entry);
    made
}
