//! A recurrent layer's parameters, named and laid out as PyTorch's `nn.LSTM`/`nn.GRU`/`nn.RNN`
//! name them: `weight_ih_l0` (`[gates·hidden, input]`), `weight_hh_l0`, `bias_ih_l0`,
//! `bias_hh_l0`, then `…_l0_reverse` for a bidirectional layer's second direction, `…_l1` for
//! the next layer; a cell alone (`nn.LSTMCell`) has them without suffix. burn's derive names a parameter by its field, and a depth chosen at run time
//! has no fields: `Module` is written here, entering each parameter under its PyTorch name, so
//! that burn's own paths, ember's parameter lists and safetensors files all read the same.

use burn::module::{Devices, Module, ModuleMapper, ModuleVisitor, Param};
use burn::tensor::{Device, Tensor};

use crate::layers::dropout::Dropout;

/// The container type the parameters announce: no name burn-store's PyTorch adapters act on
/// (they transpose `Struct:Linear`), so the weights are stored as they are, PyTorch's layout.
const CONTAINER: &str = "Struct:Recurrent";

/// One direction of one layer.
#[derive(Debug, Clone)]
pub(crate) struct Cell {
    pub(crate) weight_ih: Param<Tensor<2>>,
    pub(crate) weight_hh: Param<Tensor<2>>,
    pub(crate) bias_ih: Option<Param<Tensor<1>>>,
    pub(crate) bias_hh: Option<Param<Tensor<1>>>,
}

impl Cell {
    /// A cell of `mode` from `input` features to `hidden`, zeros until the initializer fills
    /// it: weights `[gates·hidden, input]` and `[gates·hidden, hidden]`, PyTorch's layout.
    pub(crate) fn zeros(
        mode: super::mode::Mode,
        hidden: usize,
        input: usize,
        use_bias: bool,
        device: &Device,
    ) -> Self {
        let width = mode.gates() * hidden;
        let bias = || use_bias.then(|| Param::from_tensor(Tensor::zeros([width], device)));
        Cell {
            weight_ih: Param::from_tensor(Tensor::zeros([width, input], device)),
            weight_hh: Param::from_tensor(Tensor::zeros([width, hidden], device)),
            bias_ih: bias(),
            bias_hh: bias(),
        }
    }

    /// `W_ih x + b_ih` for inputs `[rows, input]`.
    pub(crate) fn input_part(&self, x: Tensor<2>) -> Tensor<2> {
        product(x, &self.weight_ih, self.bias_ih.as_ref())
    }

    /// `W_hh h + b_hh` for states `[batch, hidden]`.
    pub(crate) fn hidden_part(&self, h: Tensor<2>) -> Tensor<2> {
        product(h, &self.weight_hh, self.bias_hh.as_ref())
    }

    /// The input features, from the weight's shape.
    pub(crate) fn input_size(&self) -> usize {
        self.weight_ih.val().dims()[1]
    }
}

/// `x·Wᵀ + b` for a weight in PyTorch's `[out, in]` layout, on burn's path (ember's oneDNN
/// product, as `Dense`'s, gained nothing here: bench/RESULTS.md, 2026-11-28).
fn product(x: Tensor<2>, weight: &Param<Tensor<2>>, bias: Option<&Param<Tensor<1>>>) -> Tensor<2> {
    burn::tensor::module::linear(x, weight.val().transpose(), bias.map(Param::val))
}

/// Every cell, layer by layer (the forward direction, then the reverse one), and the dropout
/// between layers.
#[derive(Debug, Clone)]
pub(crate) struct Weights {
    /// One cell for a loop of one's own: its names have no suffix.
    pub(crate) alone: bool,
    pub(crate) directions: usize,
    pub(crate) cells: Vec<Cell>,
    pub(crate) dropout: Dropout,
}

impl Weights {
    /// The suffix of cell `k`'s names: `_l0`, `_l0_reverse`, `_l1`, …; none for a cell of
    /// one's own loop (PyTorch's `nn.LSTMCell` names its `weight_ih`).
    fn suffix(&self, k: usize) -> String {
        if self.alone {
            return String::new();
        }
        let layer = k / self.directions;
        match k % self.directions {
            0 => format!("_l{layer}"),
            _ => format!("_l{layer}_reverse"),
        }
    }

    /// The cell of `layer` in `direction` (0 forward, 1 reverse).
    pub(crate) fn cell(&self, layer: usize, direction: usize) -> &Cell {
        &self.cells[layer * self.directions + direction]
    }

