//! A sequence model of one's own through `fit`: `examples/char_lstm.rs`'s character LSTM
//! (Embedding, LSTM, Dense in a block of one's own, `SequenceCrossEntropyLoss`) trained on
//! Debian's fortunes. Its perplexity falls from about the vocabulary's size towards a
//! character model's, under each of the chapter's policies, and the trained network finishes
//! a prefix with English letters.

#[allow(dead_code)]
#[path = "../../examples/char_lstm.rs"]
pub mod char_lstm;

use burn::prelude::*;
use char_lstm::CharModel;
use ember::{Block, Init, Optimizer, SequenceCrossEntropyLoss};
use ember_datasets::text::{Partition, Subsequences, fortunes};
use ember_trainer::fit::Fit;
use ember_trainer::policy::{NoSync, Window};

#[test]
fn a_character_lstm_learns_the_fortunes_under_every_policy() {
    let dir = std::path::Path::new(fortunes::DIR);
    let (corpus, vocab) = fortunes::characters(dir, Some(40_000)).unwrap();
    let device = Device::flex().autodiff();
    let batches = || Subsequences::new(corpus.clone(), 16, 20, Partition::Random, 0).unwrap();
    // One network, built and sized once, for the three runs: flex's random generator is the
    // process's, and the other tests of this binary draw from it on their threads, so a second
    // `device.seed(0)` and initialization need not give the same weights (CI saw that).
    device.seed(0);
    let first = batches().epoch(0).swap_remove(0);
    let untrained = CharModel::new(vocab.len(), 64)
        .initialize(Init::Xavier, &device)
        .infer_shape(first.x_on(&device).unwrap())
        .unwrap();
    let mut finals = Vec::new();
    for policy in ["barrier", "t+2", "none"] {
        let mut batches = batches();
        let net = untrained.clone();
        let trainer = Optimizer::new(&net, "adam", 0.01).unwrap();
        let fit = Fit::new(net, SequenceCrossEntropyLoss, trainer, &device).epochs(3);
        let fit = match policy {
            "barrier" => fit.policy(Window(1)),
            "t+2" => fit.policy(Window(2)),
            _ => fit.policy(NoSync),
        };
        let run = fit.run(&mut batches).unwrap();
        let perplexity: Vec<f64> = run.trace.epochs.iter().map(|e| e.mean_loss.exp()).collect();
        // Untrained, about the vocabulary's 28; a character model of English soon below 10.
        assert!(
            perplexity[0] < 28.0 && perplexity[2] < 10.0,
            "{policy}: {perplexity:?}"
        );
        assert!(
            perplexity.windows(2).all(|w| w[1] < w[0]),
            "{policy}: {perplexity:?}"
        );
        let text = char_lstm::predict(&run.net.valid(), &vocab, "the ", 20, &Device::flex());
        assert!(
            text.chars().all(|c| c == ' ' || c.is_ascii_lowercase()),
            "{text}"
        );
        finals.push(perplexity[2]);
    }
    // The policies change when the frontend waits, not what is computed.
    assert!(finals.windows(2).all(|w| w[0] == w[1]), "{finals:?}");
}
