//! `ember::hybrid`: a training step recorded once and replayed per batch. On wgpu (lavapipe in
//! CI) the replays are cubecl's recorded dispatches, the launches the card's CUDA graph would
//! hold, so these tests check the design a card relies on: the batch, the parameters, the
//! optimizer's state and the per-step learning rate all reach a replay through slots written
//! in place, and a replay's numbers are the eager step's, bit for bit. On burn-flex the step
//! runs again each time, and must give the same numbers.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use burn::prelude::*;
use burn::tensor::TensorData;
use ember::Error;
use ember::hybrid::{CAPTURE_RUNS, Hybrid, Slot};

use crate::common::wgpu;

const BATCHES: usize = 6;

/// Batch `i`: 8 rows of 4 features and their targets, different for every `i`.
pub(crate) fn batch(i: usize, device: &Device) -> (Tensor<2>, Tensor<2>) {
    let x = (0..ROWS * 4).map(|k| ((i * 31 + k * 7) % 13) as f32 / 13.0 - 0.4);
    let y = (0..ROWS).map(|k| ((i * 5 + k * 3) % 7) as f32 / 7.0);
    (
        Tensor::from_data(TensorData::new(x.collect::<Vec<_>>(), [ROWS, 4]), device),
        Tensor::from_data(TensorData::new(y.collect::<Vec<_>>(), [ROWS, 1]), device),
    )
}

/// A batch's rows.
pub(crate) const ROWS: usize = 8;

/// A 4-6-1 tanh network's weights.
fn initial(device: &Device) -> [Tensor<2>; 2] {
    let w = |rows: usize, cols: usize, seed: usize| {
        let v = (0..rows * cols).map(|k| ((k * 17 + seed) % 11) as f32 / 11.0 - 0.5);
        Tensor::from_data(TensorData::new(v.collect::<Vec<_>>(), [rows, cols]), device)
    };
    [w(4, 6, 3), w(6, 1, 5)]
}

/// A learning rate that changes every step, as a schedule's does.
fn rate(step: usize) -> f32 {
    0.2 / (1.0 + step as f32)
}

/// One step of SGD with momentum 0.9 (PyTorch's: `v = 0.9·v + g`, `w -= lr·v`) under the
/// squared error, on the inner device's tensors; `lr` a tensor of one element.
fn sgd_step(
    w: [Tensor<2>; 2],
    v: [Tensor<2>; 2],
    (x, y): (Tensor<2>, Tensor<2>),
    lr: Tensor<1>,
) -> ([Tensor<2>; 2], [Tensor<2>; 2], Tensor<1>) {
    let wa = w.clone().map(|w| Tensor::<2>::from_inner(w).require_grad());
    let h = Tensor::<2>::from_inner(x).matmul(wa[0].clone()).tanh();
    let out = h.matmul(wa[1].clone());
    let loss = (out - Tensor::<2>::from_inner(y)).powf_scalar(2.0).mean();
    let grads = loss.backward();
    let g = wa.map(|w| w.grad(&grads).expect("every weight has a gradient"));
    let lr = lr.unsqueeze::<2>();
    let [v0, v1] = v;
    let [g0, g1] = g;
    let v = [v0.mul_scalar(0.9) + g0, v1.mul_scalar(0.9) + g1];
    let [w0, w1] = w;
    let w = [w0 - v[0].clone() * lr.clone(), w1 - v[1].clone() * lr];
    (w, v, loss.inner())
}

/// The weights and losses after [`BATCHES`] eager steps.
fn eager(device: &Device) -> (Vec<Vec<f32>>, Vec<f32>) {
    let mut w = initial(device);
    let mut v = w.clone().map(|w| w.zeros_like());
    let mut losses = Vec::new();
    for i in 0..BATCHES {
        let lr = Tensor::from_data(TensorData::new(vec![rate(i)], [1]), device);
        let (nw, nv, loss) = sgd_step(w, v, batch(i, device), lr);
        (w, v) = (nw, nv);
        losses.push(loss.into_scalar());
    }
    (w.map(values).to_vec(), losses)
}

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().try_to_vec::<f32>().expect("f32 values")
}

/// What the recorded step reads and writes.
struct State {
    w: [Slot<2>; 2],
    v: [Slot<2>; 2],
    x: Slot<2>,
    y: Slot<2>,
    lr: Slot<1>,
}

