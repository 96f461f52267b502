//! ember's layers against PyTorch: forward outputs, input gradients and parameter gradients on
//! fixed inputs, within 1e-5. The reference values are printed by
//! `tests/reference/torch_layers.py` (quoted there in full) into
//! `tests/reference/torch_layers.out.rs`; both fill every tensor with the same formulas:
//!
//! ```text
//! input   x[i] = sin(0.37 i + 0.1)
//! weights w[i] = 0.3 cos(0.53 i + 0.2 + k)   (k: the parameter's place in its layer)
//! loss = sum(y * g), g[i] = sin(0.71 i + 0.3)
//! ```
//!
//! Parameters reach ember through a safetensors file written in PyTorch's names and layout by
//! the `safetensors` crate alone, so the file boundary is checked on the way.

use std::path::Path;

use burn::module::{Module, Param};
use burn::prelude::*;
use burn::tensor::Gradients;
use ember::{
    Activation, AvgPool2D, BatchNorm, Block, Conv1D, Conv2D, Dense, Embedding, Flatten,
    GlobalAvgPool2D, Init, LayerNorm, MaxPool2D, NdTensor, Sequential, load_parameters,
};
use safetensors::{Dtype, tensor::TensorView};

include!("reference/torch_layers.out.rs");

#[path = "layers/attention.rs"]
mod attention;
#[path = "layers/autocast.rs"]
mod autocast;
#[path = "layers/positional.rs"]
mod positional;
#[path = "layers/recurrent.rs"]
mod recurrent;

fn fill(shape: &[usize], f: impl Fn(f64) -> f64) -> Vec<f32> {
    let n: usize = shape.iter().product();
    (0..n).map(|i| f(i as f64) as f32).collect()
}

fn x_of(shape: &[usize]) -> Vec<f32> {
    fill(shape, |i| (0.37 * i + 0.1).sin())
}

fn w_of(shape: &[usize], k: usize) -> Vec<f32> {
    fill(shape, |i| 0.3 * (0.53 * i + 0.2 + k as f64).cos())
}

fn g_of(shape: &[usize]) -> Vec<f32> {
    fill(shape, |i| (0.71 * i + 0.3).sin())
}

fn device() -> Device {
    Device::flex().autodiff()
}

/// Writes `(name, shape)` parameters, each filled by `w_of` with its place `k`, in PyTorch's
/// layout, and loads them into `block`.
fn with_torch_weights<B: Block>(block: B, params: &[(&str, Vec<usize>)]) -> B {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("torch.safetensors");
    write_safetensors(
        &path,
        params
            .iter()
            .enumerate()
            .map(|(k, (name, shape))| (name.to_string(), shape.clone(), w_of(shape, k)))
            .collect(),
    );
    load_parameters(block, &path, &device()).unwrap()
}

fn write_safetensors(path: &Path, tensors: Vec<(String, Vec<usize>, Vec<f32>)>) {
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .into_iter()
        .map(|(name, shape, values)| {
            let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            (name, shape, data)
        })
        .collect();
    let views: Vec<(String, TensorView<'_>)> = bytes
        .iter()
        .map(|(name, shape, data)| {
            let view = TensorView::new(Dtype::F32, shape.clone(), data).unwrap();
            (name.clone(), view)
        })
        .collect();
    safetensors::serialize_to_file(views, None, path).unwrap();
}

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().convert::<f32>().try_to_vec().unwrap()
}

fn assert_close(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (f64::from(*g) - w).abs() <= 1e-5 * w.abs().max(1.0),
            "{what}[{i}]: got {g}, want {w}\ngot  {got:?}\nwant {want:?}"
        );
    }
}

/// Runs `block` on the formula input of `shape` and back-propagates `sum(y * g)`: the output
/// and the gradients of the input and of `params` (burn's tensors, read by the caller).
struct Run {
    y: Vec<f32>,
    dx: Vec<f32>,
    grads: Gradients,
}

fn run<B: Block>(block: &B, shape: &[usize]) -> Run {
    let device = device();
    let x = NdTensor::from_host(&x_of(shape), shape, &device).unwrap();
    let x = x.require_grad();
    let y = block.forward(x.clone());
    let y_dims = y.dims();
    let g = NdTensor::from_host(&g_of(&y_dims), &y_dims, &device).unwrap();
    let loss = (y.clone().flatten() * g.flatten()).sum();
    let grads = loss.backward();
    Run {
        y: values(y.flatten()),
        dx: values(x.grad(&grads).unwrap().flatten()),
        grads,
    }
}

