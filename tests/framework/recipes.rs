//! The optimizers, schedules and clipping against PyTorch: 20 steps of the problem that
//! `tests/reference/torch_recipes.py` describes (the tiny network, a new batch a step), the
//! parameters equal within 1e-5, and each schedule's rates within 1e-9. The reference numbers
//! are that script's output, `tests/reference/torch_recipes.out.rs`.

use burn::prelude::*;
use ember::optim::{Clipping, LrSchedule, Schedule, ScheduleAt};
use ember::{L2Loss, Loss, Optimizer, OptimizerKind, Sequential, load_parameters, save_parameters};

use super::tiny_net::{out, read_file, resolved_tiny_net, tiny_weights, write_pytorch_file};

// The file's LeNet summary is tests/cli/recipes.rs's.
#[allow(dead_code)]
mod reference {
    include!("../reference/torch_recipes.out.rs");
}
use reference::*;

const STEPS: u64 = 20;
const PER_EPOCH: u64 = 5;

fn data(t: u64, device: &Device) -> (Tensor<2>, Tensor<2>) {
    let x: Vec<f32> = (0..8)
        .map(|i| ((0.37 * (i + 8 * t) as f64) + 0.1).sin() as f32)
        .collect();
    let y: Vec<f32> = (0..4)
        .map(|j| (2.0 * (0.53 * (j + 4 * t) as f64).cos()) as f32)
        .collect();
    (
        Tensor::<1>::from_floats(x.as_slice(), device).reshape([4, 2]),
        Tensor::<1>::from_floats(y.as_slice(), device).reshape([4, 1]),
    )
}

/// The 20 steps with `trainer` (its rate set by `schedule` where there is one): the
/// parameters after them, flattened in PyTorch's order, and each step's rate.
fn train(mut trainer: Optimizer, schedule: Option<&dyn LrSchedule>) -> (Vec<f32>, Vec<f64>) {
    let device = Device::flex().autodiff();
    let dir = tempfile::tempdir().unwrap();
    let fixed = dir.path().join("fixed.safetensors");
    write_pytorch_file(&fixed, &tiny_weights());
    let mut net: Sequential = load_parameters(resolved_tiny_net(&device), &fixed, &device).unwrap();
    let base = trainer.learning_rate();
    let mut rates = Vec::new();
    for step in 0..STEPS {
        if let Some(schedule) = schedule {
            let at = ScheduleAt {
                step,
                epoch: (step / PER_EPOCH) as usize,
                total: STEPS,
            };
            trainer.set_learning_rate(schedule.rate(base, at));
        }
        rates.push(trainer.learning_rate());
        let (x, y) = data(step, &device);
        let l = L2Loss.forward(out(&net, x), y).unwrap();
        net = trainer.step(net, l.backward(), 4).unwrap();
    }
    let after = dir.path().join("after.safetensors");
    save_parameters(&net, &after).unwrap();
    let saved = read_file(&after);
    let flat = ["0.weight", "0.bias", "1.weight", "1.bias"]
        .iter()
        .flat_map(|name| saved[*name].1.clone())
        .collect();
    (flat, rates)
}

fn trainer(kind: OptimizerKind, lr: f64) -> Optimizer {
    Optimizer::new(&resolved_tiny_net(&Device::flex()), kind, lr).unwrap()
}

fn assert_params(what: &str, got: &[f32], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}");
    let worst = got
        .iter()
        .zip(want)
        .map(|(g, w)| (f64::from(*g) - w).abs())
        .fold(0.0, f64::max);
    assert!(
        worst < 1e-5,
        "{what}: off by {worst:e}\n got {got:?}\nwant {want:?}"
    );
}

