//! What a reader of a recurrent layer sees of it (ONNX export): its settings, and once made,
//! each layer's and direction's weights in PyTorch's layout.

use burn::tensor::Tensor;

use super::{Layout, Mode, Recurrent};

/// A recurrent layer's settings and weights, read-only.
pub(crate) struct View<'a> {
    pub(crate) mode: Mode,
    pub(crate) hidden: usize,
    pub(crate) layers: usize,
    pub(crate) directions: usize,
    pub(crate) layout: Layout,
    layer: &'a Recurrent,
}

/// One layer's and direction's weights: `weight_ih` `[G·H, in]`, `weight_hh` `[G·H, H]`,
/// the biases `[G·H]` (none without biases), gates in PyTorch's order.
pub(crate) struct CellWeights {
    pub(crate) weight_ih: Tensor<2>,
    pub(crate) weight_hh: Tensor<2>,
    pub(crate) biases: Option<(Tensor<1>, Tensor<1>)>,
}

impl Recurrent {
    /// The layer as a reader sees it; `None` before its weights are made.
    pub(crate) fn view(&self) -> Option<View<'_>> {
        self.weights.get()?;
        Some(View {
            mode: self.mode,
            hidden: self.hidden,
            layers: self.layers,
            directions: self.directions(),
            layout: self.layout,
            layer: self,
        })
    }
}

impl View<'_> {
    /// Layer `layer`'s weights in `direction` (1: the reverse one).
    pub(crate) fn cell(&self, layer: usize, direction: usize) -> CellWeights {
        let weights = self.layer.weights.module(self.layer);
        let cell = weights.cell(layer, direction);
        let biases = match (&cell.bias_ih, &cell.bias_hh) {
            (Some(ih), Some(hh)) => Some((ih.val(), hh.val())),
            _ => None,
        };
        CellWeights {
            weight_ih: cell.weight_ih.val(),
            weight_hh: cell.weight_hh.val(),
            biases,
        }
    }
}