fn grad<const D: usize>(param: &Param<Tensor<D>>, run: &Run) -> Vec<f32> {
    values(param.val().grad(&run.grads).unwrap())
}

fn resolved<B: Block>(block: B, shape: &[usize]) -> B {
    let device = device();
    block
        .initialize(Init::default(), &device)
        .infer_shape(NdTensor::zeros(shape, &device).unwrap())
        .unwrap()
}

#[test]
fn conv2d_with_strides_and_padding_matches_pytorch() {
    let shape = [2, 2, 5, 5];
    let conv = resolved(Conv2D::new(3, 3).strides(2).padding(1), &shape);
    let conv = with_torch_weights(conv, &[("weight", vec![3, 2, 3, 3]), ("bias", vec![3])]);
    let r = run(&conv, &shape);
    assert_close(&r.y, &CONV2D_Y, "y");
    assert_close(&r.dx, &CONV2D_DX, "dx");
    let inner = conv.conv().unwrap();
    assert_close(&grad(&inner.weight, &r), &CONV2D_D0, "dweight");
    assert_close(&grad(inner.bias.as_ref().unwrap(), &r), &CONV2D_D1, "dbias");
}

#[test]
fn conv2d_with_dilation_and_groups_matches_pytorch() {
    let shape = [1, 2, 5, 5];
    let conv = resolved(
        Conv2D::new(4, 2).dilation(2).groups(2).use_bias(false),
        &shape,
    );
    assert_eq!(conv.collect_params().names(), ["weight"]);
    let conv = with_torch_weights(conv, &[("weight", vec![4, 1, 2, 2])]);
    let r = run(&conv, &shape);
    assert_close(&r.y, &CONV2D_GROUPS_Y, "y");
    assert_close(&r.dx, &CONV2D_GROUPS_DX, "dx");
    assert_close(
        &grad(&conv.conv().unwrap().weight, &r),
        &CONV2D_GROUPS_D0,
        "dweight",
    );
}

#[test]
fn conv1d_matches_pytorch() {
    let shape = [2, 2, 7];
    let conv = resolved(Conv1D::new(3, 3).padding(1).strides(2), &shape);
    let conv = with_torch_weights(conv, &[("weight", vec![3, 2, 3]), ("bias", vec![3])]);
    let r = run(&conv, &shape);
    assert_close(&r.y, &CONV1D_Y, "y");
    assert_close(&r.dx, &CONV1D_DX, "dx");
    let inner = conv.conv().unwrap();
    assert_close(&grad(&inner.weight, &r), &CONV1D_D0, "dweight");
    assert_close(&grad(inner.bias.as_ref().unwrap(), &r), &CONV1D_D1, "dbias");
}

#[test]
fn pooling_matches_pytorch() {
    let r = run(&MaxPool2D::new(2), &[1, 2, 4, 5]);
    assert_close(&r.y, &MAXPOOL_Y, "max y");
    assert_close(&r.dx, &MAXPOOL_DX, "max dx");
    let r = run(&AvgPool2D::new(3).strides(2).padding(1), &[1, 1, 5, 5]);
    assert_close(&r.y, &AVGPOOL_Y, "avg y");
    assert_close(&r.dx, &AVGPOOL_DX, "avg dx");
    let r = run(&GlobalAvgPool2D::new(), &[2, 3, 3, 2]);
    assert_close(&r.y, &GLOBALAVG_Y, "global y");
    assert_close(&r.dx, &GLOBALAVG_DX, "global dx");
}

#[test]
fn dense_flattens_like_gluon_and_matches_pytorch_flatten_then_linear() {
    let shape = [2, 2, 3];
    let dense = resolved(Dense::new(4), &shape);
    let dense = with_torch_weights(dense, &[("weight", vec![4, 6]), ("bias", vec![4])]);
    let r = run(&dense, &shape);
    assert_close(&r.y, &DENSE_Y, "y");
    assert_close(&r.dx, &DENSE_DX, "dx");
    let inner = dense.linear().unwrap();
    // burn keeps the weight as [in, out]; PyTorch's gradient is [out, in].
    let dw = values(inner.weight.val().grad(&r.grads).unwrap().transpose());
    assert_close(&dw, &DENSE_D0, "dweight");
    assert_close(&grad(inner.bias.as_ref().unwrap(), &r), &DENSE_D1, "dbias");
}

