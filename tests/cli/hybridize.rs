//! `--hybridize` from the command line: `train` says once how the step runs (recorded and
//! replayed on wgpu, run again on flex, eagerly with the reason), and trains what the eager run
//! trains; `compare` hands the flag to the runs of each policy. What a recorded step computes
//! is in tests/library/hybridize.rs.

use super::common;
use super::common::cli::{TINY, args, succeeds};

/// The loss of each epoch `ember train` printed (`mean loss` on synthetic data, `train loss`
/// on a dataset).
fn losses(said: &str) -> Vec<String> {
    said.lines()
        .filter_map(|line| {
            let rest = line.split("mean loss ").nth(1);
            rest.or_else(|| line.split("train loss ").nth(1))
        })
        .map(|rest| rest.split([',', ' ']).next().unwrap().to_string())
        .collect()
}

/// The line that says how the steps ran.
fn hybridize_line(said: &str) -> Vec<&str> {
    said.lines()
        .filter(|l| l.starts_with("hybridize:"))
        .collect()
}

#[test]
fn train_says_how_the_step_runs_and_trains_what_the_eager_run_trains() {
    let momentum = ["--optimizer", "sgd", "--momentum", "0.9", "--epochs", "2"];
    for device in ["flex", "wgpu"] {
        let base: Vec<&str> = args(&TINY, &momentum)
            .into_iter()
            .map(|a| if a == "flex" { device } else { a })
            .collect();
        let eager = succeeds(&base);
        assert!(hybridize_line(&eager).is_empty(), "{eager}");
        let dir = tempfile::tempdir().unwrap();
        let metrics = dir.path().join("m.csv");
        let recorded = succeeds(&args(
            &base,
            &["--hybridize", "--metrics", metrics.to_str().unwrap()],
        ));
        // The epochs' file carries what the recording holds, the same every epoch.
        let epochs = std::fs::read_to_string(dir.path().join("m.epochs.csv")).unwrap();
        let header: Vec<&str> = epochs.lines().next().unwrap().split(',').collect();
        let column = header.iter().position(|c| *c == "recording_mb");
        let column = column.unwrap_or_else(|| panic!("{device}: no recording_mb: {epochs}"));
        let held: Vec<f64> = epochs
            .lines()
            .skip(1)
            .map(|l| l.split(',').nth(column).unwrap().parse().unwrap())
            .collect();
        assert!(
            held.len() == 2 && held[0] > 0.0 && held[1] == held[0],
            "{device}: {epochs}"
        );
        let how = match device {
            "wgpu" => "hybridize: the step is recorded once and replayed",
            _ => "hybridize: the step is recorded once; this device replays no graph",
        };
        let said = hybridize_line(&recorded);
        assert!(said.len() == 2 && said[0].starts_with(how), "{recorded}");
        // 2 epochs of 4 batches, all of one shape.
        assert!(
            said[1].contains("8 steps ran the recording, 0 outside"),
            "{recorded}"
        );
        assert!(recorded.contains("hybridized"), "{recorded}");
        assert_eq!(losses(&recorded), losses(&eager), "{device}");
        assert_eq!(losses(&eager).len(), 2, "{eager}");
    }
}

/// Each epoch's evaluation line: its losses and accuracies, which hold no time.
fn figures(said: &str) -> Vec<&str> {
    said.lines()
        .filter(|l| l.starts_with("epoch ") && l.contains("train loss"))
        .collect()
}

/// The ResNet's BatchNorm keeps its running statistics in the recording's slots: the recorded
/// run trains and evaluates (with those statistics) as the eager run does, on flex and wgpu.
#[test]
fn a_resnet_is_recorded_and_evaluates_as_the_eager_run() {
    let dir = tempfile::tempdir().unwrap();
    common::fashion::fashion_like(dir.path(), "train", 64, 1);
    common::fashion::fashion_like(dir.path(), "t10k", 32, 2);
    let images = format!("fashion-mnist:{}", dir.path().display());
    for device in ["flex", "wgpu"] {
        let base = [
            "train",
            "--device",
            device,
            "--model",
            "resnet",
            "--data",
            &images,
            "--batch-size",
            "32",
            "--epochs",
            "2",
            "--eval",
            "acc,ce",
        ];
        let eager = succeeds(&base);
        let recorded = succeeds(&args(&base, &["--hybridize"]));
        let said = hybridize_line(&recorded);
        assert!(
            said.len() == 2
                && said[0].contains("recorded once")
                && said[1].contains("4 steps ran the recording, 0 outside"),
            "{device}: {recorded}"
        );
        assert_eq!(figures(&recorded), figures(&eager), "{device}");
        assert_eq!(figures(&eager).len(), 2, "{eager}");
    }
}

#[test]
fn what_a_recording_cannot_hold_trains_eagerly_and_says_why() {
    let tiny = |more: &[&'static str]| args(&TINY, more);
    for (eager, why) in [
        (
            tiny(&["--accumulate", "2"]),
            "gradient accumulation over 2 batches",
        ),
        (
            tiny(&["--optimizer", "adagrad"]),
            "only sgd, adam and adamw are recorded yet",
        ),
        (tiny(&["--clip-norm", "1"]), "clipping is not recorded yet"),
    ] {
        let recorded = succeeds(&args(&eager, &["--hybridize"]));
        let said = hybridize_line(&recorded);
        assert!(
            said.len() == 1 && said[0].contains("runs eagerly") && said[0].contains(why),
            "{eager:?}: {recorded}"
        );
        assert_eq!(losses(&recorded), losses(&succeeds(&eager)), "{eager:?}");
    }
}
