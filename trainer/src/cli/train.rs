//! `ember train`: the chapter's MLP on the chapter's synthetic data, or a model of `--model`
//! on Fashion-MNIST, a CSV table or NumPy arrays. The flags map onto
//! [`ember_trainer::run::TrainSettings`], which checks and trains the run.

use std::path::PathBuf;

use clap::Args;
use ember_trainer::fit::{EarlyStopping, ReduceLrOnPlateau};
use ember_trainer::policy::auto::{BLOCK, GAIN, LARGEST, MOST_PAIRS, PAIRS};
use ember_trainer::policy::{BUILT_INS, PolicyKind};
use ember_trainer::run::eval::EvalList;
use ember_trainer::run::job::{Job, launched};
use ember_trainer::run::loss_name::LossName;
use ember_trainer::run::model::ModelSpec;
use ember_trainer::run::{Outputs, TrainSettings};

use super::distributed::{self, Distributed};
use super::workload::WorkloadArgs;

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

/// `--eval`'s long help.
const EVAL_HELP: &str = "Metrics of every epoch, comma separated: acc, topK (top5, …), ce \
(cross-entropy), f1 (macro F1) for class labels; mse, mae for values to regress; perplexity \
for text (exp of the mean cross-entropy per token); `none` for none [default: acc for class \
labels, perplexity for text, none for values]. Each is counted on the training batches \
as the steps run (train_NAME), then on the test set and on --valid-split's share (test_NAME, \
valid_NAME). They print on the epoch lines and go to <stem>.epochs.csv. A metric adds no \
barrier: the steps add to sums on the device, which are read once, at the epoch's end, where \
every policy waits anyway.";

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
    /// BatchNorm, global average pooling); for text, a language model: `lstm:H`, `gru:H`,
    /// `rnn:H` or `rnn-relu:H`, then `,layers=N` and `,embed=E` (an Embedding of E, 32 by
    /// default, the recurrent layers of H, a Dense scoring the vocabulary at every step), or
    /// `transformer:layers=L,heads=H,dim=D` (an Embedding of D, d2l's positional encoding, L
    /// causal pre-norm Transformer encoder layers of H heads, feed-forward 4·D, dropout 0.1).
    /// Defaults to --hidden on synthetic data, to d2l's mlp:256 on other data and to lstm:256
    /// on text.
    #[arg(long)]
    model: Option<ModelSpec>,
    /// The loss: `l2` for values to regress (synthetic data, csv and npy data without
    /// --classes), `softmax-ce` for class labels, `sequence-ce` for text (the next token at
    /// every step). Defaults to the one the data's targets
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
    #[arg(long, value_name = "METRICS", long_help = EVAL_HELP)]
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
        && let Some((rank, size)) = launched()
    {
        anyhow::bail!(
            "this process is rank {rank} of {size} that a launcher (mpirun) started, without \
             --distributed mpi: each rank would train alone, the same run {size} times, and \
             write the same outputs; give --distributed mpi to every rank"
        );
    }
    match args.distributed.map(Distributed::start).transpose()? {
        Some(job) => {
            let result = train(args, Some(&job));
            distributed::end(&job, result)
        }
        None => train(args, None),
    }
}

impl From<TrainArgs> for TrainSettings {
    fn from(args: TrainArgs) -> Self {
        Self {
            workload: (&args.workload).into(),
            sync: args.sync,
            epochs: args.epochs,
            model: args.model,
            loss: args.loss,
            eval: args.eval,
            early_stop: args.early_stop,
            reduce_lr_on_plateau: args.reduce_lr_on_plateau,
            best_on: args.best_on,
            outputs: Outputs {
                save: args.save,
                save_best: args.save_best,
                metrics: args.metrics,
                profile: args.profile,
                tensorboard: args.tensorboard,
                checkpoint: args.checkpoint,
                checkpoint_every: args.checkpoint_every,
                resume: args.resume,
                load: args.load,
            },
        }
    }
}

/// `ember train`, as this process alone or as a rank of `job`: the run's stages
/// ([`TrainSettings::plan`]), with the job's barriers between them.
fn train(args: TrainArgs, job: Option<&Job>) -> anyhow::Result<()> {
    let (summary, notes) = (args.summary, super::notes());
    let plan = TrainSettings::from(args).plan()?;
    // Rank 0 prints and writes for the job; the others check their inputs once it has.
    let writes = job.is_none_or(|job| job.rank() == 0);
    if let Some(job) = job.filter(|_| !writes) {
        super::quiet();
        super::rank_lines(job.rank());
        job.collective().barrier();
    }
    // Every output is checked before any work starts.
    let mut outputs = plan.outputs(writes, &notes)?;
    outputs.make_dirs(writes)?;
    if let Some(job) = job.filter(|_| writes) {
        job.collective().barrier();
    }
    let run = plan.load(outputs)?;
    if summary {
        let summary = super::summary::summary(run.model(), run.example(), run.network_outputs())?;
        say!("{}", summary.to_string().trim_end());
    }
    run.train(job, &notes)
}
