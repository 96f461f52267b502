//! What a resumed run must keep of the flags of the run that wrote its checkpoint, and what it
//! may change: the flags [`Flag::ALL`] marks [`Resume::Changeable`] (--lr, --lr-schedule,
//! --precision). A flag written only where it is not its default ([`Flag::unset`]: --precision
//! f32) reads as that default where a record lacks it.

use std::collections::BTreeMap;

use super::data_content;
use super::flags::{Flag, Resume};

/// A changeable flag the resumed run gives another value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// `--lr`.
    pub flag: String,
    /// The checkpoint's run's value.
    pub before: String,
    /// This run's.
    pub now: String,
}

/// The CPU kernels a run on the CPU trained with, whichever way they were chosen
/// (`--cpu-kernels`, `EMBER_CPU_KERNELS`, a library that is missing): a resumed run may go on
/// with others (a machine without oneDNN goes on with flex's), and the change is printed, as
/// the bits then differ from one unbroken run's; a record without them (written before ember
/// kept them) takes any. It was accepted without a word (hostile pass).
pub const KERNELS: &str = "--cpu-kernels";

/// A run as `--distributed` records it (`mpi:2`, or nothing), in words: `a job of 2 ranks
/// (mpirun -np 2)`, `a single process (no --distributed)`.
fn job(recorded: Option<&str>) -> String {
    match recorded.map(|r| r.strip_prefix("mpi:").unwrap_or(r)) {
        None => "a single process (no --distributed)".to_string(),
        Some("1") => "a job of 1 rank (mpirun -np 1)".to_string(),
        Some(ranks) => format!("a job of {ranks} ranks (mpirun -np {ranks})"),
    }
}

/// The changes from the checkpoint's record `before` to this run's `now`, or every difference
/// that a resumed run may not make, in words, at once: a flag only one of the runs had
/// (--devices where this run has --device), or one whose value changed.
pub fn compare(
    before: &BTreeMap<String, String>,
    now: &BTreeMap<String, String>,
) -> Result<Vec<Change>, String> {
    let flags: std::collections::BTreeSet<&String> = before.keys().chain(now.keys()).collect();
    let (mut changes, mut differ) = (Vec::new(), Vec::new());
    // What the run trained on is its data's content: where both runs recorded it, --data may
    // name the files otherwise (`./big.csv`, another directory); a checkpoint from before
    // ember recorded it compares --data as typed.
    let (content_before, content_now) = (before.get(data_content::KEY), now.get(data_content::KEY));
    let recorded_content = content_before.is_some();
    // Text's options (steps, tokens, partitioning, offset) cut the same files into other
    // batches: for text, --data is compared as written.
    let text = |value: Option<&str>| value.is_some_and(|v| v.starts_with("text:"));
    for flag in flags {
        let (was, is) = (recorded(before, flag), recorded(now, flag));
        let same_content = recorded_content && content_before == content_now;
        if was == is
            || (flag == "--data" && same_content && !text(was) && !text(is))
            || (flag == data_content::KEY && !recorded_content)
        {
            continue;
        }
        if flag == KERNELS && (was.is_none() || is.is_none()) {
            continue;
        }
        // --epochs is recorded under a schedule spanning the run only: a change to another
        // schedule (which --lr-schedule may make) is not a change of --epochs.
        if flag == "--epochs" && !(before.contains_key(flag) && now.contains_key(flag)) {
            continue;
        }
        match (was, is) {
            (Some(b), Some(v)) if changeable(flag) => changes.push(Change {
                flag: flag.clone(),
                before: b.to_string(),
                now: v.to_string(),
            }),
            // A job's size in words one can act on (`mpi:2` is no value --distributed takes).
            (b, v) if flag == "--distributed" => differ.push(format!(
                "it was written by {}, and this one is {}",
                job(b),
                job(v)
            )),
            (Some(b), Some(v)) => differ.push(format!(
                "it was written by a run with {flag} {b}, and this one has {flag} {v}{}",
                spans(flag, now)
            )),
            (Some(b), None) => differ.push(format!(
                "it was written by a run with {flag} {b}, and this one has no {flag}{}",
                kept(flag)
            )),
            (None, v) => differ.push(format!(
                "it was written by a run without {flag}, and this one has {flag} {}{}",
                v.unwrap_or(""),
                kept(flag)
            )),
        }
    }
    let devices = ["--device", "--devices"]
        .iter()
        .any(|flag| recorded(before, flag) != recorded(now, flag));
    match differ.is_empty() {
        true => Ok(changes),
        false => Err(differ.join("; ") + if devices { DEVICES_STAY } else { "" }),
    }
}

fn flag(name: &str) -> Option<&'static Flag> {
    Flag::ALL.iter().find(|f| name == f.to_string())
}

/// The flags a resumed run may change, in words: `--lr, --lr-schedule and --precision`.
pub fn changeable_flags() -> String {
    let names: Vec<String> = Flag::ALL
        .iter()
        .filter(|f| f.resume == Resume::Changeable)
        .map(Flag::to_string)
        .collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => names.concat(),
    }
}

/// For a changeable flag given by one run only: that its value may change, but it may not be
/// given or left out (a resume that forgot `--lr-schedule` would train at a constant rate).
fn kept(name: &str) -> String {
    match changeable(name) {
        true => format!(" ({name} may change on resume, to another value, but not come or go)"),
        false => String::new(),
    }
}

