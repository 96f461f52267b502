//! ember's recurrent layers as ONNX's `RNN`, `GRU` and `LSTM` operators, one node a layer.
//!
//! ONNX's operators take `X` as `[time, batch, input]` and give `Y` as `[time, directions,
//! batch, hidden]`; their weights are `[directions, gates · hidden, input]` with the gates in
//! ONNX's order: LSTM `i, o, f, c` (PyTorch's `i, f, g, o`), GRU `z, r, h` with
//! `linear_before_reset = 1` (PyTorch's `r, z, n`, the reset applied after the product). A
//! layer's `Y` becomes the next layer's `X` as `[time, batch, directions · hidden]`; batch
//! first (`Layout::Ntc`) is a `Transpose` on the way in and out. Dropout between layers is
//! training's only: inference has none. The states start from zeros, as `Block::forward`'s.

use burn::tensor::Tensor;

use super::export::Export;
use super::graph::{Attribute, OnnxGraph, Value};
use crate::error::{Error, Result};
use crate::layers::rnn::view::View;
use crate::{Layout, Mode, Recurrent};

impl Export for Recurrent {
    fn describe(&self, g: &mut OnnxGraph, x: Value) -> Result<Value> {
        let Some(view) = self.view() else {
            // `export` names every deferred layer before any describes itself.
            return Err(Error::DeferredInitialization {
                layers: vec![self.to_string()],
            });
        };
        let swap = |g: &mut OnnxGraph, x: &Value| {
            g.node(
                "Transpose",
                &[x],
                &[("perm", Attribute::Ints(vec![1, 0, 2]))],
            )
        };
        let mut x = match view.layout {
            Layout::Tnc => x,
            Layout::Ntc => swap(g, &x),
        };
        // Reshape's [0, 0, -1]: time and batch kept, directions and hidden side by side.
        let shape = g.integers("sides", &[3], &[0, 0, -1]);
        for layer in 0..view.layers {
            let y = layer_node(g, &view, layer, &x)?;
            let y = g.node(
                "Transpose",
                &[&y],
                &[("perm", Attribute::Ints(vec![0, 2, 1, 3]))],
            );
            x = g.node_of_rank("Reshape", &[&y, &shape], &[], 3);
        }
        Ok(match view.layout {
            Layout::Tnc => x,
            Layout::Ntc => swap(g, &x),
        })
    }
}

/// Layer `layer`'s operator on `x` (`[time, batch, input]`): `Y`, `[time, directions, batch,
/// hidden]`.
fn layer_node(g: &mut OnnxGraph, view: &View<'_>, layer: usize, x: &Value) -> Result<Value> {
    let (op, order): (&str, &[usize]) = match view.mode {
        Mode::RnnTanh | Mode::RnnRelu => ("RNN", &[0]),
        Mode::Lstm => ("LSTM", &[0, 3, 1, 2]),
        Mode::Gru => ("GRU", &[1, 0, 2]),
    };
    let cells: Vec<_> = (0..view.directions).map(|d| view.cell(layer, d)).collect();
    let gates = |t: Tensor<2>| reorder(t, order, view.hidden);
    let stacked =
        |f: &dyn Fn(usize) -> Tensor<2>| Tensor::stack::<3>((0..cells.len()).map(f).collect(), 0);
    let suffix = format!("l{layer}");
    let w = g.parameter(
        &format!("W_{suffix}"),
        stacked(&|d| gates(cells[d].weight_ih.clone())),
    )?;
    let r = g.parameter(
        &format!("R_{suffix}"),
        stacked(&|d| gates(cells[d].weight_hh.clone())),
    )?;
    let biases: Option<Vec<Tensor<1>>> = cells
        .iter()
        .map(|c| {
            let (ih, hh) = c.biases.clone()?;
            let flat = |b: Tensor<1>| gates(b.unsqueeze_dim(1)).squeeze_dim(1);
            Some(Tensor::cat(vec![flat(ih), flat(hh)], 0))
        })
        .collect();
    let b = match biases {
        Some(b) => Some(g.parameter(&format!("B_{suffix}"), Tensor::stack::<2>(b, 0))?),
        None => None,
    };
    let direction = match view.directions {
        1 => "forward",
        _ => "bidirectional",
    };
    let mut attributes = vec![
        ("hidden_size", Attribute::Int(view.hidden as i64)),
        ("direction", Attribute::String(direction.to_string())),
    ];
    match view.mode {
        Mode::Gru => attributes.push(("linear_before_reset", Attribute::Int(1))),
        Mode::RnnRelu => attributes.push((
            "activations",
            Attribute::Strings(vec!["Relu".to_string(); view.directions]),
        )),
        Mode::RnnTanh | Mode::Lstm => {}
    }
    let mut inputs = vec![x, &w, &r];
    inputs.extend(b.as_ref());
    Ok(g.node_of_rank(op, &inputs, &attributes, 4))
}

/// The rows of `t` (`[gates · hidden, ·]`) with its gate blocks in `order`.
fn reorder(t: Tensor<2>, order: &[usize], hidden: usize) -> Tensor<2> {
    let blocks: Vec<Tensor<2>> = order
        .iter()
        .map(|&g| t.clone().narrow(0, g * hidden, hidden))
        .collect();
    Tensor::cat(blocks, 0)
}
