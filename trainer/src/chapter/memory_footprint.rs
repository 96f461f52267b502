//! 12.2.3 "Improving Memory Footprint" and exercise 2: the chapter's training loop with a
//! barrier on every batch, with none, and with "batch t finishes before t + 2 starts". Each run
//! is `ember train` in a fresh process, so its memory figures are its own.

use crate::summary::{PolicyRun, median};

use super::{Experiment, Outcome, Picture, Setup, Timing};
use crate::policy::PolicyKind;
use crate::run::workload::Workload;

const BOOK: &str = "d2l trains the MLP 512 -> 2048 -> 512 -> 1 on 150 batches of 1024 \
    random examples, once with l.wait_to_read() after every batch and once without. The \
    frontend prints 'batch 50, time ...' lines as it goes: with the barrier they advance with \
    the backend; without it, all 150 batches are issued in a fraction of the epoch, and \
    'increased memory' shows the queued batches piling up (a few MB with the barrier, far \
    more without).";

/// The chapter's workload (small under `--quick`) on the training device.
fn workload(s: &Setup) -> Workload {
    let mut workload = Workload::chapter(s.train.name);
    if s.quick {
        (workload.batches, workload.batch_size, workload.features) = (6, 32, 16);
        workload.hidden = vec![32];
    }
    workload
}

/// `repeat` runs of `ember train --sync spec` of the chapter's workload, each in a fresh
/// process ([`super::Runner::train`]).
pub fn train_in_child(s: &Setup, spec: PolicyKind) -> anyhow::Result<Vec<PolicyRun>> {
    s.runner.train(&spec, s.repeat, &workload(s), &s.scratch)
}

pub(super) struct Measured {
    name: String,
    pub(super) runs: Vec<PolicyRun>,
}

impl Measured {
    pub(super) fn new(s: &Setup, spec: PolicyKind) -> anyhow::Result<Self> {
        Ok(Self {
            name: spec.to_string(),
            runs: s.training_runs(spec)?,
        })
    }

    fn epochs(&self, field: fn(&crate::trace::EpochRecord) -> f64) -> Vec<f64> {
        self.runs
            .iter()
            .flat_map(|r| r.trace.epochs.iter().map(field))
            .collect()
    }

    pub(super) fn time(&self) -> Timing {
        Timing {
            label: format!("{}: time per epoch", self.name),
            seconds: self.epochs(|e| e.time),
        }
    }

    pub(super) fn peak(&self) -> f64 {
        median(self.epochs(|e| e.peak_growth_mb))
    }

    /// The most batches in flight at once, over every run and epoch.
    pub(super) fn max_depth(&self) -> usize {
        self.runs
            .iter()
            .flat_map(|r| r.trace.epochs.iter().map(|e| e.max_depth))
            .max()
            .unwrap_or(0)
    }

    pub(super) fn line(&self) -> String {
        format!(
            "{}: issued in {:.4} sec, max in flight {}, increased memory: {:.1} MB, peak \
             growth: {:.1} MB",
            self.name,
            median(self.epochs(|e| e.issue_time)),
            self.max_depth(),
            median(self.epochs(|e| e.increased_mb)),
            self.peak()
        )
    }
}

pub(super) fn context(s: &Setup) -> String {
    let sizes = if s.quick {
        "6 batches of 32 x 16, hidden 32"
    } else {
        "150 batches of 1024 x 512, hidden 2048,512"
    };
    format!(
        "{} ({}); {sizes}; each run a fresh `ember train`, median of {}",
        s.train.label(),
        s.train_reason,
        s.repeat
    )
}

/// 12.2.3: the training loop with and without a barrier (`ember train` in fresh processes).
pub const EXPERIMENT: Experiment = Experiment {
    key: "memory-footprint",
    title: "Improving memory footprint (12.2.3)",
    about: "12.2.3: the training loop with and without a barrier (`ember train` in fresh processes)",
    book: BOOK,
    run,
};

fn run(s: &Setup) -> anyhow::Result<Outcome> {
    let barrier = Measured::new(s, PolicyKind::Window(1))?;
    let none = Measured::new(s, PolicyKind::NoSync)?;
    let ratio = none.peak() / barrier.peak().max(0.1);
    let held = none.peak() > 2.0 * barrier.peak() + 1.0;
    Ok(Outcome {
        experiment: &EXPERIMENT,
        context: context(s),
        timings: vec![barrier.time(), none.time()],
        notes: vec![barrier.line(), none.line()],
        ratio: ("none / barrier peak memory growth".into(), ratio),
        claim: "without a barrier the queued batches make memory grow (peak growth over twice \
                the barrier's)"
            .into(),
        held,
        why: if held {
            format!(
                "none's frontend ran up to {} batches ahead, and each queued batch holds its \
                 host data until the backend takes it",
                none.max_depth()
            )
        } else {
            "the backend kept up with the frontend, so few batches were ever queued".into()
        },
        picture: Picture::Timeline(vec![barrier.runs[0].clone(), none.runs[0].clone()]),
    })
}
