//! Mixed precision in a training run (`Fit::precision`): the forward passes' products in bf16
//! on every replica, the master weights, the loss and the update in f32; and a device whose
//! backend has no bf16 arithmetic refused before the first step. The layers' bf16 numerics
//! against PyTorch's autocast are in tests/layers/autocast.rs.

use burn::prelude::*;
use ember::{
    Activation, Block, Dense, Init, Optimizer, Precision, Replicas, Sequential,
    SoftmaxCrossEntropyLoss,
};
use ember_datasets::{DataLoader, Examples};
use ember_trainer::fit::{Fit, FitRun};

use super::common::params::{flat, max_difference};

/// 96 examples of 16 features in 3 classes: the class is the largest of three fixed
/// projections of the features, which the network can learn.
fn examples() -> Examples {
    let x: Vec<f32> = (0..96 * 16).map(|i| (i as f32 * 0.37).sin()).collect();
    let labels: Vec<usize> = x
        .chunks(16)
        .map(|row| {
            let score = |k: usize| -> f32 {
                row.iter()
                    .enumerate()
                    .map(|(j, v)| v * ((j * 3 + k) as f32).cos())
                    .sum()
            };
            (0..3)
                .max_by(|&a, &b| score(a).total_cmp(&score(b)))
                .unwrap()
        })
        .collect();
    Examples::classification(x, 16, labels, 3).unwrap()
}

fn network(device: &Device) -> Sequential {
    Sequential::new()
        .add(Dense::new(32).activation(Activation::Relu))
        .add(Dense::new(3))
        .initialize(Init::default(), device)
        .infer_shape(Tensor::<2>::zeros([1, 16], device))
        .unwrap()
}

/// Four epochs of batches of 16, SGD at 0.5, in `precision`, on `replicas` flex devices.
fn train(net: &Sequential, precision: Precision, replicas: usize) -> FitRun<Sequential> {
    let device = Device::flex().autodiff();
    let optimizer = Optimizer::new(net, "sgd", 0.5).unwrap();
    let replicas = Replicas::new(vec![device.clone(); replicas]).unwrap();
    let mut data = DataLoader::new(examples(), 16).unwrap().shuffle(3);
    Fit::new(net.clone(), SoftmaxCrossEntropyLoss, optimizer, &device)
        .replicas(replicas)
        .epochs(4)
        .precision(precision)
        .run(&mut data)
        .unwrap()
}

fn losses(run: &FitRun<Sequential>) -> Vec<f64> {
    run.trace
        .batches
        .iter()
        .map(|b| f64::from(b.loss))
        .collect()
}

/// The largest difference between two runs' losses, relative to the larger.
fn loss_difference(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(a, b)| (a - b).abs() / a.abs().max(b.abs()))
        .fold(0.0, f64::max)
}

#[test]
fn bf16_products_train_f32_master_weights_close_to_the_f32_run() {
    let net = network(&Device::flex().autodiff());
    for replicas in [1, 2] {
        let f32 = train(&net, Precision::F32, replicas);
        let bf16 = train(&net, Precision::Bf16, replicas);
        let (a, b) = (losses(&f32), losses(&bf16));
        assert_eq!(a.len(), 24);
        // The products ran in bf16 (the losses moved by more than two f32 kernels differ, here
        // the f32 run's, oneDNN's, and bf16's, oneDNN's where it multiplies bf16, else
        // burn-flex's; on an AVX2 EPYC the runs differed by 3e-3), and the run follows the f32
        // one within bf16's rounding.
        let apart = loss_difference(&a, &b);
        assert!(
            apart > 1e-3 && apart < 0.03,
            "{replicas} replica(s): {apart}\nf32  {a:?}\nbf16 {b:?}"
        );
        assert!(b[18..].iter().all(|l| *l < 0.8 * b[0]), "it trains: {b:?}");
        // The parameters stay f32, updated in f32: the weights moved apart by more than f32's
        // rounding, by less than the update itself.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bf16.safetensors");
        bf16.net.save_parameters(&path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        for (name, tensor) in file.tensors() {
            assert_eq!(tensor.dtype(), safetensors::Dtype::F32, "{name}");
        }
        let (trained, start) = (flat(&bf16.net), flat(&net));
        let apart = max_difference(&flat(&f32.net), &trained);
        assert!(
            apart > 1e-6 && apart < 0.1 * max_difference(&start, &trained),
            "{apart}"
        );
    }
}

#[test]
fn a_device_without_bf16_arithmetic_is_refused_before_the_first_step() {
    // burn's wgpu (WGSL) has no bf16; CI's wgpu is lavapipe.
    let wgpu = ember::DeviceName::Wgpu.resolve().unwrap().device.autodiff();
    let net = network(&wgpu);
    let optimizer = Optimizer::new(&net, "sgd", 0.5).unwrap();
    let mut data = DataLoader::new(examples(), 16).unwrap();
    let err = Fit::new(net, SoftmaxCrossEntropyLoss, optimizer, &wgpu)
        .precision(Precision::Bf16)
        .run(&mut data)
        .err()
        .expect("bf16 on wgpu must be refused");
    let text = err.to_string();
    assert!(
        text.contains("invalid precision bf16") && text.contains("no bf16 arithmetic"),
        "{text}"
    );
}
