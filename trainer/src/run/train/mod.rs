//! A run of `ember train`, as code builds it: [`TrainSettings`] holds every flag, unchecked;
//! [`TrainSettings::check`] refuses in `ember train`'s words, naming the flag, before any work,
//! and gives the [`CheckedRun`]; [`CheckedRun::train`] trains it and writes its outputs.
//! `ember train` is this module, clap and printing.
//!
//! The checks run in three stages, which a job's ranks take between barriers:
//! [`TrainSettings::plan`] (the workload, the policy, the epochs), [`Plan::outputs`] (every
//! path, and the checkpoint a resume goes on from; it makes nothing), then, after
//! [`OutputPaths::make_dirs`], [`Plan::load`] (the data, the model, the metrics watched and the
//! memory the run needs). One check is left to [`CheckedRun::train`], as it needs the opened
//! device: whether a resumed checkpoint's run had the same flags.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::bail;
use burn::tensor::Device;
use ember::{DeviceName, Init, L2Loss, Replicas, SoftmaxCrossEntropyLoss};

use super::eval::{EvalList, check_watched};
use super::job::{Job, alike};
use super::loss_name::LossName;
use super::model::{ModelSpec, recorded};
use super::notes::Notes;
use super::output_paths::OutputPaths;
use super::task::{Task, wrong_loss};
use super::workload::{Workload, WorkloadSettings, positive};
use crate::fit::{EarlyStopping, ReduceLrOnPlateau, Watched};
use crate::metric::{VALID, column};
use crate::policy::{PolicyKind, SyncPolicy};

mod configure;
mod sources;
mod text;

/// Everything `ember train` is given, unchecked; each field is the flag of its name, `None` the
/// flag left out. The default is `ember train` with no flag.
#[derive(Debug, Clone)]
pub struct TrainSettings {
    /// The workload's flags (`--device`, `--data`, `--lr`, the recipe, …).
    pub workload: WorkloadSettings,
    /// `--sync`.
    pub sync: PolicyKind,
    /// `--epochs`.
    pub epochs: usize,
    /// `--model`.
    pub model: Option<ModelSpec>,
    /// `--loss`.
    pub loss: Option<LossName>,
    /// `--eval`.
    pub eval: Option<EvalList>,
    /// `--early-stop`.
    pub early_stop: Option<EarlyStopping>,
    /// `--reduce-lr-on-plateau`.
    pub reduce_lr_on_plateau: Option<ReduceLrOnPlateau>,
    /// `--best-on`.
    pub best_on: Option<String>,
    /// The files it reads and writes.
    pub outputs: Outputs,
}

impl Default for TrainSettings {
    fn default() -> Self {
        Self {
            workload: WorkloadSettings::default(),
            sync: PolicyKind::Window(1),
            epochs: 1,
            model: None,
            loss: None,
            eval: None,
            early_stop: None,
            reduce_lr_on_plateau: None,
            best_on: None,
            outputs: Outputs::default(),
        }
    }
}

/// The files a run reads and writes, each the flag of its name.
#[derive(Debug, Clone, Default)]
pub struct Outputs {
    /// `--save`.
    pub save: Option<PathBuf>,
    /// `--save-best`.
    pub save_best: Option<PathBuf>,
    /// `--metrics`.
    pub metrics: Option<PathBuf>,
    /// `--profile`.
    pub profile: Option<PathBuf>,
    /// `--tensorboard`.
    pub tensorboard: Option<PathBuf>,
    /// `--checkpoint`.
    pub checkpoint: Option<PathBuf>,
    /// `--checkpoint-every`.
    pub checkpoint_every: Option<usize>,
    /// `--resume`.
    pub resume: Option<PathBuf>,
    /// `--load`.
    pub load: Option<PathBuf>,
}

impl TrainSettings {
    /// The first stage: the workload ([`WorkloadSettings::check`]), the policy, `--epochs`.
    ///
    /// # Errors
    /// A refused value, named.
    pub fn plan(self) -> anyhow::Result<Plan> {
        let workload = self.workload.clone().check()?;
        let policy = self.sync.build()?;
        Ok(Plan {
            epochs: positive("epochs", self.epochs)?,
            workload,
            policy,
            settings: self,
        })
    }

    /// Every check, as a process alone runs them: [`TrainSettings::plan`], [`Plan::outputs`],
    /// [`OutputPaths::make_dirs`] (where the checkpoints go), [`Plan::load`]. `notes` hears
    /// what finding a checkpoint to resume did.
    ///
    /// ```
    /// use ember_trainer::run::TrainSettings;
    ///
    /// let mut settings = TrainSettings::default();
    /// settings.workload.lr = 0.0;
    /// let refused = settings.check(&Default::default()).err().unwrap();
    /// assert!(refused.to_string().starts_with("invalid --lr 0: "), "{refused}");
    /// ```
    ///
    /// # Errors
    /// What `ember train` refuses for the same flags, in its words.
    pub fn check(self, notes: &Notes) -> anyhow::Result<CheckedRun> {
        let plan = self.plan()?;
        let mut outputs = plan.outputs(true, notes)?;
        outputs.make_dirs(true)?;
        plan.load(outputs)
    }
}

