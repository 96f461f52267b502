//! What a layer's oneDNN passes hold between its forward and backward pass: the primitives of
//! a differentiated layer, and the arrays its forward pass read.

use burn::backend::flex::FlexTensor;

use super::super::bridge;
use super::super::primitive::{Md, Primitive};
use super::describe::Descs;
use super::params::{self, Arg, Shape};

/// The passes of a layer that is differentiated.
pub(super) struct Training {
    pub(super) d: Descs,
    pub(super) forward: Primitive,
    /// [`params::weights`]' arrays into the forward pass's layouts.
    pub(super) weights: [Arg; 2],
    pub(super) workspace: Md,
    pub(super) backward: Primitive,
    /// The same arrays into the backward pass's layouts.
    pub(super) backward_weights: [Arg; 2],
    /// The weights' gradients from the backward pass's layouts into [`params::weights`]'.
    pub(super) diff_weights: [Arg; 2],
}

/// What the forward pass reads, in burn-flex's plain arrays.
#[derive(Clone)]
pub(super) struct Arrays {
    pub(super) x: FlexTensor,
    pub(super) h0: FlexTensor,
    pub(super) c0: Option<FlexTensor>,
    /// [`params::weights`]' arrays, and [`params::bias`]'.
    pub(super) weights_layer: FlexTensor,
    pub(super) weights_iter: FlexTensor,
    pub(super) bias: FlexTensor,
}

impl Arrays {
    pub(super) fn new(s: &Shape, a: &[FlexTensor]) -> Arrays {
        let params = &a[3..];
        Arrays {
            x: bridge::dense(&a[0]),
            h0: bridge::dense(&a[1]),
            c0: (s.states() == 2).then(|| bridge::dense(&a[2])),
            weights_layer: params::weights(s, params, 0),
            weights_iter: params::weights(s, params, 1),
            bias: params::bias(s, params),
        }
    }
}
