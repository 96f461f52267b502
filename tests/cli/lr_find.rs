//! `ember lr-find`: the sweep's table, the suggested `--lr` and the plot; bad values refused
//! before any work, naming the flag; an output that would replace an input refused.

use super::common::cli::{args, ember, fails_with, succeeds, text};

/// A workload of a few milliseconds: 6 synthetic batches an epoch of 64 examples of 16
/// features, the MLP 16-32-1, on flex.
const TINY: [&str; 11] = [
    "lr-find",
    "--device",
    "flex",
    "--batches",
    "6",
    "--batch-size",
    "64",
    "--features",
    "16",
    "--hidden",
    "32",
];

/// 40 rates from 1e-5 to 1e3, which blows up.
const RATES: [&str; 6] = ["--steps", "40", "--min-lr", "1e-5", "--max-lr", "1e3"];

#[test]
fn lr_find_prints_the_sweep_and_the_suggestion_and_draws_it() {
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("figures");
    let plot_arg = plot.to_str().unwrap();
    let stdout = succeeds(&args(&args(&TINY, &RATES), &["--plot", plot_arg]));
    assert!(
        stdout.contains("sweeping 40 rates from 0.00001 to 1000 (exponential"),
        "{stdout}"
    );
    // The table starts at the first rate and marks the suggestion.
    let first_row = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("1 "))
        .unwrap_or_else(|| panic!("no first row in:\n{stdout}"));
    assert!(first_row.contains("1.000e-5"), "{first_row}");
    assert!(stdout.contains("<- suggested"), "{stdout}");
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("suggested --lr "))
        .unwrap_or_else(|| panic!("no suggestion in:\n{stdout}"));
    let lr: f64 = line.parse().unwrap();
    // The sweep blew up before its last rate, and the suggestion lies below where it did.
    let ended = stdout.lines().find(|l| l.starts_with("sweep: ")).unwrap();
    assert!(
        ended.contains("blew up") || ended.contains("became"),
        "{ended}"
    );
    assert!((1e-5..1e3).contains(&lr), "{lr}");
    for file in ["lr_find.png", "lr_find.svg"] {
        let path = plot.join(file);
        assert!(
            stdout.contains(&format!("plot: {}", path.display())),
            "{stdout}"
        );
        assert!(std::fs::metadata(&path).unwrap().len() > 1000, "{file}");
    }
    let svg = std::fs::read_to_string(plot.join("lr_find.svg")).unwrap();
    assert!(svg.contains("suggested") && svg.contains("learning rate"));
}

#[test]
fn bad_sweep_values_are_refused_naming_the_flag_before_any_work() {
    let cases: [(&[&str], &str); 13] = [
        (&["--min-lr", "0"], "invalid --min-lr 0"),
        (&["--min-lr", "-0.001"], "invalid --min-lr -0.001"),
        (&["--min-lr", "nan"], "invalid --min-lr NaN"),
        // 0 in single precision: the sweep suggested --lr 8.86e-52 from it (issue 62).
        (
            &["--min-lr", "1e-60", "--max-lr", "1e-50"],
            "invalid --min-lr 1e-60: must be at least about 1.2e-38",
        ),
        (&["--max-lr", "1e-9"], "invalid --max-lr 0.000000001"),
        (&["--max-lr", "inf"], "invalid --max-lr inf"),
        (&["--steps", "1"], "invalid --steps 1"),
        (&["--steps", "12"], "invalid --steps 12"),
        // Hours of batches, which never left --min-lr when stopped (issue 62).
        (
            &["--steps", "99999999999"],
            "invalid --steps 99999999999: at most",
        ),
        (&["--divergence", "1"], "invalid --divergence 1"),
        (
            &["--lr-schedule", "cosine"],
            "--lr-schedule cosine applies to `ember train`",
        ),
        (
            &["--accumulate", "2"],
            "--accumulate 2 applies to `ember train`",
        ),
        (&["--hybridize"], "--hybridize applies to `ember train`"),
    ];
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("figures");
    for (bad, needle) in cases {
        let line = args(&args(&TINY, &["--plot", plot.to_str().unwrap()]), bad);
        fails_with(&line, needle);
        // Refused before any work: the plot's directory was not even made.
        assert!(!plot.exists(), "{bad:?} made {}", plot.display());
    }
}

#[test]
fn the_plot_never_replaces_an_input() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("lr_find.png");
    std::fs::write(&input, b"the user's parameters").unwrap();
    let line = args(
        &args(&TINY, &RATES),
        &[
            "--load",
            input.to_str().unwrap(),
            "--plot",
            dir.path().to_str().unwrap(),
        ],
    );
    let out = ember(&line);
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{stdout}");
    assert!(stderr.contains("is the same file as --load"), "{stderr}");
    assert_eq!(std::fs::read(&input).unwrap(), b"the user's parameters");
}

/// A sweep stopped while its smoothed loss still fell printed "suggested --lr" at a rate near
/// --min-lr (issue 62); now it says what it swept and suggests nothing, and exits as a
/// stopped run.
#[test]
fn a_sweep_cut_short_before_its_minimum_suggests_nothing() {
    let sweep = std::process::Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(args(&TINY, &["--steps", "1000000"]))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(3));
    let sent = std::process::Command::new("kill")
        .args(["-INT", &sweep.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let out = sweep.wait_with_output().unwrap();
    let (stdout, stderr) = super::common::cli::text(&out);
    // A stopped run's exit, 130 for SIGINT: it was 1, a failure's (hostile pass).
    assert_eq!(out.status.code(), Some(130), "{stdout}{stderr}");
    assert!(!stdout.contains("suggested --lr"), "{stdout}");
    assert!(stdout.contains("of 1000000 steps"), "{stdout}");
    assert!(
        stderr.contains("no learning rate to suggest: the sweep ran"),
        "{stderr}"
    );
}
