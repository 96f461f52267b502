//! Layers in a row: oneDNN's convolutions write channels-last views that the next BatchNorm,
//! activation, pooling and convolution read as they are, and gradients arrive in either order.
//! The chain's output and every gradient (input and each parameter) match burn-flex's within
//! 1e-4 of the largest value: ten layers, two BatchNorms among them, add up rounding that a
//! single layer keeps under 1e-5, while an array read in the wrong order is off by the order
//! of the values themselves.

use burn::prelude::*;
use burn::tensor::Gradients;
use ember::{Activation, AvgPool2D, BatchNorm, Conv2D, Dense, MaxPool2D, Sequential};

use super::both_paths::{compare_within, every_gradient, ready};

fn all_grads(net: &Sequential, grads: &Gradients) -> Vec<Vec<f32>> {
    let out = every_gradient(net, grads);
    // Weights of the three convolutions and the Dense layer, the biases of the last three,
    // and γ and β of both BatchNorms.
    assert_eq!(out.len(), 11, "gradients found");
    out
}

#[test]
fn a_chain_of_layers_matches_flex() {
    for shape in [&[3, 2, 13, 11][..], &[1, 3, 9, 9]] {
        // Conv → BN → ReLU → max pool → conv with a fused sigmoid → BN → tanh → average pool
        // → conv → Dense: each layer after the first reads its input as the one before wrote it.
        let net: Sequential = Sequential::new()
            // No bias before BatchNorm: its gradient is zero but for rounding.
            .add(Conv2D::new(8, 3).padding(1).use_bias(false))
            .add(BatchNorm::new())
            .add(Activation::Relu)
            .add(MaxPool2D::new(2).strides(2).padding(1))
            .add(Conv2D::new(5, 3).padding(1).activation(Activation::Sigmoid))
            .add(BatchNorm::new())
            .add(Activation::Tanh)
            .add(AvgPool2D::new(2).strides(1))
            .add(Conv2D::new(4, 1).strides(2))
            .add(Dense::new(3));
        // The same parameters on every run.
        Device::flex().autodiff().seed(11);
        let net = ready(net, shape);
        compare_within(
            &format!("chain on {shape:?}"),
            &net,
            shape,
            &all_grads,
            1e-4,
        );
    }
}
