//! Models beyond the MLP through `fit`: LeNet on Fashion-MNIST-format images, a user's residual
//! block on `[N, C, H, W]` inside a `Sequential`, training and inference modes, and the first
//! batch as the one step that resolves deferred sizes.

mod common;

use burn::module::Module;
use burn::prelude::*;
use common::fashion::fashion_like;
use ember::{
    Activation, AvgPool2D, BatchNorm, Block, Conv2D, Dense, Dropout, Flatten, Init, MaxPool2D,
    NdTensor, Optimizer, Result, Sequential, SoftmaxCrossEntropyLoss,
};
use ember_datasets::{Batch, DataLoader};
use ember_trainer::evaluate::accuracy;
use ember_trainer::fit::{BatchSource, Fit};
use ember_trainer::policy::Window;

fn lenet(activation: Activation, max_pool: bool) -> Sequential {
    let pool = |net: Sequential| {
        if max_pool {
            net.add(MaxPool2D::new(2))
        } else {
            net.add(AvgPool2D::new(2).strides(2))
        }
    };
    let net = Sequential::new().add(Conv2D::new(6, 5).padding(2).activation(activation));
    let net = pool(net).add(Conv2D::new(16, 5).activation(activation));
    pool(net)
        .add(Dense::new(120).activation(activation))
        .add(Dense::new(84).activation(activation))
        .add(Dense::new(10))
}

#[test]
fn lenet_learns_fashion_mnist_format_images_through_fit() {
    let dir = tempfile::tempdir().unwrap();
    let train = fashion_like(dir.path(), "train", 1500, 1);
    let test = fashion_like(dir.path(), "t10k", 300, 2);
    assert_eq!(train.shape(), [1, 28, 28], "images keep their shape");
    let device = Device::flex().autodiff();
    device.seed(5);
    let net = lenet(Activation::Relu, true).initialize(Init::Xavier, &device);
    assert_eq!(net.collect_params().deferred.len(), 5, "{}", net.summary());
    let trainer = Optimizer::new(&net, "sgd", 0.1).unwrap();
    let mut loader = DataLoader::new(train, 64).unwrap().shuffle(1);
    let run = Fit::new(net, SoftmaxCrossEntropyLoss, trainer, &device)
        .policy(Window(2))
        .epochs(3)
        .run(&mut loader)
        .unwrap();
    let params = run.net.collect_params();
    assert!(params.deferred.is_empty());
    assert_eq!(params.get("0.weight").unwrap().shape, [6, 1, 5, 5]);
    assert_eq!(params.get("4.weight").unwrap().shape, [120, 400]);
    let test = DataLoader::new(test, 100).unwrap();
    let acc = accuracy(&run.net.valid(), &test, &Device::flex()).unwrap();
    let losses: Vec<f64> = run.trace.epochs.iter().map(|e| e.mean_loss).collect();
    assert!(acc > 0.8, "test accuracy {acc}, losses {losses:?}");
}

/// d2l's residual block (8.6), built from ember's layers, its sizes inferred in `infer`.
#[derive(Module, Debug)]
struct Residual {
    conv1: Conv2D,
    bn1: BatchNorm,
    conv2: Conv2D,
}

impl Block for Residual {
    fn forward(&self, x: NdTensor) -> NdTensor {
        let y = Activation::Relu.forward(self.bn1.forward(self.conv1.forward(x.clone())));
        let y: Tensor<4> = self.conv2.forward(y).rank();
        (y + x.rank::<4>()).into()
    }

    fn initialize(self, init: Init, device: &Device) -> Self {
        Self {
            conv1: self.conv1.initialize(init, device),
            bn1: self.bn1.initialize(init, device),
            conv2: self.conv2.initialize(init, device),
        }
    }

    fn infer(self, x: NdTensor) -> Result<(Self, NdTensor)> {
        let (conv1, y) = self.conv1.infer(x.clone())?;
        let (bn1, y) = self.bn1.infer(y)?;
        let (conv2, _) = self.conv2.infer(y)?;
        let block = Self { conv1, bn1, conv2 };
        let y = block.forward(x);
        Ok((block, y))
    }
}

fn residual(channels: usize) -> Residual {
    Residual {
        conv1: Conv2D::new(channels, 3).padding(1),
        bn1: BatchNorm::new(),
        conv2: Conv2D::new(channels, 3).padding(1),
    }
}

/// Random 4-channel 6×6 images whose class is the sign of their mean.
#[derive(Clone)]
struct Images {
    batches: Vec<Batch>,
}

impl Images {
    fn new(batches: usize) -> Self {
        let device = Device::flex();
        device.seed(9);
        let batches = (0..batches)
            .map(|_| {
                let x =
                    Tensor::<1>::random([16 * 144], burn::tensor::Distribution::Default, &device)
                        .sub_scalar(0.5);
                let x: Vec<f32> = x.into_data().try_to_vec().unwrap();
                let y = x
                    .chunks(144)
                    .map(|image| f32::from(image.iter().sum::<f32>() > 0.0))
                    .collect();
                Batch {
                    x,
                    x_shape: vec![16, 4, 6, 6],
                    y,
                    y_shape: [16, 1],
                }
            })
            .collect();
        Self { batches }
    }
}

