//! `ember train`: the chapter's MLP on the chapter's synthetic data, or a model of `--model`
//! on Fashion-MNIST, a CSV table or NumPy arrays.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::bail;
use burn::tensor::Device;
use clap::Args;
use ember::{DeviceName, Init, L2Loss, Replicas, SoftmaxCrossEntropyLoss};
use ember_trainer::fit::{EarlyStopping, ReduceLrOnPlateau, Watched};
use ember_trainer::metric::{VALID, column};
use ember_trainer::policy::auto::{BLOCK, GAIN, LARGEST, MOST_PAIRS, PAIRS};
use ember_trainer::policy::{BUILT_INS, PolicyKind, SyncPolicy};

use super::distributed::{self, Distributed, Job};
use super::eval::{self, EvalList, check_watched};
use super::model::ModelSpec;
use super::output_paths::OutputPaths;
use super::task::{LossName, Task, wrong_loss};
use super::workload::{Workload, WorkloadArgs, positive};

mod configure;
mod sources;

/// `--sync`'s long help: the built-in policies' table, one a line.
fn policy_help() -> String {
    let mut help = "How far the frontend may run ahead of the backend:".to_string();
    for built_in in BUILT_INS {
        help.push_str(&format!("\n  {:<12}{}", built_in.name, built_in.rule));
    }
    help.push_str(&format!(
        "\n\nauto starts as the barrier and compares the window in force with its double by the \
         frontend's pace (seconds from one batch's release to the next, in blocks of {BLOCK} \
         such intervals once the window has filled). The two take turns, k 2k k 2k … k, and each block \
         of 2k is divided by the mean of the blocks around it, so that a machine whose speed \
         drifts moves both alike; the median of the {PAIRS} ratios decides, or of {MOST_PAIRS} \
         where the first {PAIRS} disagree on whether 2k gains. Where 2k is at least \
         {gain}% faster it compares 2k with 4k (up to {LARGEST}); where not, it keeps k: the \
         smallest window within {gain}% of its double's pace (an epoch too short to time a block \
         ends the probing). Within an epoch it never lets the process grow past MB (default: \
         the memory free at the start, and no bound where the system does not say), and never \
         tries a doubled window that would not fit. A resumed run probes again. It reads only \
         the frontend's pace: it cannot tell one device queue from another, a backend that \
         reports no progress before a readback shows its pace only through the waits, and a \
         machine whose pace jumps by more than {gain}% in most pairs of blocks may make it keep \
         a window one step off. The window it kept is each batch's `window` in --metrics and a \
         counter in --profile.",
        gain = GAIN * 100.0,
    ));
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
    /// Write the per-batch trace here: `*.jsonl` for JSON Lines (batches and epochs in the one
    /// file, each line with its `kind`), CSV otherwise (epochs go to
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
    /// aside, saying why), or from the checkpoint DIR/step-N names. Give the flags of the run
    /// that wrote it again (they are checked, not read back: one that differs is refused,
    /// naming it): --epochs may grow (not under a --lr-schedule that spans the run: cosine,
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
    /// [default: 0] for PATIENCE epochs: METRIC:PATIENCE[:MIN_DELTA] (with 1, the first epoch
    /// without improvement stops it, as Keras's EarlyStopping). Accuracies, top-K and F1
    /// improve up, losses and errors down. Read where the epoch's metrics already are: no
    /// barrier. The last checkpoint is the stopped epoch's.
    #[arg(long, value_name = "METRIC:PATIENCE[:MIN_DELTA]")]
    early_stop: Option<EarlyStopping>,
    /// Multiply the learning rate by FACTOR [default: 0.1] when METRIC has not improved for
    /// PATIENCE epochs, counted as --early-stop counts them (Keras's ReduceLROnPlateau;
    /// PyTorch's with patience PATIENCE-1): METRIC:PATIENCE[:FACTOR]. A cut that would take the
    /// rate below about 1.2e-38, where single precision makes it 0 or flushes it to 0, is not
    /// made.
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
    if args.distributed.is_none()
        && let Some((rank, size)) = distributed::launched()
    {
        anyhow::bail!(
            "this process is rank {rank} of {size} that a launcher (mpirun) started, without \
             --distributed mpi: each rank would train alone, the same run {size} times, and \
             write the same outputs; give --distributed mpi to every rank"
        );
    }
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
    let alike = job.map(|_| ranks_alike(&args));
    let workload = Workload::try_from(args.workload)?;
    let policy_kind = args.sync.clone();
    let policy = args.sync.build()?;
    let epochs = positive("epochs", args.epochs)?;
    // Rank 0 prints and writes for the job; the others check their inputs once it has.
    let writes = job.is_none_or(|job| job.rank() == 0);
    let kept = |path: Option<PathBuf>| path.filter(|_| writes);
    if let Some(job) = job.filter(|_| !writes) {
        super::quiet();
        super::rank_lines(job.rank());
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
    outputs.make_dirs(writes)?;
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
    let workload = match job {
        Some(job) => job.rank_device(workload),
        None => workload,
    };
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
        alike: alike.unwrap_or_default(),
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
    /// In a job, what every rank must have alike besides what a resume matches
    /// ([`ranks_alike`]).
    alike: BTreeMap<String, String>,
}

/// What the ranks of a job must be started with alike, besides what a resume must match: the
/// outputs as given (rank 0 writes them, and another rank's would be dropped in silence), the
/// sync policy, and the CPU's kernels (`EMBER_CPU_KERNELS`), which change a rank's arithmetic.
fn ranks_alike(args: &TrainArgs) -> BTreeMap<String, String> {
    // `./x.st` is `x.st` (they were refused as two files, hostile pass); nothing is resolved
    // on disk, as another host's rank would resolve it in its own directories.
    let path = |p: &Option<PathBuf>| {
        p.as_ref().map_or("none".to_string(), |p| {
            let plain: PathBuf = p
                .components()
                .filter(|c| *c != std::path::Component::CurDir)
                .collect();
            plain.display().to_string()
        })
    };
    BTreeMap::from([
        ("--save".to_string(), path(&args.save)),
        ("--save-best".to_string(), path(&args.save_best)),
        ("--metrics".to_string(), path(&args.metrics)),
        ("--profile".to_string(), path(&args.profile)),
        ("--tensorboard".to_string(), path(&args.tensorboard)),
        ("--sync".to_string(), args.sync.to_string()),
        // The kernels in use, whichever way they were chosen (--cpu-kernels, the environment,
        // a library that is missing): comparing the variable alone let `--cpu-kernels flex`
        // beside oneDNN through, and refused it beside `EMBER_CPU_KERNELS=flex` (hostile pass).
        (
            "the CPU kernels".to_string(),
            ember::kernels::status().kernels.to_string(),
        ),
    ])
}