/// For `--epochs`, recorded only under a schedule that spans the run: why it may not grow here,
/// where it may elsewhere (the refusal did not say, and read as if --epochs never could).
fn spans(name: &str, now: &BTreeMap<String, String>) -> String {
    match (name, recorded(now, "--lr-schedule")) {
        ("--epochs", Some(schedule)) => format!(
            " (--epochs may grow on resume, but not under --lr-schedule {schedule}, whose rates \
             depend on the run's length; the way on is a schedule whose rates do not, such as \
             step:1:1, which trains at the rate --lr gives: `constant` would drop the \
             schedule, which a resume may not)"
        ),
        _ => String::new(),
    }
}

/// Whether a resumed run may give `name` (`--lr`) another value than the checkpoint's run.
fn changeable(name: &str) -> bool {
    name == KERNELS || flag(name).is_some_and(|f| f.resume == Resume::Changeable)
}

/// Why the devices may not change, and the way on where one is gone.
const DEVICES_STAY: &str = "; a run goes on on the devices it trained on, whose arithmetic its \
                            optimizer state holds: for a remote server that is gone, serve a \
                            device at the same address again (`ember serve --listen HOST:PORT`)";

/// `name`'s value in a record: the one written, else what its absence means.
fn recorded<'a>(record: &'a BTreeMap<String, String>, name: &str) -> Option<&'a str> {
    record
        .get(name)
        .map(String::as_str)
        .or_else(|| flag(name).and_then(|f| f.unset))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn precision_may_be_given_or_dropped_where_the_record_has_its_default() {
        let f32_run = record(&[("--lr", "0.1"), ("--batch-size", "32")]);
        let bf16_run = record(&[
            ("--lr", "0.1"),
            ("--batch-size", "32"),
            ("--precision", "bf16"),
        ]);
        let to = |from: &BTreeMap<String, String>, to: &BTreeMap<String, String>| {
            compare(from, to).unwrap()
        };
        let change = |before: &str, now: &str| Change {
            flag: "--precision".to_string(),
            before: before.to_string(),
            now: now.to_string(),
        };
        assert_eq!(to(&f32_run, &bf16_run), [change("f32", "bf16")]);
        assert_eq!(to(&bf16_run, &f32_run), [change("bf16", "f32")]);
        assert_eq!(to(&f32_run, &f32_run), []);
    }

    #[test]
    fn other_flags_must_match_and_every_difference_is_named_at_once() {
        let before = record(&[
            ("--lr", "0.1"),
            ("--batch-size", "32"),
            ("--device", "flex"),
        ]);
        let now = record(&[
            ("--lr", "0.05"),
            ("--batch-size", "64"),
            ("--devices", "flex,flex"),
        ]);
        let err = compare(&before, &now).unwrap_err();
        for said in [
            "with --batch-size 32, and this one has --batch-size 64",
            "with --device flex, and this one has no --device",
            "without --devices, and this one has --devices flex,flex",
        ] {
            assert!(err.contains(said), "{said}: {err}");
        }
        assert!(!err.contains("--lr"), "--lr may change: {err}");
        assert_eq!(changeable_flags(), "--lr, --lr-schedule and --precision");
        // A changeable flag without a default must be on both sides to change, and the
        // refusal says so (before, it said only that the flag may change).
        let scheduled = record(&[("--lr-schedule", "cosine")]);
        for err in [
            compare(&scheduled, &record(&[])).unwrap_err(),
            compare(&record(&[]), &scheduled).unwrap_err(),
        ] {
            assert!(
                err.contains(
                    "--lr-schedule may change on resume, to another value, but not come or go"
                ),
                "{err}"
            );
        }
        assert!(
            !compare(&before, &now)
                .unwrap_err()
                .contains("may change on resume")
        );
        // --epochs counts only where both runs recorded it (a schedule spanning the run).
        let with = record(&[("--epochs", "3")]);
        assert_eq!(compare(&with, &record(&[])).unwrap(), []);
        assert!(compare(&with, &record(&[("--epochs", "4")])).is_err());
        // And its refusal names the schedule that makes it so (it read as if --epochs could
        // never grow, hostile pass).
        let cosine = |epochs| record(&[("--epochs", epochs), ("--lr-schedule", "cosine")]);
        let err = compare(&cosine("2"), &cosine("3")).unwrap_err();
        assert!(
            err.contains("--epochs may grow on resume, but not under --lr-schedule cosine"),
            "{err}"
        );
    }

    #[test]
    fn a_job_of_another_size_is_named_by_its_ranks() {
        let err = compare(&record(&[("--distributed", "mpi:2")]), &record(&[])).unwrap_err();
        assert!(
            err.contains(
                "written by a job of 2 ranks (mpirun -np 2), and this one is a single process \
                 (no --distributed)"
            ),
            "{err}"
        );
        let err = compare(
            &record(&[("--distributed", "mpi:2")]),
            &record(&[("--distributed", "mpi:3")]),
        )
        .unwrap_err();
        assert!(
            err.contains(
                "it was written by a job of 2 ranks (mpirun -np 2), and this one is a job of 3 \
                 ranks (mpirun -np 3)"
            ),
            "{err}"
        );
    }
}