/// The same steps through [`Hybrid`]: the step recorded once, then each batch and rate
/// written into its slot and the step run; with the number of times the step's code ran.
fn hybrid(device: &Device) -> (Vec<Vec<f32>>, Vec<f32>, bool, usize) {
    let w = initial(device);
    let (x, y) = batch(0, device);
    let state = Rc::new(RefCell::new(State {
        v: w.clone().map(|w| Slot::new(w.zeros_like())),
        w: w.map(Slot::new),
        x: Slot::new(x),
        y: Slot::new(y),
        lr: Slot::new(Tensor::zeros([1], device)),
    }));
    let ran = Rc::new(Cell::new(0));
    let (s, counter) = (state.clone(), ran.clone());
    let mut step = Hybrid::capture(device, move || {
        counter.set(counter.get() + 1);
        let (w, v, loss) = {
            let s = s.borrow();
            let batch = (s.x.read(), s.y.read());
            sgd_step(
                s.w.each_ref().map(Slot::read),
                s.v.each_ref().map(Slot::read),
                batch,
                s.lr.read(),
            )
        };
        let s = &mut *s.borrow_mut();
        for (slot, new) in
            s.w.iter_mut()
                .chain(s.v.iter_mut())
                .zip(w.into_iter().chain(v))
        {
            slot.write(new)
                .expect("the step holds no other handle to its slots");
        }
        loss
    });
    assert_eq!(
        ran.get(),
        CAPTURE_RUNS,
        "capturing runs the step CAPTURE_RUNS times"
    );

    // Capturing trained: the run starts from the initial weights and no momentum.
    {
        let mut s = state.borrow_mut();
        for (slot, w) in s.w.iter_mut().zip(initial(device)) {
            slot.write(w).unwrap();
        }
        for slot in s.v.iter_mut() {
            let zeros = slot.value().zeros_like();
            slot.write(zeros).unwrap();
        }
    }
    let mut losses = Vec::new();
    for i in 0..BATCHES {
        {
            let mut s = state.borrow_mut();
            let (x, y) = batch(i, device);
            s.x.write(x).unwrap();
            s.y.write(y).unwrap();
            s.lr.write(Tensor::from_data(
                TensorData::new(vec![rate(i)], [1]),
                device,
            ))
            .unwrap();
        }
        // SAFETY: the loss is read back before the next run; the slots stay.
        losses.push(unsafe { step.run() }.clone().into_scalar());
    }
    let w = state.borrow().w.each_ref().map(|s| values(s.value()));
    (
        w.to_vec(),
        losses,
        step.is_graph(),
        ran.get() - CAPTURE_RUNS,
    )
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn replayed_equals_eager(device: &Device) -> (bool, usize) {
    let (w, losses) = eager(device);
    let (hw, hlosses, graph, reruns) = hybrid(device);
    assert_eq!(bits(&hlosses), bits(&losses), "the losses, step by step");
    for (a, b) in hw.iter().zip(&w) {
        assert_eq!(bits(a), bits(b), "the weights after {BATCHES} steps");
    }
    assert_ne!(
        w[0],
        values(initial(device)[0].clone()),
        "the steps trained"
    );
    (graph, reruns)
}

#[test]
fn a_replayed_step_equals_the_eager_steps_bit_for_bit_on_wgpu() {
    let (graph, reruns) = replayed_equals_eager(&wgpu().autodiff());
    assert!(graph, "wgpu replays recorded dispatches");
    assert_eq!(reruns, 0, "a replay does not run the step's code");
}

#[test]
fn a_rerun_step_equals_the_eager_steps_bit_for_bit_on_flex() {
    let (graph, reruns) = replayed_equals_eager(&Device::flex().autodiff());
    assert!(!graph, "burn-flex has no graphs");
    assert_eq!(
        reruns, BATCHES,
        "without a graph the step runs again for each batch"
    );
}

/// The rate while recording, and the one set after.
const RECORDED: f32 = 0.5;
const LATER: f32 = 0.25;

/// The hazard slots exist for: a rate passed as a number is recorded with the launch, so a
/// replay keeps the rate of the recording where a rerun reads the new one.
fn scaled_after_capture(device: &Device) -> f32 {
    let w = Rc::new(RefCell::new(Slot::new(Tensor::<1>::ones([4], device))));
    let rate = Rc::new(Cell::new(RECORDED));
    let (ws, r) = (w.clone(), rate.clone());
    let mut step = Hybrid::capture(device, move || {
        let new = ws.borrow().read().mul_scalar(1.0 - r.get());
        ws.borrow_mut().write(new).unwrap();
    });
    w.borrow_mut().write(Tensor::ones([4], device)).unwrap();
    rate.set(LATER);
    // SAFETY: nothing read from the slot is held; the slot stays.
    unsafe { step.run() };
    let v = values(w.borrow().value());
    v[0]
}

#[test]
fn a_number_given_to_a_launch_stays_the_recordings_while_a_rerun_reads_the_new_one() {
    assert_eq!(scaled_after_capture(&wgpu()), 1.0 - RECORDED, "replayed");
    assert_eq!(
        scaled_after_capture(&Device::flex()),
        1.0 - LATER,
        "run again"
    );
}

/// Why slots are written in place: a slot replaced by a new one after the recording is not
/// what a replay reads.
fn doubled_after_replacing(device: &Device) -> f32 {
    let x = Rc::new(RefCell::new(Slot::new(Tensor::<1>::ones([4], device))));
    let xs = x.clone();
    let mut step = Hybrid::capture(device, move || xs.borrow().read().mul_scalar(2.0));
    *x.borrow_mut() = Slot::new(Tensor::full([4], 5.0, device));
    // SAFETY (the hazard, on purpose): the replaced slot's buffer stays alive in the
    // recording, and nothing else reads it.
    let out = unsafe { step.run() }.clone();
    values(out)[0]
}

#[test]
fn a_replaced_slot_is_not_what_a_replay_reads() {
    assert_eq!(
        doubled_after_replacing(&wgpu()),
        2.0,
        "replayed: the recorded buffer"
    );
    assert_eq!(
        doubled_after_replacing(&Device::flex()),
        10.0,
        "run again: the new slot"
    );
}

#[test]
fn a_slot_refuses_another_shape_and_a_write_while_it_is_read() {
    let device = Device::flex();
    let mut slot = Slot::new(Tensor::<2>::ones([2, 3], &device));
    let err = slot.write(Tensor::zeros([3, 2], &device)).unwrap_err();
    assert!(
        matches!(&err, Error::Shape { got, .. } if got == &vec![3, 2]),
        "{err}"
    );
    let held = slot.read();
    let err = slot.write(Tensor::zeros([2, 3], &device)).unwrap_err();
    assert!(err.to_string().contains("still alive"), "{err}");
    drop(held);
    slot.write(Tensor::zeros([2, 3], &device)).unwrap();
    assert_eq!(values(slot.value()), vec![0.0; 6]);
    // A copy from `value` is not changed by a later write.
    let before = slot.value();
    slot.write(Tensor::ones([2, 3], &device)).unwrap();
    assert_eq!(values(before), vec![0.0; 6]);
}
