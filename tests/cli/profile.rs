//! `--profile`: Chrome's trace-event JSON, checked against the format's rules (the fields each
//! phase needs, microseconds, slices that nest on each track as Perfetto and chrome://tracing
//! require, an arrow per completed batch bound to its slices) and against the CSV trace of
//! the same run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use super::common::cli::{TINY, args, csv_rows, fails_with, succeeds};

/// One event's `key`, which must be there.
fn field<'a>(event: &'a Value, key: &str) -> &'a Value {
    event
        .get(key)
        .unwrap_or_else(|| panic!("no {key:?} in {event}"))
}

fn number(event: &Value, key: &str) -> f64 {
    field(event, key)
        .as_f64()
        .unwrap_or_else(|| panic!("{key:?} is not a number in {event}"))
}

/// Checks the file against the trace-event format's rules; returns its events.
fn valid_profile(path: &Path) -> Vec<Value> {
    let file: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    assert!(
        matches!(file["displayTimeUnit"].as_str(), Some("ms" | "ns")),
        "{}",
        file["displayTimeUnit"]
    );
    let events = file["traceEvents"].as_array().expect("traceEvents").clone();
    assert!(!events.is_empty());
    // (pid, tid) → its slices, as (start, end).
    let mut slices: BTreeMap<(u64, u64), Vec<(f64, f64)>> = BTreeMap::new();
    let mut flows: BTreeMap<u64, Vec<&Value>> = BTreeMap::new();
    for event in &events {
        let ph = field(event, "ph").as_str().expect("ph is a string");
        field(event, "name").as_str().expect("name is a string");
        let pid = field(event, "pid").as_u64().expect("pid is an integer");
        let tid = field(event, "tid").as_u64().expect("tid is an integer");
        let ts = number(event, "ts");
        assert!(ts >= 0.0 && ts.is_finite(), "{event}");
        match ph {
            "X" => {
                let dur = number(event, "dur");
                assert!(dur >= 0.0 && dur.is_finite(), "{event}");
                slices.entry((pid, tid)).or_default().push((ts, ts + dur));
            }
            "s" | "f" => {
                field(event, "cat").as_str().expect("a flow has a cat");
                let id = field(event, "id").as_u64().expect("a flow's id");
                if ph == "f" {
                    assert_eq!(event["bp"], "e", "{event}");
                }
                flows.entry(id).or_default().push(event);
            }
            "C" => {
                let args = field(event, "args").as_object().expect("a counter's args");
                assert!(!args.is_empty(), "{event}");
                assert!(args.values().all(Value::is_number), "{event}");
            }
            "M" => {
                let args = field(event, "args");
                match field(event, "name").as_str().unwrap() {
                    "process_name" | "thread_name" => {
                        args["name"].as_str().expect("a name");
                    }
                    "process_sort_index" | "thread_sort_index" => {
                        args["sort_index"].as_i64().expect("a sort index");
                    }
                    other => panic!("unknown metadata {other}"),
                }
            }
            other => panic!("phase {other} is not one ember writes: {event}"),
        }
    }
    // On each track, a slice ends before the next starts, or holds it whole.
    for (track, list) in &mut slices {
        list.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.total_cmp(&a.1)));
        let mut open: Vec<(f64, f64)> = Vec::new();
        for &(start, end) in list.iter() {
            while open.last().is_some_and(|&(_, e)| e <= start) {
                open.pop();
            }
            if let Some(&(outer_start, outer_end)) = open.last() {
                assert!(
                    end <= outer_end,
                    "track {track:?}: [{start}, {end}] overlaps [{outer_start}, {outer_end}]"
                );
            }
            open.push((start, end));
        }
    }
    // Every arrow has one tail and one head, later, each inside a slice of its track.
    let inside = |e: &Value| {
        let track = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        let ts = e["ts"].as_f64().unwrap();
        slices
            .get(&track)
            .is_some_and(|list| list.iter().any(|&(s, end)| s <= ts && ts <= end))
    };
    for (id, ends) in &flows {
        let phases: Vec<&str> = ends.iter().map(|e| e["ph"].as_str().unwrap()).collect();
        assert_eq!(phases, ["s", "f"], "flow {id}");
        assert!(
            ends[0]["ts"].as_f64() <= ends[1]["ts"].as_f64(),
            "flow {id}"
        );
        assert!(
            ends.iter().all(|e| inside(e)),
            "flow {id} binds to no slice"
        );
    }
    events
}

