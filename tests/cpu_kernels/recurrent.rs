//! ember's recurrent layers against PyTorch on both CPU paths: oneDNN's RNN primitives (a whole
//! layer over the sequence in one primitive, its backward pass in another) and burn-flex's
//! step-by-step path each give `tests/layers/recurrent.rs`'s ten configurations within 1e-5 of
//! `torch.nn.RNN/LSTM/GRU` and their cells: the outputs, the final states, the input's gradient
//! and every parameter's. The reference data is that test's own, included: both paths are held
//! to the same numbers. On the oneDNN path each layer is checked to have run there (a cell, one
//! step of a loop of one's own, takes burn's path on both). Beside them, larger and odder
//! shapes on both paths against each other.
//! References: `tests/reference/torch_recurrent.py`.

use std::collections::BTreeMap;

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::prelude::*;
use ember::kernels::{self, Kernels};
use ember::{Block, Init, Layout, NdTensor, Recurrent, RecurrentCell};

use super::both_paths::{close, on_onednn, values};

/// What PyTorch gave for one case (the fields `tests/reference/torch_recurrent.out.rs` fills).
struct Want {
    y: &'static [f64],
    h: &'static [f64],
    c: Option<&'static [f64]>,
    dx: &'static [f64],
    params: &'static [(&'static str, &'static [usize])],
    d: &'static [&'static [f64]],
}

include!("../reference/torch_recurrent.out.rs");

/// The formulas `tests/reference/torch_recurrent.py` fills every tensor with.
fn fill(shape: &[usize], f: impl Fn(f64) -> f64) -> Vec<f32> {
    let n: usize = shape.iter().product();
    (0..n).map(|i| f(i as f64) as f32).collect()
}

fn x_of(shape: &[usize]) -> Vec<f32> {
    fill(shape, |i| (0.37 * i + 0.1).sin())
}

fn w_of(shape: &[usize], k: usize) -> Vec<f32> {
    fill(shape, |i| 0.3 * (0.53 * i + 0.2 + k as f64).cos())
}

fn g_of(shape: &[usize]) -> Vec<f32> {
    fill(shape, |i| (0.71 * i + 0.3).sin())
}

fn s_of(shape: &[usize]) -> Vec<f32> {
    fill(shape, |i| (0.29 * i + 0.7).sin())
}

fn device() -> Device {
    Device::flex().autodiff()
}

fn tensor<const D: usize>(data: Vec<f32>, shape: [usize; D]) -> Tensor<D> {
    Tensor::from_data(TensorData::new(data, shape), &device())
}

fn host<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().convert::<f32>().try_to_vec().unwrap()
}

/// Sets each parameter, by its PyTorch name, to the reference's values (its place `k` in
/// PyTorch's order).
struct Torch<'a> {
    path: Vec<String>,
    params: &'a [(&'static str, &'static [usize])],
}

impl ModuleMapper for Torch<'_> {
    fn enter_module(&mut self, name: &str, _: &str) {
        self.path.push(name.to_string());
    }
    fn exit_module(&mut self, _: &str, _: &str) {
        self.path.pop();
    }
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let name = self.path.join(".");
        let (k, (_, shape)) = self
            .params
            .iter()
            .enumerate()
            .find(|(_, (n, _))| *n == name)
            .unwrap_or_else(|| panic!("{name}: not one of PyTorch's parameters"));
        let dims: [usize; D] = shape.to_vec().try_into().unwrap();
        param.map(|_| tensor(w_of(shape, k), dims).require_grad())
    }
}

/// Each parameter's gradient by its PyTorch name.
struct Grads<'g> {
    path: Vec<String>,
    grads: &'g burn::tensor::Gradients,
    found: BTreeMap<String, Vec<f32>>,
}

impl ModuleVisitor for Grads<'_> {
    fn enter_module(&mut self, name: &str, _: &str) {
        self.path.push(name.to_string());
    }
    fn exit_module(&mut self, _: &str, _: &str) {
        self.path.pop();
    }
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if let Some(grad) = param.val().grad(self.grads) {
            self.found.insert(self.path.join("."), host(grad));
        }
    }
}

fn assert_close(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (f64::from(*g) - w).abs() <= 1e-5 * w.abs().max(1.0),
            "{what}[{i}]: got {g}, want {w}"
        );
    }
}

