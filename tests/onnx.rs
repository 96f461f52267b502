//! ONNX export, checked by an independent client: each network is exported, read by ONNX's
//! own checker (`onnx.checker.check_model`, full check) and run by ONNX Runtime on random
//! inputs of batch 1 and 7, and its outputs compared with ember's inference outputs. CI
//! installs the client (`scripts/install-onnx-check.sh`); without it these tests fail, never
//! skip.

mod common;

#[path = "onnx/cli.rs"]
mod cli;
#[path = "onnx/sequence.rs"]
mod sequence;

use std::path::{Path, PathBuf};
use std::process::Command;

use burn::prelude::*;
use burn::tensor::Distribution;
use ember::{
    Activation, AvgPool2D, BatchNorm, Block, Conv1D, Conv2D, Dense, Dropout, Embedding, Error,
    Export, Flatten, GlobalAvgPool2D, Init, LayerNorm, MaxPool2D, NdTensor, Sequential,
};

/// The largest difference allowed between ember's and ONNX Runtime's outputs.
const TOLERANCE: f32 = 1e-5;

/// The Python that has `onnx` and `onnxruntime`.
fn python() -> PathBuf {
    let path = std::env::var_os("EMBER_ONNX_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/ember/onnx-venv/bin/python")
        });
    assert!(
        path.exists(),
        "{} not found: these tests need ONNX Runtime; run scripts/install-onnx-check.sh \
         (.ci/run does)",
        path.display()
    );
    path
}

/// Runs `tests/onnx/check.py` and returns the JSON it printed.
pub(crate) fn check_py(args: &[&str]) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/onnx/check.py");
    let output = Command::new(python())
        .arg(script)
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "check.py {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

pub(crate) fn write_f32(path: &Path, values: &[f32]) {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(path, bytes).unwrap();
}

/// Exports `net` for examples of shape `example`, runs the file in ONNX Runtime on inputs of
/// batch 1 and 7 made by `input`, and returns the largest difference from ember's outputs.
fn largest_difference<B: Export>(
    net: &B,
    example: &[usize],
    input: impl Fn(&[usize]) -> Vec<f32>,
) -> f32 {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("net.onnx");
    net.export(&model, example).unwrap();
    let inference = net.valid();
    let device = Device::flex();
    let mut largest = 0.0f32;
    for batch in [1, 7] {
        let mut shape = vec![batch];
        shape.extend(example);
        let x = input(&shape);
        let y = inference.forward(NdTensor::from_host(&x, &shape, &device).unwrap());
        let expected_shape = y.dims();
        let expected: Vec<f32> = y.flatten().into_data().try_to_vec::<f32>().unwrap();
        let (x_path, y_path) = (dir.path().join("x.f32"), dir.path().join("y.f32"));
        write_f32(&x_path, &x);
        write_f32(&y_path, &expected);
        let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
        let report = check_py(&[
            "compare",
            model.to_str().unwrap(),
            x_path.to_str().unwrap(),
            &dims.join(","),
            y_path.to_str().unwrap(),
        ]);
        let got: Vec<usize> = serde_json::from_value(report["shape"].clone()).unwrap();
        assert_eq!(got, expected_shape, "batch {batch}: output shapes");
        assert_eq!(report["opset"], serde_json::json!([ember::onnx::OPSET]));
        largest = largest.max(report["max_diff"].as_f64().unwrap() as f32);
    }
    eprintln!("largest difference from ONNX Runtime: {largest:e}");
    largest
}

fn normal(shape: &[usize]) -> Vec<f32> {
    let n: usize = shape.iter().product();
    Tensor::<1>::random([n], Distribution::Normal(0.0, 1.0), &Device::flex())
        .into_data()
        .try_to_vec::<f32>()
        .unwrap()
}

