//! PyTorch's recurrent parameters as oneDNN's primitives read them, and their gradients back.
//!
//! oneDNN's weights have the dimensions `[layers, directions, in, gates, hidden]` (`ldigo`).
//! PyTorch's `weight_ih [gates·hidden, in]` of one direction lies in memory as that array does
//! in the order `ldgoi`, for one layer and direction. So the directions' weights one after the
//! other, their gate blocks in oneDNN's order, make an array `[directions, gates, hidden, in]`
//! that oneDNN reads as `ldigo` through `ldgoi`'s strides ([`Shape::weights_md`]): the reorders
//! into the primitives' own layouts transpose it, and the gradients come back in it.
//!
//! The gate orders: the LSTM's are the same (i, f, g, o; oneDNN's c̃ is g); PyTorch's GRU has
//! r, z, n and oneDNN's linear-before-reset GRU u (z), r, o (n) ([`Shape::order`]). oneDNN reads
//! one bias `[1, directions, gates, hidden]`: PyTorch's `bias_ih + bias_hh`, except for the
//! GRU's n gate, whose two biases lie on either side of the reset: its four blocks are
//! `b_iz + b_hz`, `b_ir + b_hr`, `b_in`, `b_hn`.

use burn::backend::flex::FlexTensor;

use super::super::bridge;
use super::super::format::{self, Format};
use super::super::layout::Buffer;
use super::super::library::*;
use super::super::primitive::{Md, Primitive, Result};
use crate::kernels::dispatch::Recurrence;

/// What one layer's primitives are made for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shape {
    pub recurrence: Recurrence,
    pub steps: usize,
    pub batch: usize,
    pub input: usize,
    pub hidden: usize,
    pub directions: usize,
    pub bias: bool,
}

impl Shape {
    /// Gate blocks in each weight: 1, 4 or 3.
    pub fn gates(&self) -> usize {
        match self.recurrence {
            Recurrence::Tanh | Recurrence::Relu => 1,
            Recurrence::Lstm => 4,
            Recurrence::Gru => 3,
        }
    }

    /// Blocks in oneDNN's bias: the GRU's n gate has two.
    pub fn bias_gates(&self) -> usize {
        match self.recurrence {
            Recurrence::Gru => 4,
            _ => self.gates(),
        }
    }

    /// States carried: `h`, and the LSTM's `c`.
    pub fn states(&self) -> usize {
        match self.recurrence {
            Recurrence::Lstm => 2,
            _ => 1,
        }
    }

    /// oneDNN's gate `g` is PyTorch's block `order()[g]`.
    pub fn order(&self) -> &'static [usize] {
        match self.recurrence {
            Recurrence::Tanh | Recurrence::Relu => &[0],
            Recurrence::Lstm => &[0, 1, 2, 3],
            Recurrence::Gru => &[1, 0, 2],
        }
    }

    /// oneDNN's weights `[1, directions, columns, gates, hidden]` over an array `[directions,
    /// gates, hidden, columns]` (PyTorch's rows, gate blocks in oneDNN's order): `columns` is
    /// the input's features for `weights_layer`, `hidden` for `weights_iter`.
    pub fn weights_md(&self, columns: usize) -> Result<Md> {
        let (g, h) = (self.gates(), self.hidden);
        Md::strided_of(
            dnnl_f32,
            &[1, self.directions, columns, g, h],
            &[
                self.directions * g * h * columns,
                g * h * columns,
                1,
                h * columns,
                columns,
            ],
        )
    }

    /// oneDNN's weights' dimensions, in the order `ldigo`.
    pub fn weights_dims(&self, columns: usize) -> [usize; 5] {
        [1, self.directions, columns, self.gates(), self.hidden]
    }
}

/// The weights `which` (0: `weight_ih`, 1: `weight_hh`) of every direction, as one array
/// `[directions, gates, hidden, columns]` in oneDNN's gate order; `params` holds each
/// direction's `weight_ih, weight_hh, bias_ih, bias_hh`. One direction whose gates are in
/// oneDNN's order already is read where it lies.
pub fn weights(shape: &Shape, params: &[FlexTensor], which: usize) -> FlexTensor {
    let order = shape.order();
    let each: Vec<FlexTensor> = (0..shape.directions)
        .map(|d| bridge::dense(&params[4 * d + which]))
        .collect();
    let identity = order.iter().enumerate().all(|(g, &p)| g == p);
    if shape.directions == 1 && identity {
        return each.into_iter().next().expect("one direction");
    }
    let rows = bridge::dims(&each[0])[0];
    let columns = bridge::dims(&each[0])[1];
    let block = shape.hidden * columns;
    let mut data = Vec::with_capacity(shape.directions * rows * columns);
    for w in &each {
        let w = w.storage::<f32>();
        for &p in order {
            data.extend_from_slice(&w[p * block..(p + 1) * block]);
        }
    }
    format::array(data, vec![shape.directions * rows, columns], Format::Plain)
}

