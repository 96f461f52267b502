//! `ember train`: the chapter's MLP on the chapter's synthetic data, or a model of `--model`
//! on Fashion-MNIST, a CSV table or NumPy arrays.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::bail;
use burn::tensor::Device;
use clap::Args;
use ember::{Block, DeviceName, Init, L2Loss, Loss, Replicas, SoftmaxCrossEntropyLoss};
use ember_datasets::{DataLoader, Examples};
use ember_trainer::evaluate::mean_loss;
use ember_trainer::fit::{EarlyStopping, Fit, ReduceLrOnPlateau, Target, Watched};
use ember_trainer::metric::{TEST, VALID, column};
use ember_trainer::policy::{BUILT_INS, PolicyKind, SyncPolicy};
use ember_trainer::signals;
use ember_trainer::tensorboard::TensorBoard;
use indicatif::{ProgressBar, ProgressStyle};

use super::book_lines::BookLines;
use super::distributed::{self, Distributed, Job};
use super::eval::{self, EvalList, check_watched};
use super::model::{ModelSpec, Net};
use super::output_paths::{OutputPaths, finish, rescue};
use super::recipe::{check_schedule, recipe_words};
use super::task::{LossName, Task, wrong_loss};
use super::workload::{Workload, WorkloadArgs, positive};

/// `--sync`'s long help: the built-in policies' table, one a line.
fn policy_help() -> String {
    let mut help = "How far the frontend may run ahead of the backend:".to_string();
    for built_in in BUILT_INS {
        help.push_str(&format!("\n  {:<12}{}", built_in.name, built_in.rule));
    }
    help.push_str(
        "\n\nauto starts as the barrier and times the frontend's pace (seconds from one batch's \
         release to the next, over 10 batches once the window has filled), then doubles the \
         window while that gains at least 1% (up to 64), and keeps the smallest window within 1% \
         of the best pace (an epoch too short to time a window ends the probing). Within an \
         epoch it never lets the process grow past MB (default: the memory free at the start, \
         and no bound where the system does not say), and stops doubling where a doubled \
         window would not fit. A resumed run probes again. It reads only the \
         frontend's pace: it cannot tell one device queue from another, a backend that reports \
         no progress before a readback shows its pace only through the waits, and on a busy \
         machine timings vary by more than 1%. The window it kept is each batch's `window` in \
         --metrics and a counter in --profile.",
    );
    help
}

