//! `ember bench`: every experiment of the chapter in quick mode, on flex and on wgpu
//! (lavapipe in CI), its lines parsed, and the report written with every section.

mod common;

use std::collections::BTreeMap;

use common::cli::{fails_with, succeeds};

/// The experiments' keys, from the binary's one list (`ember bench --list`).
fn experiments() -> Vec<String> {
    let keys: Vec<String> = succeeds(&["bench", "--list"])
        .lines()
        .map(|line| line.split('\t').next().unwrap_or_default().to_string())
        .collect();
    assert!(keys.len() > 1, "{keys:?}");
    keys
}

/// One experiment's printed section.
#[derive(Debug, Default)]
struct Section {
    timings: BTreeMap<String, f64>,
    notes: Vec<String>,
    ratio: Option<f64>,
    verdict: Option<String>,
}

/// Parses `ember bench` output: every line of a section is a header, a context line, a timing
/// (`label: 0.1234 sec`), a ratio, a verdict, or a note.
fn parse(stdout: &str) -> BTreeMap<String, Section> {
    let mut sections = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in stdout.lines() {
        if let Some(header) = line.strip_prefix("== ") {
            let key = header.split(':').next().unwrap().to_string();
            sections.insert(key.clone(), Section::default());
            current = Some(key);
            continue;
        }
        let Some(key) = &current else { continue };
        let section = sections.get_mut(key).unwrap();
        if line.is_empty() || line.starts_with("wrote ") {
            current = None;
        } else if let Some(rest) = line.strip_prefix("ratio ") {
            let value = rest.rsplit(": ").next().unwrap();
            section.ratio = Some(
                value
                    .parse()
                    .unwrap_or_else(|_| panic!("ratio in {line:?}")),
            );
        } else if line.starts_with("book's claim ") {
            section.verdict = Some(line.to_string());
        } else if let Some(value) = line.strip_suffix(" sec")
            && let Some((label, seconds)) = value.rsplit_once(": ")
            && let Ok(seconds) = seconds.parse::<f64>()
        {
            assert!(seconds.is_finite() && seconds >= 0.0, "{line}");
            section.timings.insert(label.to_string(), seconds);
        } else if !line.starts_with("on ") {
            section.notes.push(line.to_string());
        }
    }
    sections
}

