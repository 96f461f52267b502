//! Shared by the framework tests: the tiny 2-3-1 network, its fixed weights, PyTorch-layout
//! safetensors files written and read without burn, and a comparison within 1e-5.

use std::collections::HashMap;
use std::path::Path;

use burn::prelude::*;
use ember::{Activation, Block, Dense, Init, NdTensor, Sequential};
use safetensors::{Dtype, SafeTensors, tensor::TensorView};

/// Writes a safetensors file with the `safetensors` crate alone, in PyTorch's layout, as
/// `torch`/`safetensors.torch.save_file` would: independent of burn-store's writer.
pub fn write_pytorch_file(path: &Path, tensors: &[(&str, Vec<usize>, Vec<f32>)]) {
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .iter()
        .map(|(name, shape, values)| {
            let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            (name.to_string(), shape.clone(), data)
        })
        .collect();
    let views: Vec<(String, TensorView<'_>)> = bytes
        .iter()
        .map(|(name, shape, data)| {
            (
                name.clone(),
                TensorView::new(Dtype::F32, shape.clone(), data).unwrap(),
            )
        })
        .collect();
    safetensors::serialize_to_file(views, None, path).unwrap();
}

/// Every tensor of a safetensors file: name -> (shape, values).
pub fn read_file(path: &Path) -> HashMap<String, (Vec<usize>, Vec<f32>)> {
    let bytes = std::fs::read(path).unwrap();
    let file = SafeTensors::deserialize(&bytes).unwrap();
    file.tensors()
        .into_iter()
        .map(|(name, view)| {
            let values = view
                .data()
                .chunks(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            (name, (view.shape().to_vec(), values))
        })
        .collect()
}

pub fn assert_close(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (f64::from(*g) - w).abs() < 1e-5,
            "{what}: got {got:?}, want {want:?}"
        );
    }
}

pub fn tiny_net() -> Sequential {
    Sequential::new()
        .add(Dense::new(3).activation(Activation::Relu))
        .add(Dense::new(1))
}

/// The tiny net with its input size (2) inferred, ready to load.
pub fn resolved_tiny_net(device: &Device) -> Sequential {
    tiny_net()
        .initialize(Init::default(), device)
        .infer_shape(Tensor::<2>::zeros([1, 2], device))
        .unwrap()
}

/// The network's output for a batch of rows.
pub fn out(net: &Sequential, x: Tensor<2>) -> Tensor<2> {
    net.forward(NdTensor::from(x)).rank()
}

/// The fixed weights of the reference, in Gluon/PyTorch layout `(units, in_units)`.
pub fn tiny_weights() -> Vec<(&'static str, Vec<usize>, Vec<f32>)> {
    vec![
        ("0.weight", vec![3, 2], vec![0.1, -0.2, 0.3, 0.4, -0.5, 0.6]),
        ("0.bias", vec![3], vec![0.01, -0.02, 0.03]),
        ("1.weight", vec![1, 3], vec![0.7, -0.8, 0.9]),
        ("1.bias", vec![1], vec![0.05]),
    ]
}
