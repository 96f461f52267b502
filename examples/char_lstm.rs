//! A character language model of one's own, d2l's chapter 9 on Debian's fortunes: an
//! `Embedding`, an `LSTM` and a `Dense` in a block of one's own, trained with `fit` on random
//! subsequences (or sequential ones, the state carried from batch to batch with
//! `Fit::carry`), its perplexity per epoch, then text generated from a prefix with the state
//! carried from character to character.
//!
//! ```text
//! apt-get install fortunes
//! cargo run --release --example char_lstm -- [EPOCHS] [CHARACTERS] [DEVICE] [random|sequential]
//! ```
//!
//! By default 4 epochs over the first 200,000 characters, on `auto`, random partitioning.

use burn::prelude::*;
use ember::optim::Clipping;
use ember::{
    Block, Dense, DeviceName, Embedding, Init, Layout, NdTensor, Optimizer, OptimizerKind,
    Recurrent, Result, SequenceCrossEntropyLoss,
};
use ember_datasets::text::{Partition, Subsequences, Vocab, fortunes};
use ember_trainer::fit::Fit;

/// Characters in, the next character's scores out, for every step.
#[derive(Module, Debug)]
pub struct CharModel {
    embed: Embedding,
    lstm: Recurrent,
    out: Dense,
}

impl CharModel {
    /// Characters of a `vocabulary`, an LSTM of `hidden` units.
    pub fn new(vocabulary: usize, hidden: usize) -> Self {
        Self {
            embed: Embedding::new(vocabulary, 32),
            lstm: Recurrent::lstm(hidden).layout(Layout::Ntc),
            out: Dense::new(vocabulary).flatten(false),
        }
    }

    /// The scores `[batch × steps, vocabulary]` and the final states, from `states`.
    pub fn scores(
        &self,
        x: NdTensor,
        states: Option<Vec<Tensor<3>>>,
    ) -> (Tensor<2>, Vec<Tensor<3>>) {
        let e: Tensor<3> = self.embed.forward(x).rank();
        let (h, states) = self.lstm.forward_state(e, states);
        let [batch, steps, hidden] = h.dims();
        let y = self.out.forward(h.reshape([batch * steps, hidden]).into());
        (y.rank(), states)
    }
}

impl Block for CharModel {
    /// `[batch, steps]` character indices in, `[batch × steps, vocabulary]` scores out.
    fn forward(&self, x: NdTensor) -> NdTensor {
        self.scores(x, None).0.into()
    }

    fn infer(self, x: NdTensor) -> Result<(Self, NdTensor)> {
        let (embed, e) = self.embed.infer(x)?;
        let (lstm, h) = self.lstm.infer(e)?;
        let h: Tensor<3> = h.into_rank()?;
        let [batch, steps, hidden] = h.dims();
        let (out, y) = self.out.infer(h.reshape([batch * steps, hidden]).into())?;
        Ok((Self { embed, lstm, out }, y))
    }

    fn initialize(self, init: Init, device: &Device) -> Self {
        Self {
            embed: self.embed.initialize(init, device),
            lstm: self.lstm.initialize(init, device),
            out: self.out.initialize(init, device),
        }
    }
}

/// d2l's `predict_ch8`: warms the state up on `prefix`, then appends the most likely
/// character `count` times, each fed back in.
pub fn predict(
    net: &CharModel,
    vocab: &Vocab,
    prefix: &str,
    count: usize,
    device: &Device,
) -> String {
    let one = |index: usize| NdTensor::from_host(&[index as f32], &[1, 1], device).unwrap();
    let mut indices: Vec<usize> = prefix
        .chars()
        .map(|c| vocab.index(&c.to_string()))
        .collect();
    let mut states = None;
    for &i in &indices[..indices.len() - 1] {
        states = Some(net.scores(one(i), states).1);
    }
    for _ in 0..count {
        let (y, next) = net.scores(one(*indices.last().unwrap()), states);
        states = Some(next);
        indices.push(y.argmax(1).into_scalar::<i64>() as usize);
    }
    indices
        .iter()
        .map(|&i| vocab.token(i).unwrap_or("?"))
        .collect()
}

fn main() -> anyhow::Result<()> {
    let arg = |n: usize| std::env::args().nth(n);
    let epochs: usize = arg(1).map_or(Ok(4), |a| a.parse())?;
    let characters: usize = arg(2).map_or(Ok(200_000), |a| a.parse())?;
    let picked = arg(3)
        .as_deref()
        .unwrap_or("auto")
        .parse::<DeviceName>()?
        .resolve()?;
    println!("device: {}", picked.reason);
    let device = picked.device.clone().autodiff();
    device.seed(0);

    let dir = std::path::Path::new(fortunes::DIR);
    let (corpus, vocab) = fortunes::characters(dir, Some(characters))?;
    println!(
        "{} characters, a vocabulary of {}",
        corpus.len(),
        vocab.len()
    );

    let partition = match arg(4).as_deref().unwrap_or("random") {
        "random" => Partition::Random,
        "sequential" => Partition::Sequential,
        other => anyhow::bail!("partition {other}: expected random or sequential"),
    };
    let mut batches = Subsequences::new(corpus, 32, 35, partition, 0)?;
    let net = CharModel::new(vocab.len(), 256).initialize(Init::Xavier, &device);
    // d2l clips the gradients' global norm to 1.
    let kind = OptimizerKind::adam();
    let trainer = Optimizer::new(&net, kind, 0.01)?.clip(Clipping::global_norm(1.0)?);
    let mut fit = Fit::new(net, SequenceCrossEntropyLoss, trainer, &device).epochs(epochs);
    if partition == Partition::Sequential {
        // Row r of batch t+1 goes on where row r of batch t stopped: so does its state.
        fit = fit.carry(|net: &CharModel, x, state| {
            let (y, state) = net.scores(x, state);
            (y.into(), state)
        });
    }
    let run = fit.run(&mut batches)?;
    for e in &run.trace.epochs {
        println!(
            "epoch {}: perplexity {:.2}, {:.1} sec",
            e.epoch + 1,
            e.mean_loss.exp(),
            e.time
        );
    }
    let net = run.net.valid();
    let text = predict(&net, &vocab, "the time ", 40, &picked.device);
    println!("{text}");
    Ok(())
}
