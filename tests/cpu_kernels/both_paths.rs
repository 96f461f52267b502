//! The harness: a layer run on both paths in one process, its output and gradients compared.

use burn::prelude::*;
use burn::tensor::Gradients;
use ember::kernels::{self, Kernels};
use ember::{Block, Init, NdTensor};

/// Deterministic values in [-1, 1) (a 64-bit LCG), so each case is reproducible.
pub fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

pub fn host(t: NdTensor) -> Vec<f32> {
    t.flatten().into_data().try_to_vec::<f32>().unwrap()
}

/// The output, the input's gradient and the parameters' gradients of `sum(block(x) · g)`.
pub fn run<B: Block>(
    block: &B,
    shape: &[usize],
    params: &dyn Fn(&B, &Gradients) -> Vec<Vec<f32>>,
) -> Vec<(String, Vec<f32>)> {
    let device = Device::flex().autodiff();
    let n = shape.iter().product();
    let x = NdTensor::from_host(&values(n, 7), shape, &device)
        .unwrap()
        .require_grad();
    let y = block.forward(x.clone());
    let dims = y.dims();
    let g = NdTensor::from_host(&values(dims.iter().product(), 11), &dims, &device).unwrap();
    let grads = (y.clone().flatten() * g.flatten()).sum().backward();
    let mut out = vec![
        ("output".to_string(), host(y)),
        ("input gradient".to_string(), host(x.grad(&grads).unwrap())),
    ];
    for (i, p) in params(block, &grads).into_iter().enumerate() {
        out.push((format!("parameter {i} gradient"), p));
    }
    out
}

/// `block` initialized and its sizes inferred for inputs of `shape`, on burn-flex's autodiff.
pub fn ready<B: Block>(block: B, shape: &[usize]) -> B {
    let device = Device::flex().autodiff();
    let block = block.initialize(Init::Xavier, &device);
    let x = NdTensor::zeros(shape, &device).unwrap();
    kernels::with_kernels(Kernels::Flex, || block.infer_shape(x).unwrap())
}

/// Runs `block` on both paths and compares them.
pub fn same<B: Block>(
    what: &str,
    block: B,
    shape: &[usize],
    params: &dyn Fn(&B, &Gradients) -> Vec<Vec<f32>>,
) {
    compare(what, &ready(block, shape), shape, params);
}

/// Runs a ready `block` on both paths and compares them.
pub fn compare<B: Block>(
    what: &str,
    block: &B,
    shape: &[usize],
    params: &dyn Fn(&B, &Gradients) -> Vec<Vec<f32>>,
) {
    compare_within(what, block, shape, params, 1e-5);
}

/// `compare`, within `tolerance` of the largest value.
pub fn compare_within<B: Block>(
    what: &str,
    block: &B,
    shape: &[usize],
    params: &dyn Fn(&B, &Gradients) -> Vec<Vec<f32>>,
    tolerance: f32,
) {
    let fast = on_onednn(what, || run(block, shape, params));
    let reference = kernels::with_kernels(Kernels::Flex, || run(block, shape, params));
    close_within(what, &fast, &reference, tolerance);
}

/// `f` on the oneDNN path, checked to have run there: something ran, nothing fell back.
pub fn on_onednn<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let (ran_before, _) = kernels::counts();
    let out = kernels::with_kernels(Kernels::OneDnn, f);
    let (ran_after, fell_back) = kernels::counts();
    assert!(
        fell_back.is_empty(),
        "{what}: oneDNN fell back: {fell_back:?}"
    );
    assert!(
        ran_after > ran_before,
        "{what}: oneDNN ran nothing ({})",
        kernels::status().detail
    );
    out
}

/// Each named array of `fast` within 1e-5 of the largest value of `reference`'s.
pub fn close(what: &str, fast: &[(String, Vec<f32>)], reference: &[(String, Vec<f32>)]) {
    close_within(what, fast, reference, 1e-5);
}

/// Each named array of `fast` within `tolerance` of the largest value of `reference`'s.
pub fn close_within(
    what: &str,
    fast: &[(String, Vec<f32>)],
    reference: &[(String, Vec<f32>)],
    tolerance: f32,
) {
    assert_eq!(fast.len(), reference.len());
    for ((name, a), (_, b)) in fast.iter().zip(reference) {
        assert_eq!(a.len(), b.len(), "{what}: {name}: lengths");
        let scale = b.iter().fold(0f32, |m, v| m.max(v.abs()));
        let diff = a.iter().zip(b).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(
            scale > 0.0,
            "{what}: {name} is all zeros: the case tests nothing"
        );
        assert!(
            diff <= tolerance * scale,
            "{what}: {name}: largest difference {diff:e}, {:e} of the largest value {scale:e}",
            diff / scale
        );
    }
}

pub fn grad<const D: usize>(t: Tensor<D>, grads: &Gradients) -> Vec<f32> {
    t.grad(grads)
        .expect("a gradient")
        .into_data()
        .try_to_vec::<f32>()
        .unwrap()
}

/// Every trainable parameter's gradient, in the module's order (BatchNorm's running statistics
/// are visited too, and have none).
pub fn every_gradient<B: burn::module::Module>(block: &B, grads: &Gradients) -> Vec<Vec<f32>> {
    struct Visitor<'a> {
        grads: &'a Gradients,
        out: Vec<Vec<f32>>,
    }
    impl burn::module::ModuleVisitor for Visitor<'_> {
        fn visit_float<const D: usize>(&mut self, param: &burn::module::Param<Tensor<D>>) {
            if let Some(g) = param.val().grad(self.grads) {
                self.out.push(g.into_data().try_to_vec::<f32>().unwrap());
            }
        }
    }
    let mut visitor = Visitor {
        grads,
        out: Vec::new(),
    };
    block.visit(&mut visitor);
    visitor.out
}
