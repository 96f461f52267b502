//! The experiments of d2l's "Computational Performance" chapters (12.1 hybridization, 12.2
//! asynchronous computation and its exercises, 12.3 automatic parallelism), each in a file
//! named after its key (`exercise-2` in `exercise_2.rs`) that holds its one [`Experiment`]
//! value: key, title, help line, the book's passage and its `run`. [`EXPERIMENTS`] lists them;
//! `ember bench`'s parser and help, its `--list`, the report and the tests all read that list.
//! Each one measures, gives the book's lines and a ratio ([`Outcome::lines`]), and says whether
//! the book's claim held on this machine, and why not when it did not. `ember bench` runs them
//! and prints the lines; code runs one with `(experiment.run)(&setup)`, given a [`Setup`] and a
//! [`Runner`] for what runs in fresh processes (`ember bench`'s runs `ember` itself; only
//! `memory-footprint`, `exercise-2` and `hybridize` ask for one).

pub mod async_matmul;
pub mod auto_parallel;
pub mod barriers;
pub mod dependency_graph;
pub mod exercise_2;
pub mod exercise_3;
pub mod exercise_4;
mod hybrid_steps;
pub mod hybridize;
pub mod implicit_blockers;
pub mod improving_computation;
pub mod memory_footprint;
pub mod report;

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::policy::PolicyKind;
use crate::run::workload::Workload;
use crate::summary::{PolicyRun, median};
use anyhow::anyhow;
use burn::tensor::{Device, Distribution, Tensor};
use ember::PickedDevice;

/// What an experiment needs from outside the library: runs in fresh processes, so that their
/// memory figures are their own, and so that kernel fusion's optimizers can be removed before
/// the process's first tensor operation. `ember bench` runs `ember` again.
pub trait Runner {
    /// `repeat` rounds of `ember train --sync policy --epochs 1` of `workload`, each in a
    /// process of its own, their traces under `scratch`.
    ///
    /// # Errors
    /// A run that failed, in its own words.
    fn train(
        &self,
        policy: &PolicyKind,
        repeat: usize,
        workload: &Workload,
        scratch: &Path,
    ) -> anyhow::Result<Vec<PolicyRun>>;

    /// [`hybridize::measure`] of `request`, in a process of its own.
    ///
    /// # Errors
    /// A run that failed, in its own words.
    fn hybridize(&self, request: &hybridize::Request) -> anyhow::Result<hybridize::Measured>;
}

/// Where and how big: what every experiment needs.
pub struct Setup {
    /// Runs in fresh processes.
    pub runner: Box<dyn Runner>,
    /// The "CPU" of the book (NumPy's place): flex unless `--cpu` says otherwise.
    pub cpu: PickedDevice,
    /// The "GPU" of the book: wgpu (a card, or lavapipe) unless `--gpu` says otherwise.
    pub gpu: PickedDevice,
    /// Where the training loops of 12.2.3 and exercise 2 run.
    pub train: PickedDevice,
    /// Why `train` was picked.
    pub train_reason: String,
    /// Measurements per timing; the median is reported.
    pub repeat: usize,
    /// Small sizes, for tests.
    pub quick: bool,
    /// Scratch space for child processes' traces and parameter files.
    pub scratch: PathBuf,
    /// Training runs already made in this invocation, shared by 12.2.3 and exercise 2.
    pub runs: RefCell<Vec<PolicyRun>>,
}

impl Setup {
    /// `full` normally, `quick` under `--quick`.
    pub fn size(&self, full: usize, quick: usize) -> usize {
        if self.quick { quick } else { full }
    }

    /// An experiment's context on the book's GPU: `wgpu on llvmpipe …, WHAT, median of 3`.
    pub fn on_gpu(&self, what: &str) -> String {
        format!("{}, {what}, median of {}", self.gpu.label(), self.repeat)
    }

    /// The training runs of `spec`, made now if not made before in this invocation.
    pub fn training_runs(&self, spec: PolicyKind) -> anyhow::Result<Vec<PolicyRun>> {
        let made: Vec<PolicyRun> = self
            .runs
            .borrow()
            .iter()
            .filter(|r| r.policy == spec)
            .cloned()
            .collect();
        if !made.is_empty() {
            return Ok(made);
        }
        let runs = memory_footprint::train_in_child(self, spec)?;
        self.runs.borrow_mut().extend(runs.iter().cloned());
        Ok(runs)
    }
}

/// One timed line, d2l's `with d2l.Benchmark(label):`, measured `repeat` times.
#[derive(Debug, Clone)]
pub struct Timing {
    /// What was timed, in the book's words.
    pub label: String,
    /// Every measurement, in seconds.
    pub seconds: Vec<f64>,
}

impl Timing {
    /// The median over the repeats.
    pub fn median(&self) -> f64 {
        median(self.seconds.clone())
    }
}

