//! Fashion-MNIST-format data through the whole pipeline: IDX files on disk, the DataLoader
//! with shuffle and prefetch, `fit` under a sync policy, and accuracy after training.

use std::io::Write;
use std::path::Path;

use burn::prelude::*;
use ember::{Activation, Block, Dense, Init, Sequential, SoftmaxCrossEntropyLoss, Trainer};
use ember_datasets::idx::read_pair;
use ember_datasets::{DataLoader, Examples};
use ember_trainer::fit::{FitOptions, fit};
use ember_trainer::policy::Window;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// Writes a gzipped IDX file of unsigned bytes.
fn write_idx_gz(path: &Path, dims: &[u32], data: &[u8]) {
    let mut bytes = vec![0, 0, 0x08, dims.len() as u8];
    for d in dims {
        bytes.extend(d.to_be_bytes());
    }
    bytes.extend(data);
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(&bytes).unwrap();
    std::fs::write(path, encoder.finish().unwrap()).unwrap();
}

/// `n` 28×28 images of 10 classes: class c lights up a band of rows, plus noise.
fn fashion_like(dir: &Path, name: &str, n: usize, seed: u64) -> Examples {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut pixels = Vec::with_capacity(n * 784);
    let mut labels = Vec::with_capacity(n);
    for _ in 0..n {
        let class: u8 = rng.random_range(0..10);
        labels.push(class);
        for row in 0..28usize {
            for _ in 0..28 {
                let lit = row / 3 == usize::from(class) || row / 3 == usize::from(class) + 1;
                let base: f32 = if lit { 170.0 } else { 40.0 };
                let noise: f32 = rng.random_range(-40.0..40.0);
                pixels.push((base + noise).clamp(0.0, 255.0) as u8);
            }
        }
    }
    let images = dir.join(format!("{name}-images-idx3-ubyte.gz"));
    let label_file = dir.join(format!("{name}-labels-idx1-ubyte.gz"));
    write_idx_gz(&images, &[n as u32, 28, 28], &pixels);
    write_idx_gz(&label_file, &[n as u32], &labels);
    read_pair(&images, &label_file).unwrap()
}

fn accuracy(net: &Sequential, data: &Examples, device: &Device) -> f64 {
    let all: Vec<usize> = (0..data.len()).collect();
    let batch = data.batch(&all);
    let x = Tensor::<1>::from_floats(batch.x.as_slice(), device).reshape(batch.x_shape);
    let predicted = net
        .forward(x)
        .unwrap()
        .argmax(1)
        .into_data()
        .convert::<i64>();
    let predicted: Vec<i64> = predicted.try_to_vec().unwrap();
    let correct = predicted
        .iter()
        .zip(&batch.y)
        .filter(|(p, y)| **p == **y as i64)
        .count();
    correct as f64 / data.len() as f64
}

#[test]
fn an_mlp_learns_fashion_mnist_format_data_from_idx_files() {
    let dir = tempfile::tempdir().unwrap();
    let train = fashion_like(dir.path(), "train", 2000, 1);
    let test = fashion_like(dir.path(), "t10k", 500, 2);
    assert_eq!((train.features(), train.classes()), (784, Some(10)));

    let device = Device::flex().autodiff();
    device.seed(3);
    // d2l's MLP: Flatten, Dense(256, relu), Dense(10), weights N(0, 0.01).
    let net: Sequential = Sequential::new()
        .add(Dense::new(256).activation(Activation::Relu))
        .add(Dense::new(10))
        .initialize(Init::Normal(0.01), &device);
    let trainer = Trainer::new(&net, "sgd", 0.1).unwrap();
    let mut loader = DataLoader::new(train, 64).unwrap().shuffle(5).prefetch(4);
    let run = fit(
        net,
        SoftmaxCrossEntropyLoss,
        trainer,
        &device,
        &mut loader,
        &mut Window(2),
        &FitOptions::epochs(3),
        &mut (),
    )
    .unwrap();
    assert_eq!(run.trace.batches.len(), 3 * loader.num_batches());
    let first = run.trace.epochs[0].mean_loss;
    let last = run.trace.epochs[2].mean_loss;
    assert!(last < 0.5 * first, "loss {first} -> {last}");
    let acc = accuracy(&run.net, &test, &Device::flex());
    eprintln!(
        "loss per epoch {:?}, test accuracy {acc}",
        run.trace
            .epochs
            .iter()
            .map(|e| e.mean_loss)
            .collect::<Vec<_>>()
    );
    assert!(
        acc > 0.8,
        "test accuracy {acc} is not clearly above chance (0.1)"
    );
}