fn check(gpu: &str) {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    let stdout = succeeds(&[
        "bench",
        "--quick",
        "--repeat",
        "2",
        "--cpu",
        "flex",
        "--gpu",
        gpu,
        "--device",
        gpu,
        "--report",
        report.to_str().unwrap(),
    ]);
    let sections = parse(&stdout);
    let experiments = experiments();
    assert_eq!(
        sections.keys().collect::<std::collections::BTreeSet<_>>(),
        experiments.iter().collect(),
        "every listed experiment ran, and nothing else"
    );
    for key in &experiments {
        let s = sections
            .get(key)
            .unwrap_or_else(|| panic!("no section {key} in:\n{stdout}"));
        assert!(s.timings.len() >= 2, "{key}: {s:?}");
        assert!(s.ratio.is_some_and(|r| r.is_finite()), "{key}: {s:?}");
        let verdict = s.verdict.as_deref().unwrap_or_default();
        assert!(
            verdict.starts_with("book's claim held:")
                || verdict.starts_with("book's claim did not hold:"),
            "{key}: {verdict:?}"
        );
    }
    // The dependency graph's value is exact.
    let graph = &sections["dependency-graph"];
    assert!(
        graph.notes.contains(&"z = [[3, 3]]".to_string()),
        "{graph:?}"
    );
    assert!(
        graph
            .verdict
            .as_deref()
            .unwrap()
            .starts_with("book's claim held:")
    );
    // Fusion on and off compute the same outputs; export reloads them exactly.
    let hybrid = &sections["hybridize"];
    let diff = |prefix: &str| -> f64 {
        let note = hybrid
            .notes
            .iter()
            .find(|n| n.starts_with(prefix))
            .unwrap_or_else(|| panic!("{prefix:?} in {hybrid:?}"));
        let value = note.split("max |difference| ").nth(1).unwrap();
        value.split([';', ' ']).next().unwrap().parse().unwrap()
    };
    assert!(diff("fusion on / off outputs") <= 1e-5, "{hybrid:?}");
    assert_eq!(diff("export"), 0.0, "{hybrid:?}");
    // The pass recorded once and replayed computes the fused pass's outputs: on wgpu from
    // cubecl's recorded dispatches, on flex (no graphs) by running again.
    assert!(diff("graph / fused outputs") <= 1e-5, "{hybrid:?}");
    let replayed = hybrid
        .notes
        .iter()
        .any(|n| n.contains("replayed the recorded launches"));
    assert_eq!(replayed, gpu == "wgpu", "{hybrid:?}");
    assert_eq!(hybrid.timings.len(), 5, "{hybrid:?}");
    // Training steps recorded once and replayed train as the eager steps do (burn's SGD).
    assert!(
        diff("training steps recorded / eager outputs") <= 1e-5,
        "{hybrid:?}"
    );
    let moved = hybrid
        .notes
        .iter()
        .find_map(|n| n.split("moved them by up to ").nth(1))
        .and_then(|rest| rest.split(')').next()?.parse::<f64>().ok());
    assert!(
        moved.is_some_and(|m| m > 1e-4),
        "the steps trained: {hybrid:?}"
    );
    // The training experiments print the book's lines for each policy.
    let memory = &sections["memory-footprint"];
    for policy in ["barrier", "none"] {
        assert!(
            memory
                .timings
                .contains_key(&format!("{policy}: time per epoch")),
            "{memory:?}"
        );
        assert!(
            memory
                .notes
                .iter()
                .any(|n| n.starts_with(&format!("{policy}: issued in"))
                    && n.contains("increased memory: ")),
            "{memory:?}"
        );
    }
    // Exercise 2's bound holds exactly, whatever the timing: the barrier never has more than
    // one batch in flight, t+2 never more than two.
    let depth = |policy: &str| -> usize {
        let line = sections["exercise-2"]
            .notes
            .iter()
            .find(|n| n.starts_with(&format!("{policy}: ")))
            .unwrap_or_else(|| panic!("no {policy} line in {:?}", sections["exercise-2"]));
        let rest = line.split("max in flight ").nth(1).unwrap();
        rest.split(',').next().unwrap().parse().unwrap()
    };
    assert!(depth("barrier") <= 1, "{:?}", sections["exercise-2"]);
    assert!(depth("window:2") <= 2, "{:?}", sections["exercise-2"]);
    // The report: every section, its verdict, and its figure.
    let md = std::fs::read_to_string(report.join("chapter.md")).unwrap();
    for key in &experiments {
        assert!(
            md.contains(&format!("<a id=\"{key}\"></a>")),
            "{key} missing from chapter.md"
        );
        assert!(md.contains(&format!("`ember bench {key}`")), "{key}");
        if key != "dependency-graph" {
            assert!(md.contains(&format!("]({key}.png)")), "{key} has no figure");
            let png = image::open(report.join(format!("{key}.png"))).unwrap();
            assert_eq!((png.width(), png.height()), (1200, 750));
        }
    }
    assert_eq!(md.matches("**Claim: ").count(), experiments.len());
}

#[test]
fn every_experiment_runs_quick_on_flex_with_a_report() {
    check("flex");
}

#[test]
fn every_experiment_runs_quick_on_wgpu_with_a_report() {
    check("wgpu");
}

#[test]
fn one_experiment_runs_by_name() {
    let stdout = succeeds(&[
        "bench",
        "dependency-graph",
        "--quick",
        "--repeat",
        "1",
        "--gpu",
        "flex",
    ]);
    let sections = parse(&stdout);
    assert_eq!(sections.keys().collect::<Vec<_>>(), ["dependency-graph"]);
    assert!(
        sections["dependency-graph"]
            .notes
            .contains(&"z = [[3, 3]]".to_string())
    );
}

