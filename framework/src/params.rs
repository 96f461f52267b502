//! The parameters of a block as Gluon's `collect_params` lists them: structural names
//! (`0.weight`, `2.0.bias`) and shapes in PyTorch's layout, the one source of both for
//! [`crate::io::safetensors`], ONNX export and the summary.

use std::fmt;

use burn::module::{Module, ModuleVisitor};
use burn::store::BurnToPyTorchAdapter;
use burn::store::ModuleSnapshot;

/// One parameter as [`Block::collect_params`](crate::Block::collect_params) reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamInfo {
    /// Structural name: `0.weight`, `2.0.bias`, `fc.weight`.
    pub name: String,
    /// Shape in Gluon/PyTorch layout, as the parameter file holds it.
    pub shape: Vec<usize>,
}

impl ParamInfo {
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// The parameters of a block, in order, like Gluon's `ParameterDict`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParamDict {
    /// The parameters, in the order the network uses them.
    pub params: Vec<ParamInfo>,
    /// The layers whose input size is still deferred, by path and kind (`0: Conv2D`): they
    /// hold no parameter until [`Block::infer_shape`](crate::Block::infer_shape) or the first batch of `fit`.
    pub deferred: Vec<String>,
}

impl ParamDict {
    /// The names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.params.iter().map(|p| p.name.as_str()).collect()
    }

    /// The parameter of that name.
    pub fn get(&self, name: &str) -> Option<&ParamInfo> {
        self.params.iter().find(|p| p.name == name)
    }

    /// Total number of scalars (deferred layers count 0).
    pub fn total(&self) -> usize {
        self.params.iter().map(ParamInfo::numel).sum()
    }
}

impl fmt::Display for ParamDict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self
            .params
            .iter()
            .map(|p| p.name.len())
            .max()
            .unwrap_or(4)
            .max(9);
        writeln!(
            f,
            "{:<width$}  {:<16}  {:>12}",
            "parameter", "shape", "count"
        )?;
        for p in &self.params {
            let dims: Vec<String> = p.shape.iter().map(usize::to_string).collect();
            let shape = format!("({})", dims.join(", "));
            writeln!(f, "{:<width$}  {:<16}  {:>12}", p.name, shape, p.numel())?;
        }
        write!(f, "total parameters: {}", self.total())?;
        if !self.deferred.is_empty() {
            write!(
                f,
                "\ndeferred until the first batch: {}",
                self.deferred.join(", ")
            )?;
        }
        Ok(())
    }
}

/// Every parameter of `module` with its structural name and shape, as
/// [`Block::collect_params`](crate::Block::collect_params) reports them: burn's module
/// snapshot seen through burn-store's PyTorch adapter, and the deferred layers found by
/// burn's visitor.
pub(crate) fn collect_params<M: Module>(module: &M) -> ParamDict {
    let params = module
        .collect(None, Some(Box::new(BurnToPyTorchAdapter)), true)
        .into_iter()
        .map(|tensor| ParamInfo {
            name: tensor.name,
            shape: tensor.shape.as_slice().to_vec(),
        })
        .collect();
    let mut finder = DeferredFinder::default();
    module.visit(&mut finder);
    ParamDict {
        params,
        deferred: finder.deferred,
    }
}

/// Finds the layers that announce themselves as deferred.
#[derive(Default)]
struct DeferredFinder {
    path: Vec<String>,
    deferred: Vec<String>,
}

impl ModuleVisitor for DeferredFinder {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        if let Some(kind) = crate::deferred::announced(container_type) {
            let at = if self.path.is_empty() {
                kind.to_string()
            } else {
                format!("{}: {kind}", self.path.join("."))
            };
            self.deferred.push(at);
        }
        self.path.push(name.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }
}
