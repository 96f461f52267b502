//! `--repeat`: how many interleaved rounds `compare` and `bench` run, each a whole set of runs.

use anyhow::bail;

/// The most rounds `--repeat` takes: each runs every policy or experiment again, and their
/// samples are kept for the medians (4294967296 aborted on the allocation, hostile pass).
pub const MOST: usize = 1000;

/// `--repeat`'s `value` where it is 1 to [`MOST`].
pub fn rounds(value: usize) -> anyhow::Result<usize> {
    if !(1..=MOST).contains(&value) {
        bail!("invalid --repeat {value}: must be 1 to {MOST} rounds");
    }
    Ok(value)
}