/// Trains `net` in training mode for a few batches on an autodiff device, so that BatchNorm's
/// running statistics are far from their start (0 and 1) and export must carry them.
fn with_running_statistics<B: Block>(net: B, example: &[usize]) -> B {
    let device = Device::flex().autodiff();
    let mut shape = vec![16];
    shape.extend(example);
    let net = net.to_device(&device);
    for _ in 0..3 {
        let x = normal(&shape)
            .iter()
            .map(|v| 3.0 * v + 2.0)
            .collect::<Vec<_>>();
        let _ = net.forward(NdTensor::from_host(&x, &shape, &device).unwrap());
    }
    net
}

fn built<B: Block>(net: B, example: &[usize]) -> B {
    built_with(net, example, normal)
}

#[test]
fn the_chapters_mlp_runs_in_onnx_runtime_as_in_ember() {
    let net: Sequential = Sequential::new()
        .add(Dense::new(2048).activation(Activation::Relu))
        .add(Dense::new(512).activation(Activation::Relu))
        .add(Dense::new(1));
    let net = built(net, &[512]);
    assert!(largest_difference(&net, &[512], normal) < TOLERANCE);
}

fn lenet(activation: Activation, max_pool: bool) -> Sequential {
    let pool = |net: Sequential| match max_pool {
        true => net.add(MaxPool2D::new(2)),
        false => net.add(AvgPool2D::new(2)),
    };
    let net = Sequential::new().add(Conv2D::new(6, 5).padding(2).activation(activation));
    pool(pool(net).add(Conv2D::new(16, 5).activation(activation)))
        .add(Dense::new(120).activation(activation))
        .add(Dense::new(84).activation(activation))
        .add(Dense::new(10))
}

#[test]
fn lenet_and_lenet_relu_run_in_onnx_runtime_as_in_ember() {
    for (activation, max_pool) in [(Activation::Sigmoid, false), (Activation::Relu, true)] {
        let net = built(lenet(activation, max_pool), &[1, 28, 28]);
        assert!(largest_difference(&net, &[1, 28, 28], normal) < TOLERANCE);
    }
}

#[test]
fn the_small_resnet_with_batchnorm_runs_in_onnx_runtime_as_in_ember() {
    let net = built(ember::models::small_resnet(10), &[1, 28, 28]);
    let net = with_running_statistics(net, &[1, 28, 28]);
    let stats = net.collect_params();
    assert!(stats.get("1.running_mean").is_some(), "{}", net.summary());
    assert!(stats.get("4.conv3.weight").is_some(), "{}", net.summary());
    assert!(largest_difference(&net, &[1, 28, 28], normal) < TOLERANCE);
}

/// Every built-in layer and activation, across three networks (images, signals, token ids):
/// grouped, strided, padded and dilated convolutions, every pooling, BatchNorm on 4 and 3
/// axes with trained statistics, Dropout, LayerNorm, Flatten, Embedding, Dense with and
/// without flattening and bias.
#[test]
fn every_layer_kind_runs_in_onnx_runtime_as_in_ember() {
    let images: Sequential = Sequential::new()
        .add(Conv2D::new(8, 3).padding(1).activation(Activation::Relu))
        .add(BatchNorm::new())
        .add(
            Conv2D::new(8, [3, 2])
                .groups(4)
                .strides([2, 1])
                .padding([2, 1])
                .dilation(2),
        )
        .add(Activation::Tanh)
        .add(MaxPool2D::new(2).strides(1).padding(1))
        .add(AvgPool2D::new(3).strides(2).padding(1))
        .add(Dropout::new(0.5))
        .add(Sequential::new().add(GlobalAvgPool2D::new()).add(Flatten))
        .add(Dense::new(6).activation(Activation::Gelu).use_bias(false))
        .add(Dense::new(3).activation(Activation::SoftRelu));
    let images = with_running_statistics(built(images, &[3, 12, 10]), &[3, 12, 10]);
    let images_diff = largest_difference(&images, &[3, 12, 10], normal);

    let signals: Sequential = Sequential::new()
        .add(
            Conv1D::new(6, 3)
                .strides(2)
                .padding(1)
                .dilation(2)
                .groups(2),
        )
        .add(BatchNorm::new())
        .add(Activation::Sigmoid)
        .add(
            Conv1D::new(4, 1)
                .activation(Activation::Gelu)
                .use_bias(false),
        )
        .add(Dense::new(5));
    let signals = with_running_statistics(built(signals, &[4, 20]), &[4, 20]);
    let signals_diff = largest_difference(&signals, &[4, 20], normal);

    let tokens: Sequential = Sequential::new()
        .add(Embedding::new(50, 8))
        .add(LayerNorm::new())
        .add(Dense::new(6).flatten(false).activation(Activation::Tanh))
        .add(LayerNorm::new().center(false))
        .add(Dense::new(2));
    let ids = |shape: &[usize]| -> Vec<f32> {
        (0..shape.iter().product::<usize>())
            .map(|i| ((i * 37 + 11) % 50) as f32)
            .collect()
    };
    let tokens = built_with(tokens, &[5], ids);
    let tokens_diff = largest_difference(&tokens, &[5], ids);

    eprintln!("images {images_diff:e}, signals {signals_diff:e}, tokens {tokens_diff:e}");
    for diff in [images_diff, signals_diff, tokens_diff] {
        assert!(diff < TOLERANCE, "{diff}");
    }
}

