//! `ember bench`: experiments measured side by side in one run, with medians and ratios.

use anyhow::Context;
use clap::Args;
use ember::device::wgpu::adapter as wgpu_adapter;
use ember::{DeviceName, L2Loss};
use ember_trainer::summary::median;
use serde::{Deserialize, Serialize};

use super::child::{self, Child};
use ember_trainer::baseline::raw_burn_epoch;
use ember_trainer::chapter::{EXPERIMENTS, Experiment, Setup, report};
use ember_trainer::policy::PolicyKind;

use super::workload::WorkloadArgs;
use ember_trainer::run::list::List;
use ember_trainer::run::workload::Workload;

mod chapter_args;
mod outputs;
mod runner;
use chapter_args::ChapterArgs;

/// Options of `ember bench`: with no experiment named, every experiment of the chapter. The
/// chapter's options may come before an experiment's name as well as after it.
#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    command: Option<BenchCommand>,
    #[command(flatten)]
    chapter: ChapterArgs,
}

/// What `ember bench` runs: one of the chapter's experiments (their subcommands come from
/// [`EXPERIMENTS`]), the policies' comparison, or a child process of one of those.
#[derive(Debug)]
enum BenchCommand {
    Experiment(&'static Experiment, ChapterArgs),
    Policies(PoliciesArgs),
    One(OneArgs),
    HybridizeChild(runner::ChildArgs),
}

const POLICIES: &str = "policies";
const ONE: &str = "one";
const HYBRIDIZE_CHILD: &str = "hybridize-child";

impl clap::Subcommand for BenchCommand {
    fn augment_subcommands(cmd: clap::Command) -> clap::Command {
        // `augment_args` sets the struct's own doc as the about, so each about comes after.
        let experiments = EXPERIMENTS
            .iter()
            .map(|e| ChapterArgs::augment_args(clap::Command::new(e.key)).about(e.about));
        let policies = PoliciesArgs::augment_args(clap::Command::new(POLICIES)).about(
            "The chapter's training loop under barrier, t+2 and none, beside the same MLP \
             written straight against burn: time per epoch, issue time, increased memory, and \
             the ratios. Each configuration runs in a fresh process.",
        );
        let one = OneArgs::augment_args(clap::Command::new(ONE))
            .about("One configuration of `policies` in this process; prints one JSON line")
            .hide(true);
        let hybridize_child = runner::ChildArgs::augment_args(clap::Command::new(HYBRIDIZE_CHILD))
            .about("One mode of `hybridize` in this process")
            .hide(true);
        cmd.subcommands(experiments)
            .subcommands([policies, one, hybridize_child])
    }

    fn augment_subcommands_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_subcommands(cmd)
    }

    fn has_subcommand(name: &str) -> bool {
        [POLICIES, ONE, HYBRIDIZE_CHILD].contains(&name)
            || EXPERIMENTS.iter().any(|e| e.key == name)
    }
}

