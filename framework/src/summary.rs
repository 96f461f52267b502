//! Gluon's `net.summary(x)`: each layer of a [`Sequential`] with its output shape and its
//! parameter count, nested containers entered, and the total.
//!
//! ```
//! use burn::prelude::*;
//! use ember::{Activation, Block, Dense, Init, Sequential};
//!
//! let device = Device::flex();
//! let net: Sequential = Sequential::new()
//!     .add(Dense::new(16).activation(Activation::Relu))
//!     .add(Dense::new(3))
//!     .initialize(Init::default(), &device);
//! // The example resolves deferred sizes, as Gluon's summary(x) does.
//! let (net, summary) = net.summarize(Tensor::<2>::zeros([1, 8], &device).into()).unwrap();
//! assert_eq!(summary.total, 8 * 16 + 16 + 16 * 3 + 3);
//! assert_eq!(summary.rows[1].output, vec![1, 3]);
//! print!("{summary}");
//! # let _ = net;
//! ```

use std::fmt;

use burn::module::Module;

use crate::block::Block;
use crate::error::Result;
use crate::layers::{Layer, Sequential};
use crate::ndtensor::NdTensor;

/// One layer's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryRow {
    /// Its name, as its parameters are named (`2`, `3.0`).
    pub name: String,
    /// Its kind (`Conv2D`, `Dense`, `Sequential`, or `Block` for a block of one's own).
    pub kind: &'static str,
    /// How deep it is nested: 0 for the network's own children.
    pub depth: usize,
    /// The shape of its output for the example.
    pub output: Vec<usize>,
    /// Its parameters (for a container: all of its children's).
    pub params: usize,
}

/// Every layer's row, with the input's shape and the total.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The example's shape.
    pub input: Vec<usize>,
    /// The layers, each container before its children.
    pub rows: Vec<SummaryRow>,
    /// Every parameter of the network.
    pub total: usize,
}

impl<U: Block> Sequential<U> {
    /// Gluon's `net.summary(x)`: passes `x` through each layer in turn (resolving deferred
    /// sizes, as [`Block::infer_shape`] does, which leaves BatchNorm's running statistics as
    /// they are) and records its output shape and parameters. Returns
    /// the network, resolved, and the summary.
    ///
    /// # Errors
    /// As [`Block::infer`]: an example that does not fit, naming the layer.
    pub fn summarize(self, x: NdTensor) -> Result<(Self, Summary)> {
        let input = x.dims();
        let mut rows = Vec::new();
        // The example trains nothing, as in `infer_shape`.
        let _inferring = crate::block::Inferring::enter();
        let (net, _) = rows_of(self, x, "", 0, &mut rows)?;
        let total = net.num_params();
        Ok((net, Summary { input, rows, total }))
    }
}

/// Infers `net`'s layers on `x` one by one, adding a row for each (and for each child of a
/// nested container) to `rows`; names are `prefix` + the index.
fn rows_of<U: Block>(
    net: Sequential<U>,
    mut x: NdTensor,
    prefix: &str,
    depth: usize,
    rows: &mut Vec<SummaryRow>,
) -> Result<(Sequential<U>, NdTensor)> {
    let mut resolved = Sequential::new();
    for (index, layer) in net.into_layers().into_iter().enumerate() {
        let name = format!("{prefix}{index}");
        let at = rows.len();
        let (layer, y) = match layer {
            Layer::Sequential(inner) => {
                rows.push(SummaryRow {
                    name: name.clone(),
                    kind: "Sequential",
                    depth,
                    output: Vec::new(),
                    params: 0,
                });
                let (inner, y) = rows_of(inner, x, &format!("{name}."), depth + 1, rows)
                    .map_err(|e| e.at_child(index))?;
                (Layer::Sequential(inner), y)
            }
            layer => {
                let kind = layer.kind();
                rows.push(SummaryRow {
                    name,
                    kind,
                    depth,
                    output: Vec::new(),
                    params: 0,
                });
                layer.infer(x).map_err(|e| e.at_child(index))?
            }
        };
        rows[at].output = y.dims();
        rows[at].params = layer.num_params();
        resolved = resolved.add(layer);
        x = y;
    }
    Ok((resolved, x))
}

/// Gluon's table: the layers, their output shapes and parameters, and the total.
impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shape = |dims: &[usize]| {
            let dims: Vec<String> = dims.iter().map(ToString::to_string).collect();
            format!("[{}]", dims.join(", "))
        };
        let rule = "-".repeat(64);
        writeln!(f, "{rule}")?;
        writeln!(
            f,
            "{:<28}{:>24}{:>12}",
            "Layer (type)", "Output shape", "Param #"
        )?;
        writeln!(f, "{}", "=".repeat(64))?;
        writeln!(f, "{:<28}{:>24}{:>12}", "input", shape(&self.input), 0)?;
        for row in &self.rows {
            let name = format!("{}{} ({})", "  ".repeat(row.depth), row.name, row.kind);
            writeln!(
                f,
                "{name:<28}{:>24}{:>12}",
                shape(&row.output),
                thousands(row.params)
            )?;
        }
        writeln!(f, "{}", "=".repeat(64))?;
        writeln!(f, "Parameters: {}", thousands(self.total))?;
        writeln!(f, "{rule}")
    }
}

/// `61706` as `61,706`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::thousands;

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(61706), "61,706");
        assert_eq!(thousands(1234567), "1,234,567");
    }
}