fn built_with<B: Block>(net: B, example: &[usize], input: impl Fn(&[usize]) -> Vec<f32>) -> B {
    let device = Device::flex();
    device.seed(7);
    let mut shape = vec![1];
    shape.extend(example);
    let x = NdTensor::from_host(&input(&shape), &shape, &device).unwrap();
    net.initialize(Init::Xavier, &device)
        .infer_shape(x)
        .unwrap()
}

/// A user's block that does not describe itself (it takes `Export`'s default `describe`): an
/// error naming it and its place, and no file.
#[derive(burn::module::Module, Debug)]
struct Opaque {
    dense: Dense,
}

impl Block for Opaque {
    fn forward(&self, x: NdTensor) -> NdTensor {
        self.dense.forward(x)
    }
    fn initialize(self, init: Init, device: &Device) -> Self {
        Self {
            dense: self.dense.initialize(init, device),
        }
    }
    fn infer(self, x: NdTensor) -> ember::Result<(Self, NdTensor)> {
        let (dense, y) = self.dense.infer(x)?;
        Ok((Self { dense }, y))
    }
}

impl Export for Opaque {}

#[test]
fn a_block_that_does_not_describe_itself_is_named_with_its_place_and_nothing_is_written() {
    let net: Sequential<Opaque> = Sequential::new().add(Dense::new(4)).add(
        Sequential::new().add(Activation::Relu).add_block(Opaque {
            dense: Dense::new(3),
        }),
    );
    let net = built(net, &[5]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("net.onnx");
    let err = net.export(&path, &[5]).unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("layer 1: layer 1: Opaque cannot be exported"),
        "{text}"
    );
    assert!(matches!(err.root(), Error::NotExportable { .. }), "{err:?}");
    assert!(!path.exists());
}

#[test]
fn a_network_with_unresolved_sizes_or_a_wrong_example_is_refused() {
    let device = Device::flex();
    let net: Sequential = Sequential::new().add(Dense::new(4)).add(Dense::new(2));
    let net = net.initialize(Init::Xavier, &device);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("net.onnx");
    let err = net.export(&path, &[5]).unwrap_err();
    assert!(matches!(err, Error::DeferredInitialization { .. }), "{err}");
    let net = net
        .infer_shape(Tensor::<2>::zeros([1, 5], &device))
        .unwrap();
    let err = net.export(&path, &[6]).unwrap_err();
    assert!(err.to_string().contains("6 features"), "{err}");
    let err = net.export(dir.path(), &[5]).unwrap_err();
    assert!(matches!(err, Error::Output { .. }), "{err}");
    assert!(!path.exists());
}
