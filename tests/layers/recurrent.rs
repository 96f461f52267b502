//! ember's recurrent layers against PyTorch's `nn.RNN`, `nn.LSTM` and `nn.GRU`: the outputs,
//! the final states, the input's gradient and every parameter's, within 1e-5, for tanh and
//! relu, one and several layers, one and two directions, both layouts, with and without an
//! initial state and biases. The parameters reach ember as a safetensors file in PyTorch's own
//! names (`weight_ih_l1_reverse`), so the names, the layout and the gate order (LSTM i, f, g,
//! o; GRU r, z, n) are all checked: a layer that swapped two gates fails every case of its kind.
//! References: `tests/reference/torch_recurrent.py`.

use std::collections::BTreeMap;

use burn::module::{ModuleVisitor, Param};

use super::*;
use ember::{Layout, Recurrent, RecurrentCell};

include!("../reference/torch_recurrent.out.rs");

/// The gradient that flows into the final states.
fn s_of(shape: &[usize]) -> Vec<f32> {
    fill(shape, |i| (0.29 * i + 0.7).sin())
}

/// What PyTorch gave for one case.
struct Want {
    y: &'static [f64],
    h: &'static [f64],
    c: Option<&'static [f64]>,
    dx: &'static [f64],
    params: &'static [(&'static str, &'static [usize])],
    d: &'static [&'static [f64]],
}

/// Each parameter's gradient by its path (`weight_ih_l0`).
struct Grads<'g> {
    path: Vec<String>,
    grads: &'g burn::tensor::Gradients,
    found: BTreeMap<String, Vec<f32>>,
}

impl ModuleVisitor for Grads<'_> {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }
    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if let Some(grad) = param.val().grad(self.grads) {
            self.found.insert(self.path.join("."), values(grad));
        }
    }
}

fn check(what: &str, layer: Recurrent, shape: [usize; 3], start: bool, want: Want) {
    let device = device();
    let lstm = want.c.is_some();
    let layer = resolved(layer, &shape);
    let params: Vec<(&str, Vec<usize>)> =
        want.params.iter().map(|(n, s)| (*n, s.to_vec())).collect();
    let layer = with_torch_weights(layer, &params);
    let x = Tensor::<3>::from_data(TensorData::new(x_of(&shape), shape), &device).require_grad();
    let batch = match what.contains("NTC") {
        true => shape[0],
        false => shape[1],
    };
    let states = start.then(|| {
        let first = layer.begin_state(batch, &device);
        let state_shape = first[0].dims();
        let of = |k| {
            Tensor::<3>::from_data(TensorData::new(w_of(&state_shape, k), state_shape), &device)
        };
        let mut states = vec![of(40)];
        if lstm {
            states.push(of(41));
        }
        states
    });
    let (y, finals) = layer.forward_state(x.clone(), states);
    compare(what, &layer, x, y, finals, want);
}

/// A cell over `shape`'s steps (`[time, batch, features]`) from the reference's state, its
/// outputs stacked along time.
fn check_cell(what: &str, cell: RecurrentCell, shape: [usize; 3], want: Want) {
    let device = device();
    let [time, batch, features] = shape;
    let cell = resolved(cell, &[batch, features]);
    let params: Vec<(&str, Vec<usize>)> =
        want.params.iter().map(|(n, s)| (*n, s.to_vec())).collect();
    let cell = with_torch_weights(cell, &params);
    let x = Tensor::<3>::from_data(TensorData::new(x_of(&shape), shape), &device).require_grad();
    let state = |k| {
        let shape = [batch, cell.begin_state(batch, &device)[0].dims()[1]];
        Tensor::<2>::from_data(TensorData::new(w_of(&shape, k), shape), &device)
    };
    let mut states = vec![state(40)];
    if want.c.is_some() {
        states.push(state(41));
    }
    let mut outputs = Vec::new();
    for t in 0..time {
        let xt = x.clone().narrow(0, t, 1).reshape([batch, features]);
        let (h, next) = cell.forward_step(xt, Some(states));
        outputs.push(h);
        states = next;
    }
    let finals = states
        .into_iter()
        .map(|s| s.unsqueeze_dim::<3>(0))
        .collect();
    compare(what, &cell, x, Tensor::stack(outputs, 0), finals, want);
}