/// `block` made for inputs of `shape`, with PyTorch's parameters.
fn with_torch<B: Block>(block: B, shape: &[usize], want: &Want) -> B {
    let block = block
        .initialize(Init::default(), &device())
        .infer_shape(NdTensor::zeros(shape, &device()).unwrap())
        .unwrap();
    block.map(&mut Torch {
        path: Vec::new(),
        params: want.params,
    })
}

/// A layer over the reference input `shape`, from the reference's states where `start`.
fn check(what: &str, layer: Recurrent, shape: [usize; 3], start: bool, want: &Want) {
    let layer = with_torch(layer, &shape, want);
    let x = tensor(x_of(&shape), shape).require_grad();
    let states = start.then(|| {
        let batch = match what.contains("NTC") {
            true => shape[0],
            false => shape[1],
        };
        let state_shape = layer.begin_state(batch, &device())[0].dims();
        let of = |k| tensor(w_of(&state_shape, k), state_shape);
        let mut states = vec![of(40)];
        if want.c.is_some() {
            states.push(of(41));
        }
        states
    });
    let (y, finals) = layer.forward_state(x.clone(), states);
    compare(what, &layer, x, y, finals, want);
}

/// A cell over `shape`'s steps (`[time, batch, features]`) from the reference's state.
fn check_cell(what: &str, cell: RecurrentCell, shape: [usize; 3], want: &Want) {
    let [time, batch, features] = shape;
    let cell = with_torch(cell, &[batch, features], want);
    let x = tensor(x_of(&shape), shape).require_grad();
    let hidden = cell.begin_state(batch, &device())[0].dims()[1];
    let mut states = vec![tensor(w_of(&[batch, hidden], 40), [batch, hidden])];
    if want.c.is_some() {
        states.push(tensor(w_of(&[batch, hidden], 41), [batch, hidden]));
    }
    let mut outputs = Vec::new();
    for t in 0..time {
        let xt = x.clone().narrow(0, t, 1).reshape([batch, features]);
        let (h, next) = cell.forward_step(xt, Some(states));
        outputs.push(h);
        states = next;
    }
    let finals = states.into_iter().map(|s| s.unsqueeze_dim(0)).collect();
    compare(what, &cell, x, Tensor::stack(outputs, 0), finals, want);
}

/// Back-propagates `sum(y · g) + sum(final · s)` and compares everything with PyTorch's.
fn compare<M: Module>(
    what: &str,
    layer: &M,
    x: Tensor<3>,
    y: Tensor<3>,
    finals: Vec<Tensor<3>>,
    want: &Want,
) {
    let mut loss = (y.clone() * tensor(g_of(&y.dims()), y.dims())).sum();
    for f in &finals {
        loss = loss + (f.clone() * tensor(s_of(&f.dims()), f.dims())).sum();
    }
    let grads = loss.backward();
    assert_close(&host(y), want.y, &format!("{what} output"));
    assert_close(&host(finals[0].clone()), want.h, &format!("{what} final h"));
    if let Some(c) = want.c {
        assert_close(&host(finals[1].clone()), c, &format!("{what} final c"));
    }
    assert_close(
        &host(x.grad(&grads).unwrap()),
        want.dx,
        &format!("{what} dx"),
    );
    let mut visitor = Grads {
        path: Vec::new(),
        grads: &grads,
        found: BTreeMap::new(),
    };
    layer.visit(&mut visitor);
    assert_eq!(visitor.found.len(), want.params.len(), "{what}: parameters");
    for ((name, _), d) in want.params.iter().zip(want.d) {
        assert_close(&visitor.found[*name], d, &format!("{what} d{name}"));
    }
}

