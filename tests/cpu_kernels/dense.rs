//! Dense on both CPU paths: oneDNN's product with its activation fused, over the examples
//! flattened or (`flatten(false)`) over every position of a sequence or an image.

use ember::{Activation, Dense};

use super::both_paths::{grad, same};

fn dense_grads(b: &Dense, grads: &burn::tensor::Gradients) -> Vec<Vec<f32>> {
    let inner = b.linear().unwrap();
    let mut v = vec![grad(inner.weight.val(), grads)];
    if let Some(bias) = &inner.bias {
        v.push(grad(bias.val(), grads));
    }
    v
}

#[test]
fn dense_matches_flex() {
    let cases: &[(&[usize], usize, bool, Option<Activation>)] = &[
        (&[1, 40], 16, true, Some(Activation::Relu)),
        (&[33, 17], 9, false, Some(Activation::Sigmoid)),
        (&[4, 3, 5, 5], 10, true, None),
        (&[16, 512], 2048, true, Some(Activation::Relu)),
        (&[6, 13], 3, true, Some(Activation::Tanh)),
        (&[5, 8], 4, true, Some(Activation::SoftRelu)),
        (&[3, 11], 6, true, Some(Activation::Gelu)),
    ];
    for &(shape, units, bias, act) in cases {
        let mut dense = Dense::new(units).use_bias(bias);
        if let Some(a) = act {
            dense = dense.activation(a);
        }
        let what = format!("Dense {shape:?} → {units}, bias {bias}, {act:?}");
        same(&what, dense, shape, &dense_grads);
    }
}

/// `flatten(false)` on sequences and images: the positions along the leading axes are the
/// product's rows (a language model's scores over its vocabulary at every step).
#[test]
fn dense_over_the_last_axis_matches_flex() {
    let cases: &[(&[usize], usize, bool, Option<Activation>)] = &[
        (&[4, 7, 9], 5, true, Some(Activation::Gelu)),
        (&[2, 3, 4, 6], 3, false, None),
        (&[1, 35, 32], 61, true, Some(Activation::Tanh)),
    ];
    for &(shape, units, bias, act) in cases {
        let mut dense = Dense::new(units).use_bias(bias).flatten(false);
        if let Some(a) = act {
            dense = dense.activation(a);
        }
        let what = format!("Dense {shape:?} → {units} over the last axis, bias {bias}, {act:?}");
        same(&what, dense, shape, &dense_grads);
    }
}
