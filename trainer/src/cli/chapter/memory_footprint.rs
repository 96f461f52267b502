//! 12.2.3 "Improving Memory Footprint" and exercise 2: the chapter's training loop with a
//! barrier on every batch, with none, and with "batch t finishes before t + 2 starts". Each run
//! is `ember train` in a fresh process, so its memory figures are its own.

use ember_trainer::compare::{PolicyRun, median};
use ember_trainer::policy::PolicySpec;

use super::{Outcome, Picture, Setup, Timing};

const BOOK: &str = "d2l trains the MLP 512 -> 2048 -> 512 -> 1 on 150 batches of 1024 \
    random examples, once with l.wait_to_read() after every batch and once without. The \
    frontend prints 'batch 50, time ...' lines as it goes: with the barrier they advance with \
    the backend; without it, all 150 batches are issued in a fraction of the epoch, and \
    'increased memory' shows the queued batches piling up (a few MB with the barrier, far \
    more without).";

const BOOK_EX2: &str = "Exercise 2 asks for a loop where batch t must finish before batch \
    t + 2 starts: the frontend may run one batch ahead, so it overlaps preparing the next batch \
    with computing the current one, while memory stays bounded like the barrier's.";

/// The chapter's workload as `ember train` arguments (small under `--quick`).
fn workload_args(s: &Setup) -> Vec<String> {
    let (batches, batch_size, features, hidden) = if s.quick {
        ("6", "32", "16", "32")
    } else {
        ("150", "1024", "512", "2048,512")
    };
    [
        ("--device", s.train.name.as_str()),
        ("--batches", batches),
        ("--batch-size", batch_size),
        ("--features", features),
        ("--hidden", hidden),
        ("--lr", "0.01"),
        ("--data", "synthetic"),
    ]
    .into_iter()
    .flat_map(|(flag, value)| [flag.to_string(), value.to_string()])
    .collect()
}

/// `repeat` runs of `ember train --sync spec`, each in a child process.
pub fn train_in_child(s: &Setup, spec: PolicySpec) -> anyhow::Result<Vec<PolicyRun>> {
    crate::cli::compare::run_all(&[spec], s.repeat, 1, &workload_args(s), &s.scratch)
}

struct Measured {
    name: String,
    runs: Vec<PolicyRun>,
}

impl Measured {
    fn new(s: &Setup, spec: PolicySpec) -> anyhow::Result<Self> {
        Ok(Self {
            name: spec.name(),
            runs: s.training_runs(spec)?,
        })
    }

    fn epochs(&self, field: fn(&ember_trainer::trace::EpochRecord) -> f64) -> Vec<f64> {
        self.runs
            .iter()
            .flat_map(|r| r.trace.epochs.iter().map(field))
            .collect()
    }

    fn time(&self) -> Timing {
        Timing {
            label: format!("{}: time per epoch", self.name),
            seconds: self.epochs(|e| e.time),
        }
    }

    fn peak(&self) -> f64 {
        median(self.epochs(|e| e.peak_growth_mb))
    }

    fn line(&self) -> String {
        format!(
            "{}: issued in {:.4} sec, increased memory: {:.1} MB, peak growth: {:.1} MB",
            self.name,
            median(self.epochs(|e| e.issue_time)),
            median(self.epochs(|e| e.increased_mb)),
            self.peak()
        )
    }
}

fn context(s: &Setup) -> String {
    let sizes = if s.quick {
        "6 batches of 32 x 16, hidden 32"
    } else {
        "150 batches of 1024 x 512, hidden 2048,512"
    };
    format!(
        "{} ({}); {sizes}; each run a fresh `ember train`, median of {}",
        Setup::label(&s.train),
        s.train_reason,
        s.repeat
    )
}

pub fn run(s: &Setup) -> anyhow::Result<Outcome> {
    let barrier = Measured::new(s, PolicySpec::Window(1))?;
    let none = Measured::new(s, PolicySpec::None)?;
    let ratio = none.peak() / barrier.peak().max(0.1);
    let held = none.peak() > 2.0 * barrier.peak() + 1.0;
    Ok(Outcome {
        key: "memory-footprint",
        title: "Improving memory footprint (12.2.3)",
        book: BOOK,
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
                none.runs[0]
                    .trace
                    .epochs
                    .iter()
                    .map(|e| e.max_depth)
                    .max()
                    .unwrap_or(0)
            )
        } else {
            "the backend kept up with the frontend, so few batches were ever queued".into()
        },
        picture: Picture::Timeline(vec![barrier.runs[0].clone(), none.runs[0].clone()]),
    })
}

pub fn exercise_2(s: &Setup) -> anyhow::Result<Outcome> {
    let barrier = Measured::new(s, PolicySpec::Window(1))?;
    let t2 = Measured::new(s, PolicySpec::Window(2))?;
    let none = Measured::new(s, PolicySpec::None)?;
    let time = |m: &Measured| m.time().median();
    let ratio = time(&t2) / time(&barrier);
    let bounded = t2.peak() <= 0.5 * none.peak();
    let held = bounded && ratio <= 1.05;
    let why = match (bounded, ratio <= 1.05) {
        (true, true) => format!(
            "t+2 kept memory at {:.1} MB against none's {:.1} MB, in {:.0}% of barrier's time",
            t2.peak(),
            none.peak(),
            100.0 * ratio
        ),
        (true, false) => format!(
            "memory stayed bounded ({:.1} MB against none's {:.1} MB), but t+2 was {:.0}% \
             slower than the barrier: on this machine the backend uses every core, so \
             preparing the next batch competes with the current one instead of overlapping it",
            t2.peak(),
            none.peak(),
            100.0 * (ratio - 1.0)
        ),
        (false, _) => format!(
            "none's queue stayed short ({:.1} MB), so bounding it saved little",
            none.peak()
        ),
    };
    Ok(Outcome {
        key: "exercise-2",
        title: "Exercise 2: batch t finishes before batch t + 2 starts",
        book: BOOK_EX2,
        context: context(s),
        timings: vec![barrier.time(), t2.time(), none.time()],
        notes: vec![barrier.line(), t2.line(), none.line()],
        ratio: ("t+2 / barrier time per epoch".into(), ratio),
        claim: "t+2 keeps memory bounded (at most half of none's peak) and is no slower than \
                the barrier (within 5%)"
            .into(),
        held,
        why,
        picture: Picture::Timeline(vec![
            barrier.runs[0].clone(),
            t2.runs[0].clone(),
            none.runs[0].clone(),
        ]),
    })
}