/// The chapter's options may come before an experiment's name: `bench --list exercise-2` lists
/// that one experiment (before, clap refused any option there, saying the experiment "cannot be
/// used with" it). Given both ways, differently, or before `policies`, which does not take
/// them, an option is an error naming it.
#[test]
fn options_before_an_experiments_name_are_its_own() {
    let listed = succeeds(&["bench", "--list", "exercise-2"]);
    assert_eq!(listed.lines().count(), 1, "{listed}");
    assert!(listed.starts_with("exercise-2\t"), "{listed}");
    // Given both ways, even where the value after is the default, as typed.
    let both = fails_with(
        &[
            "bench",
            "--repeat",
            "5",
            "exercise-2",
            "--repeat",
            "3",
            "--list",
        ],
        "--repeat",
    );
    assert!(both.contains(r#"as "5" and after it as "3""#), "{both}");
    // Before `policies`, even at the chapter's default value.
    let policies = fails_with(
        &["bench", "--repeat", "3", "policies"],
        "--repeat before `policies`",
    );
    assert!(
        policies.contains("ember bench policies --help"),
        "{policies}"
    );
}

#[test]
fn bad_bench_options_are_named() {
    fails_with(&["bench", "--repeat", "0", "--quick"], "--repeat 0");
    // Samples for 2^32 rounds aborted on their allocation (hostile pass).
    let repeat = ["--repeat", "4294967296"];
    let out = tempfile::tempdir().unwrap();
    let compare = ["compare", "--out", out.path().to_str().unwrap()];
    for command in [&["bench", "--quick"][..], &compare] {
        fails_with(
            &[command, &repeat].concat(),
            "invalid --repeat 4294967296: must be 1 to 1000 rounds",
        );
    }
    fails_with(&["bench", "--gpu", "tpu", "--quick"], "tpu");
    fails_with(&["bench", "warp-speed"], "warp-speed");
    let dir = tempfile::tempdir().unwrap();
    // One new path for both: --report made it a directory, then refused --profile for being
    // one (issue 62). Refused before anything is made.
    let one = dir.path().join("bn3.json");
    let one = one.to_str().unwrap();
    fails_with(
        &["bench", "--quick", "--profile", one, "--report", one],
        "are one path, where the report is a directory",
    );
    assert!(!std::path::Path::new(one).exists());
    // One of the report's files by another spelling, --report new: the profile was lost,
    // exit 0 (the second hostile pass). Refused, and the directory it made goes again.
    let report = dir.path().join("r2");
    let dotted = format!("{}/./chapter.md", report.display());
    fails_with(
        &[
            "bench",
            "--quick",
            "--profile",
            &dotted,
            "--report",
            report.to_str().unwrap(),
            "memory-footprint",
        ],
        "is --report",
    );
    assert!(!report.exists());
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let stderr = fails_with(
        &[
            "bench",
            "barriers",
            "--quick",
            "--report",
            file.to_str().unwrap(),
        ],
        "a-file",
    );
    // bench's own flag is named (it blamed --out, which bench does not have).
    assert!(stderr.contains("invalid --report"), "{stderr}");
    // Every experiment's figure is checked before any runs (a FIFO there failed the report
    // after the runs), and --profile may not be one of them (the figure replaced the
    // profile, exit 0).
    let report = dir.path().join("report");
    std::fs::create_dir(&report).unwrap();
    let fifo = report.join("barriers.png");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let report_arg = report.to_str().unwrap();
    let stderr = fails_with(
        &["bench", "barriers", "--quick", "--report", report_arg],
        "is a FIFO",
    );
    assert!(!stderr.contains("drawing the figure"), "{stderr}");
    std::fs::remove_file(&fifo).unwrap();
    let figure = report.join("barriers.svg");
    fails_with(
        &[
            "bench",
            "barriers",
            "--quick",
            "--report",
            report_arg,
            "--profile",
            figure.to_str().unwrap(),
        ],
        "'s barriers.svg: give it a path of its own",
    );
    assert!(!figure.exists());
}

/// `bench --profile`: the training loops' runs (exercise 2's barrier, t+2 and none, each
/// repeat) as processes of one Chrome trace, each with an issue and a compute slice a batch.
#[test]
fn bench_profiles_its_training_runs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bench.json");
    let stdout = succeeds(&[
        "bench",
        "exercise-2",
        "--quick",
        "--repeat",
        "2",
        "--cpu",
        "flex",
        "--gpu",
        "flex",
        "--device",
        "flex",
        "--profile",
        path.to_str().unwrap(),
    ]);
    assert!(stdout.contains("6 training run(s)"), "{stdout}");
    let profile: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let events = profile["traceEvents"].as_array().unwrap();
    let processes: Vec<&str> = events
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    let expected: Vec<String> = ["barrier", "window:2", "none"]
        .iter()
        .flat_map(|p| (1..=2).map(move |r| format!("--sync {p}, round {r}")))
        .collect();
    assert_eq!(processes, expected);
    let count = |name: &str| {
        events
            .iter()
            .filter(|e| e["ph"] == "X" && e["name"] == name)
            .count()
    };
    assert!(count("issue") > 0);
    assert_eq!(count("issue"), count("compute"));
}
