//! `ember compare`: the same workload under several policies, the tables and the plots.
//!
//! Each run is a fresh `ember train` process, so that every policy's memory is measured from a
//! clean baseline and no run inherits another's heap. Runs are interleaved: round r starts the
//! list at a different policy, so drift of the machine favours none of them.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use clap::Args;
use ember_trainer::compare::{PolicyRun, PolicySummary, summarize, write_tables};
use ember_trainer::plot::{MemoryFigure, SweepFigure, TimeFigure, TimelineFigure, render};
use ember_trainer::policy::PolicySpec;
use ember_trainer::trace::Trace;

use super::workload::{Workload, WorkloadArgs, positive};

/// Options of `ember compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    #[command(flatten)]
    workload: WorkloadArgs,
    /// Policies to compare, comma separated (see `ember train --help`).
    #[arg(long, default_value = "barrier,t+2,none")]
    policies: String,
    /// Directory for summary.csv, trace.csv, summary.md and the plots (created if needed).
    #[arg(long)]
    out: PathBuf,
    /// Also run window:K for each K (default 1,2,4,8) and none, and plot time per epoch against
    /// peak memory growth (sweep.png).
    #[arg(long, num_args = 0..=1, default_missing_value = "1,2,4,8", value_name = "KS")]
    sweep: Option<String>,
    /// Rounds: every policy runs once per round, in a rotated order.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Epochs per run.
    #[arg(long, default_value_t = 1)]
    epochs: usize,
}