/// A run whose workload, policy and epochs were checked: [`TrainSettings::plan`]'s.
pub struct Plan {
    settings: TrainSettings,
    /// The checked workload.
    pub workload: Workload,
    policy: Box<dyn SyncPolicy>,
    epochs: usize,
}

impl Plan {
    /// The second stage: every path the run reads and writes, checked (a regular file or new in
    /// a writable directory, no output over an input or another output, none inside the
    /// checkpoints' directory), and the checkpoint `--resume` goes on from; nothing is made. A
    /// process that `writes` not (a job's rank other than 0) is given no output, and leaves
    /// the checkpoints' directory to the rank that writes.
    ///
    /// # Errors
    /// A path refused, named with its flag.
    pub fn outputs(&self, writes: bool, notes: &Notes) -> anyhow::Result<OutputPaths> {
        let o = self.settings.outputs.clone();
        let kept = |path: Option<PathBuf>| path.filter(|_| writes);
        OutputPaths::check(
            writes,
            &self.workload.data,
            o.load,
            [kept(o.save), kept(o.save_best)],
            [kept(o.metrics), kept(o.profile), kept(o.tensorboard)],
            o.checkpoint,
            o.checkpoint_every,
            o.resume,
            notes,
        )
    }

    /// The last stage: the data, the loss, the model, `--eval` and the metrics watched, and
    /// whether the run fits in this machine's memory, before anything is allocated.
    ///
    /// # Errors
    /// Data that cannot be read, a loss or model it cannot train, a metric that is no column
    /// of the run's epochs, sizes too large for the machine.
    pub fn load(self, mut outputs: OutputPaths) -> anyhow::Result<CheckedRun> {
        let Plan {
            settings,
            workload,
            policy,
            epochs,
        } = self;
        let task = Task::load(&workload.data, workload.classes)?;
        let loss = settings.loss.unwrap_or(task.loss());
        if loss != task.loss() {
            return Err(wrong_loss(loss, &task, &workload.data));
        }
        let model = task.model(settings.model, &workload)?;
        let default_eval = EvalList::for_task(None, &task, &workload.data)?;
        let eval = EvalList::for_task(settings.eval, &task, &workload.data)?;
        let columns = eval.columns(
            matches!(&task, Task::Classify { test: Some(_), .. }),
            workload.valid_split.is_some(),
        );
        let (early_stop, reduce) = (settings.early_stop, settings.reduce_lr_on_plateau);
        if reduce.is_some()
            && let Some(schedule @ ember::optim::Schedule::OneCycle { .. }) =
                &workload.recipe.schedule
        {
            bail!(
                "--reduce-lr-on-plateau scales --lr, which --lr-schedule {schedule} ignores: \
                 leave one of them out"
            );
        }
        let watched = [
            ("--early-stop", early_stop.as_ref().map(|e| &e.0)),
            (
                "--reduce-lr-on-plateau",
                reduce.as_ref().map(|r| &r.watched),
            ),
        ];
        for (flag, watched) in watched {
            if let Some(watched) = watched {
                check_watched(flag, watched, &columns)?;
            }
        }
        let best_on = match (&settings.best_on, &early_stop) {
            _ if outputs.save_best.is_none() => None,
            (Some(metric), _) => Some(metric.clone()),
            (None, Some(early_stop)) => Some(early_stop.0.metric.clone()),
            (None, None) if workload.valid_split.is_some() => Some(column(VALID, "loss")),
            (None, None) => bail!(
                "--save-best needs a metric to watch: give --best-on METRIC (one of {}), or \
                 --valid-split F to watch valid_loss",
                columns.join(", ")
            ),
        };
        let best_on = best_on.map(|metric| Watched::new(&metric, 1, 0.0));
        if let Some(watched) = &best_on {
            check_watched("--best-on", watched, &columns)?;
        }
        task.check_memory(&workload, &model, &settings.sync, epochs)?;
        let (example, classes) = task.example_and_outputs(&workload);
        outputs.recorded = recorded(&model, &example, classes);
        Ok(CheckedRun {
            eval_given: (eval != default_eval).then(|| eval.recorded()),
            eval,
            best_on,
            early_stop,
            reduce_lr_on_plateau: reduce,
            workload,
            task,
            loss,
            model,
            policy,
            sync: settings.sync,
            epochs,
            outputs,
            example,
            classes,
            // As given, for what a job's ranks must have alike.
            given: settings.outputs,
        })
    }
}

/// A run whose every setting was checked: what it trains, on what, and where it writes. Its
/// parts are read-only: a change after the checks would skip them.
pub struct CheckedRun {
    workload: Workload,
    task: Task,
    loss: LossName,
    model: ModelSpec,
    example: Vec<usize>,
    classes: usize,
    outputs: OutputPaths,
    eval: EvalList,
    eval_given: Option<String>,
    best_on: Option<Watched>,
    early_stop: Option<EarlyStopping>,
    reduce_lr_on_plateau: Option<ReduceLrOnPlateau>,
    policy: Box<dyn SyncPolicy>,
    sync: PolicyKind,
    epochs: usize,
    given: Outputs,
}