/// oneDNN's bias `[1, directions, bias gates, hidden]` from each direction's `bias_ih` and
/// `bias_hh` (zeros where one is absent).
pub fn bias(shape: &Shape, params: &[FlexTensor]) -> FlexTensor {
    let h = shape.hidden;
    let mut data = Vec::with_capacity(shape.directions * shape.bias_gates() * h);
    for d in 0..shape.directions {
        let part = |k: usize| {
            let b = bridge::dense(&params[4 * d + k]);
            let present = bridge::dims(&b)[0] > 0;
            (present, b)
        };
        let (has_ih, ih) = part(2);
        let (has_hh, hh) = part(3);
        let block = |present: bool, b: &FlexTensor, p: usize| -> Vec<f32> {
            match present {
                true => b.storage::<f32>()[p * h..(p + 1) * h].to_vec(),
                false => vec![0.0; h],
            }
        };
        for &p in shape.order() {
            let (i, hh_p) = (block(has_ih, &ih, p), block(has_hh, &hh, p));
            if shape.recurrence == Recurrence::Gru && p == 2 {
                // n: b_in here, b_hn in the fourth block, inside the reset.
                data.extend_from_slice(&i);
            } else {
                data.extend(i.iter().zip(&hh_p).map(|(a, b)| a + b));
            }
        }
        if shape.recurrence == Recurrence::Gru {
            data.extend_from_slice(&block(has_hh, &hh, 2));
        }
    }
    format::array(
        data,
        vec![1, shape.directions, shape.bias_gates(), h],
        Format::Plain,
    )
}

/// Each direction's gradient of `weight_ih` (`which` 0) or `weight_hh` (1) in PyTorch's layout
/// `[gates·hidden, columns]`, from oneDNN's in the array [`weights`] makes.
pub fn weight_grads(shape: &Shape, grad: Vec<f32>, columns: usize) -> Vec<FlexTensor> {
    let order = shape.order();
    let rows = shape.gates() * shape.hidden;
    let identity = order.iter().enumerate().all(|(g, &p)| g == p);
    if shape.directions == 1 && identity {
        return vec![format::array(grad, vec![rows, columns], Format::Plain)];
    }
    let block = shape.hidden * columns;
    (0..shape.directions)
        .map(|d| {
            let mut data = vec![0.0; rows * columns];
            for (g, &p) in order.iter().enumerate() {
                let from = (d * order.len() + g) * block;
                data[p * block..(p + 1) * block].copy_from_slice(&grad[from..from + block]);
            }
            format::array(data, vec![rows, columns], Format::Plain)
        })
        .collect()
}

/// Each direction's gradients of `bias_ih` and `bias_hh` (`[gates·hidden]` each), from
/// oneDNN's of its bias `[1, directions, bias gates, hidden]`: a sum's two terms share its
/// gradient.
pub fn bias_grads(shape: &Shape, grad: &[f32]) -> Vec<(FlexTensor, FlexTensor)> {
    let (h, gates) = (shape.hidden, shape.gates());
    let per_direction = shape.bias_gates() * h;
    (0..shape.directions)
        .map(|d| {
            let db = &grad[d * per_direction..(d + 1) * per_direction];
            let (mut ih, mut hh) = (vec![0.0; gates * h], vec![0.0; gates * h]);
            for (g, &p) in shape.order().iter().enumerate() {
                let block = &db[g * h..(g + 1) * h];
                ih[p * h..(p + 1) * h].copy_from_slice(block);
                let of_hh = match shape.recurrence == Recurrence::Gru && p == 2 {
                    true => &db[3 * h..4 * h],
                    false => block,
                };
                hh[p * h..(p + 1) * h].copy_from_slice(of_hh);
            }
            let array = |v| format::array(v, vec![gates * h], Format::Plain);
            (array(ih), array(hh))
        })
        .collect()
}

/// An array in one layout handed to a primitive in another: the reorder between them, or
/// nothing where they are the same.
pub struct Arg {
    pub from: Md,
    pub to: Md,
    pub reorder: Option<Primitive>,
}

impl Arg {
    pub fn new(from: &Md, to: &Md) -> Result<Arg> {
        let reorder = match from.same(to) {
            true => None,
            false => Some(Primitive::reorder(from, to)?),
        };
        Ok(Arg {
            from: from.clone(),
            to: to.clone(),
            reorder,
        })
    }

    /// `data` (in `from`'s layout) in `to`'s: itself, or a reordered copy.
    pub fn read(&self, data: *mut f32) -> Result<Buffer> {
        match &self.reorder {
            None => Ok(Buffer::Borrowed(data)),
            Some(reorder) => {
                // Written by the reorder before anything reads it; Rust never reads it.
                let mut copy = Vec::with_capacity(self.to.size().div_ceil(4));
                reorder.execute(&[
                    (DNNL_ARG_FROM, &self.from, data),
                    (DNNL_ARG_TO, &self.to, copy.as_mut_ptr()),
                ])?;
                Ok(Buffer::Owned(copy))
            }
        }
    }
}