/// What a figure in the report shows.
pub enum Picture {
    /// Bars of the timings.
    Bars,
    /// The frontend/backend timeline of these training runs.
    Timeline(Vec<PolicyRun>),
    /// No figure: the lines say it.
    None,
}

/// One experiment of the chapter: everything about it that is written once.
#[derive(Debug)]
pub struct Experiment {
    /// The name on the command line (`ember bench KEY`), in the report and in the figures'
    /// file names.
    pub key: &'static str,
    /// The section's title, with the book's section number.
    pub title: &'static str,
    /// One line for `ember bench --help`.
    pub about: &'static str,
    /// What the book does and finds, with its figures.
    pub book: &'static str,
    /// Measures, and says whether the book's claim held here.
    pub run: fn(&Setup) -> anyhow::Result<Outcome>,
}

/// Every experiment, in the chapter's order.
pub const EXPERIMENTS: &[&Experiment] = &[
    &async_matmul::EXPERIMENT,
    &dependency_graph::EXPERIMENT,
    &barriers::EXPERIMENT,
    &implicit_blockers::EXPERIMENT,
    &improving_computation::EXPERIMENT,
    &memory_footprint::EXPERIMENT,
    &exercise_2::EXPERIMENT,
    &exercise_3::EXPERIMENT,
    &exercise_4::EXPERIMENT,
    &hybridize::EXPERIMENT,
    &auto_parallel::EXPERIMENT,
];

/// An experiment's result.
pub struct Outcome {
    /// The experiment.
    pub experiment: &'static Experiment,
    /// Device and sizes of this run.
    pub context: String,
    /// The timed lines.
    pub timings: Vec<Timing>,
    /// Other printed lines (values, estimates).
    pub notes: Vec<String>,
    /// The ratio that carries the lesson.
    pub ratio: (String, f64),
    /// The book's qualitative claim, in one sentence.
    pub claim: String,
    /// Whether it held here.
    pub held: bool,
    /// Why it held or did not, on this machine.
    pub why: String,
    /// The report's figure.
    pub picture: Picture,
}

impl Outcome {
    /// The book's lines, the ratio and the verdict, as printed.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = vec![format!(
            "== {}: {} ==",
            self.experiment.key, self.experiment.title
        )];
        lines.push(format!("on {}", self.context));
        lines.extend(
            self.timings
                .iter()
                .map(|t| format!("{}: {:.4} sec", t.label, t.median())),
        );
        lines.extend(self.notes.iter().cloned());
        lines.push(format!(
            "ratio {}: {}",
            self.ratio.0,
            show_ratio(self.ratio.1)
        ));
        lines.push(format!(
            "book's claim {}: {} ({})",
            if self.held { "held" } else { "did not hold" },
            self.claim,
            self.why
        ));
        lines
    }
}

/// A ratio with four significant places, however small.
pub fn show_ratio(value: f64) -> String {
    if value != 0.0 && value.abs() < 0.01 {
        format!("{value:.3e}")
    } else {
        format!("{value:.4}")
    }
}

/// Times `body` `repeat` times (after `setup` each time, untimed).
pub fn timed(
    label: impl Into<String>,
    repeat: usize,
    mut body: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<Timing> {
    let mut seconds = Vec::with_capacity(repeat);
    for _ in 0..repeat {
        let start = Instant::now();
        body()?;
        seconds.push(start.elapsed().as_secs_f64());
    }
    Ok(Timing {
        label: label.into(),
        seconds,
    })
}

/// `npx.waitall()`: waits for everything issued on `device`.
pub fn wait_all(device: &Device) -> anyhow::Result<()> {
    device
        .sync()
        .map_err(|e| anyhow!("waiting for the device failed: {e:?}"))
}

/// `np.random.normal(size=(n, n))` on `device`.
pub fn normal(n: usize, device: &Device) -> Tensor<2> {
    Tensor::<2>::random([n, n], Distribution::Normal(0.0, 1.0), device)
}

/// `wait_to_read` for one tensor: burn has no per-tensor wait, so read one element of it back,
/// which waits for the tensor and nothing issued after it (on an in-order device, for
/// everything issued before the read).
pub fn wait_to_read(t: &Tensor<2>) -> anyhow::Result<()> {
    to_host(t.clone().slice([0..1, 0..1])).map(drop)
}

/// Copies `t` to host memory (`asnumpy()`), waiting for it.
pub fn to_host(t: Tensor<2>) -> anyhow::Result<Vec<f32>> {
    t.into_data()
        .try_to_vec::<f32>()
        .map_err(|e| anyhow!("reading a result back failed: {e:?}"))
}

/// Why asynchrony cannot show on `device`, or `None` when it can.
pub fn no_overlap_reason(device: &PickedDevice) -> Option<String> {
    (!device.capabilities().asynchronous).then(|| {
        format!(
            "{} executes each operation on the calling thread: there is no backend queue, so \
             issuing is computing",
            device.name
        )
    })
}