#[test]
fn every_optimizer_matches_pytorch_after_20_steps() {
    let sgd = OptimizerKind::sgd();
    let nesterov = sgd
        .with_momentum(0.9)
        .and_then(|k| k.with_nesterov(true))
        .and_then(|k| k.with_weight_decay(0.01))
        .unwrap();
    let adam_wd = OptimizerKind::adam().with_weight_decay(0.001).unwrap();
    let adamw_options = OptimizerKind::adamw()
        .with_beta1(0.8)
        .and_then(|k| k.with_beta2(0.99))
        .and_then(|k| k.with_epsilon(1e-6))
        .and_then(|k| k.with_weight_decay(0.1))
        .unwrap();
    let rmsprop_momentum = OptimizerKind::rmsprop()
        .with_momentum(0.5)
        .and_then(|k| k.with_weight_decay(0.01))
        .unwrap();
    let cases: [(&str, OptimizerKind, f64, &[f64]); 8] = [
        ("sgd", sgd, 0.1, &SGD),
        ("sgd nesterov wd", nesterov, 0.05, &SGD_NESTEROV_WD),
        ("adam wd", adam_wd, 0.01, &ADAM_WD),
        ("adamw", "adamw".parse().unwrap(), 0.01, &ADAMW),
        ("adamw options", adamw_options, 0.02, &ADAMW_OPTIONS),
        ("rmsprop", "rmsprop".parse().unwrap(), 0.01, &RMSPROP),
        (
            "rmsprop momentum wd",
            rmsprop_momentum,
            0.01,
            &RMSPROP_MOMENTUM_WD,
        ),
        ("adagrad", "adagrad".parse().unwrap(), 0.1, &ADAGRAD),
    ];
    for (what, kind, lr, want) in cases {
        assert_params(what, &train(trainer(kind, lr), None).0, want);
    }
    // The cases differ from each other by more than the tolerance: none passes on another's
    // numbers.
    assert!((ADAMW[0] - ADAM_WD[0]).abs() > 1e-3 && (SGD[0] - ADAGRAD[0]).abs() > 1e-3);
}

#[test]
fn every_schedule_matches_pytorchs_per_batch_rates_and_parameters() {
    let momentum = OptimizerKind::sgd().with_momentum(0.9).unwrap();
    let cases: [(&str, &[f64], &[f64]); 6] = [
        ("cosine", &COSINE, &COSINE_LR),
        ("cosine:warmup=4", &COSINE_WARMUP, &COSINE_WARMUP_LR),
        ("step:1:0.5", &STEP, &STEP_LR),
        ("multistep:1,3:0.1", &MULTISTEP, &MULTISTEP_LR),
        ("poly:2", &POLY, &POLY_LR),
        ("onecycle:0.2", &ONECYCLE, &ONECYCLE_LR),
    ];
    for (spec, want, want_rates) in cases {
        let schedule: Schedule = spec.parse().unwrap();
        schedule.check(STEPS).unwrap();
        let (params, rates) = train(trainer(momentum, 0.1), Some(&schedule));
        for (step, (got, want)) in rates.iter().zip(want_rates).enumerate() {
            assert!(
                (got - want).abs() < 1e-9,
                "{spec} step {step}: {got} != {want}"
            );
        }
        assert_params(spec, &params, want);
    }
}

#[test]
fn global_norm_and_value_clipping_match_pytorch() {
    let sgd = || trainer(OptimizerKind::sgd(), 0.1);
    let norm = Clipping::global_norm(0.1).unwrap();
    let value = Clipping::value(0.02).unwrap();
    let both = norm.with_value(0.02).unwrap();
    assert_params("norm", &train(sgd().clip(norm), None).0, &CLIP_NORM);
    assert_params("value", &train(sgd().clip(value), None).0, &CLIP_VALUE);
    assert_params("both", &train(sgd().clip(both), None).0, &CLIP_BOTH);
    // The clipping bites: without it the steps are plain SGD's, far from these.
    assert!((SGD[0] - CLIP_NORM[0]).abs() > 1e-2);
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let err = Clipping::global_norm(bad).unwrap_err().to_string();
        assert!(err.contains("clip norm"), "{err}");
    }
}
