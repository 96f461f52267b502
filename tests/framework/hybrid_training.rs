//! A network of ember's layers trained by a recorded step: its parameters in
//! [`ParamSlots`], SGD's and Adam's state and per-step numbers in [`Update`]'s slots, against
//! the same steps run eagerly through [`Optimizer`] (burn's optimizers), bit for bit, on wgpu
//! (the step replayed from cubecl's recorded dispatches) and on flex (run again each time).

use std::cell::RefCell;
use std::rc::Rc;

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::prelude::*;
use ember::hybrid::{Hybrid, ParamSlots, Slot, Update};
use ember::{
    Activation, BatchNorm, Block, Dense, Init, L2Loss, Loss, Optimizer, OptimizerKind, Sequential,
};

use crate::common::wgpu;
use crate::hybrid::{ROWS, batch};

const BATCHES: usize = 6;

/// A schedule's rate: another at every step.
fn rate(step: usize) -> f64 {
    0.05 / (1.0 + step as f64)
}

/// A 4-6-1 tanh network with its sizes set; with `norm`, a BatchNorm between its layers.
fn network(device: &Device, norm: bool) -> Sequential {
    device.seed(11);
    let mut net: Sequential = Sequential::new().add(Dense::new(6).activation(Activation::Tanh));
    if norm {
        net = net.add(BatchNorm::new().momentum(0.3));
    }
    let net = net.add(Dense::new(1)).initialize(Init::Xavier, device);
    net.infer_shape(batch(0, device).0).unwrap()
}

/// The loss summed over the batch (Gluon's `loss.backward()` on the per-example losses).
fn loss_of(net: &Sequential, (x, y): (Tensor<2>, Tensor<2>)) -> Tensor<1> {
    L2Loss.forward(net.forward(x.into()).rank(), y).unwrap()
}

fn flat(net: &Sequential) -> Vec<Vec<u32>> {
    struct Flat(Vec<Vec<u32>>);
    impl ModuleVisitor for Flat {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let v = param.val().into_data().try_to_vec::<f32>().unwrap();
            self.0.push(v.iter().map(|x| x.to_bits()).collect());
        }
    }
    let mut f = Flat(Vec::new());
    // `valid` reads the running statistics' last update, which burn keeps aside until then.
    net.valid().visit(&mut f);
    f.0
}

/// The eager steps: ember's Optimizer (burn's SGD or Adam) at each step's rate.
fn eager(mut net: Sequential, kind: OptimizerKind, device: &Device) -> (Vec<Vec<u32>>, Vec<u32>) {
    let mut optimizer = Optimizer::new(&net, kind, rate(0)).unwrap();
    let mut losses = Vec::new();
    for i in 0..BATCHES {
        optimizer.set_learning_rate(rate(i));
        let l = loss_of(&net, batch(i, device));
        losses.push(l.clone().sum().into_scalar::<f32>().to_bits());
        net = optimizer.step(net, l.backward(), ROWS).unwrap();
    }
    (flat(&net), losses)
}

struct State {
    params: ParamSlots,
    update: Update,
    x: Slot<2>,
    y: Slot<2>,
}

/// The same steps recorded once: each step's batch and rate written into slots, then run.
fn recorded(
    net: Sequential,
    kind: OptimizerKind,
    device: &Device,
) -> (Vec<Vec<u32>>, Vec<u32>, bool) {
    let optimizer = Optimizer::new(&net, kind, rate(0)).unwrap();
    let params = ParamSlots::new(&net).unwrap();
    let (x, y) = batch(0, device);
    let mut update = Update::new(&optimizer, &params, device).unwrap();
    // A rate while capturing too, so that the capture's runs train (and must be undone).
    update.prepare(rate(0)).unwrap();
    let state = Rc::new(RefCell::new(State {
        update,
        params,
        x: Slot::new(x),
        y: Slot::new(y),
    }));
    let (s, template) = (state.clone(), net.clone());
    let mut step = Hybrid::capture(device, move || {
        let s = &mut *s.borrow_mut();
        let net = s.params.net(template.clone()).unwrap();
        let l = loss_of(&net, (s.x.read(), s.y.read()));
        let total = l.clone().sum();
        let grads = GradientsParams::from_grads(l.backward(), &net);
        let grads = s.params.gradients(&net, &grads).unwrap();
        s.params.write_running(net).unwrap();
        let new = s.update.apply(s.params.values(), grads, ROWS).unwrap();
        s.params.write(new).unwrap();
        total
    });
    // The capture's CAPTURE_RUNS runs trained: start again from the network's parameters,
    // written into the slots the recording reads.
    {
        let s = &mut *state.borrow_mut();
        s.params.load(&net).unwrap();
        s.update.restart().unwrap();
    }
    let mut losses = Vec::new();
    for i in 0..BATCHES {
        {
            let s = &mut *state.borrow_mut();
            let (x, y) = batch(i, device);
            s.x.write(x).unwrap();
            s.y.write(y).unwrap();
            s.update.prepare(rate(i)).unwrap();
        }
        // SAFETY: the loss is read back before the next run; the slots stay in place.
        let total = unsafe { step.run() }.clone();
        losses.push(total.into_scalar::<f32>().to_bits());
    }
    let trained = state.borrow().params.copied_net(net.clone()).unwrap();
    // A copy: loading other values into the slots leaves it as it is.
    state.borrow_mut().params.load(&net).unwrap();
    (flat(&trained), losses, step.is_graph())
}