/// Every configuration of `tests/layers/recurrent.rs`, on the kernels chosen.
fn all_ten() {
    check("RNN", Recurrent::rnn(5), [6, 3, 4], false, &RNN_TANH);
    let deep = Recurrent::rnn(5)
        .relu()
        .layers(2)
        .bidirectional(true)
        .layout(Layout::Ntc);
    let want = &RNN_RELU_DEEP_BI_NTC;
    check("RNN relu deep bi NTC", deep, [3, 6, 4], true, want);
    check("LSTM", Recurrent::lstm(5), [6, 3, 4], true, &LSTM);
    let deep = Recurrent::lstm(4).layers(2).bidirectional(true);
    check("LSTM deep bi", deep, [5, 2, 3], true, &LSTM_DEEP_BI);
    let plain = Recurrent::lstm(3).use_bias(false).layout(Layout::Ntc);
    check(
        "LSTM no bias NTC",
        plain,
        [2, 7, 4],
        false,
        &LSTM_NO_BIAS_NTC,
    );
    check("GRU", Recurrent::gru(5), [6, 3, 4], true, &GRU);
    let deep = Recurrent::gru(4)
        .layers(3)
        .bidirectional(true)
        .layout(Layout::Ntc);
    check("GRU deep bi NTC", deep, [2, 5, 3], true, &GRU_DEEP_BI_NTC);
    check_cell("RNNCell", RecurrentCell::rnn(5), [3, 2, 4], &RNN_CELL);
    check_cell("LSTMCell", RecurrentCell::lstm(5), [3, 2, 4], &LSTM_CELL);
    check_cell("GRUCell", RecurrentCell::gru(5), [3, 2, 4], &GRU_CELL);
}

#[test]
fn recurrent_layers_match_pytorch_on_onednn() {
    let (before, _) = kernels::counts();
    on_onednn("the recurrent layers", all_ten);
    let (after, _) = kernels::counts();
    // One operation per layer: 1 + 2 + 1 + 2 + 1 + 1 + 3 layers, the cells none.
    assert!(
        after - before >= 11,
        "oneDNN ran {} operations for 11 layers",
        after - before
    );
}

#[test]
fn recurrent_layers_match_pytorch_on_flex() {
    kernels::with_kernels(Kernels::Flex, all_ten);
}

/// The output, the final states and every gradient of `layer` over an input of `shape` from
/// given states, on the kernels chosen.
fn outputs(layer: &Recurrent, shape: [usize; 3], batch: usize) -> Vec<(String, Vec<f32>)> {
    let n = shape.iter().product();
    let x = tensor(values(n, 3), shape).require_grad();
    let first = layer.begin_state(batch, &device());
    let states: Vec<Tensor<3>> = first
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let dims = s.dims();
            tensor(values(dims.iter().product(), 20 + k as u64), dims).require_grad()
        })
        .collect();
    let (y, finals) = layer.forward_state(x.clone(), Some(states.clone()));
    let mut loss = (y.clone() * tensor(values(y.dims().iter().product(), 5), y.dims())).sum();
    for (k, f) in finals.iter().enumerate() {
        let g = tensor(values(f.dims().iter().product(), 30 + k as u64), f.dims());
        loss = loss + (f.clone() * g).sum();
    }
    let grads = loss.backward();
    let mut out = vec![("output".to_string(), host(y))];
    for (k, f) in finals.into_iter().enumerate() {
        out.push((format!("final state {k}"), host(f)));
    }
    out.push(("input gradient".to_string(), host(x.grad(&grads).unwrap())));
    for (k, s) in states.iter().enumerate() {
        out.push((format!("state {k} gradient"), host(s.grad(&grads).unwrap())));
    }
    let mut visitor = Grads {
        path: Vec::new(),
        grads: &grads,
        found: BTreeMap::new(),
    };
    layer.visit(&mut visitor);
    out.extend(visitor.found.into_iter().map(|(n, g)| (format!("d{n}"), g)));
    out
}

#[test]
fn larger_layers_agree_on_both_paths() {
    // (layer, [time, batch, features] in its layout, batch)
    let cases = [
        (Recurrent::lstm(64), [35, 8, 17], 8),
        (
            Recurrent::lstm(16).layers(3).layout(Layout::Ntc),
            [5, 11, 16],
            5,
        ),
        (Recurrent::gru(24).bidirectional(true), [9, 3, 7], 3),
        (Recurrent::gru(8).layers(2).use_bias(false), [4, 1, 8], 1),
        (Recurrent::rnn(32).relu().bidirectional(true), [12, 6, 5], 6),
        (
            Recurrent::rnn(7).layers(2).layout(Layout::Ntc),
            [2, 1, 3],
            2,
        ),
    ];
    for (layer, shape, batch) in cases {
        let what = format!("{layer} over {shape:?}");
        let layer = layer
            .initialize(Init::Xavier, &device())
            .infer_shape(NdTensor::zeros(&shape, &device()).unwrap())
            .unwrap();
        let fast = on_onednn(&what, || outputs(&layer, shape, batch));
        let reference = kernels::with_kernels(Kernels::Flex, || outputs(&layer, shape, batch));
        close(&what, &fast, &reference);
    }
}
