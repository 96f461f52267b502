//! `ember compare`: the same workload under several policies, the tables and the plots.
//!
//! Each run is a fresh `ember train` process, so that every policy's memory is measured from a
//! clean baseline and no run inherits another's heap. Runs are interleaved: round r starts the
//! list at a different policy, so drift of the machine favours none of them.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Args;
use ember::DeviceName;
use ember::io::{ScratchDir, write_atomic_bytes};
use ember_trainer::plot::{MemoryFigure, SweepFigure, TimeFigure, TimelineFigure, render};
use ember_trainer::profile::Profile;
use ember_trainer::summary::{PolicyRun, PolicySummary, summarize};
use ember_trainer::trace::{BatchRecord, Trace, csv};
use serde::Serialize;

use ember_trainer::policy::PolicyKind;

use super::child::Child;
use super::workload::WorkloadArgs;
use ember_trainer::run::list::{List, Size};
use ember_trainer::run::workload::{Workload, positive};

/// Options of `ember compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    #[command(flatten)]
    workload: WorkloadArgs,
    /// Policies to compare, comma separated (see `ember train --help`).
    #[arg(long, default_value = "barrier,t+2,none")]
    policies: List<PolicyKind>,
    /// Directory for summary.csv, trace.csv, summary.md and the plots (created if needed).
    #[arg(long)]
    out: PathBuf,
    /// Also run window:K for each K (default 1,2,4,8) and none, and plot time per epoch against
    /// peak memory growth (sweep.png).
    #[arg(long, num_args = 0..=1, default_missing_value = "1,2,4,8", value_name = "KS")]
    sweep: Option<List<Size>>,
    /// Rounds: every policy runs once per round, in a rotated order.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Epochs per run.
    #[arg(long, default_value_t = 1)]
    epochs: usize,
    /// Also write every run as Chrome's trace-event JSON here (see `ember train --profile`):
    /// one process per policy and round, each from its own start, so that Perfetto shows the
    /// policies one above the other on one time axis.
    #[arg(long, value_name = "FILE")]
    profile: Option<PathBuf>,
    /// Also write the comparison as one self-contained HTML page here (no network, every
    /// script inline): the table, the plots, and an interactive timeline per policy (zoom,
    /// pan, hover a batch for its times and memory).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

/// `--sweep 1,2,4,8`: the window policies of those sizes, plus none.
fn sweep_policies(sweep: &List<Size>) -> Vec<PolicyKind> {
    sweep
        .0
        .iter()
        .map(|k| PolicyKind::Window(k.0))
        .chain([PolicyKind::NoSync])
        .collect()
}

pub fn run(args: CompareArgs) -> anyhow::Result<()> {
    // The highest directory of --out that does not exist yet: one that a refused or failed
    // comparison made, and left empty, is removed again.
    let made = args
        .out
        .ancestors()
        .take_while(|dir| !dir.as_os_str().is_empty() && std::fs::symlink_metadata(dir).is_err())
        .last()
        .map(Path::to_path_buf);
    let out = args.out.clone();
    let compared = compare(args);
    if let (Err(_), Some(top)) = (&compared, made) {
        for dir in out.ancestors().take_while(|dir| dir.starts_with(&top)) {
            if std::fs::remove_dir(dir).is_err() {
                break;
            }
        }
    }
    compared
}

