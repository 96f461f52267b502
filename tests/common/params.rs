//! A network's parameters as numbers, to compare two runs.

use std::collections::BTreeMap;
use std::path::Path;

use burn::module::{Module, ModuleVisitor, Param};
use burn::prelude::*;
use burn::tensor::Distribution;
use ember::Sequential;

/// Every parameter's values, in visiting order.
struct Flatten(Vec<f32>);

impl ModuleVisitor for Flatten {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let values = param.val().into_data().convert::<f32>().try_to_vec::<f32>();
        self.0.extend(values.unwrap());
    }
}

pub fn flat(net: &Sequential) -> Vec<f32> {
    let mut visitor = Flatten(Vec::new());
    net.visit(&mut visitor);
    visitor.0
}

pub fn max_difference(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max)
}

/// Every parameter moved by noise (σ 0.3), so that the biases an initialization leaves at zero
/// (`in_proj_bias`) and LayerNorm's ones and zeros take part in a comparison; a trainable
/// parameter stays trainable.
pub struct Noisy;

impl burn::module::ModuleMapper for Noisy {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        param.map(|t| {
            let noise = Tensor::random(t.shape(), Distribution::Normal(0.0, 0.3), &t.device());
            let trainable = t.is_require_grad();
            (t + noise).detach().set_require_grad(trainable)
        })
    }
}

/// The safetensors file's tensors, by name, as raw bytes.
pub fn tensors(path: &Path) -> BTreeMap<String, Vec<u8>> {
    let bytes = std::fs::read(path).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    file.tensors()
        .into_iter()
        .map(|(name, view)| (name, view.data().to_vec()))
        .collect()
}

/// A safetensors file of `f32` tensors: each tensor's values, by name.
pub fn floats(path: &Path) -> BTreeMap<String, Vec<f32>> {
    tensors(path)
        .into_iter()
        .map(|(name, bytes)| {
            let values = bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            (name, values)
        })
        .collect()
}

/// Every value of a safetensors file of `f32` tensors, in the file's order of names.
pub fn values(path: &Path) -> Vec<f32> {
    floats(path).into_values().flatten().collect()
}
