//! The chapter's MLP (512-2048-512-1) learns a synthetic target on flex and on wgpu.

use burn::prelude::*;
use ember::{Activation, Block, Dense, Init, L2Loss, Loss, NdTensor, Optimizer, Sequential};
use ember_datasets::Synthetic;

use super::common::wgpu;

/// The chapter's MLP (512-2048-512-1) learns a learnable synthetic target.
fn chapter_mlp_learns_on(device: &Device, batch: usize, steps: usize) {
    device.seed(7);
    let data = Synthetic::regression(batch, 512, 0.01, 11);
    let mut net: Sequential = Sequential::new()
        .add(Dense::new(2048).activation(Activation::Relu))
        .add(Dense::new(512).activation(Activation::Relu))
        .add(Dense::new(1))
        .initialize(Init::default(), device)
        .infer_shape(Tensor::<2>::zeros([1, 512], device))
        .unwrap();
    let mut trainer = Optimizer::new(&net, "sgd", 0.004).unwrap();
    let mut losses = Vec::new();
    for step in 0..steps {
        let b = data.batch(step as u64 % 4);
        let x = b.x_on(device).unwrap();
        let y = NdTensor::from_host(&b.y, &b.y_shape, device)
            .unwrap()
            .rank();
        let l = L2Loss.forward(net.forward(x).rank(), y).unwrap();
        losses.push(l.clone().mean().into_scalar::<f32>());
        net = trainer.step(net, l.backward(), batch).unwrap();
    }
    assert_eq!(
        net.collect_params().get("0.weight").unwrap().shape,
        [2048, 512]
    );
    eprintln!("losses: {losses:?}");
    // The data cycles through 4 batches: compare each batch with itself, first visit to last.
    let first: f32 = losses[..4].iter().sum::<f32>() / 4.0;
    let last: f32 = losses[steps - 4..].iter().sum::<f32>() / 4.0;
    assert!(
        losses.iter().all(|l| l.is_finite())
            && (0..4).all(|b| losses[steps - 4 + b] < losses[b])
            && last < 0.8 * first,
        "loss did not decrease: {losses:?}"
    );
}

#[test]
fn chapter_mlp_learns_on_flex() {
    chapter_mlp_learns_on(&Device::flex().autodiff(), 64, 16);
}

#[test]
fn chapter_mlp_learns_on_wgpu() {
    chapter_mlp_learns_on(&wgpu().autodiff(), 64, 16);
}
