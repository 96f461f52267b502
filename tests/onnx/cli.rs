//! `ember export` from the command line: from the file `train --save` wrote alone, checked by
//! ONNX Runtime on Fashion-MNIST; bad input refused, naming the value.

use std::path::Path;

use burn::prelude::*;
use ember::{Activation, Block, Dense, Init, Sequential};

use super::common;
use super::{check_py, write_f32};

/// The README's train → export → ONNX Runtime, on the real Fashion-MNIST (Debian's
/// `dataset-fashion-mnist`, which CI installs): the accuracy ONNX Runtime computes from the IDX
/// files is the test accuracy `ember train` printed.
#[test]
fn lenet_relu_trained_on_fashion_mnist_keeps_its_test_accuracy_in_onnx_runtime() {
    let data = ember_datasets::fashion_mnist::DEFAULT_DIR;
    assert!(
        Path::new(data).join("t10k-labels-idx1-ubyte.gz").exists(),
        "this test needs Fashion-MNIST in {data}: apt-get install dataset-fashion-mnist"
    );
    let dir = tempfile::tempdir().unwrap();
    let params = dir.path().join("lenet.safetensors");
    let model = dir.path().join("lenet.onnx");
    let (params_arg, model_arg) = (params.to_str().unwrap(), model.to_str().unwrap());
    let flags = [
        "--device",
        "flex",
        "--data",
        "fashion-mnist",
        "--model",
        "lenet-relu",
    ];
    let mut train = flags.to_vec();
    train.extend(["--lr", "0.1", "--batch-size", "256", "--save", params_arg]);
    let printed = common::cli::succeeds(&[&["train"], &train[..]].concat());
    // The epoch line: "epoch 1: loss 0.6 · train acc 0.78 · test_acc 0.8264 · …".
    let ember_accuracy: f64 = printed
        .split("test_acc")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|value| value.trim_end_matches(',').parse().ok())
        .unwrap_or_else(|| panic!("no test_acc in:\n{printed}"));
    // From the file alone: `--save` recorded the model, its input and its outputs.
    let printed = common::cli::succeeds(&["export", "--load", params_arg, "--out", model_arg]);
    assert!(printed.contains("ONNX opset 17"), "{printed}");
    let report = check_py(&["accuracy", model_arg, data]);
    let onnx_accuracy = report["accuracy"].as_f64().unwrap();
    eprintln!("test accuracy: ember {ember_accuracy}, ONNX Runtime {onnx_accuracy}");
    assert_eq!(report["examples"], 10_000);
    assert!(ember_accuracy > 0.5, "{ember_accuracy}");
    assert!(
        (ember_accuracy - onnx_accuracy).abs() <= 0.001,
        "{ember_accuracy} vs {onnx_accuracy}"
    );
}

/// `ember export` with bad input: a clear error naming the value, a non-zero exit, and
/// nothing written or replaced; a file without ember's metadata (a PyTorch one) takes
/// `--model` and `--data`, and says so.
#[test]
fn ember_export_refuses_bad_input_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let params = path("mlp.safetensors");
    common::cli::succeeds(&[
        "train",
        "--device",
        "flex",
        "--batches",
        "2",
        "--batch-size",
        "8",
        "--features",
        "6",
        "--hidden",
        "5",
        "--save",
        &params,
    ]);
    let export = |load: &str, out: &str, more: &[&str]| -> Vec<String> {
        let mut args = vec!["export", "--load", load, "--out", out];
        args.extend(more);
        args.iter().map(|a| a.to_string()).collect()
    };
    // The output is the parameter file itself: it would be replaced.
    let before = std::fs::read(&params).unwrap();
    let stderr = common::cli::fails_with(
        &common::cli::strs(&export(&params, &params, &[])),
        "is the same file as --load",
    );
    assert!(stderr.contains(&params), "{stderr}");
    assert_eq!(std::fs::read(&params).unwrap(), before);
    // A directory.
    let dir_arg = dir.path().to_str().unwrap();
    common::cli::fails_with(
        &common::cli::strs(&export(&params, dir_arg, &[])),
        "a directory",
    );
    // A --model other than the one the file records.
    let out = path("mlp.onnx");
    common::cli::fails_with(
        &common::cli::strs(&export(&params, &out, &["--model", "mlp:7"])),
        "holds mlp:5",
    );
    // --features or --data that contradict what the file records are refused, not ignored.
    common::cli::fails_with(
        &common::cli::strs(&export(&params, &out, &["--features", "9"])),
        "leave them out",
    );
    // Training's flags mean nothing here, and are refused.
    for flag in [["--lr", "0.1"], ["--device", "flex"], ["--batches", "3"]] {
        common::cli::fails_with(&common::cli::strs(&export(&params, &out, &flag)), flag[0]);
    }
    // A missing parameter file.
    let missing = path("missing.safetensors");
    let stderr = common::cli::fails_with(
        &common::cli::strs(&export(&missing, &out, &[])),
        "missing.safetensors",
    );
    assert!(!stderr.is_empty());
    assert!(!Path::new(&out).exists());
    // A file without ember's metadata, as PyTorch writes one: --model and --data are needed,
    // and parameters that do not fit them are named.
    let device = Device::flex();
    let net: Sequential = Sequential::new()
        .add(Dense::new(5).activation(Activation::Relu))
        .add(Dense::new(1))
        .initialize(Init::default(), &device);
    let net = net
        .infer_shape(Tensor::<2>::zeros([1, 6], &device))
        .unwrap();
    let bare = path("bare.safetensors");
    net.save_parameters(&bare).unwrap();
    common::cli::fails_with(
        &common::cli::strs(&export(&bare, &out, &[])),
        "give --model and --data",
    );
    // Metadata that names a network the parameters are not: the file is named, not a --model
    // that was never given (hostile pass).
    let wrong = path("wrong-meta.safetensors");
    let meta = std::collections::BTreeMap::from(
        [
            ("ember.model", "lenet"),
            ("ember.input", "6"),
            ("ember.outputs", "1"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    ember::io::safetensors::save_parameters_with(&net, Path::new(&wrong), &meta).unwrap();
    let err = common::cli::fails_with(
        &common::cli::strs(&export(&wrong, &out, &[])),
        "wrong-meta.safetensors's metadata: lenet cannot take inputs of shape [6]",
    );
    assert!(!err.contains("--model lenet"), "{err}");
    let synthetic = ["--data", "synthetic", "--features", "6"];
    common::cli::fails_with(
        &common::cli::strs(&export(
            &bare,
            &out,
            &[&synthetic[..], &["--model", "mlp:7"]].concat(),
        )),
        "does not match the network",
    );
    let printed = common::cli::succeeds(&common::cli::strs(&export(
        &bare,
        &out,
        &[&synthetic[..], &["--model", "mlp:5"]].concat(),
    )));
    assert!(printed.contains("input [batch, 6], 1 outputs"), "{printed}");
    // And the file `train --save` wrote needs nothing else.
    let printed = common::cli::succeeds(&common::cli::strs(&export(&params, &out, &[])));
    assert!(printed.contains("input [batch, 6], 1 outputs"), "{printed}");
    let x = dir.path().join("x.f32");
    write_f32(&x, &[0.5; 18]);
    let y = dir.path().join("y.f32");
    write_f32(&y, &[0.0; 3]);
    let report = check_py(&[
        "compare",
        &out,
        x.to_str().unwrap(),
        "3,6",
        y.to_str().unwrap(),
    ]);
    assert_eq!(report["shape"], serde_json::json!([3, 1]));
}
