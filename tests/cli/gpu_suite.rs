//! `bench/gpu/run.sh --dry-run`: the GPU suite on the CPU, with tiny sizes and without the
//! peers, so that it cannot rot between the sessions that draw a card (bench/gpu/README.md).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The report's sections, in order (bench/gpu/report.py's SECTIONS).
const SECTIONS: [&str; 9] = [
    "## Steps",
    "## Correctness",
    "## The card and `auto`",
    "## Kernel tuning",
    "## The chapter's 11 experiments",
    "## Sync policies compared",
    "## Beside PyTorch and JAX",
    "## Profile of the slowest ratio",
    "## Verdicts",
];

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/gpu/run.sh")
}

/// Runs the dry run with `ember` into `out`; returns its standard output and report.md.
fn dry_run(ember: &Path, out: &Path) -> (String, String) {
    let run = Command::new("bash")
        .arg(script())
        .args(["--dry-run", "--out"])
        .arg(out)
        .arg("--ember")
        .arg(ember)
        .output()
        .expect("running bash bench/gpu/run.sh");
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "dry run failed:\n{stdout}{stderr}");
    let report = std::fs::read_to_string(out.join("report.md"))
        .unwrap_or_else(|e| panic!("no report.md ({e}):\n{stdout}{stderr}"));
    (stdout, report)
}

fn section<'a>(report: &'a str, title: &str) -> &'a str {
    let start = report
        .find(title)
        .unwrap_or_else(|| panic!("{title} missing:\n{report}"));
    let rest = &report[start + title.len()..];
    &rest[..rest.find("\n## ").unwrap_or(rest.len())]
}

