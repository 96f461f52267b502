//! How a run of `ember train` trains on each kind of data: the chapter's synthetic batches, or
//! examples held in memory (Fashion-MNIST, CSV, NPY) with their validation share and test set.

use std::io::IsTerminal;

use crate::evaluate::mean_loss;
use crate::fit::Target;
use crate::metric::{TEST, VALID, column};
use anyhow::{Context, bail};
use ember::{Block, Init, L2Loss, Loss};
use ember_datasets::{DataLoader, Examples};
use indicatif::{ProgressBar, ProgressStyle};

use super::super::book_lines::BookLines;
use super::super::model::Net;
use super::super::recipe::{check_schedule, recipe_words};
use super::super::written::finish;
use super::Run;

impl Run<'_> {
    /// The chapter's workload: synthetic batches, L2 loss, the book's progress lines.
    pub(super) fn synthetic(self) -> anyhow::Result<()> {
        let (w, notes) = (self.workload, self.notes);
        note!(
            notes,
            "training {} batches x {} of {} features, model {}{}, policy {}, {} epoch(s)",
            w.batches,
            w.batch_size,
            w.features,
            self.model,
            recipe_words(&w.recipe),
            self.policy.kind(),
            self.epochs
        );
        let bar = std::io::stdout().is_terminal().then(|| {
            ProgressBar::new(w.batches as u64).with_style(
                ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} issued ({elapsed})")
                    .expect("valid template"),
            )
        });
        let progress = BookLines {
            bar,
            batches: w.batches,
            notes: self.notes.clone(),
        };
        let device = self.device.clone().autodiff();
        let mut net = self.model.build(1, Init::default(), &device);
        if let Some(path) = &self.outputs.load {
            let example = w.data()?.batch(0);
            let x = example.x_on(&device)?;
            net = (net.infer_shape(x)?.load_parameters(path, &device))
                .with_context(|| format!("invalid --load {}", path.display()))?;
        }
        check_schedule(&w.recipe, w.batches, self.epochs)?;
        let fit = w.fit(net, L2Loss, &device)?.metrics(self.eval.build());
        let outputs = self.outputs;
        let mut data = w.epochs()?;
        if let Some(job) = self.job {
            data = data.shard(job.rank(), job.collective().size());
        }
        let run = self.configure(fit, progress)?.run(&mut data)?;
        finish(run, outputs, notes)
    }

    /// Training on examples held in memory (Fashion-MNIST, CSV, NPY), d2l's
    /// `train_ch3`/`train_ch6`: shuffled minibatches, SGD at the workload's rate, and after
    /// each epoch the --eval metrics its steps accumulated (`fit` does that), and the same on
    /// the validation share (with its loss) and on the test set.
    pub(super) fn examples<L>(
        self,
        net: Net,
        loss: L,
        train: Examples,
        test: Option<Examples>,
    ) -> anyhow::Result<()>
    where
        L: Loss + Clone + Send + Sync + 'static,
        L::Target: Target,
    {
        let (w, notes) = (self.workload, self.notes);
        let (train, valid) = match w.valid_split {
            Some(share) => {
                let (train, valid) = super::super::task::held_out(&train, share, w.seed)?;
                (train, Some(valid))
            }
            None => (train, None),
        };
        note!(
            notes,
            "training on {}: {} train{}{} examples of shape {:?}; {}, batch {}, lr {}{}, policy {}, {} epoch(s)",
            w.data,
            train.len(),
            valid
                .as_ref()
                .map(|v| format!(", {} valid", v.len()))
                .unwrap_or_default(),
            test.as_ref()
                .map(|t| format!(", {} test", t.len()))
                .unwrap_or_default(),
            train.shape(),
            self.model,
            w.batch_size,
            ember::error::number(w.lr),
            recipe_words(&w.recipe),
            self.policy.kind(),
            self.epochs
        );
        // Known now rather than at the epoch's last step: a last batch smaller than the
        // devices cannot give each an example.
        let last = train.len() % w.batch_size;
        if let Some(devices) = &w.devices
            && last != 0
            && last < devices.len()
        {
            bail!(
                "invalid --batch-size {}: --data {} has {} training examples, so the last batch \
                 of each epoch holds {last}, too few for the {} devices of --devices {devices}; \
                 choose a batch size that leaves none or at least {} for the last batch",
                w.batch_size,
                w.data,
                train.len(),
                devices.len(),
                devices.len()
            );
        }
        let device = self.device.clone().autodiff();
        let mut loader = DataLoader::new(train, w.batch_size)?
            .shuffle(w.seed)
            .prefetch(4);
        if let Some(job) = self.job {
            loader = loader.shard(job.rank(), job.collective().size())?;
        }
        let mut net = net;
        if let Some(path) = &self.outputs.load {
            let example = loader.examples().batch(&[0]);
            let x = example.x_on(&device)?;
            net = (net.infer_shape(x)?.load_parameters(path, &device))
                .with_context(|| format!("invalid --load {}", path.display()))?;
        }
        check_schedule(&w.recipe, loader.num_batches(), self.epochs)?;
        let mut fit = w
            .fit(net, loss.clone(), &device)?
            .metrics(self.eval.build());
        if let Some(valid) = valid {
            let valid = DataLoader::new(valid, 1024)?;
            let (d, data) = (self.device.clone(), valid.clone());
            fit = fit.evaluate(column(VALID, "loss"), move |net: &Net| {
                mean_loss(net, &loss, &data, &d)
            });
            if !self.eval.0.is_empty() {
                fit = fit.evaluate_metrics(VALID, valid, self.eval.build(), self.device);
            }
        }
        if let Some(test) = test
            && !self.eval.0.is_empty()
        {
            let test = DataLoader::new(test, 1024)?;
            fit = fit.evaluate_metrics(TEST, test, self.eval.build(), self.device);
        }
        let progress = BookLines {
            bar: None,
            batches: loader.num_batches(),
            notes: self.notes.clone(),
        };
        let outputs = self.outputs;
        let run = self.configure(fit, progress)?.run(&mut loader)?;
        finish(run, outputs, notes)
    }
}