fn compare(args: CompareArgs) -> anyhow::Result<()> {
    let workload = Workload::try_from(args.workload)?;
    let repeat = super::rounds::rounds(args.repeat)?;
    let epochs = positive("epochs", args.epochs)?;
    let main = args.policies.0;
    let sweep = args.sweep.as_ref().map(sweep_policies);
    super::compare_outputs::check(&args.out, [&args.profile, &args.html], &workload.data)?;
    let device = match &workload.devices {
        Some(list) => {
            let names: Vec<DeviceName> = list.0.iter().map(|spec| spec.name).collect();
            ember_trainer::run::precision::check(workload.recipe.precision, &names)?;
            list.to_string()
        }
        None => {
            let picked = workload.device.open()?;
            ember_trainer::run::precision::check(workload.recipe.precision, &[picked.name])?;
            say!("device: {}", picked.reason);
            // The figures name what auto picked, and any other device as given (`wgpu:1`).
            match workload.device.name {
                DeviceName::Auto => picked.name.to_string(),
                _ => workload.device.to_string(),
            }
        }
    };

    // Every distinct policy runs once per round; the sweep reuses the main runs it shares.
    let mut configs: Vec<PolicyKind> = Vec::new();
    for spec in main.iter().chain(sweep.iter().flatten()) {
        if !configs.contains(spec) {
            configs.push(spec.clone());
        }
    }
    // The runs' metrics, until read back: gone however the comparison ends (a Ctrl-C too,
    // which ends it at once; the runs in flight end with it).
    ember_trainer::signals::install()?;
    let scratch = ScratchDir::beside(&args.out.join("compare"))?;
    let runs = run_all(&configs, repeat, epochs, &workload, scratch.path());
    drop(scratch);
    let runs = runs?;

    let subtitle = format!(
        "{}, {}, {} epoch(s), {} round(s)",
        device,
        workload.describe(),
        epochs,
        repeat
    );
    let summaries = summarize(&runs);
    let (mut written, mut failures) = write_outputs(
        &args.out,
        &runs,
        &summaries,
        &main,
        sweep.as_deref(),
        &subtitle,
    );
    if let Some(path) = &args.profile {
        match profile(&runs, &device).write(path) {
            Ok(()) => written.push(path.clone()),
            Err(e) => failures.push(format!("--profile {}: {e}", path.display())),
        }
    }
    if let Some(path) = &args.html {
        let page = super::html::page(
            &format!("Device and workload: {subtitle}."),
            &table(&summaries),
            TABLE_NOTE,
            &first_rounds(&runs, &main),
            &args.out,
            // The plots this run drew, not an older run's left in --out.
            &["time", "memory", "timeline", "sweep"]
                .into_iter()
                .filter(|plot| written.contains(&args.out.join(format!("{plot}.svg"))))
                .collect::<Vec<_>>(),
        );
        match write_atomic_bytes(path, page.as_bytes()) {
            Ok(()) => written.push(path.clone()),
            Err(e) => failures.push(format!("--html {}: {e}", path.display())),
        }
    }
    say!("");
    say!(
        "{}",
        markdown(&summaries, &format!("Device and workload: {subtitle}.")).trim_end()
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

/// Writes the tables and the figures into `out`: the time and memory figures and the timeline
/// of the `main` policies (their first round), and the sweep's figure. A failure writing one
/// output never keeps the others from being written. Returns the files written and the
/// failures.
fn write_outputs(
    out: &Path,
    runs: &[PolicyRun],
    summaries: &[PolicySummary],
    main: &[PolicyKind],
    sweep: Option<&[PolicyKind]>,
    subtitle: &str,
) -> (Vec<PathBuf>, Vec<String>) {
    let pick = |specs: &[PolicyKind]| -> Vec<PolicySummary> {
        specs
            .iter()
            .filter_map(|spec| summaries.iter().find(|s| &s.policy == spec).cloned())
            .collect()
    };
    let first_rounds: Vec<&Trace> = first_rounds(runs, main)
        .into_iter()
        .map(|r| &r.trace)
        .collect();
    let mut failures: Vec<String> = Vec::new();
    let mut written: Vec<PathBuf> = Vec::new();
    match write_tables(
        out,
        runs,
        summaries,
        &format!("Device and workload: {subtitle}."),
    ) {
        Ok(()) => written.extend(["summary.csv", "trace.csv", "summary.md"].map(|f| out.join(f))),
        Err(e) => failures.push(format!("writing the tables: {e}")),
    }
    let mut plot = |name: &str, result: ember::Result<Vec<PathBuf>>| match result {
        Ok(files) => written.extend(files),
        Err(e) => failures.push(format!("drawing {name}: {e}")),
    };
    let main_summaries = pick(main);
    let time = TimeFigure {
        summaries: &main_summaries,
        subtitle,
    };
    plot("time", render(&time, out, "time"));
    let memory = MemoryFigure {
        traces: &first_rounds,
        subtitle,
    };
    plot("memory", render(&memory, out, "memory"));
    let timeline = TimelineFigure {
        traces: &first_rounds,
        subtitle,
    };
    plot("timeline", render(&timeline, out, "timeline"));
    if let Some(sweep) = sweep {
        let sweep_summaries = pick(sweep);
        let figure = SweepFigure {
            summaries: &sweep_summaries,
            subtitle,
        };
        plot("sweep", render(&figure, out, "sweep"));
    }
    (written, failures)
}

/// The first round's run of each of `policies`, in their order: what the figures and the
/// page's timelines show.
fn first_rounds<'a>(runs: &'a [PolicyRun], policies: &[PolicyKind]) -> Vec<&'a PolicyRun> {
    policies
        .iter()
        .filter_map(|p| runs.iter().find(|r| r.round == 0 && &r.policy == p))
        .collect()
}

/// Every run as a process of the profile, a policy's rounds together, the policies in the
/// order they first ran.
pub(super) fn profile(runs: &[PolicyRun], device: &str) -> Profile {
    let devices: Vec<String> = device.split(',').map(str::to_string).collect();
    let first_ran = |policy: &PolicyKind| runs.iter().position(|r| &r.policy == policy);
    let mut ordered: Vec<&PolicyRun> = runs.iter().collect();
    ordered.sort_by_key(|r| (first_ran(&r.policy), r.round));
    let mut profile = Profile::new();
    for run in ordered {
        let name = format!("--sync {}, round {}", run.policy, run.round + 1);
        profile.add_run(&name, &run.trace, &devices);
    }
    profile
}