/// The names of the tracks (threads) in `events`.
fn tracks(events: &[Value]) -> BTreeSet<&str> {
    events
        .iter()
        .filter(|e| e["name"] == "thread_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect()
}

fn seconds(row: &BTreeMap<String, String>, column: &str) -> f64 {
    row[column].parse().unwrap_or(f64::NAN)
}

/// The slices named `name`, by (epoch from 1, batch).
fn by_batch<'a>(events: &'a [Value], name: &str) -> BTreeMap<(u64, u64), &'a Value> {
    events
        .iter()
        .filter(|e| e["ph"] == "X" && e["name"] == name)
        .map(|e| {
            let at = match name {
                "wait" => &e["args"]["before"],
                _ => &e["args"],
            };
            let key = (at["epoch"].as_u64().unwrap(), at["batch"].as_u64().unwrap());
            (key, e)
        })
        .collect()
}

/// The trace's seconds as the profile's whole microseconds.
fn us(seconds: f64) -> f64 {
    (seconds * 1e6).floor()
}

#[test]
fn a_profile_follows_the_format_and_agrees_with_the_csv_trace() {
    let dir = tempfile::tempdir().unwrap();
    for policy in ["barrier", "t+2", "none"] {
        let csv = dir.path().join(format!("{policy}.csv"));
        let json = dir.path().join(format!("{policy}.json"));
        let stdout = succeeds(&[
            "train",
            "--device",
            "flex",
            "--features",
            "64",
            "--hidden",
            "256,256",
            "--batches",
            "12",
            "--batch-size",
            "32",
            "--epochs",
            "2",
            "--sync",
            policy,
            "--metrics",
            csv.to_str().unwrap(),
            "--profile",
            json.to_str().unwrap(),
        ]);
        assert!(stdout.contains("ui.perfetto.dev"), "{stdout}");
        let events = valid_profile(&json);
        let rows = csv_rows(&csv);
        assert_eq!(rows.len(), 24);
        let (issues, computes, waits) = (
            by_batch(&events, "issue"),
            by_batch(&events, "compute"),
            by_batch(&events, "wait"),
        );
        assert_eq!(issues.len(), 24, "{policy}");
        assert_eq!(
            computes.len(),
            24,
            "{policy}: a compute slice per completed batch"
        );
        let flows = events.iter().filter(|e| e["ph"] == "s").count();
        assert_eq!(flows, 24, "{policy}: an arrow per completed batch");
        for (i, row) in rows.iter().enumerate() {
            let key = (
                row["epoch"].parse::<u64>().unwrap() + 1,
                row["batch"].parse().unwrap(),
            );
            let issue = issues[&key];
            let (start, end) = (seconds(row, "issue_start"), seconds(row, "issue_end"));
            // Each slice starts and ends at the trace's instants, in whole microseconds.
            let span = |e: &Value| [number(e, "ts"), number(e, "ts") + number(e, "dur")];
            assert_eq!(span(issue), [us(start), us(end)], "{policy} {key:?}");
            let compute = span(computes[&key]);
            assert_eq!(compute[1], us(seconds(row, "done")), "{policy} {key:?}");
            assert!(
                compute[0] >= us(end),
                "{policy} {key:?}: computed before its issue"
            );
            // What each policy waits for: the barrier for the batch before, t+2 for the one two
            // before (within the epoch: each begins with nothing in flight); none never waits.
            let before = |k: usize| (i >= k && rows[i - k]["epoch"] == row["epoch"]).then(|| i - k);
            let waited_for = match policy {
                "barrier" => before(1),
                "t+2" => before(2),
                _ => None,
            };
            match (waited_for, waits.get(&key)) {
                (Some(j), Some(wait)) => {
                    let (wait_start, wait_end) =
                        (seconds(row, "wait_start"), seconds(row, "wait_end"));
                    assert_eq!(
                        span(wait),
                        [us(wait_start), us(wait_end)],
                        "{policy} {key:?}"
                    );
                    assert!(
                        wait_end >= seconds(&rows[j], "done"),
                        "{policy}: batch {key:?} issued before batch {j} was done"
                    );
                }
                (None, None) => assert_eq!(row["wait_start"], "", "{policy} {key:?}"),
                (expected, found) => {
                    panic!("{policy} {key:?}: waits for {expected:?}, the profile has {found:?}")
                }
            }
        }
        let expected = match policy {
            "barrier" => 2 * 11,
            "t+2" => 2 * 10,
            _ => 0,
        };
        assert_eq!(waits.len(), expected, "{policy}: wait slices");
        // The counters: memory and the queue after each issue.
        for counter in ["memory (MB)", "in flight"] {
            let n = events
                .iter()
                .filter(|e| e["ph"] == "C" && e["name"] == counter)
                .count();
            assert_eq!(n, 24, "{counter}");
        }
        assert_eq!(
            tracks(&events),
            BTreeSet::from(["backend: flex", "epochs", "frontend"]),
            "{policy}"
        );
        let epochs = events
            .iter()
            .filter(|e| e["ph"] == "X" && e["tid"] == 0)
            .count();
        assert_eq!(epochs, 2);
    }
}

