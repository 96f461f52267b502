//! Where `ember compare` writes: the files it writes into `--out`, and `--out`, `--profile` and
//! `--html` checked against each other and the data before `--out` is made.

use std::path::{Path, PathBuf};

use anyhow::Context;

use ember_trainer::run::clash::Files;
use ember_trainer::run::workload::DataSpec;

/// Creates `out` (given as `flag`) if needed, and checks that it is a writable directory and
/// that each of `files` in it can take an output (see [`ember::io::check`]).
pub(super) fn prepare_out(flag: &str, out: &Path, files: &[&str]) -> anyhow::Result<()> {
    let invalid = || format!("invalid {flag} {}", out.display());
    ember::io::check_dir(out).with_context(invalid)?;
    for file in files {
        ember::io::check(&out.join(file)).with_context(invalid)?;
    }
    Ok(())
}

/// What `ember compare` writes into `--out`.
pub(super) const WRITTEN: [&str; 11] = [
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

/// Checks `out` and the other outputs (`--profile`, `--html`) against each other and the data,
/// then makes `out`. The clashes first: `--out k --html k` named k "a directory" once `--out`
/// had made it.
pub(super) fn check(
    out: &Path,
    [profile, html]: [&Option<PathBuf>; 2],
    data: &DataSpec,
) -> anyhow::Result<()> {
    clashes(out, [profile, html], data)?;
    prepare_out("--out", out, &WRITTEN)?;
    // Again, now that --out is there to resolve: `--html ./k/summary.md` or a path through a
    // symlink to k is k's summary.md only once k exists (`compare` removes a k it made when
    // this fails).
    clashes(out, [profile, html], data)?;
    for (flag, path) in [("--profile", profile), ("--html", html)] {
        if let Some(path) = path {
            ember::io::check(path).with_context(|| format!("invalid {flag} {}", path.display()))?;
        }
    }
    Ok(())
}

/// The outputs against each other and the data.
fn clashes(
    out: &Path,
    [profile, html]: [&Option<PathBuf>; 2],
    data: &DataSpec,
) -> anyhow::Result<()> {
    let mut files = Files::default();
    files.data(data);
    files.output(format!("--out {} (a directory)", out.display()), out);
    for file in WRITTEN {
        files.output(
            format!("--out {} (its {file})", out.display()),
            &out.join(file),
        );
    }
    let others = [("--profile", profile), ("--html", html)];
    for (flag, path) in others {
        if let Some(path) = path {
            files.output(format!("{flag} {}", path.display()), path);
        }
    }
    files.check()?;
    Ok(())
}