impl CheckedRun {
    /// The checked workload.
    pub fn workload(&self) -> &Workload {
        &self.workload
    }

    /// The network.
    pub fn model(&self) -> &ModelSpec {
        &self.model
    }

    /// The shape of one example, without the batch axis.
    pub fn example(&self) -> &[usize] {
        &self.example
    }

    /// The network's outputs: the classes, or the values regressed.
    pub fn network_outputs(&self) -> usize {
        self.classes
    }

    /// Where it reads and writes.
    pub fn paths(&self) -> &OutputPaths {
        &self.outputs
    }

    /// Trains the run, alone (`job` none) or as a rank of `job`, on the devices it names, and
    /// writes its outputs: `--save` first, then the trace; a run that fails after training
    /// began keeps what it trained ([`crate::fit::Fit::rescue`]). `notes` hears the lines
    /// `ember train` prints, besides the progress (the book's lines, or a bar where the
    /// standard output is a terminal).
    ///
    /// A rank of a job must have been checked through the stages, with [`Plan::outputs`]'
    /// `writes` true on rank 0 alone ([`TrainSettings::check`] makes every process write).
    /// Training installs SIGINT and SIGTERM handlers for the process: a signal stops the run
    /// after its batch in flight (at once in a job), and says so on the standard error.
    ///
    /// # Errors
    /// A device that cannot be opened, a resume whose checkpoint's run had other flags, a
    /// failed step (after its rescue), an output not written; [`super::Interrupted`] where a
    /// signal stopped the run (its checkpoint holds it).
    pub fn train(self, job: Option<&Job>, notes: &Notes) -> anyhow::Result<()> {
        let given = &self.given;
        let alike = job.map(|_| {
            alike(
                [
                    ("--save", &given.save),
                    ("--save-best", &given.save_best),
                    ("--metrics", &given.metrics),
                    ("--profile", &given.profile),
                    ("--tensorboard", &given.tensorboard),
                ],
                &given.load,
                self.workload.classes,
                self.loss,
                &self.sync,
            )
        });
        let workload = match job {
            Some(job) => job.rank_device(self.workload),
            None => self.workload,
        };
        let picked = workload.open_seeded_devices(notes)?;
        let main = &picked[0];
        let mut outputs = self.outputs;
        outputs.devices = picked.iter().map(|p| p.name.to_string()).collect();
        let device = main.device.clone().autodiff();
        let replicas = Replicas::new(picked.iter().map(|p| p.device.clone().autodiff()).collect())?;
        if replicas.len() > 1 {
            note!(notes, "{}", replicas.exchange());
        }
        let run = Run {
            eval_given: self.eval_given,
            eval: self.eval,
            best_on: self.best_on,
            early_stop: self.early_stop,
            reduce_lr_on_plateau: self.reduce_lr_on_plateau,
            workload: &workload,
            model: &self.model,
            policy: self.policy,
            epochs: self.epochs,
            device: &main.device,
            device_name: main.name,
            replicas,
            outputs: &outputs,
            job,
            alike: alike.unwrap_or_default(),
            notes,
        };
        match (self.loss, self.task) {
            (LossName::L2, Task::Synthetic) => run.synthetic(),
            (LossName::SoftmaxCe, Task::Classify { train, test }) => {
                let classes = train.classes().unwrap_or(1);
                let net = self.model.build(classes, self.model.init(), &device);
                run.examples(net, SoftmaxCrossEntropyLoss, train, test)
            }
            (LossName::L2, Task::Regress { train }) => {
                let net = self.model.build(train.outputs(), Init::default(), &device);
                run.examples(net, L2Loss, train, None)
            }
            (LossName::SequenceCe, Task::Text(text)) => {
                let net = self
                    .model
                    .build(text.vocab.len(), self.model.init(), &device);
                run.text(net, text)
            }
            (loss, task) => Err(wrong_loss(loss, &task, &workload.data)),
        }
    }
}

/// One run, training: the workload, the model, the policy, and where things go.
struct Run<'a> {
    /// `--eval`'s metrics, checked against the data's targets.
    eval: EvalList,
    /// `--eval` as given, where it differs from the default.
    eval_given: Option<String>,
    /// What `--save-best` watches.
    best_on: Option<Watched>,
    early_stop: Option<EarlyStopping>,
    reduce_lr_on_plateau: Option<ReduceLrOnPlateau>,
    workload: &'a Workload,
    model: &'a ModelSpec,
    policy: Box<dyn SyncPolicy>,
    epochs: usize,
    /// The main device without autodiff, for evaluation.
    device: &'a Device,
    /// What `--device` (or `--devices`' first entry) resolved to.
    device_name: DeviceName,
    /// The devices each step is split across (the main device alone without `--devices`).
    replicas: Replicas,
    outputs: &'a OutputPaths,
    /// The job this process is a rank of, under `--distributed`.
    job: Option<&'a Job>,
    /// In a job, what every rank must have alike besides what a resume matches ([`alike`]).
    alike: BTreeMap<String, String>,
    /// Where the run's lines go.
    notes: &'a Notes,
}
