//! `ember lr-find`: Lightning's learning-rate finder on the workload `ember train` takes. A copy
//! of the network trains one batch at each rate from `--min-lr` to `--max-lr`; the command
//! prints the curve in a few rows and the suggested `--lr`, and `--plot DIR` draws it.

use std::path::PathBuf;

use anyhow::bail;
use clap::{Args, ValueEnum};
use ember::{Block, Init, L2Loss, Loss, Replicas, SoftmaxCrossEntropyLoss};
use ember_datasets::{DataLoader, Examples};
use ember_trainer::fit::{
    BatchSource, LrFinding, LrSweep, Suggestion, SweepEnd, SweepMode, Target,
};
use ember_trainer::plot::{LrFindFigure, render};
use ember_trainer::policy::PolicyKind;

use super::compare_outputs::prepare_out;
use super::workload::WorkloadArgs;
use ember_trainer::run::clash::Files;
use ember_trainer::run::loss_name::LossName;
use ember_trainer::run::model::{ModelSpec, Net};
use ember_trainer::run::recipe::recipe_words;
use ember_trainer::run::task::{Task, wrong_loss};
use ember_trainer::run::workload::Workload;

/// What `--plot DIR` writes.
const FIGURE: &str = "lr_find";

/// How the rate rises, as `--mode` spells it.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Mode {
    /// Evenly spaced on a log axis.
    Exponential,
    /// Evenly spaced.
    Linear,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::Exponential => "exponential",
            Mode::Linear => "linear",
        })
    }
}

/// Options of `ember lr-find`.
#[derive(Debug, Args)]
pub struct LrFindArgs {
    #[command(flatten)]
    workload: WorkloadArgs,
    /// The network, as `train --model` takes it [default: --hidden on synthetic data, d2l's
    /// mlp:256 on other data].
    #[arg(long)]
    model: Option<ModelSpec>,
    /// The loss, as `train --loss` takes it [default: the one the data's targets call for].
    #[arg(long, value_enum)]
    loss: Option<LossName>,
    /// Sweep from the parameters (safetensors) in this file (they are not changed).
    #[arg(long)]
    load: Option<PathBuf>,
    /// The first learning rate.
    #[arg(long, default_value_t = 1e-8, allow_negative_numbers = true)]
    min_lr: f64,
    /// The last learning rate.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    max_lr: f64,
    /// Batches in the sweep, one rate each; over several epochs where the data has fewer.
    #[arg(long, default_value_t = 100)]
    steps: usize,
    /// How the rate rises from --min-lr to --max-lr.
    #[arg(long, value_enum, default_value = "exponential")]
    mode: Mode,
    /// Stop once the smoothed loss exceeds F times its best so far (Lightning's
    /// early_stop_threshold); `inf` runs every step.
    #[arg(
        long,
        value_name = "F",
        default_value_t = 4.0,
        allow_negative_numbers = true
    )]
    divergence: f64,
    /// Draw loss against learning rate, the suggestion marked, as DIR/lr_find.png and
    /// DIR/lr_find.svg (DIR is made if missing).
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
}

/// The sweep of the flags, each value checked and named by its flag.
fn sweep(args: &LrFindArgs) -> anyhow::Result<LrSweep> {
    let (min, max) = (args.min_lr, args.max_lr);
    for (flag, value) in [("--min-lr", min), ("--max-lr", max)] {
        if let Err(ember::Error::InvalidValue { reason, .. }) = ember::optim::positive(flag, value)
        {
            bail!(
                "invalid {flag} {}: {reason}",
                ember_trainer::run::flags::number(value)
            );
        }
    }
    if max <= min {
        bail!("invalid --max-lr {max}: must be a finite number above --min-lr {min}");
    }
    let sweep = LrSweep::new(min, max, args.steps)
        .mode(match args.mode {
            Mode::Exponential => SweepMode::Exponential,
            Mode::Linear => SweepMode::Linear,
        })
        .early_stop_threshold(match args.divergence {
            f if f == f64::INFINITY => None,
            f => Some(f),
        });
    let least = sweep.skip_begin + sweep.skip_end + 2;
    // Lightning's default is 100; a sweep is one batch a step, so a million is hours of them.
    const MOST: usize = 1_000_000;
    if args.steps > MOST {
        bail!(
            "invalid --steps {}: at most {MOST} (a sweep trains one batch a step; Lightning's \
             default is 100)",
            args.steps
        );
    }
    if args.steps < least {
        bail!(
            "invalid --steps {}: the suggestion passes over the first {} points and the last \
             {}, and needs 2 more; give {least} or more",
            args.steps,
            sweep.skip_begin,
            sweep.skip_end
        );
    }
    if args.divergence.is_nan() || args.divergence <= 1.0 {
        bail!(
            "invalid --divergence {}: must be above 1 (a multiple of the best smoothed loss), \
             or inf to run every step",
            ember_trainer::run::flags::number(args.divergence)
        );
    }
    sweep.check()?;
    Ok(sweep)
}

