//! Parameters saved and loaded: PyTorch's layout gives hand-computed outputs, a save round-trips
//! once shapes are inferred, and wrong, missing, extra, corrupt and truncated files are listed
//! as errors; a failed save never clobbers the file it replaces.

use std::collections::HashMap;

use burn::prelude::*;
use burn::tensor::Distribution;
use ember::{Activation, Block, Dense, Error, Init, Sequential, load_parameters, save_parameters};

use super::tiny_net::{
    assert_close, out, read_file, resolved_tiny_net, tiny_net, tiny_weights, write_pytorch_file,
};

#[test]
fn a_pytorch_layout_file_gives_the_hand_computed_outputs() {
    let device = Device::flex();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("torch.safetensors");
    write_pytorch_file(&path, &tiny_weights());
    let net = load_parameters(resolved_tiny_net(&device), &path, &device).unwrap();
    // h = relu(W0·x + b0) with x = (1, 2): (0.1−0.4+0.01, 0.3+0.8−0.02, −0.5+1.2+0.03) → (0, 1.08, 0.73)
    // out = 0.7·0 − 0.8·1.08 + 0.9·0.73 + 0.05 = −0.157
    let y: Vec<f32> = out(&net, Tensor::from_floats([[1.0, 2.0]], &device))
        .into_data()
        .try_to_vec()
        .unwrap();
    assert_close(&y, &[-0.157], "forward");
}

#[test]
fn save_then_load_round_trips_once_shapes_are_inferred() {
    let device = Device::flex();
    let build = || {
        Sequential::<ember::NoBlock>::new()
            .add(Dense::new(16).activation(Activation::Tanh))
            .add(Activation::Relu)
            .add(
                Sequential::new()
                    .add(Dense::new(8))
                    .add(Dense::new(2).use_bias(false)),
            )
            .initialize(Init::Xavier, &device)
    };
    let x = Tensor::<2>::random([5, 7], Distribution::Normal(0.0, 1.0), &device);
    let net = build().infer_shape(x.clone()).unwrap();
    let before: Vec<f32> = out(&net, x.clone()).into_data().try_to_vec().unwrap();
    assert_eq!(
        net.collect_params().names(),
        ["0.weight", "0.bias", "2.0.weight", "2.0.bias", "2.1.weight"],
        "activations take an index but hold no parameter; nesting adds a level"
    );

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("net.safetensors");
    save_parameters(&net, &path).unwrap();
    let shapes: HashMap<String, Vec<usize>> = read_file(&path)
        .into_iter()
        .map(|(k, (s, _))| (k, s))
        .collect();
    assert_eq!(shapes["0.weight"], vec![16, 7]);
    assert_eq!(shapes["2.1.weight"], vec![2, 8]);
    let listed: HashMap<String, Vec<usize>> = net
        .collect_params()
        .params
        .into_iter()
        .map(|p| (p.name, p.shape))
        .collect();
    assert_eq!(listed, shapes, "collect_params lists what the file holds");

    // A deferred net cannot take shapes from a file: it says which layers wait.
    let err = load_parameters(build(), &path, &device).unwrap_err();
    assert!(
        err.to_string().contains("0: Dense") && err.to_string().contains("2.1: Dense"),
        "{err}"
    );
    device.seed(99);
    let fresh = build().infer_shape(x.clone()).unwrap();
    assert_ne!(
        out(&fresh, x.clone())
            .into_data()
            .try_to_vec::<f32>()
            .unwrap(),
        before
    );
    let loaded = load_parameters(fresh, &path, &device).unwrap();
    let after: Vec<f32> = out(&loaded, x).into_data().try_to_vec().unwrap();
    assert_eq!(before, after);
}

#[test]
fn a_wrong_shape_missing_or_extra_name_in_a_file_is_listed() {
    let device = Device::flex();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.safetensors");
    write_pytorch_file(
        &path,
        &[
            ("0.weight", vec![3, 2], vec![0.0; 6]),
            ("0.bias", vec![4], vec![0.0; 4]),
            ("1.weight", vec![1, 3], vec![0.0; 3]),
            ("9.weight", vec![1], vec![0.0]),
        ],
    );
    let err = load_parameters(resolved_tiny_net(&device), &path, &device).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::ParameterMismatch { .. }), "{text}");
    assert!(
        text.contains("mis-shaped: 0.bias is [4] in the file but [3]"),
        "{text}"
    );
    assert!(text.contains("missing: 1.bias"), "{text}");
    assert!(text.contains("extra: 9.weight"), "{text}");
}

#[test]
fn corrupt_and_truncated_files_are_errors_not_panics() {
    let device = Device::flex();
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.safetensors");
    write_pytorch_file(&good, &tiny_weights());
    let bytes = std::fs::read(&good).unwrap();
    let truncated = dir.path().join("truncated.safetensors");
    std::fs::write(&truncated, &bytes[..bytes.len() - 10]).unwrap();
    let garbage = dir.path().join("garbage.safetensors");
    std::fs::write(&garbage, b"not a safetensors file at all").unwrap();
    for path in [&truncated, &garbage, &dir.path().join("absent.safetensors")] {
        let err = load_parameters(resolved_tiny_net(&device), path, &device).unwrap_err();
        assert!(err.to_string().contains(&*path.to_string_lossy()), "{err}");
    }
    // Cut short is said as such, not as the library's "incomplete metadata, file not fully
    // covered" (issue 62).
    let err = load_parameters(resolved_tiny_net(&device), &truncated, &device).unwrap_err();
    assert!(
        err.to_string().contains("shorter than its header says"),
        "{err}"
    );
}

#[test]
fn saving_never_clobbers_a_file_with_a_half_written_one() {
    let device = Device::flex();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keep.safetensors");
    std::fs::write(&path, b"previous contents").unwrap();
    // A deferred net cannot be saved: the old file must survive untouched, with no temporary.
    let deferred = tiny_net().initialize(Init::default(), &device);
    let err = save_parameters(&deferred, &path).unwrap_err();
    assert!(matches!(err, Error::DeferredInitialization { .. }), "{err}");
    assert!(err.to_string().contains("0: Dense"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), b"previous contents");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

/// A BatchNorm trained on this thread, then loaded from a file: the file's running statistics
/// hold. burn keeps a training step's update per thread until that thread reads again, and
/// the next read took it in over what the load had written.
#[test]
fn loaded_running_statistics_are_not_undone_by_an_update_held_from_before() {
    use ember::BatchNorm;
    let device = Device::flex().autodiff();
    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join("fresh.safetensors");
    let net: Sequential = Sequential::new()
        .add(Dense::new(4))
        .add(BatchNorm::new())
        .initialize(Init::Xavier, &device)
        .infer_shape(Tensor::<2>::zeros([1, 3], &device))
        .unwrap();
    save_parameters(&net, &fresh).unwrap();
    // One training pass: its update waits for this thread's next read.
    let x = Tensor::<2>::random([16, 3], Distribution::Normal(3.0, 1.0), &device);
    let _ = net.forward(x.into());
    let net = load_parameters(net, &fresh, &device).unwrap();
    let after = dir.path().join("after.safetensors");
    save_parameters(&net.valid(), &after).unwrap();
    let floats = super::common::params::floats(&after);
    for (name, expected) in [("1.running_mean", 0.0), ("1.running_var", 1.0)] {
        let values = &floats[name];
        assert!(values.iter().all(|&v| v == expected), "{name}: {values:?}");
    }
}
