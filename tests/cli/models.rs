//! `--model resnet`: d2l's small ResNet trained from the command line is the library's
//! `ember::models::small_resnet`, parameter for parameter.

use burn::tensor::Device;
use ember::{Block, Init, NdTensor, models};
use ember_datasets::DataLoader;

use super::common;
use super::common::cli::succeeds;

/// The number after `name ` on `line`.
fn value(line: &str, name: &str) -> f64 {
    let rest = line.split(&format!("{name} ")).nth(1).unwrap();
    rest.split([',', ' ']).next().unwrap().parse().unwrap()
}

#[test]
fn the_resnet_trained_from_the_cli_is_the_librarys_small_resnet() {
    let dir = tempfile::tempdir().unwrap();
    common::fashion::fashion_like(dir.path(), "train", 192, 1);
    let test = common::fashion::fashion_like(dir.path(), "t10k", 120, 2);
    let data = format!("fashion-mnist:{}", dir.path().display());
    let params = dir.path().join("resnet.safetensors");
    let stdout = succeeds(&[
        "train",
        "--device",
        "flex",
        "--data",
        &data,
        "--model",
        "resnet",
        "--lr",
        "0.05",
        "--batch-size",
        "32",
        "--epochs",
        "3",
        "--save",
        params.to_str().unwrap(),
    ]);
    let epochs: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains(": train loss"))
        .collect();
    assert_eq!(epochs.len(), 3, "{stdout}");
    let (first, last) = (
        value(epochs[0], "train loss"),
        value(epochs[2], "train loss"),
    );
    assert!(
        last < first,
        "the loss did not fall: {first} → {last}\n{stdout}"
    );

    // The file holds what the library's network holds, name for name and shape for shape.
    let device = Device::flex();
    let net = models::small_resnet(10)
        .initialize(Init::Xavier, &device)
        .infer_shape(NdTensor::zeros(&[1, 1, 28, 28], &device).unwrap())
        .unwrap();
    let held = net.collect_params();
    let file = common::params::tensors(&params);
    let names: Vec<&str> = file.keys().map(String::as_str).collect();
    let mut expected = held.names();
    expected.sort();
    assert_eq!(names, expected);
    for param in &held.params {
        assert_eq!(file[&param.name].len(), 4 * param.numel(), "{}", param.name);
    }
    assert!(
        stdout.contains(&format!("parameters: {}", held.total())),
        "{stdout}"
    );

    // Loaded into the library's network, it classifies the test set as the CLI said it did
    // (to one example: the batches' sums may round differently).
    let net = net.load_parameters(&params, &device).unwrap();
    let loader = DataLoader::new(test, 120).unwrap();
    let accuracy = ember_trainer::evaluate::accuracy(&net, &loader, &device).unwrap();
    let printed = value(epochs[2], "test_acc");
    assert!(
        (accuracy - printed).abs() <= 1.0 / 120.0 + 1e-9,
        "library {accuracy} vs CLI {printed}\n{stdout}"
    );
}