impl clap::FromArgMatches for BenchCommand {
    /// `matches` are the bench's own, with the chapter's options given before the
    /// subcommand's name; the subcommand's are inside.
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        match matches.subcommand() {
            Some((POLICIES, sub)) => {
                chapter_args::none_before(matches, POLICIES)?;
                Ok(Self::Policies(PoliciesArgs::from_arg_matches(sub)?))
            }
            Some((ONE, sub)) => {
                chapter_args::none_before(matches, ONE)?;
                Ok(Self::One(OneArgs::from_arg_matches(sub)?))
            }
            Some((HYBRIDIZE_CHILD, sub)) => {
                chapter_args::none_before(matches, HYBRIDIZE_CHILD)?;
                Ok(Self::HybridizeChild(runner::ChildArgs::from_arg_matches(
                    sub,
                )?))
            }
            Some((name, sub)) => match EXPERIMENTS.iter().find(|e| e.key == name) {
                Some(experiment) => Ok(Self::Experiment(
                    experiment,
                    chapter_args::experiments(matches, sub)?,
                )),
                None => Err(clap::Error::raw(
                    clap::error::ErrorKind::InvalidSubcommand,
                    format!("unknown experiment {name:?}\n"),
                )),
            },
            None => Err(clap::Error::new(clap::error::ErrorKind::MissingSubcommand)),
        }
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

#[derive(Debug, Args)]
struct PoliciesArgs {
    #[command(flatten)]
    workload: WorkloadArgs,
    /// Policies to run, comma separated.
    #[arg(long, default_value = "barrier,t+2,none")]
    policies: List<PolicyKind>,
    /// Rounds; each round runs every configuration once, in a rotated order, and the medians
    /// over rounds are reported.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
}

#[derive(Debug, Args)]
struct OneArgs {
    #[command(flatten)]
    workload: WorkloadArgs,
    /// `raw` (burn without ember) or a sync policy.
    #[arg(long)]
    config: String,
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.command {
        None => chapter(EXPERIMENTS, args.chapter),
        Some(BenchCommand::Experiment(experiment, chapter_args)) => {
            chapter(&[experiment], chapter_args)
        }
        Some(BenchCommand::Policies(args)) => policies(args),
        Some(BenchCommand::One(args)) => one(args),
        Some(BenchCommand::HybridizeChild(args)) => runner::hybridize_child(args),
    }
}

/// Runs `experiments`, prints their lines, and writes the report.
fn chapter(experiments: &[&'static Experiment], args: ChapterArgs) -> anyhow::Result<()> {
    if args.list {
        for experiment in experiments {
            say!("{}\t{}", experiment.key, experiment.title);
        }
        return Ok(());
    }
    let repeat = crate::cli::rounds::rounds(args.repeat)?;
    let cpu = args.cpu.resolve()?;
    // The book's GPU is the asynchronous device: wgpu on any adapter, lavapipe included.
    let gpu = match args.gpu {
        DeviceName::Auto if wgpu_adapter().is_some() => DeviceName::Wgpu,
        DeviceName::Auto => DeviceName::Flex,
        name => name,
    }
    .resolve()?;
    let train = args.device.resolve()?;
    let train_reason = train.reason.clone();
    // The report's files, checked before any experiment runs: chapter.md and each
    // experiment's figure.
    let report_files: Vec<String> = std::iter::once("chapter.md".to_string())
        .chain(
            experiments
                .iter()
                .flat_map(|e| [format!("{}.png", e.key), format!("{}.svg", e.key)]),
        )
        .collect();
    let report_files: Vec<&str> = report_files.iter().map(String::as_str).collect();
    // The two outputs against each other first, before --report is made (`--profile x
    // --report x` made x a directory, then refused --profile for being one), and again once it
    // is there to resolve (`--profile ./r/chapter.md --report r`, r new, lost the profile).
    let (profile, report) = (args.profile.as_deref(), args.report.as_deref());
    outputs::profile_clashes(profile, report, &report_files)?;
    if let Some(dir) = &args.report {
        let made = std::fs::symlink_metadata(dir).is_err();
        super::compare_outputs::prepare_out("--report", dir, &report_files)?;
        if let Err(e) = outputs::profile_clashes(profile, report, &report_files) {
            // A directory it made for nothing goes again (an empty one only).
            if made {
                let _ = std::fs::remove_dir(dir);
            }
            return Err(e);
        }
    }
    if let Some(path) = &args.profile {
        ember::io::check(path).with_context(|| format!("invalid --profile {}", path.display()))?;
    }
    let scratch = std::env::temp_dir().join(format!("ember-bench-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).with_context(|| format!("creating {}", scratch.display()))?;
    let machine = format!(
        "Machine: {} CPU cores. CPU device: {}. GPU device: {}. Training device: {} ({}).",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        cpu.label(),
        gpu.label(),
        train.label(),
        train_reason
    );
    say!("{machine}");
    let setup = Setup {
        cpu,
        gpu,
        train,
        train_reason,
        repeat,
        quick: args.quick,
        scratch: scratch.clone(),
        runs: Default::default(),
        runner: Box::new(runner::Children),
    };
    let mut outcomes = Vec::new();
    let result = (|| -> anyhow::Result<()> {
        for experiment in experiments {
            let outcome = (experiment.run)(&setup)
                .with_context(|| format!("experiment {}", experiment.key))?;
            say!("");
            for line in outcome.lines() {
                say!("{line}");
            }
            outcomes.push(outcome);
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    result?;
    if let Some(path) = &args.profile {
        let runs = setup.runs.borrow();
        super::compare::profile(&runs, &setup.train.label())
            .write(path)
            .with_context(|| format!("--profile {}", path.display()))?;
        say!(
            "profile: {} ({} training run(s))",
            path.display(),
            runs.len()
        );
    }
    if let Some(dir) = &args.report {
        say!("");
        for file in report::write(dir, &machine, &outcomes)? {
            say!("wrote {}", file.display());
        }
    }
    Ok(())
}

/// One measured epoch of one configuration.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Sample {
    time: f64,
    issue: Option<f64>,
    increased_mb: Option<f64>,
    peak_mb: Option<f64>,
}

/// glibc returns freed memory to the system and maps large buffers afresh depending on which
/// thread's arena freed them, which moves an epoch by ±20% here between otherwise identical
/// runs. Every child gets the same fixed settings, so the ratios measure ember, not malloc.
const MALLOC_PINS: [(&str, &str); 2] = [
    ("MALLOC_TRIM_THRESHOLD_", "4294967296"),
    ("MALLOC_MMAP_THRESHOLD_", "33554432"),
];

fn one(args: OneArgs) -> anyhow::Result<()> {
    let workload = Workload::try_from(args.workload)?.plain_sgd("ember bench")?;
    let picked = workload.one_device("ember bench")?.open()?;
    let sample = if args.config == "raw" {
        let time = raw_burn_epoch(
            &picked.device,
            &workload.data()?,
            workload.batches,
            &workload.hidden,
            workload.lr,
        );
        Sample {
            time,
            issue: None,
            increased_mb: None,
            peak_mb: None,
        }
    } else {
        let spec: PolicyKind = args.config.parse()?;
        let device = picked.device.autodiff();
        let fit = workload.fit(workload.net(&device), L2Loss, &device)?;
        let run = fit.policy(spec.build()?).run(&mut workload.epochs()?)?;
        let e = &run.trace.epochs[0];
        Sample {
            time: e.time,
            issue: Some(e.issue_time),
            increased_mb: Some(e.increased_mb),
            peak_mb: Some(e.peak_growth_mb),
        }
    };
    child::report(&sample)
}

/// Runs one configuration in a fresh child process.
fn child(workload: &Workload, config: &str) -> anyhow::Result<Sample> {
    Child::ember(
        format!("the benchmark of {config}"),
        ["bench", "one", "--config", config]
            .map(String::from)
            .into_iter()
            .chain(workload.to_args()),
    )?
    .envs(MALLOC_PINS)
    .result()
}

fn policies(args: PoliciesArgs) -> anyhow::Result<()> {
    let workload = Workload::try_from(args.workload)?.plain_sgd("ember bench")?;
    let repeat = crate::cli::rounds::rounds(args.repeat)?;
    let specs = args.policies.0;
    let picked = workload.one_device("ember bench")?.open()?;
    say!("device: {}", picked.reason);
    say!(
        "workload: {} batches x {} x {} features, hidden {:?}, {repeat} round(s), each run in a fresh process",
        workload.batches,
        workload.batch_size,
        workload.features,
        workload.hidden
    );
    say!(
        "malloc pinned in every run: {}",
        MALLOC_PINS.map(|(k, v)| format!("{k}={v}")).join(" ")
    );
    // Configuration 0 is raw burn; 1.. are the policies.
    let configs: Vec<String> = std::iter::once("raw".to_string())
        .chain(specs.iter().map(ToString::to_string))
        .collect();
    let names: Vec<String> = std::iter::once("raw burn (barrier)".to_string())
        .chain(specs.iter().map(ToString::to_string))
        .collect();
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); names.len()];
    for round in 0..repeat {
        for k in 0..names.len() {
            let config = (k + round) % names.len();
            let sample = child(&workload, &configs[config])?;
            say!(
                "round {}: {:<20} time per epoch: {:.4} sec, issued in {}, increased memory: {}, peak growth {}",
                round + 1,
                names[config],
                sample.time,
                show(sample.issue, "sec"),
                show(sample.increased_mb, "MB"),
                show(sample.peak_mb, "MB"),
            );
            samples[config].push(sample);
        }
    }
    print_medians(&names, &samples, &specs, repeat);
    Ok(())
}

/// The medians of each configuration's samples over the rounds (0 is raw burn, 1.. the
/// `specs`), and the ratios the chapter's claims are about.
fn print_medians(names: &[String], samples: &[Vec<Sample>], specs: &[PolicyKind], repeat: usize) {
    say!("\nmedians over {repeat} round(s):");
    let med = |i: usize, f: fn(&Sample) -> Option<f64>| {
        let values: Vec<f64> = samples[i].iter().filter_map(f).collect();
        (!values.is_empty()).then(|| median(values))
    };
    for (i, name) in names.iter().enumerate() {
        say!(
            "{name:<20} time per epoch: {:.4} sec, issue time: {}, increased memory: {}, peak growth: {}",
            med(i, |s| Some(s.time)).unwrap_or(f64::NAN),
            show(med(i, |s| s.issue), "sec"),
            show(med(i, |s| s.increased_mb), "MB"),
            show(med(i, |s| s.peak_mb), "MB"),
        );
    }
    let find = |spec: PolicyKind| specs.iter().position(|s| *s == spec).map(|i| i + 1);
    print_ratios(
        samples,
        &med,
        find(PolicyKind::Window(1)),
        find(PolicyKind::Window(2)),
        find(PolicyKind::NoSync),
    );
}

/// The median over the rounds of configuration `i` of one figure of a sample.
type Median<'a> = dyn Fn(usize, fn(&Sample) -> Option<f64>) -> Option<f64> + 'a;

/// The ratios between the configurations at `barrier`, `w2` and `none`, where they ran.
fn print_ratios(
    samples: &[Vec<Sample>],
    med: &Median,
    barrier: Option<usize>,
    w2: Option<usize>,
    none: Option<usize>,
) {
    if let (Some(w2), Some(none)) = (w2, none) {
        // Throughput ratio = time(none) / time(window:2), per round, then the median.
        let ratios = samples[w2]
            .iter()
            .zip(&samples[none])
            .map(|(w, n)| n.time / w.time)
            .collect();
        say!(
            "ratio window:2 / none throughput: {:.3} (target >= 0.97)",
            median(ratios)
        );
    }
    if let Some(barrier) = barrier {
        let ratios = samples[barrier]
            .iter()
            .zip(&samples[0])
            .map(|(b, r)| b.time / r.time)
            .collect();
        say!(
            "ratio barrier / raw burn time: {:.3} (target <= 1.03)",
            median(ratios)
        );
    }
    if let (Some(barrier), Some(none)) = (barrier, none) {
        let share = med(none, |s| s.issue).unwrap_or(f64::NAN)
            / med(none, |s| Some(s.time)).unwrap_or(f64::NAN);
        let above = med(none, |s| s.peak_mb).unwrap_or(f64::NAN)
            - med(barrier, |s| s.peak_mb).unwrap_or(f64::NAN);
        say!(
            "none: issue time {:.1}% of its epoch; peak memory growth {above:.1} MB above barrier's",
            100.0 * share
        );
    }
}

fn show(value: Option<f64>, unit: &str) -> String {
    value.map_or_else(|| "-".to_string(), |v| format!("{v:.4} {unit}"))
}