/// Back-propagates `sum(y * g) + sum(final * s)` through `layer` and compares everything with
/// PyTorch's.
fn compare<M: burn::module::Module>(
    what: &str,
    layer: &M,
    x: Tensor<3>,
    y: Tensor<3>,
    finals: Vec<Tensor<3>>,
    want: Want,
) {
    let device = device();
    let g = Tensor::<3>::from_data(TensorData::new(g_of(&y.dims()), y.dims()), &device);
    let mut loss = (y.clone() * g).sum();
    for f in &finals {
        let s = Tensor::<3>::from_data(TensorData::new(s_of(&f.dims()), f.dims()), &device);
        loss = loss + (f.clone() * s).sum();
    }
    let grads = loss.backward();
    assert_close(&values(y), want.y, &format!("{what} output"));
    assert_close(
        &values(finals[0].clone()),
        want.h,
        &format!("{what} final h"),
    );
    assert_eq!(
        finals.len(),
        1 + usize::from(want.c.is_some()),
        "{what}: states"
    );
    if let Some(c) = want.c {
        assert_close(&values(finals[1].clone()), c, &format!("{what} final c"));
    }
    assert_close(
        &values(x.grad(&grads).unwrap()),
        want.dx,
        &format!("{what} dx"),
    );
    let mut visitor = Grads {
        path: Vec::new(),
        grads: &grads,
        found: BTreeMap::new(),
    };
    layer.visit(&mut visitor);
    let mut names: Vec<&str> = want.params.iter().map(|(n, _)| *n).collect();
    names.sort();
    let found: Vec<&str> = visitor.found.keys().map(String::as_str).collect();
    assert_eq!(found, names, "{what}: the parameters, by PyTorch's names");
    for ((name, _), d) in want.params.iter().zip(want.d) {
        assert_close(&visitor.found[*name], d, &format!("{what} d{name}"));
    }
}

#[test]
fn rnn_matches_pytorch() {
    check("RNN", Recurrent::rnn(5), [6, 3, 4], false, RNN_TANH);
    let deep = Recurrent::rnn(5)
        .relu()
        .layers(2)
        .bidirectional(true)
        .layout(Layout::Ntc);
    check(
        "RNN relu deep bi NTC",
        deep,
        [3, 6, 4],
        true,
        RNN_RELU_DEEP_BI_NTC,
    );
}

#[test]
fn lstm_matches_pytorch() {
    check("LSTM", Recurrent::lstm(5), [6, 3, 4], true, LSTM);
    let deep = Recurrent::lstm(4).layers(2).bidirectional(true);
    check("LSTM deep bi", deep, [5, 2, 3], true, LSTM_DEEP_BI);
    let plain = Recurrent::lstm(3).use_bias(false).layout(Layout::Ntc);
    check(
        "LSTM no bias NTC",
        plain,
        [2, 7, 4],
        false,
        LSTM_NO_BIAS_NTC,
    );
}

#[test]
fn gru_matches_pytorch() {
    check("GRU", Recurrent::gru(5), [6, 3, 4], true, GRU);
    let deep = Recurrent::gru(4)
        .layers(3)
        .bidirectional(true)
        .layout(Layout::Ntc);
    check("GRU deep bi NTC", deep, [2, 5, 3], true, GRU_DEEP_BI_NTC);
}

#[test]
fn cells_match_pytorch_over_a_loop_of_ones_own() {
    check_cell("RNNCell", RecurrentCell::rnn(5), [3, 2, 4], RNN_CELL);
    check_cell("LSTMCell", RecurrentCell::lstm(5), [3, 2, 4], LSTM_CELL);
    check_cell("GRUCell", RecurrentCell::gru(5), [3, 2, 4], GRU_CELL);
}