impl BatchSource for Images {
    fn batches(&mut self, _epoch: usize) -> Box<dyn Iterator<Item = Result<Batch>> + '_> {
        Box::new(self.batches.iter().cloned().map(Ok))
    }
}

#[test]
fn a_users_residual_block_on_images_trains_beside_ember_layers_and_modes_switch() {
    let device = Device::flex().autodiff();
    device.seed(2);
    let net: Sequential<Residual> = Sequential::new()
        .add(Conv2D::new(8, 3).padding(1))
        .add(BatchNorm::new())
        .add(Activation::Relu)
        .add_block(residual(8))
        .add(Dropout::new(0.5))
        .add(Flatten)
        .add(Dense::new(2))
        .initialize(Init::Xavier, &device);
    assert_eq!(net.collect_params().deferred.len(), 6, "{}", net.summary());
    let trainer = Optimizer::new(&net, "sgd", 0.05).unwrap();
    let mut data = Images::new(8);
    let run = Fit::new(net, SoftmaxCrossEntropyLoss, trainer, &device)
        .policy(Window(2))
        .epochs(4)
        .run(&mut data)
        .unwrap();
    let names = run.net.collect_params().names().join(" ");
    assert!(
        names.contains("3.conv1.weight") && names.contains("3.bn1.running_var"),
        "{names}"
    );
    let losses: Vec<f64> = run.trace.epochs.iter().map(|e| e.mean_loss).collect();
    assert!(losses[3] < losses[0], "{losses:?}");

    // Training mode drops units at random; the inference copy is deterministic.
    let batch = &data.batches[0];
    let x = |device: &Device| batch.x_on(device).unwrap();
    let out = |net: &Sequential<Residual>, device: &Device| -> Vec<f32> {
        net.forward(x(device))
            .flatten()
            .into_data()
            .try_to_vec()
            .unwrap()
    };
    assert_ne!(
        out(&run.net, &device),
        out(&run.net, &device),
        "dropout in training"
    );
    let eval = run.net.valid();
    assert_eq!(out(&eval, &Device::flex()), out(&eval, &Device::flex()));
}

#[test]
fn the_first_batch_resolves_deferred_sizes_and_a_misfit_batch_is_an_error_naming_the_layer() {
    let device = Device::flex().autodiff();
    let data = |x_shape: Vec<usize>| {
        let n: usize = x_shape.iter().product();
        let rows = x_shape[0];
        Images {
            batches: vec![Batch {
                x: vec![0.5; n],
                x_shape,
                y: vec![0.0; rows],
                y_shape: [rows, 1],
            }],
        }
    };
    let train = |shape: Vec<usize>| {
        let net = lenet(Activation::Sigmoid, false).initialize(Init::Xavier, &device);
        let trainer = Optimizer::new(&net, "sgd", 0.1).unwrap();
        Fit::new(net, SoftmaxCrossEntropyLoss, trainer, &device)
            .policy(Window(1))
            .run(&mut data(shape))
            .map(|run| run.net)
    };
    let net = train(vec![2, 1, 28, 28]).unwrap();
    assert_eq!(
        net.collect_params().get("2.weight").unwrap().shape,
        [16, 6, 5, 5]
    );
    // Flat rows where images belong, and images too small for the second convolution.
    let err = train(vec![2, 784]).map(drop).unwrap_err().to_string();
    assert!(
        err.contains("layer 0: Conv2D") && err.contains("[2, 784]"),
        "{err}"
    );
    let err = train(vec![2, 1, 6, 6]).map(drop).unwrap_err().to_string();
    assert!(
        err.contains("layer 2: Conv2D") && err.contains("window 5"),
        "{err}"
    );
}

#[test]
fn a_batch_of_another_example_shape_mid_epoch_is_an_error_naming_it() {
    let device = Device::flex().autodiff();
    let mut images = Images::new(2);
    images.batches[1].x_shape = vec![16, 4, 3, 12];
    let net: Sequential = Sequential::new()
        .add(Dense::new(2))
        .initialize(Init::default(), &device);
    let trainer = Optimizer::new(&net, "sgd", 0.1).unwrap();
    let err = Fit::new(net, SoftmaxCrossEntropyLoss, trainer, &device)
        .policy(Window(1))
        .run(&mut images)
        .map(drop)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("batch 2 of epoch 1") && err.contains("[16, 4, 3, 12]"),
        "{err}"
    );
}