#[test]
fn layer_norm_matches_pytorch() {
    let shape = [2, 3, 4];
    let norm = resolved(LayerNorm::new(), &shape);
    let norm = with_torch_weights(norm, &[("weight", vec![4]), ("bias", vec![4])]);
    let r = run(&norm, &shape);
    assert_close(&r.y, &LAYERNORM_Y, "y");
    assert_close(&r.dx, &LAYERNORM_DX, "dx");
    let inner = norm.norm().unwrap();
    assert_close(&grad(&inner.gamma, &r), &LAYERNORM_D0, "dweight");
    assert_close(
        &grad(inner.beta.as_ref().unwrap(), &r),
        &LAYERNORM_D1,
        "dbias",
    );
}

#[test]
fn batch_norm_matches_pytorch_in_training_and_gluon_in_its_running_statistics() {
    let shape = [4, 3, 2, 2];
    let bn = resolved(BatchNorm::new(), &shape);
    assert_eq!(
        bn.collect_params().names(),
        ["weight", "bias", "running_mean", "running_var"],
        "PyTorch's names"
    );
    let params = [("weight", vec![3]), ("bias", vec![3])];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bn.safetensors");
    let mut tensors: Vec<(String, Vec<usize>, Vec<f32>)> = params
        .iter()
        .enumerate()
        .map(|(k, (name, shape))| (name.to_string(), shape.clone(), w_of(shape, k)))
        .collect();
    tensors.push(("running_mean".into(), vec![3], vec![0.0; 3]));
    tensors.push(("running_var".into(), vec![3], vec![1.0; 3]));
    tensors.push(("num_batches_tracked".into(), vec![], vec![0.0]));
    write_safetensors(&path, tensors);
    let bn = load_parameters(bn, &path, &device()).unwrap();

    // Training (an autodiff device): the batch's statistics, and one momentum step, which
    // the saved file holds too.
    let r = run(&bn, &shape);
    let saved = dir.path().join("trained.safetensors");
    bn.save_parameters(&saved).unwrap();
    let bytes = std::fs::read(&saved).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let in_file: Vec<f32> = file
        .tensor("running_mean")
        .unwrap()
        .data()
        .chunks(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    assert_close(&in_file, &BATCHNORM_RUNNING_MEAN, "saved running mean");
    assert_close(&r.y, &BATCHNORM_Y, "y");
    assert_close(&r.dx, &BATCHNORM_DX, "dx");
    let inner = bn.norm().unwrap();
    assert_close(&grad(&inner.gamma, &r), &BATCHNORM_D0, "dweight");
    assert_close(&grad(&inner.beta, &r), &BATCHNORM_D1, "dbias");
    let mean = values(inner.running_mean.value_sync());
    assert_close(&mean, &BATCHNORM_RUNNING_MEAN, "running mean");
    let var = values(inner.running_var.value_sync());
    assert_close(
        &var,
        &BATCHNORM_RUNNING_VAR_GLUON,
        "running var (Gluon's rule)",
    );

    // Inference (the valid copy): the running statistics, and they stay put.
    let eval = bn.valid();
    let x = NdTensor::from_host(&x_of(&shape), &shape, &Device::flex()).unwrap();
    let y = values(eval.forward(x).flatten());
    assert_close(&y, &BATCHNORM_EVAL_Y, "inference y");
    assert_close(
        &values(eval.norm().unwrap().running_var.value()),
        &BATCHNORM_RUNNING_VAR_GLUON,
        "running var after inference",
    );
}

#[test]
fn embedding_matches_pytorch() {
    let device = device();
    let embed = Embedding::new(5, 3).initialize(Init::default(), &device);
    let embed = with_torch_weights(embed, &[("weight", vec![5, 3])]);
    let indices = Tensor::<2>::from_floats([[0.0, 2.0, 4.0], [1.0, 1.0, 3.0]], &device);
    let y: Tensor<3> = embed.forward(indices.into()).rank();
    let g = Tensor::<1>::from_floats(g_of(&[2, 3, 3]).as_slice(), &device).reshape([2, 3, 3]);
    let grads = (y.clone() * g).sum().backward();
    assert_close(&values(y), &EMBEDDING_Y, "y");
    let dw = values(embed.table().unwrap().weight.val().grad(&grads).unwrap());
    assert_close(&dw, &EMBEDDING_D0, "dweight");
    let err = embed
        .infer_shape(Tensor::<2>::from_floats([[5.0]], &device))
        .unwrap_err();
    assert!(err.to_string().contains("embedding index 5"), "{err}");
}

#[test]
fn activations_match_pytorch() {
    let device = device();
    let cases: [(Activation, &[f64; 10], &[f64; 10]); 5] = [
        (Activation::Relu, &RELU_Y, &RELU_DX),
        (Activation::Sigmoid, &SIGMOID_Y, &SIGMOID_DX),
        (Activation::Tanh, &TANH_Y, &TANH_DX),
        (Activation::SoftRelu, &SOFTRELU_Y, &SOFTRELU_DX),
        (Activation::Gelu, &GELU_Y, &GELU_DX),
    ];
    for (activation, want_y, want_dx) in cases {
        let x: Vec<f32> = x_of(&[2, 5]).iter().map(|v| 3.0 * v).collect();
        let x = Tensor::<1>::from_floats(x.as_slice(), &device)
            .reshape([2, 5])
            .require_grad();
        let y: Tensor<2> = activation.forward(x.clone().into()).rank();
        let g = Tensor::<1>::from_floats(g_of(&[2, 5]).as_slice(), &device).reshape([2, 5]);
        let grads = (y.clone() * g).sum().backward();
        assert_close(&values(y), want_y, &format!("{activation} y"));
        assert_close(
            &values(x.grad(&grads).unwrap()),
            want_dx,
            &format!("{activation} dx"),
        );
    }
}

#[test]
fn flatten_keeps_the_batch_axis() {
    let x = NdTensor::from_host(&x_of(&[2, 3, 4, 5]), &[2, 3, 4, 5], &device()).unwrap();
    let (_, y) = Flatten.infer(x).unwrap();
    assert_eq!(y.dims(), [2, 60]);
    let err = Flatten
        .infer_shape(Tensor::<1>::zeros([3], &device()))
        .unwrap_err();
    assert!(err.to_string().contains("Flatten"), "{err}");
}

/// A PyTorch LeNet's `state_dict` (d2l 7.6's PyTorch code: activations, pooling and Flatten
/// as their own modules), exported to safetensors, loads into the same network written in
/// ember, and both give the same outputs.
#[test]
fn a_pytorch_lenet_state_dict_loads_and_gives_pytorchs_outputs() {
    let device = Device::flex();
    let sigmoid = Activation::Sigmoid;
    let net: Sequential = Sequential::new()
        .add(Conv2D::new(6, 5).padding(2))
        .add(sigmoid)
        .add(AvgPool2D::new(2).strides(2))
        .add(Conv2D::new(16, 5))
        .add(sigmoid)
        .add(AvgPool2D::new(2).strides(2))
        .add(Flatten)
        .add(Dense::new(120))
        .add(sigmoid)
        .add(Dense::new(84))
        .add(sigmoid)
        .add(Dense::new(10))
        .initialize(Init::Xavier, &device)
        .infer_shape(Tensor::<4>::zeros([1, 1, 28, 28], &device))
        .unwrap();
    let state_dict = [
        ("0.weight", vec![6, 1, 5, 5]),
        ("0.bias", vec![6]),
        ("3.weight", vec![16, 6, 5, 5]),
        ("3.bias", vec![16]),
        ("7.weight", vec![120, 400]),
        ("7.bias", vec![120]),
        ("9.weight", vec![84, 120]),
        ("9.bias", vec![84]),
        ("11.weight", vec![10, 84]),
        ("11.bias", vec![10]),
    ];
    let listed: Vec<(String, Vec<usize>)> = net
        .collect_params()
        .params
        .into_iter()
        .map(|p| (p.name, p.shape))
        .collect();
    let expected: Vec<(String, Vec<usize>)> = state_dict
        .iter()
        .map(|(name, shape)| (name.to_string(), shape.clone()))
        .collect();
    assert_eq!(listed, expected, "PyTorch's names and shapes");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lenet.safetensors");
    write_safetensors(
        &path,
        state_dict
            .iter()
            .enumerate()
            .map(|(k, (name, shape))| (name.to_string(), shape.clone(), w_of(shape, k)))
            .collect(),
    );
    let net = load_parameters(net, &path, &device).unwrap();
    let x = NdTensor::from_host(&x_of(&[2, 1, 28, 28]), &[2, 1, 28, 28], &device).unwrap();
    assert_close(&values(net.forward(x).flatten()), &LENET_Y, "LeNet output");
}
