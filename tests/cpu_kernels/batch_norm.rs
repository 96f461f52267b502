//! BatchNorm on both paths: training (the batch's statistics) with the gradients of the input,
//! γ and β, and the running statistics it leaves; inference (the running statistics), outside
//! autodiff and, with the training flag off, under it.

use burn::module::{Flag, Module, ModuleMapper, Param};
use burn::prelude::*;
use burn::tensor::Gradients;
use ember::kernels::{self, Kernels};
use ember::{BatchNorm, Block, NdTensor};

use super::both_paths::{close, compare, grad, host, on_onednn, ready, values};

/// Shapes of rank 2 to 5, with batch 1 and odd sizes.
const SHAPES: &[&[usize]] = &[
    &[4, 5],
    &[1, 3, 5, 7],
    &[3, 6, 4, 5],
    &[2, 7, 9],
    &[2, 3, 2, 3, 4],
];

/// Sets γ and β to values around 1 and 0 (their initial ones and zeros would hide a swap of the
/// two, or γ left out), and optionally turns the training flag off.
struct Spread {
    seed: u64,
    training: bool,
}

impl ModuleMapper for Spread {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        self.seed += 1;
        let seed = self.seed;
        param.map(|t| {
            let dims = t.dims();
            let v: Vec<f32> = values(dims.iter().product(), seed)
                .iter()
                .map(|v| v + 0.5 * (seed % 2) as f32)
                .collect();
            Tensor::from_data(TensorData::new(v, dims), &t.device()).require_grad()
        })
    }

    fn map_flag(&mut self, flag: Param<Flag>) -> Param<Flag> {
        if self.training {
            flag
        } else {
            Param::from_bool(false)
        }
    }
}

fn spread(bn: BatchNorm, training: bool) -> BatchNorm {
    bn.map(&mut Spread { seed: 0, training })
}

fn parameter_grads(bn: &BatchNorm, grads: &Gradients) -> Vec<Vec<f32>> {
    let norm = bn.norm().unwrap();
    vec![grad(norm.gamma.val(), grads), grad(norm.beta.val(), grads)]
}

fn running(bn: &BatchNorm) -> Vec<(String, Vec<f32>)> {
    let norm = bn.norm().unwrap();
    let host = |t: Tensor<1>| t.into_data().try_to_vec::<f32>().unwrap();
    vec![
        ("running mean".into(), host(norm.running_mean.value_sync())),
        (
            "running variance".into(),
            host(norm.running_var.value_sync()),
        ),
    ]
}

#[test]
fn batch_norm_matches_flex_in_training() {
    for &shape in SHAPES {
        let what = format!("BatchNorm training on {shape:?}");
        let bn = spread(ready(BatchNorm::new(), shape), true);
        compare(&what, &bn, shape, &parameter_grads);

        // The running statistics each path leaves, from the same start (a clone would share
        // them: burn keeps running statistics behind a shared lock).
        let device = Device::flex().autodiff();
        let x = NdTensor::from_host(&values(shape.iter().product(), 3), shape, &device).unwrap();
        let after = |kernels: Kernels| {
            let bn = spread(ready(BatchNorm::new().momentum(0.7), shape), true);
            kernels::with_kernels(kernels, || bn.forward(x.clone()));
            running(&bn)
        };
        let fast = on_onednn(&what, || after(Kernels::OneDnn));
        let reference = after(Kernels::Flex);
        // Not the initial zeros and ones: the batch's statistics moved them.
        assert!(
            reference[0].1.iter().any(|m| m.abs() > 1e-3),
            "{reference:?}"
        );
        assert!(
            reference[1].1.iter().any(|v| (v - 1.0).abs() > 1e-3),
            "{reference:?}"
        );
        close(&format!("{what}: running statistics"), &fast, &reference);
    }
}

#[test]
fn batch_norm_matches_flex_in_inference() {
    for &shape in SHAPES {
        let what = format!("BatchNorm inference on {shape:?}");
        let device = Device::flex().autodiff();
        let x = NdTensor::from_host(&values(shape.iter().product(), 3), shape, &device).unwrap();
        let bn = spread(ready(BatchNorm::new().momentum(0.2), shape), true);
        // One training step moves the running statistics away from zeros and ones.
        kernels::with_kernels(Kernels::Flex, || bn.forward(x));

        // Outside autodiff: `valid()`, what `fit` evaluates.
        let valid = bn.valid();
        let plain = NdTensor::from_host(&values(shape.iter().product(), 9), shape, &Device::flex())
            .unwrap();
        let out = |kernels| {
            let y = kernels::with_kernels(kernels, || valid.forward(plain.clone()));
            vec![("output".to_string(), host(y))]
        };
        close(
            &what,
            &on_onednn(&what, || out(Kernels::OneDnn)),
            &out(Kernels::Flex),
        );

        // Under autodiff with the training flag off: the running statistics, differentiated.
        let frozen = spread(bn, false);
        compare(
            &format!("{what}, under autodiff"),
            &frozen,
            shape,
            &parameter_grads,
        );
    }
}