#[test]
fn the_warm_up_changes_no_parameter() {
    let device = Device::flex().autodiff();
    // The parameters and images are drawn once: burn's generator is one per process, shared
    // with the tests beside this one, so seeding it again need not give the same draws.
    let net: Sequential = Sequential::new()
        .add(Conv2D::new(4, 3))
        .add(BatchNorm::new())
        .add(Dense::new(2))
        .initialize(Init::Xavier, &device);
    let net = net
        .infer_shape(Tensor::<4>::zeros([1, 4, 6, 6], &device))
        .unwrap();
    let images = Images::new(3);
    let trained = |warmup: bool| -> std::collections::BTreeMap<String, Vec<u8>> {
        // A copy with running statistics of its own (a clone's are shared).
        let net = net.valid().train();
        let trainer = Optimizer::new(&net, "sgd", 0.5).unwrap();
        let run = Fit::new(net, SoftmaxCrossEntropyLoss, trainer, &device)
            .policy(Window(1))
            .epochs(1)
            .warmup(warmup)
            .run(&mut images.clone())
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("net.safetensors");
        run.net.save_parameters(&path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        file.tensors()
            .into_iter()
            .map(|(name, view)| (name, view.data().to_vec()))
            .collect()
    };
    assert_eq!(trained(true), trained(false));
}

/// The user's residual network of the test above, without dropout.
fn residual_net(device: &Device) -> Sequential<Residual> {
    Sequential::new()
        .add(Conv2D::new(8, 3).padding(1))
        .add(BatchNorm::new())
        .add(Activation::Relu)
        .add_block(residual(8))
        .add(Flatten)
        .add(Dense::new(2))
        .initialize(Init::Xavier, device)
}

/// Each BatchNorm's running statistics, by parameter name, as `save_parameters` writes them
/// after `valid()` has taken in every update still held per thread.
fn running_statistics(net: &Sequential<Residual>) -> std::collections::BTreeMap<String, Vec<f32>> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("net.safetensors");
    net.valid().save_parameters(&path).unwrap();
    common::params::floats(&path)
        .into_iter()
        .filter(|(name, _)| name.contains("running"))
        .collect()
}

/// `infer_shape` and `summarize` run an example through the network, also through a block's
/// own `forward` (the residual block's `infer`), on a training device: the example trains
/// nothing, so every BatchNorm keeps its fresh statistics (mean 0, variance 1).
#[test]
fn an_example_that_resolves_sizes_leaves_the_running_statistics_alone() {
    let device = Device::flex().autodiff();
    // Images whose channels have means of 3 and variances far from 1.
    let x: Tensor<4> = Images::new(1).batches[0].x_on(&device).unwrap().rank();
    let example: NdTensor = x.mul_scalar(4.0).add_scalar(3.0).into();
    let fresh = |stats: std::collections::BTreeMap<String, Vec<f32>>| {
        assert_eq!(stats.len(), 4, "{stats:?}");
        for (name, values) in stats {
            let expected = if name.ends_with("running_mean") {
                0.0
            } else {
                1.0
            };
            assert!(values.iter().all(|&v| v == expected), "{name}: {values:?}");
        }
    };
    let net = residual_net(&device).infer_shape(example.clone()).unwrap();
    fresh(running_statistics(&net));
    let (net, _) = residual_net(&device).summarize(example).unwrap();
    fresh(running_statistics(&net));
}

/// The same network, from the same parameter file, through one epoch of `fit` (the step on the
/// engine's worker thread, the sizes resolved on the caller's) on flex and on wgpu: the
/// running statistics agree. They did not while the example that resolved the sizes updated
/// them: burn keeps each update per thread, and the caller's was averaged into the worker's.
#[test]
fn running_statistics_after_fit_agree_on_flex_and_wgpu() {
    let flex = Device::flex().autodiff();
    let images = Images::new(4);
    let dir = tempfile::tempdir().unwrap();
    let start = dir.path().join("start.safetensors");
    let example = |device: &Device| images.batches[0].x_on(device).unwrap();
    residual_net(&flex)
        .infer_shape(example(&flex))
        .unwrap()
        .save_parameters(&start)
        .unwrap();
    let trained = |device: &Device| {
        let net = residual_net(device)
            .infer_shape(example(device))
            .unwrap()
            .load_parameters(&start, device)
            .unwrap();
        let trainer = Optimizer::new(&net, "sgd", 0.1).unwrap();
        let run = Fit::new(net, SoftmaxCrossEntropyLoss, trainer, device)
            .epochs(1)
            .run(&mut images.clone())
            .unwrap();
        running_statistics(&run.net)
    };
    let (on_flex, on_wgpu) = (trained(&flex), trained(&common::wgpu().autodiff()));
    assert_eq!(on_flex.len(), 4);
    for (name, a) in &on_flex {
        let b = &on_wgpu[name];
        for (x, y) in a.iter().zip(b) {
            assert!(
                (x - y).abs() <= 1e-4 * x.abs().max(1.0),
                "{name}: flex {a:?}, wgpu {b:?}"
            );
        }
    }
}