#[test]
fn the_dry_run_writes_every_section_of_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let (_, report) = dry_run(Path::new(env!("CARGO_BIN_EXE_ember")), dir.path());

    let mut at = 0;
    for title in SECTIONS {
        let found = report[at..].find(title);
        at += found.unwrap_or_else(|| panic!("{title} missing or out of order:\n{report}"));
    }
    // Every step ran to its end, or was skipped for a reason the dry run gives.
    let steps = section(&report, "## Steps");
    for step in [
        "devices",
        "resnet-check",
        "nccl-check",
        "tune",
        "chapter-flex",
        "compare-flex",
        "profile",
        "hybrid-check",
    ] {
        assert!(
            steps.contains(&format!("| {step} | ok |")),
            "{step}:\n{steps}"
        );
    }
    for peers in [
        "bf16-check",
        "peers-chapter",
        "peers-cuda",
        "peers-wgpu",
        "peers-resnet",
        "tune-bf16",
        "peers-bf16",
        "peers-char-lstm",
        "peers-hybridize",
    ] {
        assert!(
            steps.contains(&format!("| {peers} | skipped: dry run")),
            "{peers}:\n{steps}"
        );
    }
    // Part 1 comes first, and each of its checks says what it found in a verdict line. The
    // ResNet check (flex against flex here, on a cut of Fashion-MNIST) printed its tables,
    // judged the running statistics with the weights held, and says what it could not judge
    // without PyTorch.
    let correctness = section(&report, "## Correctness");
    assert!(
        steps.find("| resnet-check |") < steps.find("| tune |"),
        "correctness before speed:\n{steps}"
    );
    assert!(
        correctness.contains("| ember on flex |")
            && correctness.contains(
                "3 epochs of 5 batches, each ended by an evaluation, flex against flex: held"
            )
            && correctness.contains("evaluated by PyTorch: not judged")
            && correctness.contains("over seeds against PyTorch: not judged"),
        "{correctness}"
    );
    // The NCCL check: one rank of a job through MPI (on the CPU, the host's all-reduce) made
    // the plain process's update.
    assert!(
        correctness.contains("largest difference over")
            && correctness
                .contains("verdict: one rank through host against one plain process: held"),
        "{correctness}"
    );
    // The hybridize check: one epoch of the MLP, LeNet and the ResNet each, recorded and eager,
    // the saved tensors compared (on flex the recorded code runs again: bit for bit).
    assert!(
        correctness.contains("| resnet | 0 |")
            && correctness
                .contains("verdict: a recorded step against the eager step on flex: held"),
        "{correctness}"
    );
    let verdicts = section(&report, "## Verdicts");
    assert!(
        verdicts.contains("- one rank through host against one plain process: held"),
        "the checks' verdicts lead the report's:\n{verdicts}"
    );
    // The tuning step timed both processes of the chapter's run (one epoch, as bench/peers.py
    // runs it), and divided one by the other.
    let tuning = section(&report, "## Kernel tuning");
    let row = tuning
        .lines()
        .find(|l| l.starts_with("| chapter-barrier |"))
        .unwrap_or_else(|| panic!("no chapter-barrier row:\n{tuning}"));
    let seconds: Vec<f64> = row
        .split('|')
        .skip(2)
        .take(3)
        .map(|c| c.trim().parse().unwrap_or(f64::NAN))
        .collect();
    assert!(
        seconds.len() == 3 && seconds.iter().all(|s| *s > 0.0),
        "{row}"
    );
    assert!(
        (seconds[1] / seconds[0] - seconds[2]).abs() < 0.15 * seconds[2],
        "second / first: {row}"
    );
    assert!(
        tuning.contains("one epoch, with --batches 6"),
        "the dry run's sizes: {tuning}"
    );
    // The chapter's table holds all 11 experiments, each with its verdict.
    let chapter = section(&report, "## The chapter's 11 experiments");
    let rows = chapter.lines().filter(|l| l.starts_with("| [")).count();
    assert_eq!(rows, 11, "{chapter}");
    // The comparison has the four policies, and the verdicts judge t+2 and auto against them.
    let policies = section(&report, "## Sync policies compared");
    for policy in ["| barrier |", "| window:2 |", "| none |", "| auto |"] {
        assert!(policies.contains(policy), "{policy}:\n{policies}");
    }
    assert!(verdicts.contains("held in"), "{verdicts}");
    for verdict in [
        "t+2 / none throughput",
        "t+2's peak process memory growth",
        "auto / none throughput",
        "auto's peak process memory growth",
    ] {
        assert!(verdicts.contains(verdict), "{verdict}:\n{verdicts}");
    }
    assert!(
        verdicts.contains("Steps that did not finish: none"),
        "{verdicts}"
    );
    // The profile has ember's trace under both policies.
    let profile = section(&report, "## Profile of the slowest ratio");
    for sync in ["| barrier |", "| none |"] {
        assert!(profile.contains(sync), "{sync}:\n{profile}");
    }
    assert!(dir.path().join("compare-flex/time.png").is_file());
    assert!(dir.path().join("chapter-flex/chapter.md").is_file());
}

#[test]
fn a_failing_step_is_reported_and_the_suite_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    // An ember whose `bench` fails; every other command is the real one.
    let fake = dir.path().join("ember");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\n[ \"$1\" = bench ] && {{ echo 'bench broke' >&2; exit 3; }}\nexec '{}' \"$@\"\n",
            env!("CARGO_BIN_EXE_ember")
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = dir.path().join("out");
    let (stdout, report) = dry_run(&fake, &out);

    let steps = section(&report, "## Steps");
    assert!(steps.contains("| chapter-flex | failed (3) |"), "{steps}");
    // The steps after it still ran.
    assert!(steps.contains("| compare-flex | ok |"), "{steps}");
    assert!(steps.contains("| profile | ok |"), "{steps}");
    assert!(stdout.contains("chapter-flex: failed (3)"), "{stdout}");
    let verdicts = section(&report, "## Verdicts");
    assert!(
        verdicts.contains("Steps that did not finish: chapter-flex"),
        "{verdicts}"
    );
    assert!(
        std::fs::read_to_string(out.join("chapter-flex.log"))
            .unwrap()
            .contains("bench broke")
    );
}
