//! Fashion-MNIST-format data through the whole pipeline: IDX files on disk, the DataLoader
//! with shuffle and prefetch, `fit` under a sync policy, and accuracy after training.

mod common;

use burn::prelude::*;
use common::fashion::fashion_like;
use ember::{Activation, Block, Dense, Init, Optimizer, Sequential, SoftmaxCrossEntropyLoss};
use ember_datasets::DataLoader;
use ember_trainer::evaluate::accuracy;
use ember_trainer::fit::Fit;
use ember_trainer::policy::Window;

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
    let trainer = Optimizer::new(&net, "sgd", 0.1).unwrap();
    let mut loader = DataLoader::new(train, 64).unwrap().shuffle(5).prefetch(4);
    let run = Fit::new(net, SoftmaxCrossEntropyLoss, trainer, &device)
        .policy(Window(2))
        .epochs(3)
        .run(&mut loader)
        .unwrap();
    assert_eq!(run.trace.batches.len(), 3 * loader.num_batches());
    let first = run.trace.epochs[0].mean_loss;
    let last = run.trace.epochs[2].mean_loss;
    assert!(last < 0.5 * first, "loss {first} -> {last}");
    let test = DataLoader::new(test, 256).unwrap();
    let acc = accuracy(&run.net.valid(), &test, &Device::flex()).unwrap();
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

/// Debian's fortunes as d2l's *Time Machine* is used: cleaned to letters and spaces, a
/// character vocabulary of 28 (`<unk>`, the space, 26 letters), most frequent first, and a
/// corpus of millions of characters cut into a language model's batches. `.ci/run` installs
/// the package; without it this test fails, naming it.
#[test]
fn debians_fortunes_make_a_character_corpus_as_d2ls_time_machine() {
    use ember_datasets::text::{Partition, Subsequences, fortunes};
    let dir = std::path::Path::new(fortunes::DIR);
    let lines = fortunes::lines(dir).unwrap();
    assert!(lines.len() > 50_000, "{} lines", lines.len());
    assert!(
        !lines.iter().any(|l| l.trim() == "%"),
        "a separator was kept"
    );
    let (corpus, vocab) = fortunes::characters(dir, None).unwrap();
    assert_eq!(vocab.len(), 28, "{:?}", vocab.tokens());
    let top: Vec<&str> = vocab.tokens()[1..4].iter().map(String::as_str).collect();
    assert_eq!(top, [" ", "e", "t"], "English's most frequent characters");
    assert!(corpus.len() > 1_500_000, "{} characters", corpus.len());
    assert!(
        !corpus.contains(&0),
        "a cleaned character outside the vocabulary"
    );
    let (first, _) = fortunes::characters(dir, Some(1000)).unwrap();
    assert_eq!(first, corpus[..1000]);
    let data = Subsequences::new(corpus, 32, 35, Partition::Sequential, 0).unwrap();
    let batches = data.epoch(0);
    assert!(batches.len() > 1000, "{} batches", batches.len());
    assert_eq!(batches[0].x_shape, [32, 35]);
}

/// Where the package is missing, the error names the directory and the package.
#[test]
fn a_missing_fortunes_directory_names_the_package() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("fortunes");
    let err = ember_datasets::text::fortunes::lines(&missing)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&missing.display().to_string()) && err.contains("package `fortunes`"),
        "{err}"
    );
}
