//! Small Fashion-MNIST-format data sets, written as the gzipped IDX files the real one ships.

use std::io::Write;
use std::path::Path;

use ember_datasets::Examples;
use ember_datasets::idx::read_pair;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// Writes a gzipped IDX file of unsigned bytes.
pub fn write_idx_gz(path: &Path, dims: &[u32], data: &[u8]) {
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
pub fn fashion_like(dir: &Path, name: &str, n: usize, seed: u64) -> Examples {
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

/// `train` and `test` fashion-like examples as Fashion-MNIST's four files in `dir`; the
/// `--data` value that reads them.
pub fn fashion_data(dir: &Path, train: usize, test: usize) -> String {
    fashion_like(dir, "train", train, 1);
    fashion_like(dir, "t10k", test, 2);
    format!("fashion-mnist:{}", dir.display())
}