/// Options of `ember train`.
#[derive(Debug, Args)]
pub struct TrainArgs {
    #[command(flatten)]
    workload: WorkloadArgs,
    /// Sync policy.
    #[arg(long, default_value = "barrier", long_help = policy_help())]
    sync: PolicyKind,
    /// Epochs.
    #[arg(long, default_value_t = 1)]
    epochs: usize,
    /// Write the per-batch trace here: `*.jsonl` for JSON Lines, CSV otherwise (epochs go to
    /// `<stem>.epochs.csv` beside it).
    #[arg(long)]
    metrics: Option<PathBuf>,
    /// Write the run as Chrome's trace-event JSON here, for Perfetto (ui.perfetto.dev) or
    /// chrome://tracing: per batch the frontend's issue, the policy's wait before it and the
    /// backend's compute on each device, tied by arrows; counters of memory, the device pool
    /// and the batches in flight. Written at the end, beside --metrics.
    #[arg(long, value_name = "FILE")]
    profile: Option<PathBuf>,
    /// Write TensorBoard scalars into this directory (made if needed) as the run goes: per
    /// batch the loss, the learning rate and the batches in flight (when the loop learns the
    /// batch is done: no barrier is added), per epoch the mean loss, the time, the peak memory
    /// growth and every --eval metric. Each run writes a new event file there; view them with
    /// `tensorboard --logdir DIR`.
    #[arg(long, value_name = "DIR")]
    tensorboard: Option<PathBuf>,
    /// The network: `mlp:H1,H2,…` (Dense(H, relu) layers, then the output layer), `lenet`
    /// (d2l's LeNet: sigmoid, average pooling), `lenet-relu` (ReLU, max pooling) or `resnet`
    /// (d2l's small ResNet: a 3×3 convolution to 8 channels, residual blocks of 8 and 16 with
    /// BatchNorm, global average pooling). Defaults to --hidden on synthetic data and to d2l's
    /// mlp:256 on other data.
    #[arg(long)]
    model: Option<ModelSpec>,
    /// The loss: `l2` for values to regress (synthetic data, csv and npy data without
    /// --classes) or `softmax-ce` for class labels. Defaults to the one the data's targets
    /// call for.
    #[arg(long, value_enum)]
    loss: Option<LossName>,
    /// Save the parameters (safetensors) here at the end. Written first, before --metrics.
    #[arg(long)]
    save: Option<PathBuf>,
    /// Keep checkpoints in this directory (parameters, optimizer state, position, trace), so
    /// that a killed or interrupted run can go on with --resume. Written at the end of each
    /// epoch, or as --checkpoint-every says; the last two are kept.
    #[arg(long)]
    checkpoint: Option<PathBuf>,
    /// Write a checkpoint after every N batches rather than at the end of each epoch (with
    /// --accumulate, at the end of the update the N-th batch falls in).
    #[arg(long)]
    checkpoint_every: Option<usize>,
    /// Go on from the newest sound checkpoint in this directory (a damaged newer one is moved
    /// aside, saying why), or from the checkpoint DIR/step-N names, with the flags of the run
    /// that wrote it: --epochs may grow (not under a --lr-schedule that spans the run: cosine,
    /// poly, onecycle), --lr and --lr-schedule may change (the way back from a run that
    /// diverged), and so may --precision. Checkpoints keep going to that directory unless
    /// --checkpoint names another.
    #[arg(long)]
    resume: Option<PathBuf>,
    /// Start from the parameters (safetensors) in this file.
    #[arg(long)]
    load: Option<PathBuf>,
    /// Print each layer's output shape and parameters first, as `ember summary` does.
    #[arg(long)]
    summary: bool,
    /// Stop when METRIC (`loss`, the mean training loss, or an epoch column: `train_acc`,
    /// `test_acc`, `valid_ce`, as --eval makes them) has not improved by more than MIN_DELTA
    /// [default: 0] for PATIENCE epochs: METRIC:PATIENCE[:MIN_DELTA]. Accuracies, top-K and F1
    /// improve up, losses and errors down. Read where the epoch's metrics already are: no
    /// barrier. The last checkpoint is the stopped epoch's.
    #[arg(long, value_name = "METRIC:PATIENCE[:MIN_DELTA]")]
    early_stop: Option<EarlyStopping>,
    /// Multiply the learning rate by FACTOR [default: 0.1] when METRIC has not improved for
    /// PATIENCE epochs (PyTorch's ReduceLROnPlateau, in epochs): METRIC:PATIENCE[:FACTOR].
    #[arg(long, value_name = "METRIC:PATIENCE[:FACTOR]")]
    reduce_lr_on_plateau: Option<ReduceLrOnPlateau>,
    #[arg(long, value_name = "METRICS", long_help = eval::HELP)]
    eval: Option<EvalList>,
    /// Save the parameters (safetensors) here after every epoch that improves --best-on, as
    /// --save writes them: a new file replaces the old one whole, never over an input. Read
    /// where the epoch's metrics already are: no barrier. An epoch whose loss or any metric is
    /// NaN or infinite is never the best, and parameters that are not finite are never written
    /// (they end the run, as a failed step does). Written before the epoch's checkpoint, so a
    /// run killed between the two trains and saves that epoch again on --resume, which knows
    /// the best so far from the checkpoint.
    #[arg(long, value_name = "PATH")]
    save_best: Option<PathBuf>,
    /// The metric --save-best watches, an epoch column as --early-stop takes [default: the
    /// --early-stop metric, else valid_loss with --valid-split].
    #[arg(long, value_name = "METRIC", requires = "save_best")]
    best_on: Option<String>,
    #[arg(long, value_enum, long_help = distributed::HELP)]
    distributed: Option<Distributed>,
}

pub fn run(args: TrainArgs) -> anyhow::Result<()> {
    match args.distributed.map(Job::start).transpose()? {
        Some(job) => {
            let result = train(args, Some(&job));
            job.end(result)
        }
        None => train(args, None),
    }
}