pub fn run(args: LrFindArgs) -> anyhow::Result<()> {
    let sweep = sweep(&args)?;
    let workload = Workload::try_from(args.workload)?;
    if let Some(schedule) = &workload.recipe.schedule {
        bail!(
            "--lr-schedule {schedule} applies to `ember train`: lr-find sets every batch's rate \
             itself, from --min-lr to --max-lr; leave it out"
        );
    }
    if workload.recipe.hybridize {
        bail!(
            "{} applies to `ember train`, `compare` and `bench`: lr-find steps its copy of the \
             network eagerly, at a new rate each batch; leave it out",
            ember_trainer::run::flags::Flag::HYBRIDIZE
        );
    }
    if workload.recipe.accumulate > 1 {
        bail!(
            "--accumulate {} applies to `ember train`: lr-find takes one batch at each rate; \
             to sweep at the batch an accumulated update sees, give --batch-size that large",
            workload.recipe.accumulate
        );
    }
    // Every output is checked before any work starts: never over an input, or another output.
    let mut files = Files::default();
    files.data(&workload.data);
    if let Some(path) = &args.load {
        files.input(format!("--load {}", path.display()), path);
    }
    if let Some(dir) = &args.plot {
        let written = [format!("{FIGURE}.png"), format!("{FIGURE}.svg")];
        prepare_out("--plot", dir, &written.each_ref().map(String::as_str))?;
        for file in &written {
            files.output(
                format!("--plot {} (its {file})", dir.display()),
                &dir.join(file),
            );
        }
    }
    files.check()?;
    let task = Task::load(&workload.data, workload.classes)?;
    if matches!(task, Task::Text(_)) {
        anyhow::bail!(
            "ember lr-find does not sweep a language model yet: --data {} is text; find a rate \
             with ember train --data {} on a few epochs of --lr values",
            workload.data,
            workload.data
        );
    }
    let loss = args.loss.unwrap_or(task.loss());
    if loss != task.loss() {
        return Err(wrong_loss(loss, &task, &workload.data));
    }
    let model = task.model(args.model, &workload)?;
    task.check_memory(&workload, &model, &PolicyKind::Window(1), 1)?;
    let picked = workload.open_seeded_devices(&super::notes())?;
    let replicas = Replicas::new(picked.iter().map(|p| p.device.clone().autodiff()).collect())?;
    let finder = Finder {
        workload: &workload,
        model: &model,
        replicas,
        load: args.load.as_ref(),
        sweep,
    };
    ember_trainer::signals::install()?;
    let found = match (loss, task) {
        (LossName::L2, Task::Synthetic) => {
            let w = &workload;
            say!(
                "sweeping {} rates from {} to {} ({}, under a barrier) on {} batches x {} of {} \
                 features, model {}{}",
                sweep.steps,
                sweep.min_lr,
                sweep.max_lr,
                args.mode,
                w.batches,
                w.batch_size,
                w.features,
                model,
                recipe_words(&w.recipe)
            );
            let net = model.build(1, Init::default(), finder.replicas.main());
            let mut data = w.epochs()?;
            let first = w.data()?.batch(0);
            finder.find(net, L2Loss, &mut data, &first)?
        }
        (LossName::SoftmaxCe, Task::Classify { train, .. }) => {
            let net = model.build(
                train.classes().unwrap_or(1),
                model.init(),
                finder.replicas.main(),
            );
            finder.examples(net, SoftmaxCrossEntropyLoss, train, args.mode)?
        }
        (LossName::L2, Task::Regress { train }) => {
            let net = model.build(train.outputs(), Init::default(), finder.replicas.main());
            finder.examples(net, L2Loss, train, args.mode)?
        }
        (loss, task) => return Err(wrong_loss(loss, &task, &workload.data)),
    };
    report(&found, args.plot.as_ref(), &workload, &model)?;
    // A sweep stopped by SIGINT or SIGTERM still prints what it found, then exits as a stopped
    // run does.
    match found.ended {
        SweepEnd::Stopped(signal) => Err(super::Interrupted(signal).into()),
        _ => Ok(()),
    }
}

/// One sweep: the workload, its network and devices, and the sweep.
struct Finder<'a> {
    workload: &'a Workload,
    model: &'a ModelSpec,
    replicas: Replicas,
    load: Option<&'a PathBuf>,
    sweep: LrSweep,
}

