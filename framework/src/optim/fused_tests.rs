use burn::optim::{AdamConfig, AdamWConfig, Optimizer as _};
use burn::tensor::{Device, Tensor, TensorData};

use super::*;

/// Values of many magnitudes and both signs, from `seed`.
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let unit = (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            unit * 10f32.powi((x % 7) as i32 - 4)
        })
        .collect()
}

fn tensor(n: usize, seed: u64, device: &Device) -> Tensor<2> {
    Tensor::from_data(TensorData::new(values(n, seed), [n / 8, 8]), device)
}

fn bits(t: &Tensor<2>) -> Vec<u32> {
    t.to_data()
        .as_slice::<f32>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

/// `a` and `b` hold the same bits; else the first element that differs, named.
fn same_bits(a: &Tensor<2>, b: &Tensor<2>, what: &str) {
    let (a, b) = (bits(a), bits(b));
    assert_eq!(a.len(), b.len(), "{what}: sizes");
    if let Some(i) = (0..a.len()).find(|&i| a[i] != b[i]) {
        let (x, y) = (f32::from_bits(a[i]), f32::from_bits(b[i]));
        panic!("{what}: element {i} is {x:e} here, {y:e} in burn's update");
    }
}

/// Six steps of `ours` and of `theirs` from the same parameter and gradients: each step's
/// parameter, moments and step count are the same to the bit, whether the parameter is updated
/// where it is (even steps) or, held by another handle too, into a new array (odd steps).
fn same_as_burns<O, T>(ours: &O, theirs: &T, lr: f64)
where
    O: BurnOptimizer,
    T: BurnOptimizer<State<2> = O::State<2>>,
    O::State<2>: Moment,
{
    let device = Device::flex();
    let n = 4096;
    let (mut a, mut b) = (tensor(n, 1, &device), tensor(n, 1, &device));
    let (mut sa, mut sb) = (None, None);
    for step in 0..6 {
        let grad = tensor(n, 100 + step, &device);
        let held = (step % 2 == 1).then(|| a.clone());
        (a, sa) = ours.step(lr, a, grad.clone(), sa);
        drop(held);
        (b, sb) = theirs.step(lr, b, grad, sb);
        let (ma, mb) = (
            sa.as_ref().unwrap().moments(),
            sb.as_ref().unwrap().moments(),
        );
        same_bits(&a, &b, &format!("the parameter after step {step}"));
        same_bits(&ma.moment_1, &mb.moment_1, &format!("m after step {step}"));
        same_bits(&ma.moment_2, &mb.moment_2, &format!("v after step {step}"));
        assert_eq!(ma.time, mb.time);
    }
}

trait Moment {
    fn moments(&self) -> &AdaptiveMomentumState<2>;
}
impl Moment for AdamState<2> {
    fn moments(&self) -> &AdaptiveMomentumState<2> {
        &self.momentum
    }
}
impl Moment for AdamWState<2> {
    fn moments(&self) -> &AdaptiveMomentumState<2> {
        &self.momentum
    }
}

/// ember's Adam and burn's own, β₁ 0.9, β₂ 0.999, ε 1e-8.
fn adam(penalty: Option<f32>) -> (Adam, burn::optim::Adam) {
    let decay = penalty.map(burn::optim::decay::WeightDecayConfig::new);
    let config = AdamConfig::new()
        .with_epsilon(1e-8)
        .with_weight_decay(decay);
    let moments = Moments {
        beta1: 0.9,
        beta2: 0.999,
        epsilon: 1e-8,
    };
    let burn = config.build();
    (
        Adam {
            burn,
            moments,
            penalty,
        },
        config.build(),
    )
}

/// ember's AdamW and burn's own, β₁ 0.8, β₂ 0.99, ε 1e-6.
fn adamw(weight_decay: f32) -> (AdamW, burn::optim::AdamW) {
    let config = AdamWConfig::new()
        .with_beta_1(0.8)
        .with_beta_2(0.99)
        .with_epsilon(1e-6)
        .with_weight_decay(weight_decay);
    let (beta1, beta2, epsilon) = (0.8, 0.99, 1e-6);
    let moments = Moments {
        beta1,
        beta2,
        epsilon,
    };
    let burn = config.build();
    (
        AdamW {
            burn,
            moments,
            weight_decay,
        },
        config.build(),
    )
}

#[test]
fn adam_in_one_pass_is_burns_adam_to_the_bit() {
    for penalty in [None, Some(0.01)] {
        let (ours, theirs) = adam(penalty);
        same_as_burns(&ours, &theirs, 0.01);
        same_as_burns(&ours, &theirs, 1e-3 / 3.0);
    }
}

#[test]
fn adamw_in_one_pass_is_burns_adamw_to_the_bit() {
    for weight_decay in [0.0, 0.01, 0.1] {
        let (ours, theirs) = adamw(weight_decay);
        same_as_burns(&ours, &theirs, 0.01);
        same_as_burns(&ours, &theirs, 1e-3 / 3.0);
    }
}

#[test]
fn a_parameter_held_elsewhere_is_left_as_it_was() {
    let (ours, _) = adam(None);
    let device = Device::flex();
    let param = tensor(64, 1, &device);
    let kept = bits(&param);
    let held = param.clone();
    let (stepped, state) = ours.step(0.1, param, tensor(64, 2, &device), None);
    assert_ne!(bits(&stepped), kept, "the step changed nothing");
    assert_eq!(
        bits(&held),
        kept,
        "the step wrote into an array another handle holds"
    );
    // The moments another handle holds are kept too.
    let state = state.unwrap();
    let m = bits(&state.momentum.moment_1);
    let held_state = state.clone();
    let _ = ours.step(0.1, stepped, tensor(64, 3, &device), Some(state));
    assert_eq!(bits(&held_state.momentum.moment_1), m);
}

#[test]
fn where_one_pass_does_not_apply_burns_update_runs() {
    let (ours, theirs) = adam(None);
    let device = Device::flex();
    // A gradient that is a transposed view: not contiguous.
    let grad = tensor(64, 2, &device).reshape([8, 8]).transpose();
    let param = tensor(64, 1, &device).reshape([8, 8]);
    assert!(Pass::of(&param, &grad, None).is_none());
    let (a, _) = ours.step(0.1, param.clone(), grad.clone(), None);
    let (b, _) = theirs.step(0.1, param, grad, None);
    same_bits(&a, &b, "the transposed gradient's update");
    // Moments of as many elements in another shape (a state that is not this parameter's).
    let param = tensor(64, 1, &device);
    let other = tensor(64, 3, &device).reshape([4, 16]);
    let state = AdaptiveMomentumState {
        time: 1,
        moment_1: other.clone(),
        moment_2: other,
        max_moment_2: None,
    };
    assert!(Pass::of(&param, &tensor(64, 2, &device), Some(&state)).is_none());
    // Another device.
    #[allow(deprecated)]
    let other = Device::ndarray();
    let param = tensor(64, 1, &other);
    assert!(Pass::of(&param, &tensor(64, 2, &other), None).is_none());
}

/// A state burn's own Adam saved loads into ember's optimizer (and so the other way: the file
/// is burn's either way), and the next step is the one burn's Adam takes from it.
#[test]
fn a_state_burns_adam_saved_is_read_and_stepped_on_to_the_bit() {
    use crate::{Block, Dense, Init, L2Loss, Loss, Sequential};
    use burn::optim::GradientsParams;

    let device = Device::flex().autodiff();
    let x = tensor(64, 7, &device);
    let y = tensor(16, 8, &device).reshape([8, 2]);
    let net: Sequential = Sequential::new()
        .add(Dense::new(2))
        .initialize(Init::default(), &device);
    let net = net.infer_shape(x.clone()).unwrap();
    let grads = |net: &Sequential| {
        let out = net.forward(x.clone().into()).rank();
        let loss = L2Loss.forward(out, y.clone()).unwrap();
        GradientsParams::from_grads(loss.backward(), net)
    };
    let mut theirs = AdamConfig::new().with_epsilon(1e-8).init();
    let mut net_b = net;
    for _ in 0..2 {
        let g = grads(&net_b);
        net_b = theirs.step(0.01, net_b, g);
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("adam.bpk");
    theirs.save(&path).unwrap();
    let mut ours = crate::Optimizer::new(&net_b, "adam", 0.01)
        .unwrap()
        .load_state(&path)
        .unwrap();
    let net_a = ours.step_params(net_b.clone(), grads(&net_b), 1).unwrap();
    let g = grads(&net_b);
    let net_b = theirs.step(0.01, net_b, g);
    let out = |net: &Sequential| -> Tensor<2> { net.forward(x.clone().into()).rank() };
    same_bits(
        &out(&net_a),
        &out(&net_b),
        "the outputs after the step from the loaded state",
    );
}