/// Parses `--sweep 1,2,4,8` into window policies, plus none.
fn sweep_policies(sweep: &str) -> anyhow::Result<Vec<PolicySpec>> {
    let ks = sweep
        .split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(|k| {
            k.parse::<usize>()
                .ok()
                .filter(|k| *k >= 1)
                .with_context(|| {
                    format!("invalid --sweep {sweep:?}: {k:?} is not a window size >= 1")
                })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    if ks.is_empty() {
        bail!(
            "invalid --sweep {sweep:?}: a sweep needs at least one window size, like --sweep 1,2,4,8"
        );
    }
    Ok(ks
        .into_iter()
        .map(PolicySpec::Window)
        .chain([PolicySpec::None])
        .collect())
}

/// Creates `out` if needed, and checks that it is a writable directory and that each of
/// `files` in it can take an output (see [`ember::output::check`]).
pub(super) fn prepare_out(out: &Path, files: &[&str]) -> anyhow::Result<()> {
    ember::output::check_dir(out).with_context(|| format!("invalid --out {}", out.display()))?;
    for file in files {
        ember::output::check(&out.join(file))
            .with_context(|| format!("invalid --out {}", out.display()))?;
    }
    Ok(())
}

/// What `ember compare` writes into `--out`.
const WRITTEN: [&str; 11] = [
    "summary.csv",
    "trace.csv",
    "summary.md",
    "time.png",
    "time.svg",
    "memory.png",
    "memory.svg",
    "timeline.png",
    "timeline.svg",
    "sweep.png",
    "sweep.svg",
];

pub fn run(args: CompareArgs) -> anyhow::Result<()> {
    let workload_args = args.workload.to_args();
    let workload = Workload::try_from(args.workload)?;
    let repeat = positive("repeat", args.repeat)?;
    let epochs = positive("epochs", args.epochs)?;
    let main: Vec<PolicySpec> = args
        .policies
        .split(',')
        .map(|p| p.parse::<PolicySpec>())
        .collect::<Result<_, _>>()?;
    let sweep = args.sweep.as_deref().map(sweep_policies).transpose()?;
    prepare_out(&args.out, &WRITTEN)?;
    let picked = workload.device.resolve()?;
    say!("device: {}", picked.reason);

    // Every distinct policy runs once per round; the sweep reuses the main runs it shares.
    let mut configs: Vec<PolicySpec> = Vec::new();
    for spec in main.iter().chain(sweep.iter().flatten()) {
        if !configs.iter().any(|c| c.name() == spec.name()) {
            configs.push(*spec);
        }
    }
    let scratch = args
        .out
        .join(format!(".ember-compare-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).with_context(|| format!("creating {}", scratch.display()))?;
    let runs = run_all(&configs, repeat, epochs, &workload_args, &scratch);
    let _ = std::fs::remove_dir_all(&scratch);
    let runs = runs?;

    let subtitle = format!(
        "{}, {}, {} epoch(s), {} round(s)",
        picked.name,
        workload.describe(),
        epochs,
        repeat
    );
    let summaries = summarize(&runs);
    let pick = |specs: &[PolicySpec]| -> Vec<PolicySummary> {
        specs
            .iter()
            .filter_map(|spec| summaries.iter().find(|s| s.policy == spec.name()).cloned())
            .collect()
    };
    let main_summaries = pick(&main);
    let main_runs: Vec<PolicyRun> = runs
        .iter()
        .filter(|r| r.round == 0 && main.iter().any(|m| m.name() == r.policy))
        .cloned()
        .collect();
    let first_rounds: Vec<&Trace> = main
        .iter()
        .filter_map(|m| main_runs.iter().find(|r| r.policy == m.name()))
        .map(|r| &r.trace)
        .collect();

    // A failure writing one output never keeps the others from being written.
    let mut failures: Vec<String> = Vec::new();
    let mut written: Vec<PathBuf> = Vec::new();
    match write_tables(
        &args.out,
        &runs,
        &summaries,
        &format!("Device and workload: {subtitle}."),
    ) {
        Ok(()) => {
            written.extend(["summary.csv", "trace.csv", "summary.md"].map(|f| args.out.join(f)))
        }
        Err(e) => failures.push(format!("writing the tables: {e}")),
    }
    let mut plot = |name: &str, result: Result<Vec<PathBuf>, String>| match result {
        Ok(files) => written.extend(files),
        Err(e) => failures.push(format!("drawing {name}: {e}")),
    };
    let time = TimeFigure {
        summaries: &main_summaries,
        subtitle: &subtitle,
    };
    plot("time", render(&time, &args.out, "time"));
    let memory = MemoryFigure {
        traces: &first_rounds,
        subtitle: &subtitle,
    };
    plot("memory", render(&memory, &args.out, "memory"));
    let timeline = TimelineFigure {
        traces: &first_rounds,
        subtitle: &subtitle,
    };
    plot("timeline", render(&timeline, &args.out, "timeline"));
    if let Some(sweep) = &sweep {
        let sweep_summaries = pick(sweep);
        let figure = SweepFigure {
            summaries: &sweep_summaries,
            subtitle: &subtitle,
        };
        plot("sweep", render(&figure, &args.out, "sweep"));
    }

    say!("");
    say!(
        "{}",
        ember_trainer::compare::markdown(&summaries, &format!("Device and workload: {subtitle}."))
            .trim_end()
    );
    say!("");
    for path in written {
        say!("wrote {}", path.display());
    }
    if !failures.is_empty() {
        bail!("in {}:\n{}", args.out.display(), failures.join("\n"));
    }
    Ok(())
}

/// Runs every configuration once per round, each in a child `ember train`, and reads back the
/// traces.
pub(super) fn run_all(
    configs: &[PolicySpec],
    repeat: usize,
    epochs: usize,
    workload_args: &[String],
    scratch: &Path,
) -> anyhow::Result<Vec<PolicyRun>> {
    let exe = std::env::current_exe().context("locating the ember binary")?;
    let total = configs.len() * repeat;
    let mut runs = Vec::new();
    for round in 0..repeat {
        for k in 0..configs.len() {
            let spec = configs[(k + round) % configs.len()];
            let name = spec.name();
            let metrics = scratch.join(format!("{}-{round}.jsonl", name.replace([':', '+'], "_")));
            say!("[{}/{total}] {name}, round {}", runs.len() + 1, round + 1);
            let mut child = Command::new(&exe)
                .arg("train")
                .args(workload_args)
                .args(["--sync", &name, "--epochs", &epochs.to_string()])
                .arg("--metrics")
                .arg(&metrics)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .context("starting ember train")?;
            let mut stderr = child.stderr.take().expect("piped stderr");
            let errors = std::thread::spawn(move || {
                let mut text = String::new();
                let _ = stderr.read_to_string(&mut text);
                text
            });
            if let Some(stdout) = child.stdout.take() {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if line.starts_with("batch ") || line.starts_with("epoch ") {
                        say!("  {name}: {line}");
                    }
                }
            }
            let status = child.wait().context("waiting for ember train")?;
            let errors = errors.join().unwrap_or_default();
            if !status.success() {
                bail!(
                    "the run of {name} (round {}) failed: {}",
                    round + 1,
                    errors.trim()
                );
            }
            let trace = Trace::read_jsonl(&metrics)
                .with_context(|| format!("reading the trace of {name}"))?;
            runs.push(PolicyRun {
                policy: name,
                round,
                trace,
            });
        }
    }
    Ok(runs)
}