impl Finder<'_> {
    /// The sweep on examples held in memory: the training share (without --valid-split's),
    /// shuffled as `ember train` does.
    fn examples<L>(
        self,
        net: Net,
        loss: L,
        train: Examples,
        mode: Mode,
    ) -> anyhow::Result<LrFinding<Net>>
    where
        L: Loss + Send + Sync + 'static,
        L::Target: Target,
    {
        let w = self.workload;
        let train = match w.valid_split {
            Some(share) => ember_trainer::run::task::held_out(&train, share, w.seed)?.0,
            None => train,
        };
        say!(
            "sweeping {} rates from {} to {} ({mode}, under a barrier) on {}: {} examples of \
             shape {:?}; {}, batch {}{}",
            self.sweep.steps,
            self.sweep.min_lr,
            self.sweep.max_lr,
            w.data,
            train.len(),
            train.shape(),
            self.model,
            w.batch_size,
            recipe_words(&w.recipe)
        );
        let mut loader = DataLoader::new(train, w.batch_size)?
            .shuffle(w.seed)
            .prefetch(4);
        let first = loader.examples().batch(&[0]);
        self.find(net, loss, &mut loader, &first)
    }

    /// `net` (from --load's parameters, where given) swept with `loss` on `data`.
    fn find<L>(
        self,
        net: Net,
        loss: L,
        data: &mut dyn BatchSource,
        first: &ember_datasets::Batch,
    ) -> anyhow::Result<LrFinding<Net>>
    where
        L: Loss + Send + Sync + 'static,
        L::Target: Target,
    {
        let device = self.replicas.main().clone();
        let net = match self.load {
            Some(path) => net
                .infer_shape(first.x_on(&device)?)?
                .load_parameters(path, &device)?,
            None => net,
        };
        let fit = self
            .workload
            .fit(net, loss, &device)?
            .replicas(self.replicas)
            .seed(self.workload.seed);
        Ok(fit.lr_find(data, self.sweep)?)
    }
}

/// Rows of the table: about a dozen, evenly spread, and the suggested and last points.
fn rows(found: &LrFinding<Net>) -> Vec<usize> {
    let n = found.points.len();
    let mut rows: Vec<usize> = (0..n).step_by(n.div_ceil(12).max(1)).collect();
    if let Suggestion::At { index, .. } = found.suggestion {
        rows.push(index);
    }
    rows.extend(n.checked_sub(1));
    rows.sort_unstable();
    rows.dedup();
    rows
}

/// A rate as `--lr` takes it: 3 significant digits, without a float's tail.
fn rounded(lr: f64) -> String {
    format!("{lr:.2e}")
        .parse::<f64>()
        .map_or_else(|_| lr.to_string(), ember::error::number)
}

/// A loss for the table: 4 decimals, or 3 significant digits once it blew up.
fn loss(value: f64) -> String {
    match value.abs() < 1e5 {
        true => format!("{value:.4}"),
        false => format!("{value:.3e}"),
    }
}

/// Prints the table, the sweep's end and the suggestion, then draws `--plot` (a figure that
/// cannot be drawn loses nothing printed).
fn report(
    found: &LrFinding<Net>,
    plot: Option<&PathBuf>,
    workload: &Workload,
    model: &ModelSpec,
) -> anyhow::Result<()> {
    let suggested = match found.suggestion {
        Suggestion::At { index, .. } => Some(index),
        _ => None,
    };
    say!(
        "{:>5}  {:>10}  {:>10}  {:>10}",
        "step",
        "lr",
        "loss",
        "smoothed"
    );
    let last = found.points.len().checked_sub(1);
    for i in rows(found) {
        let p = &found.points[i];
        let mark = match (Some(i) == suggested, Some(i) == last, &found.ended) {
            (true, _, _) => "  <- suggested",
            (_, true, SweepEnd::Diverged { .. }) => "  <- diverged",
            _ => "",
        };
        say!(
            "{:>5}  {:>10.3e}  {:>10}  {:>10}{mark}",
            i + 1,
            p.lr,
            loss(p.loss),
            loss(p.smoothed)
        );
    }
    say!(
        "sweep: {} of {} steps; {}",
        found.points.len(),
        found.sweep.steps,
        found.ended
    );
    if let Suggestion::At { lr, .. } = &found.suggestion {
        say!("suggested --lr {}", rounded(*lr));
    }
    if let Some(dir) = plot {
        let subtitle = format!(
            "{}, model {model}, {}, batch {}",
            workload.data, workload.recipe.optimizer, workload.batch_size
        );
        let figure = LrFindFigure {
            points: &found.points,
            mode: found.sweep.mode,
            suggested,
            subtitle: &subtitle,
        };
        for path in render(&figure, dir, FIGURE)? {
            say!("plot: {}", path.display());
        }
    }
    match (&found.suggestion, &found.ended) {
        (Suggestion::At { .. }, _) => Ok(()),
        // A sweep a signal cut short says so, and exits as a stopped run does (130 for
        // SIGINT), not as a failure (1).
        (none, SweepEnd::Stopped(_)) => {
            say_err!("no learning rate to suggest: {none}");
            Ok(())
        }
        (none, _) => bail!("no learning rate to suggest: {none}"),
    }
}
