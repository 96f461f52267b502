//! The settings every run of `ember train` shares, and what makes two runs the same run.

use std::collections::BTreeMap;

use crate::fit::{Fit, Target};
use crate::signals;
use crate::tensorboard::TensorBoard;
use anyhow::bail;
use ember::{DeviceName, Loss};

use super::super::book_lines::BookLines;
use super::super::model::Net;
use super::super::rescue_file::rescue;
use super::super::resume_flags;
use super::Run;

impl Run<'_> {
    /// The settings every run of `ember train` shares: policy, epochs, progress, the per-step
    /// seed, checkpoints and resume.
    pub(super) fn configure<'f, L>(
        self,
        fit: Fit<'f, Net, L>,
        progress: BookLines,
    ) -> anyhow::Result<Fit<'f, Net, L>>
    where
        L: Loss + Send + Sync + 'static,
        L::Target: Target,
    {
        let notes = self.notes;
        // A job's ranks would each stop at the batch their own signal found, and then wait in
        // different collectives: in a job, a signal ends the process, and the job goes on from
        // its last checkpoint, which rank 0 names.
        signals::checkpoints_in(self.outputs.checkpoint.as_ref().map(|c| c.dir.clone()));
        match self.job {
            None => signals::install()?,
            Some(job) => signals::install_at_once((job.rank() == 0).then(|| {
                let none = match &self.outputs.checkpoint {
                    Some(_) => "",
                    None => "; nothing of it is kept (no --checkpoint)",
                };
                format!("the job ends at once (its ranks cannot agree on a batch to stop at){none}")
            }))?,
        }
        let description = self.description();
        if let Some(job) = self.job {
            let (checkpoint, resume) = (&self.outputs.checkpoint, &self.outputs.resume);
            let mut settings = description.clone();
            settings.extend(self.alike.clone());
            job.agree(&settings, self.epochs, progress.batches, checkpoint, resume)?;
        }
        let mut fit = fit
            .replicas(self.replicas)
            .policy(self.policy)
            .epochs(self.epochs)
            .progress(progress)
            .seed(self.workload.seed)
            .rescue(rescue(
                self.outputs,
                self.workload.recipe.rate_flag(self.workload.lr),
                notes.clone(),
            ));
        if let Some(checkpointing) = &self.outputs.checkpoint {
            fit = fit.checkpoint(checkpointing.clone().describe(description.clone()));
        }
        if let Some(job) = self.job {
            let mut collective = job.collective();
            note!(notes, "{}", collective.choose(self.device));
            fit = fit.distributed(collective);
        }
        if let Some(early_stop) = self.early_stop {
            fit = fit.callback(early_stop);
        }
        if let Some(reduce) = self.reduce_lr_on_plateau {
            fit = fit.callback(reduce);
        }
        if let (Some(watched), Some(path)) = (self.best_on, &self.outputs.save_best) {
            let (path, recorded) = (path.clone(), self.outputs.recorded.clone());
            let notes = notes.clone();
            fit = fit.save_best(watched, move |net: &Net, epoch| {
                ember::io::safetensors::save_parameters_with(net, &path, &recorded)?;
                note!(
                    notes,
                    "epoch {}: the best so far: parameters saved to --save-best {}",
                    epoch.epoch + 1,
                    path.display()
                );
                Ok(())
            });
        }
        if let Some(checkpoint) = &self.outputs.resume {
            let changes = resume_flags::compare(checkpoint.description(), &description).map_err(
                |differ| {
                    anyhow::anyhow!(
                        "cannot resume from {}: {differ}; resume with the flags of that run (only \
                         {} may change, --lr-schedule only to another schedule: it may not come \
                         or go; and --epochs may grow, unless a schedule spans the run)",
                        checkpoint.dir.display(),
                        resume_flags::changeable_flags()
                    )
                },
            )?;
            // A number past 12 digits, short (1e30 was printed with its 31 digits).
            let short = |value: &str| {
                value
                    .parse()
                    .map_or(value.to_string(), ember::error::number)
            };
            for change in changes {
                let rounding = match change.flag == resume_flags::KERNELS {
                    true => {
                        "; the numbers go on in these kernels' rounding, not bit for bit as \
                             one unbroken run's"
                    }
                    false => "",
                };
                note!(
                    notes,
                    "resuming with {flag} {} (the checkpoint's run had {flag} {}){rounding}",
                    short(&change.now),
                    short(&change.before),
                    flag = change.flag
                );
            }
            let done = checkpoint.position.epoch;
            // A checkpoint inside an epoch has trained part of the next one: going on to no
            // more epochs than it finished would save parameters past the run's end (the
            // hostile pass's `--epochs 1` from inside epoch 2 saved 1.97 epochs, exit 0).
            let inside = checkpoint.position.next_batch > 0;
            if done > self.epochs || (inside && done == self.epochs) {
                let least = done + usize::from(inside);
                let what = match inside {
                    true => format!("is inside epoch {least} already"),
                    false => format!("has done {done} epoch(s) already"),
                };
                bail!(
                    "invalid --epochs {}: the run resumed from {} {what}; give {least} or more",
                    self.epochs,
                    checkpoint.dir.display()
                );
            }
            // Its last checkpoint written, a run killed before `--save` still gets it: the
            // resume trains nothing and writes the outputs (it was refused, and the trained
            // network reached no file, hostile pass).
            if done == self.epochs {
                note!(
                    notes,
                    "the run resumed from {} has done its {done} epoch(s): nothing more to \
                     train; writing its outputs",
                    checkpoint.dir.display()
                );
            } else {
                note!(
                    notes,
                    "resuming from {}: epoch {}, batch {}",
                    checkpoint.dir.display(),
                    checkpoint.position.epoch + 1,
                    checkpoint.position.next_batch
                );
            }
            let unverified = checkpoint.unverified();
            if !unverified.is_empty() {
                warn_note!(
                    notes,
                    "warning: {} records no checksum for {}: written by an ember from before \
                     2026-11-25, or its state.json was edited; those files are read unverified",
                    checkpoint.dir.display(),
                    unverified.join(", ")
                );
            }
            fit = fit.resume(checkpoint.clone());
        }
        // Last, once a resume was found sound: a refused run leaves no event file.
        if let Some(dir) = &self.outputs.tensorboard {
            let writer = TensorBoard::new(dir)?;
            note!(
                notes,
                "tensorboard: {} (tensorboard --logdir {})",
                writer.path().display(),
                dir.display()
            );
            fit = fit.callback(writer);
        }
        Ok(fit)
    }

    /// What makes two runs the same run, flag by flag: what a resume must match. --epochs may
    /// grow and --sync changes no result, so neither is here.
    fn description(&self) -> BTreeMap<String, String> {
        let mut flags = self.workload.description(self.device_name);
        super::super::data_content::describe(&self.workload.data, &mut flags);
        if let Some(job) = self.job {
            flags.insert("--distributed".to_string(), job.describe());
        }
        flags.insert("--model".to_string(), self.model.to_string());
        // The kernels change a CPU run's arithmetic: a resume says where they changed, and a
        // job's ranks must match them.
        if self.device_name == DeviceName::Flex {
            flags.insert(
                resume_flags::KERNELS.to_string(),
                ember::kernels::status().kernels.to_string(),
            );
        }
        // A schedule over the whole run gives other rates to a run of other length.
        if self.workload.recipe.spans_run() {
            flags.insert("--epochs".to_string(), self.epochs.to_string());
        }
        // The callbacks' state is replayed from the checkpoint's epochs: the same callbacks.
        if let Some(early_stop) = &self.early_stop {
            flags.insert("--early-stop".to_string(), early_stop.to_string());
        }
        if let Some(reduce) = &self.reduce_lr_on_plateau {
            flags.insert("--reduce-lr-on-plateau".to_string(), reduce.to_string());
        }
        // So are the columns they watch: --eval's, where it is not the default, in any order.
        // (--save-best's best is replayed from the epochs too, and may come or go on a resume.)
        if let Some(eval) = &self.eval_given {
            flags.insert("--eval".to_string(), eval.clone());
        }
        flags
    }
}