/// `ember train`, as this process alone or as a rank of `job`.
fn train(args: TrainArgs, job: Option<&Job>) -> anyhow::Result<()> {
    let workload = Workload::try_from(args.workload)?;
    let policy_kind = args.sync.clone();
    let policy = args.sync.build()?;
    let epochs = positive("epochs", args.epochs)?;
    // Rank 0 prints and writes for the job; the others check their inputs once it has.
    let writes = job.is_none_or(|job| job.rank() == 0);
    let kept = |path: Option<PathBuf>| path.filter(|_| writes);
    if let Some(job) = job.filter(|_| !writes) {
        super::quiet();
        job.collective().barrier();
    }
    // Every output is checked before any work starts.
    let mut outputs = OutputPaths::check(
        writes,
        &workload.data,
        args.load,
        [kept(args.save), kept(args.save_best)],
        [
            kept(args.metrics),
            kept(args.profile),
            kept(args.tensorboard),
        ],
        args.checkpoint,
        args.checkpoint_every,
        args.resume,
    )?;
    if let Some(job) = job.filter(|_| writes) {
        job.collective().barrier();
    }
    let task = Task::load(&workload.data, workload.classes)?;
    let loss = args.loss.unwrap_or(task.loss());
    if loss != task.loss() {
        return Err(wrong_loss(loss, &task, &workload.data));
    }
    let model = task.model(args.model, &workload)?;
    let default_eval = EvalList::for_task(None, &task, &workload.data)?;
    let eval = EvalList::for_task(args.eval, &task, &workload.data)?;
    let columns = eval.columns(
        matches!(&task, Task::Classify { test: Some(_), .. }),
        workload.valid_split.is_some(),
    );
    let watched = [
        ("--early-stop", args.early_stop.as_ref().map(|e| &e.0)),
        (
            "--reduce-lr-on-plateau",
            args.reduce_lr_on_plateau.as_ref().map(|r| &r.watched),
        ),
    ];
    if args.reduce_lr_on_plateau.is_some()
        && let Some(schedule @ ember::optim::Schedule::OneCycle { .. }) = &workload.recipe.schedule
    {
        bail!(
            "--reduce-lr-on-plateau scales --lr, which --lr-schedule {schedule} ignores: \
             leave one of them out"
        );
    }
    for (flag, watched) in watched {
        if let Some(watched) = watched {
            check_watched(flag, watched, &columns)?;
        }
    }
    let best_on = match (&args.best_on, &args.early_stop) {
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
    task.check_memory(&workload, &model, &policy_kind, epochs)?;
    let (example, classes) = task.example_and_outputs(&workload);
    outputs.recorded = super::export::recorded(&model, &example, classes);
    if args.summary {
        let summary = super::summary::summary(&model, &example, classes)?;
        say!("{}", summary.to_string().trim_end());
    }
    let picked = workload.open_seeded_devices()?;
    let main = &picked[0];
    outputs.devices = picked.iter().map(|p| p.name.to_string()).collect();
    let device = main.device.clone().autodiff();
    let replicas = Replicas::new(picked.iter().map(|p| p.device.clone().autodiff()).collect())?;
    if replicas.len() > 1 {
        say!("{}", replicas.exchange());
    }
    let run = Run {
        eval_given: (eval != default_eval).then(|| eval.recorded()),
        eval,
        best_on,
        early_stop: args.early_stop,
        reduce_lr_on_plateau: args.reduce_lr_on_plateau,
        workload: &workload,
        model: &model,
        policy,
        epochs,
        device: &main.device,
        device_name: main.name,
        replicas,
        outputs: &outputs,
        job,
    };
    match (loss, task) {
        (LossName::L2, Task::Synthetic) => run.synthetic(),
        (LossName::SoftmaxCe, Task::Classify { train, test }) => {
            let classes = train.classes().unwrap_or(1);
            let net = model.build(classes, model.init(), &device);
            run.examples(net, SoftmaxCrossEntropyLoss, train, test)
        }
        (LossName::L2, Task::Regress { train }) => {
            let net = model.build(train.outputs(), Init::default(), &device);
            run.examples(net, L2Loss, train, None)
        }
        (loss, task) => Err(wrong_loss(loss, &task, &workload.data)),
    }
}

/// One `ember train` run: the workload, the model, the policy, and where things go.
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
}