    /// Applies `f` to every parameter of every cell (the same operation for both ranks).
    fn each(self, f: &mut impl Apply) -> Self {
        Self {
            alone: self.alone,
            directions: self.directions,
            dropout: self.dropout,
            cells: self
                .cells
                .into_iter()
                .map(|c| Cell {
                    weight_ih: f.apply(c.weight_ih),
                    weight_hh: f.apply(c.weight_hh),
                    bias_ih: c.bias_ih.map(|b| f.apply(b)),
                    bias_hh: c.bias_hh.map(|b| f.apply(b)),
                })
                .collect(),
        }
    }
}

/// One of `Module`'s operations on a parameter of any rank.
trait Apply {
    fn apply<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>>;
}

/// `fork`, `to_device`, `train`, `materialize`.
#[derive(Clone, Copy)]
enum Plain<'a> {
    Fork(&'a Device),
    ToDevice(&'a Device),
    Train,
    Materialize,
}

impl Apply for Plain<'_> {
    fn apply<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        match *self {
            Plain::Fork(device) => param.fork(device),
            Plain::ToDevice(device) => param.to_device(device),
            Plain::Train => Module::train(param),
            Plain::Materialize => param.materialize(),
        }
    }
}

/// A mapper's pass, each parameter entered under its PyTorch name.
struct Named<'m, M> {
    mapper: &'m mut M,
    names: std::vec::IntoIter<String>,
}

impl<M: ModuleMapper> Apply for Named<'_, M> {
    fn apply<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let name = self.names.next().expect("a name for each parameter");
        self.mapper.enter_module(&name, CONTAINER);
        let param = Module::map(param, self.mapper);
        self.mapper.exit_module(&name, CONTAINER);
        param
    }
}

impl Weights {
    /// Each parameter's name, in the order [`Weights::each`] visits them (PyTorch's order).
    fn names(&self) -> Vec<String> {
        let mut names = Vec::new();
        for (k, cell) in self.cells.iter().enumerate() {
            let s = self.suffix(k);
            names.push(format!("weight_ih{s}"));
            names.push(format!("weight_hh{s}"));
            if cell.bias_ih.is_some() {
                names.push(format!("bias_ih{s}"));
            }
            if cell.bias_hh.is_some() {
                names.push(format!("bias_hh{s}"));
            }
        }
        names
    }
}

impl Module for Weights {
    fn collect_devices(&self, mut devices: Devices) -> Devices {
        for c in &self.cells {
            devices = c.weight_ih.collect_devices(devices);
            devices = c.weight_hh.collect_devices(devices);
            devices = c.bias_ih.collect_devices(devices);
            devices = c.bias_hh.collect_devices(devices);
        }
        devices
    }
    fn fork(self, device: &Device) -> Self {
        self.each(&mut Plain::Fork(device))
    }
    fn to_device(self, device: &Device) -> Self {
        self.each(&mut Plain::ToDevice(device))
    }
    fn train(self) -> Self {
        let mut weights = self.each(&mut Plain::Train);
        weights.dropout = Module::train(weights.dropout);
        weights
    }
    fn valid(&self) -> Self {
        Self {
            alone: self.alone,
            directions: self.directions,
            dropout: Module::valid(&self.dropout),
            cells: self
                .cells
                .iter()
                .map(|c| Cell {
                    weight_ih: Module::valid(&c.weight_ih),
                    weight_hh: Module::valid(&c.weight_hh),
                    bias_ih: c.bias_ih.as_ref().map(Module::valid),
                    bias_hh: c.bias_hh.as_ref().map(Module::valid),
                })
                .collect(),
        }
    }
    fn materialize(self) -> Self {
        self.each(&mut Plain::Materialize)
    }
    fn visit<V: ModuleVisitor>(&self, visitor: &mut V) {
        let mut names = self.names().into_iter();
        let mut one = |visitor: &mut V, visit: &dyn Fn(&mut V)| {
            let name = names.next().expect("a name for each parameter");
            visitor.enter_module(&name, CONTAINER);
            visit(visitor);
            visitor.exit_module(&name, CONTAINER);
        };
        for c in &self.cells {
            one(visitor, &|v| c.weight_ih.visit(v));
            one(visitor, &|v| c.weight_hh.visit(v));
            if let Some(b) = &c.bias_ih {
                one(visitor, &|v| b.visit(v));
            }
            if let Some(b) = &c.bias_hh {
                one(visitor, &|v| b.visit(v));
            }
        }
        // Its training flag, which `valid` turns off: no tensor, no name.
        self.dropout.visit(visitor);
    }
    fn map<M: ModuleMapper>(self, mapper: &mut M) -> Self {
        let names = self.names().into_iter();
        let mut weights = self.each(&mut Named { mapper, names });
        weights.dropout = weights.dropout.map(mapper);
        weights
    }
}
