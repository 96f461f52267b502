//! 12.1's training steps: the chapter's MLP trained by SGD with momentum on one batch of 64,
//! eagerly (ember's `Optimizer`, burn's SGD) or recorded once and replayed ([`ember::hybrid`]:
//! its parameters and the optimizer's state in slots, the rate written before each run), the
//! time per step and the network's output after all the steps.

use std::cell::RefCell;
use std::rc::Rc;

use anyhow::anyhow;
use burn::module::Module;
use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor};
use ember::hybrid::{Hybrid, ParamSlots, Update};
use ember::{Block, L2Loss, Loss, Optimizer, OptimizerKind, PickedDevice, Sequential};
use ember_datasets::Synthetic;

use super::hybridize::{Measured, Request};
use super::{to_host, wait_all};

/// The batch's rows.
const ROWS: usize = 64;
/// The step's rate and momentum.
const RATE: f64 = 0.01;
const MOMENTUM: f64 = 0.9;

/// The batch: 64 rows of the chapter's 512 features, each row's first two its targets.
fn batch(device: &Device) -> anyhow::Result<(Tensor<2>, Tensor<2>)> {
    let x: Tensor<2> = Synthetic::chapter(ROWS, 512, 13)
        .batch(0)
        .x_on(device)?
        .into_rank()?;
    let y = x.clone().narrow(1, 0, 2).detach();
    Ok((x, y))
}

fn loss_of(net: &Sequential, x: &Tensor<2>, y: &Tensor<2>) -> anyhow::Result<Tensor<1>> {
    let out: Tensor<2> = net.forward(x.clone().into()).into_rank()?;
    Ok(L2Loss.forward(out, y.clone())?)
}

/// `request.repeat` timings of `request.passes / 10` steps of `net` (on an autodiff device),
/// after as many steps unmeasured; the output is the trained network's on the batch.
pub(super) fn measure(
    request: &Request,
    picked: &PickedDevice,
    net: Sequential,
) -> anyhow::Result<Measured> {
    let device = net
        .devices()
        .first()
        .cloned()
        .ok_or_else(|| anyhow!("the network has no device"))?;
    let (x, y) = batch(&device)?;
    let steps = (request.passes / 10).max(1);
    let kind = OptimizerKind::sgd().with_momentum(MOMENTUM)?;
    let optimizer = Optimizer::new(&net, kind, RATE)?;
    let untrained: Tensor<2> = net.forward(x.clone().into()).into_rank()?;
    let untrained = to_host(untrained.detach())?;
    let (seconds, trained, replayed) = if request.graph {
        recorded(request, picked, net, optimizer, (x.clone(), y), steps)?
    } else {
        eager(request, net, optimizer, (x.clone(), y), steps)?
    };
    let out: Tensor<2> = trained.forward(x.into()).into_rank()?;
    let output = to_host(out)?;
    Ok(Measured {
        seconds,
        moved: Some(super::hybridize::max_diff(&untrained, &output)),
        output,
        replayed,
    })
}

type Steps = (Vec<f64>, Sequential, bool);

fn eager(
    request: &Request,
    mut net: Sequential,
    mut optimizer: Optimizer,
    (x, y): (Tensor<2>, Tensor<2>),
    steps: usize,
) -> anyhow::Result<Steps> {
    let device = x.device();
    let mut seconds = Vec::new();
    for round in 0..=request.repeat {
        let start = std::time::Instant::now();
        for _ in 0..steps {
            let l = loss_of(&net, &x, &y)?;
            net = optimizer.step(net, l.backward(), ROWS)?;
        }
        wait_all(&device)?;
        // The first round warms up (kernels compiled, buffers made).
        if round > 0 {
            seconds.push(start.elapsed().as_secs_f64());
        }
    }
    Ok((seconds, net, false))
}

struct State {
    params: ParamSlots,
    update: Update,
}

fn recorded(
    request: &Request,
    picked: &PickedDevice,
    net: Sequential,
    optimizer: Optimizer,
    (x, y): (Tensor<2>, Tensor<2>),
    steps: usize,
) -> anyhow::Result<Steps> {
    let device = x.device();
    let params = ParamSlots::new(&net)?;
    let mut update = Update::new(&optimizer, &params, &device)?;
    update.prepare(RATE)?;
    let state = Rc::new(RefCell::new(State { params, update }));
    let (s, template) = (state.clone(), net.clone());
    let mut step = Hybrid::capture(&device, move || -> Result<(), String> {
        let s = &mut *s.borrow_mut();
        let net = s.params.net(template.clone()).map_err(|e| e.to_string())?;
        let l = loss_of(&net, &x, &y).map_err(|e| e.to_string())?;
        let grads = GradientsParams::from_grads(l.backward(), &net);
        let grads = s
            .params
            .gradients(&net, &grads)
            .map_err(|e| e.to_string())?;
        s.params.write_running(net).map_err(|e| e.to_string())?;
        let values = s.params.values();
        let new = s
            .update
            .apply(values, grads, ROWS)
            .map_err(|e| e.to_string())?;
        s.params.write(new).map_err(|e| e.to_string())
    });
    if let Err(e) = step.output() {
        return Err(anyhow!("the recorded step: {e}"));
    }
    super::hybridize::recorded_where_it_can(picked, step.is_graph(), "step")?;
    // The capture's runs trained: start again from the network and no momentum.
    {
        let s = &mut *state.borrow_mut();
        s.params.load(&net)?;
        s.update.restart()?;
    }
    let mut seconds = Vec::new();
    for round in 0..=request.repeat {
        let start = std::time::Instant::now();
        for _ in 0..steps {
            state.borrow_mut().update.prepare(RATE)?;
            // SAFETY: nothing read from the slots is held across a run, and the slots stay
            // where the recording read them.
            if let Err(e) = unsafe { step.run() } {
                return Err(anyhow!("a recorded step: {e}"));
            }
        }
        wait_all(&device)?;
        if round > 0 {
            seconds.push(start.elapsed().as_secs_f64());
        }
    }
    // Copies, so that the network outlives the slots' next writes.
    let trained = state.borrow().params.copied_net(net)?;
    Ok((seconds, trained, step.is_graph()))
}