impl Run<'_> {
    /// The chapter's workload: synthetic batches, L2 loss, the book's progress lines.
    fn synthetic(self) -> anyhow::Result<()> {
        let w = self.workload;
        say!(
            "training {} batches x {} of {} features, model {}{}, policy {}, {} epoch(s)",
            w.batches,
            w.batch_size,
            w.features,
            self.model,
            recipe_words(w),
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
        };
        let device = self.device.clone().autodiff();
        let mut net = self.model.build(1, Init::default(), &device);
        if let Some(path) = &self.outputs.load {
            let example = w.data()?.batch(0);
            let x = example.x_on(&device)?;
            net = net.infer_shape(x)?.load_parameters(path, &device)?;
        }
        check_schedule(&w.recipe, w.batches, self.epochs)?;
        let fit = w.fit(net, L2Loss, &device)?.metrics(self.eval.build());
        let outputs = self.outputs;
        let mut data = w.epochs()?;
        if let Some(job) = self.job {
            data = data.shard(job.rank(), job.collective().size());
        }
        let run = self.configure(fit, progress)?.run(&mut data)?;
        finish(run, outputs)
    }

    /// Training on examples held in memory (Fashion-MNIST, CSV, NPY), d2l's
    /// `train_ch3`/`train_ch6`: shuffled minibatches, SGD at the workload's rate, and after
    /// each epoch the --eval metrics its steps accumulated (`fit` does that), and the same on
    /// the validation share (with its loss) and on the test set.
    fn examples<L>(
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
        let w = self.workload;
        let (train, valid) = match w.valid_split {
            Some(share) => {
                let (train, valid) = train.split(share, w.seed)?;
                (train, Some(valid))
            }
            None => (train, None),
        };
        say!(
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
            w.lr,
            recipe_words(w),
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
            net = net.infer_shape(x)?.load_parameters(path, &device)?;
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
        };
        let outputs = self.outputs;
        let run = self.configure(fit, progress)?.run(&mut loader)?;
        finish(run, outputs)
    }

    /// The settings every run of `ember train` shares: policy, epochs, progress, the per-step
    /// seed, checkpoints and resume.
    fn configure<'f, L>(
        self,
        fit: Fit<'f, Net, L>,
        progress: BookLines,
    ) -> anyhow::Result<Fit<'f, Net, L>>
    where
        L: Loss + Send + Sync + 'static,
        L::Target: Target,
    {
        // A job's ranks would each stop at the batch their own signal found, and then wait in
        // different collectives: in a job, a signal ends the process, and the job goes on from
        // its last checkpoint.
        if self.job.is_none() {
            signals::install()?;
        }
        let description = self.description();
        if let Some(job) = self.job {
            let (checkpoint, resume) = (&self.outputs.checkpoint, &self.outputs.resume);
            job.agree(
                &description,
                self.epochs,
                progress.batches,
                checkpoint,
                resume,
            )?;
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
            ));
        if let Some(checkpointing) = &self.outputs.checkpoint {
            fit = fit.checkpoint(checkpointing.clone().describe(description.clone()));
        }
        if let Some(job) = self.job {
            fit = fit.distributed(job.collective());
        }
        if let Some(early_stop) = self.early_stop {
            fit = fit.callback(early_stop);
        }
        if let Some(reduce) = self.reduce_lr_on_plateau {
            fit = fit.callback(reduce);
        }
        if let (Some(watched), Some(path)) = (self.best_on, &self.outputs.save_best) {
            let (path, recorded) = (path.clone(), self.outputs.recorded.clone());
            fit = fit.save_best(watched, move |net: &Net, epoch| {
                ember::io::safetensors::save_parameters_with(net, &path, &recorded)?;
                say!(
                    "epoch {}: the best so far: parameters saved to --save-best {}",
                    epoch.epoch + 1,
                    path.display()
                );
                Ok(())
            });
        }
        if let Some(checkpoint) = &self.outputs.resume {
            let changes = super::resume_flags::compare(checkpoint.description(), &description)
                .map_err(|differ| {
                    anyhow::anyhow!(
                        "cannot resume from {}: {differ}; resume with the flags of that run (only \
                         {} may change)",
                        checkpoint.dir.display(),
                        super::resume_flags::changeable_flags()
                    )
                })?;
            for change in changes {
                say!(
                    "resuming with {flag} {} (the checkpoint's run had {flag} {})",
                    change.now,
                    change.before,
                    flag = change.flag
                );
            }
            let done = checkpoint.position.epoch;
            if done >= self.epochs {
                bail!(
                    "invalid --epochs {}: the run resumed from {} has done {done} epoch(s) \
                     already; give more epochs to train on",
                    self.epochs,
                    checkpoint.dir.display()
                );
            }
            say!(
                "resuming from {}: epoch {}, batch {}",
                checkpoint.dir.display(),
                checkpoint.position.epoch + 1,
                checkpoint.position.next_batch
            );
            fit = fit.resume(checkpoint.clone());
        }
        // Last, once a resume was found sound: a refused run leaves no event file.
        if let Some(dir) = &self.outputs.tensorboard {
            let writer = TensorBoard::new(dir)?;
            say!(
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
        if let Some(job) = self.job {
            flags.insert("--distributed".to_string(), job.describe());
        }
        flags.insert("--model".to_string(), self.model.to_string());
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