fn same_steps(kind: OptimizerKind, device: &Device, norm: bool) -> bool {
    // One network for both paths: the generator `network` seeds is the process's, and this
    // binary's other tests draw from it on their threads, so a second `network(device)` need
    // not repeat the first. Each path gets running statistics of its own (`valid().train()`:
    // a clone shares BatchNorm's with the original).
    let net = network(device, norm);
    let (params, losses) = eager(net.valid().train(), kind, device);
    let (hybrid_params, hybrid_losses, graph) = recorded(net.valid().train(), kind, device);
    if norm {
        // The running statistics moved: a step that froze them would differ from the eager one.
        let (first, last) = (flat(&net), &params);
        assert_ne!(
            &first[4..6],
            &last[4..6],
            "{kind:?}: the running statistics trained"
        );
    }
    assert_eq!(hybrid_losses, losses, "{kind:?}: the losses, step by step");
    assert_eq!(
        hybrid_params, params,
        "{kind:?}: the parameters after {BATCHES} steps"
    );
    graph
}

fn kinds() -> [OptimizerKind; 7] {
    let sgd = OptimizerKind::sgd();
    let momentum = sgd.with_momentum(0.9).unwrap();
    let nesterov = momentum.with_nesterov(true).unwrap();
    [
        sgd,
        momentum,
        nesterov.with_weight_decay(1e-2).unwrap(),
        OptimizerKind::adam(),
        OptimizerKind::adam().with_weight_decay(1e-2).unwrap(),
        OptimizerKind::adamw(),
        OptimizerKind::adamw().with_weight_decay(0.0).unwrap(),
    ]
}

#[test]
fn sgd_and_adam_replayed_equal_burns_eager_steps_bit_for_bit_on_wgpu() {
    for kind in kinds() {
        assert!(
            same_steps(kind, &wgpu().autodiff(), false),
            "{kind:?}: replayed on wgpu"
        );
    }
}

#[test]
fn sgd_and_adam_run_again_equal_burns_eager_steps_bit_for_bit_on_flex() {
    for kind in kinds() {
        assert!(
            !same_steps(kind, &Device::flex().autodiff(), false),
            "{kind:?}: no graphs on flex"
        );
    }
}

#[test]
fn what_a_recorded_step_cannot_hold_yet_is_refused_by_name() {
    let device = Device::flex().autodiff();
    let net = network(&device, false);
    let params = ParamSlots::new(&net).unwrap();
    let rmsprop = Optimizer::new(&net, "rmsprop", 0.1).unwrap();
    let err = Update::new(&rmsprop, &params, &device)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("RmsProp") && err.contains("sgd, adam and adamw"),
        "{err}"
    );
    let clipped = Optimizer::new(&net, "sgd", 0.1)
        .unwrap()
        .clip(ember::optim::Clipping::global_norm(1.0).unwrap());
    let err = Update::new(&clipped, &params, &device)
        .unwrap_err()
        .to_string();
    assert!(err.contains("clipping"), "{err}");
    let err = params.net(network(&device, false)).unwrap_err().to_string();
    assert!(
        err.contains("parameter 0"),
        "another network's parameters: {err}"
    );
    // An optimizer that stepped holds a state the update would not carry over.
    let mut stepped = Optimizer::new(&net, "adam", 0.1).unwrap();
    let l = loss_of(&net, batch(0, &device));
    let _ = stepped.step(net.clone(), l.backward(), ROWS).unwrap();
    let err = Update::new(&stepped, &params, &device)
        .unwrap_err()
        .to_string();
    assert!(err.contains("state of its own"), "{err}");
    // A batch of no examples.
    let sgd = Optimizer::new(&net, "sgd", 0.1).unwrap();
    let mut update = Update::new(&sgd, &params, &device).unwrap();
    let grads = params.values().into_iter().map(Some).collect();
    let err = update
        .apply(params.values(), grads, 0)
        .unwrap_err()
        .to_string();
    assert!(err.contains("batch size 0"), "{err}");
}

/// BatchNorm's running statistics are updated by its forward pass's own code, which a replay
/// does not run: the step writes what that code computed into their slots, and the replayed
/// steps keep the eager loop's statistics, bit for bit, beside its parameters.
#[test]
fn a_batchnorm_networks_steps_replayed_keep_its_running_statistics_bit_for_bit() {
    let momentum = OptimizerKind::sgd().with_momentum(0.9).unwrap();
    for kind in [momentum, OptimizerKind::adam()] {
        assert!(
            same_steps(kind, &wgpu().autodiff(), true),
            "{kind:?}: replayed on wgpu"
        );
        assert!(
            !same_steps(kind, &Device::flex().autodiff(), true),
            "{kind:?}: run again on flex"
        );
    }
}
