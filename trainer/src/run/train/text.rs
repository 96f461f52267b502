//! How a run of `ember train` trains a language model on text (`--data text:…`): d2l's
//! `train_ch8`, subsequences of the corpus each epoch, the state carried from batch to batch
//! under sequential partitioning, perplexity per epoch, and with `--valid-split` the loss and
//! perplexity of the corpus' held-out end.

use anyhow::{Context, bail};
use burn::tensor::{Device, Tensor};
use ember::{Block, Loss, NdTensor, SequenceCrossEntropyLoss};
use ember_datasets::Batch;
use ember_datasets::text::{Partition, Subsequences};

use super::super::book_lines::BookLines;
use super::super::model::{ModelSpec, Net};
use super::super::recipe::recipe_words;
use super::super::text_data::TextTask;
use super::super::written::finish;
use super::Run;
use crate::fit::{Evaluation, Target};
use crate::metric::{VALID, column, read_floats};

impl Run<'_> {
    /// A language model on `text`.
    pub(super) fn text(self, net: Net, text: TextTask) -> anyhow::Result<()> {
        let (w, notes) = (self.workload, self.notes);
        let sequential = text.spec.partition == Partition::Sequential;
        // A recurrent network carries its state from batch to batch under sequential
        // partitioning; a Transformer carries none.
        let carries = sequential && matches!(self.model, ModelSpec::Recurrent(_));
        if self.job.is_some() {
            bail!(
                "--distributed with --data {}: a job's ranks would each need their own share of \
                 the text; train text in one process",
                w.data
            );
        }
        if carries && self.replicas.len() > 1 {
            bail!(
                "--devices with --data {}: sequential partitioning carries each row's state from \
                 batch to batch, and the devices would each need their rows' share of it; give \
                 --data {},random, or one device",
                w.data,
                w.data
            );
        }
        let (train, valid) = text.split(w.valid_split);
        let steps = text.spec.steps;
        let cut = |corpus: Vec<usize>, what: &str| {
            let cut = Subsequences::new(corpus, w.batch_size, steps, text.spec.partition, w.seed);
            cut.and_then(|cut| match text.spec.offset {
                Some(offset) => cut.offset(offset),
                None => Ok(cut),
            })
            .with_context(|| {
                format!(
                    "invalid --batch-size {} for --data {} ({what}): give a smaller batch, \
                         or more tokens",
                    w.batch_size, w.data
                )
            })
        };
        let (train_tokens, valid_tokens) = (train.len(), valid.as_ref().map(Vec::len));
        let mut batches = cut(train, "its training text")?;
        let valid = valid
            .map(|v| cut(v, "its share held out by --valid-split"))
            .transpose()?;
        note!(
            notes,
            "training on {}: {train_tokens} train{} tokens, a vocabulary of {}, sequences of \
             {steps} ({} partitioning); {}, batch {}, lr {}{}, policy {}, {} epoch(s)",
            w.data,
            valid_tokens
                .map(|n| format!(", {n} valid"))
                .unwrap_or_default(),
            text.vocab.len(),
            match sequential {
                true => "sequential",
                false => "random",
            },
            self.model,
            w.batch_size,
            ember::error::number(w.lr),
            recipe_words(&w.recipe),
            self.policy.kind(),
            self.epochs
        );
        let device = self.device.clone().autodiff();
        let mut net = net;
        let Some(first) = batches.epoch(0).into_iter().next() else {
            bail!(
                "invalid --data {}: its training text makes no batch",
                w.data
            );
        };
        if let Some(path) = &self.outputs.load {
            net = (net
                .infer_shape(first.x_on(&device)?)?
                .load_parameters(path, &device))
            .with_context(|| format!("invalid --load {}", path.display()))?;
        }
        let mut fit = w
            .fit(net, SequenceCrossEntropyLoss, &device)?
            .metrics(self.eval.build());
        if carries {
            fit = fit
                .carry(|net: &Net, x, state: Option<Vec<Tensor<3>>>| net.forward_state(x, state));
        }
        if let Some(valid) = valid {
            let (batches, device) = (valid.epoch(0), self.device.clone());
            if batches.is_empty() {
                bail!(
                    "invalid --valid-split {}: the {} tokens it holds out of --data {} make no \
                     batch of --batch-size {}",
                    w.valid_split.unwrap_or_default(),
                    valid_tokens.unwrap_or_default(),
                    w.data,
                    w.batch_size
                );
            }
            let mut names = vec![column(VALID, "loss")];
            names.extend(self.eval.0.iter().map(|k| column(VALID, &k.to_string())));
            let perplexity = !self.eval.0.is_empty();
            fit = fit.evaluation(Evaluation {
                names,
                compute: Box::new(move |net: &Net| {
                    let loss = held_out_loss(net, &batches, &device, carries)?;
                    Ok([loss]
                        .into_iter()
                        .chain(perplexity.then(|| loss.exp()))
                        .collect())
                }),
            });
        }
        let progress = BookLines {
            bar: None,
            batches: text.batches(w.batch_size),
            notes: self.notes.clone(),
        };
        let outputs = self.outputs;
        let run = self.configure(fit, progress)?.run(&mut batches)?;
        finish(run, outputs, notes)
    }
}

/// The mean loss per token of `net` on the held-out `batches`, read once: where it `carries`
/// its state, from the state the batch before ended in, as training goes through them.
fn held_out_loss(
    net: &Net,
    batches: &[Batch],
    device: &Device,
    carries: bool,
) -> ember::Result<f64> {
    let (mut sum, mut state) = (None::<Tensor<1>>, None);
    for batch in batches {
        let x: NdTensor = batch.x_on(device)?;
        let (pred, next) = net.forward_state(x, state.take());
        if carries {
            state = Some(next);
        }
        let y = <SequenceCrossEntropyLoss as Loss>::Target::upload(batch, device)?;
        let losses = SequenceCrossEntropyLoss
            .forward(pred.into_rank()?, y)?
            .sum();
        sum = Some(sum.map_or(losses.clone(), |sum| sum + losses));
    }
    let examples: usize = batches.iter().map(Batch::len).sum();
    let total = match sum {
        Some(sum) => read_floats(sum, "a loss")?[0],
        None => 0.0,
    };
    Ok(total / examples.max(1) as f64)
}