#[test]
fn a_data_parallel_profile_has_a_track_and_an_arrow_per_device() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("split.json");
    succeeds(&[
        "train",
        "--devices",
        "flex,flex",
        "--batches",
        "4",
        "--batch-size",
        "32",
        "--features",
        "8",
        "--hidden",
        "4",
        "--profile",
        json.to_str().unwrap(),
    ]);
    let events = valid_profile(&json);
    let tracks = tracks(&events);
    assert!(
        tracks.contains("backend 0: flex") && tracks.contains("backend 1: flex"),
        "{tracks:?}"
    );
    let flows = events.iter().filter(|e| e["ph"] == "s").count();
    assert_eq!(flows, 2 * 4, "4 batches, each split across 2 devices");
}

#[test]
fn compare_profiles_every_run_as_a_process_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("compare.json");
    let out = dir.path().join("out");
    succeeds(&[
        "compare",
        "--device",
        "flex",
        "--batches",
        "6",
        "--batch-size",
        "16",
        "--features",
        "8",
        "--hidden",
        "8",
        "--policies",
        "barrier,none",
        "--repeat",
        "2",
        "--out",
        out.to_str().unwrap(),
        "--profile",
        json.to_str().unwrap(),
    ]);
    let events = valid_profile(&json);
    let processes: Vec<&str> = events
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        processes,
        [
            "--sync barrier, round 1",
            "--sync barrier, round 2",
            "--sync none, round 1",
            "--sync none, round 2"
        ]
    );
    let issues = events.iter().filter(|e| e["name"] == "issue").count();
    assert_eq!(issues, 4 * 6);
}

#[test]
fn a_profile_never_goes_over_an_input_or_another_output() {
    let dir = tempfile::tempdir().unwrap();
    let metrics = dir.path().join("run.csv");
    std::fs::write(&metrics, "kept\n").unwrap();
    let metrics = metrics.to_str().unwrap();
    fails_with(
        &args(&TINY, &["--metrics", metrics, "--profile", metrics]),
        "--profile",
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("run.csv")).unwrap(),
        "kept\n"
    );
    fails_with(
        &args(&TINY, &["--profile", dir.path().to_str().unwrap()]),
        "invalid --profile",
    );
}