/// Runs every configuration once per round, each in a child `ember train`, and reads back the
/// traces.
pub(crate) fn run_all(
    configs: &[PolicyKind],
    repeat: usize,
    epochs: usize,
    workload: &Workload,
    scratch: &Path,
) -> anyhow::Result<Vec<PolicyRun>> {
    let Some(total) = configs.len().checked_mul(repeat) else {
        bail!(
            "--repeat {repeat}: {repeat} rounds of {} runs is more runs than this machine counts",
            configs.len()
        );
    };
    let workload_args = workload.to_args();
    let mut runs = Vec::new();
    for round in 0..repeat {
        for k in 0..configs.len() {
            let spec = &configs[(k + round) % configs.len()];
            let name = spec.to_string();
            // By its number: a policy's own name may be longer than a file's (`auto:1e-300`).
            let metrics = scratch.join(format!("run-{}.jsonl", runs.len()));
            say!("[{}/{total}] {name}, round {}", runs.len() + 1, round + 1);
            let args = ["train", "--sync", &name, "--epochs", &epochs.to_string()]
                .map(OsString::from)
                .into_iter()
                .chain(workload_args.iter().map(OsString::from))
                .chain(["--metrics".into(), metrics.clone().into()]);
            Child::ember(format!("the run of {name} (round {})", round + 1), args)?.run(
                |line| {
                    if line.starts_with("batch ") || line.starts_with("epoch ") {
                        say!("  {name}: {line}");
                    }
                },
            )?;
            let trace = Trace::read_jsonl(&metrics)
                .with_context(|| format!("reading the trace of {name}"))?;
            runs.push(PolicyRun {
                policy: spec.clone(),
                round,
                trace,
            });
        }
    }
    Ok(runs)
}

/// A row of `trace.csv`: the round, then the batch record.
#[derive(Serialize)]
struct TraceRow<'a> {
    round: usize,
    #[serde(flatten)]
    batch: &'a BatchRecord,
}

/// Writes `summary.csv`, `trace.csv` and `summary.md` into `dir`, each atomically.
fn write_tables(
    dir: &Path,
    runs: &[PolicyRun],
    summaries: &[PolicySummary],
    context: &str,
) -> ember::Result<()> {
    write_atomic_bytes(&dir.join("summary.csv"), csv(summaries).as_bytes())?;
    let rows: Vec<TraceRow<'_>> = runs
        .iter()
        .flat_map(|run| {
            run.trace.batches.iter().map(|batch| TraceRow {
                round: run.round,
                batch,
            })
        })
        .collect();
    write_atomic_bytes(&dir.join("trace.csv"), csv(&rows).as_bytes())?;
    write_atomic_bytes(
        &dir.join("summary.md"),
        markdown(summaries, context).as_bytes(),
    )
}

/// The comparison's table: the header, then a row a policy.
fn table(summaries: &[PolicySummary]) -> Vec<Vec<String>> {
    let header = [
        "policy",
        "time per epoch (s)",
        "frontend issue time (s)",
        "increased memory (MB)",
        "peak memory growth (MB)",
        "peak device pool (MB)",
        "final loss",
        "batches/s",
    ];
    let mut rows = vec![header.map(str::to_string).to_vec()];
    if let Some(first) = summaries.first() {
        rows[0].push(format!("batches/s ÷ {}'s, by round", first.reference));
    }
    for s in summaries {
        let pool = s
            .peak_pool_mb
            .map_or_else(|| "-".to_string(), |p| format!("{p:.1}"));
        rows.push(vec![
            s.policy.to_string(),
            format!("{:.3}", s.time_per_epoch),
            format!("{:.3}", s.issue_time),
            format!("{:.1}", s.increased_mb),
            format!("{:.1}", s.peak_growth_mb),
            pool,
            format!("{:.4}", s.final_loss),
            format!("{:.2}", s.batches_per_s),
            format!("{:.3}", s.relative_throughput),
        ]);
    }
    rows
}

/// What the table's times and memory mean.
const TABLE_NOTE: &str = "Time per epoch runs from the first issue to the end of the epoch's waitall; the \
issue time ends when the frontend issued its last batch. The last column divides a policy's \
batches per second over each run (all its batches over all its epochs' time) by the reference's \
(none's, or the first policy's without none) in the same round, and takes the median over the \
rounds: a change in the machine's speed between rounds cancels there, not in the medians of the \
epochs' times. Memory is the process's resident set, \
measured in a fresh process per run; growth is relative to the start of the epoch.";

/// The summary as a Markdown table a person reads.
fn markdown(summaries: &[PolicySummary], context: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Sync policies compared\n\n{context}\n");
    for (i, row) in table(summaries).iter().enumerate() {
        let _ = writeln!(out, "| {} |", row.join(" | "));
        if i == 0 {
            let _ = writeln!(out, "|---|{}", "---:|".repeat(row.len() - 1));
        }
    }
    let _ = writeln!(out, "\n{TABLE_NOTE}");
    out
}
