//! The job's ranks as one rank sees them ([`Collective`]) and the collectives they take part
//! in together: sums, a gather, the check that every rank was started alike. With them, the
//! state the collective keeps of the gradients' sums, which `gradients.rs` does: how they meet
//! ([`Via`]), what they did ([`Exchanged`]) and the size of their messages ([`BUCKET_VALUES`]).

use std::collections::BTreeMap;
use std::fmt;

use crate::error::{Error, Result};

/// Gradients travel in messages of at most this many values (25 MiB of `f32`, DDP's default
/// bucket): one all-reduce per bucket, never one per tensor.
pub const BUCKET_VALUES: usize = 25 * (1 << 20) / 4;

/// How the ranks' gradients meet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Via {
    /// Read back to the host and summed by MPI, which works with every device; says why
    /// NCCL does not sum them.
    Host(String),
    /// Summed in place on the ranks' CUDA cards by NCCL.
    Nccl,
}

impl fmt::Display for Via {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Host(why) => write!(
                f,
                "gradients summed by MPI on the host, in buckets of {} MiB (not by NCCL: {why})",
                (BUCKET_VALUES * size_of::<f32>()) >> 20
            ),
            Self::Nccl => write!(f, "gradients summed on the cards by NCCL"),
        }
    }
}

/// What [`Collective::sum_gradients`] did since it was last asked.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Exchanged {
    /// All-reduces of the whole gradient (each of one or more buckets).
    pub sums: u64,
    /// Gradient values each rank sent, over all of them.
    pub values: u64,
    /// Seconds in them, from the first bucket's call to the last one's return: the transfer,
    /// the additions and the wait for the slowest rank.
    pub seconds: f64,
}

/// The job's ranks, as one rank sees them, and the collectives they take part in together.
/// Every rank must call the same collectives in the same order.
#[derive(Debug, Clone)]
pub struct Collective {
    pub(super) rank: usize,
    pub(super) size: usize,
    /// This rank among the ranks on its host (MPI's shared-memory split).
    pub(super) local_rank: usize,
    /// Whether the ranks' gradient sizes were found equal (checked at the first sum).
    pub(super) checked: bool,
    /// How the gradients meet, once chosen ([`Collective::choose`]).
    pub(super) via: Option<Via>,
    pub(super) exchanged: Exchanged,
}

impl Collective {
    /// This process's rank, from 0.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// How many ranks the job has.
    pub fn size(&self) -> usize {
        self.size
    }

    /// This rank among the ranks on its host, from 0: the card it takes (`cuda:local_rank`),
    /// as DDP's `LOCAL_RANK`.
    pub fn local_rank(&self) -> usize {
        self.local_rank
    }

    /// Ends every rank of the job with `code` (`MPI_Abort`): what a rank that failed does, as
    /// the others may be waiting for it in a collective that would never end.
    pub fn abort(&self, code: i32) -> ! {
        #[cfg(feature = "mpi")]
        {
            use mpi::traits::Communicator;
            mpi::topology::SimpleCommunicator::world().abort(code)
        }
        #[cfg(not(feature = "mpi"))]
        std::process::exit(code)
    }

    /// Waits until every rank has called it.
    pub fn barrier(&self) {
        #[cfg(feature = "mpi")]
        {
            use mpi::collective::CommunicatorCollectives;
            mpi::topology::SimpleCommunicator::world().barrier();
        }
    }

    /// Sums `values` over the ranks, in place, in buckets of [`BUCKET_VALUES`].
    pub fn sum_f32(&self, values: &mut [f32]) {
        #[cfg(feature = "mpi")]
        {
            use mpi::collective::{CommunicatorCollectives, SystemOperation};
            let world = mpi::topology::SimpleCommunicator::world();
            for bucket in values.chunks_mut(BUCKET_VALUES) {
                let send = bucket.to_vec();
                world.all_reduce_into(&send[..], bucket, SystemOperation::sum());
            }
        }
        #[cfg(not(feature = "mpi"))]
        let _ = values;
    }

    /// Sums `values` over the ranks, in place (one message).
    pub fn sum_f64(&self, values: &mut [f64]) {
        #[cfg(feature = "mpi")]
        {
            use mpi::collective::{CommunicatorCollectives, SystemOperation};
            let world = mpi::topology::SimpleCommunicator::world();
            let send = values.to_vec();
            world.all_reduce_into(&send[..], values, SystemOperation::sum());
        }
        #[cfg(not(feature = "mpi"))]
        let _ = values;
    }

    /// Sums `mine` over the ranks where their lengths may differ: a rank that has nothing
    /// (an empty slice) adds nothing; the others must be as long as each other.
    ///
    /// # Errors
    /// [`Error::Distributed`] for two ranks with sums of other lengths.
    pub fn sum_sparse(&self, mine: &[f64], what: &str) -> Result<Vec<f64>> {
        let bytes: Vec<u8> = mine.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut sum: Vec<f64> = Vec::new();
        for (rank, theirs) in self.gather(&bytes).iter().enumerate() {
            let theirs: Vec<f64> = theirs
                .chunks_exact(8)
                .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
                .collect();
            match (sum.is_empty(), theirs.is_empty()) {
                (_, true) => {}
                (true, false) => sum = theirs,
                (false, false) if sum.len() == theirs.len() => {
                    sum.iter_mut().zip(&theirs).for_each(|(s, t)| *s += t)
                }
                (false, false) => {
                    return Err(Error::Distributed(format!(
                        "{what}: rank {rank} holds {} values, an earlier rank {}",
                        theirs.len(),
                        sum.len()
                    )));
                }
            }
        }
        Ok(sum)
    }

    /// Each rank's `mine`, by rank: every rank gets all of them.
    pub fn gather(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        #[cfg(feature = "mpi")]
        {
            use mpi::collective::CommunicatorCollectives;
            let world = mpi::topology::SimpleCommunicator::world();
            let mut lengths = vec![0u64; self.size];
            world.all_gather_into(&(mine.len() as u64), &mut lengths[..]);
            let longest = lengths.iter().copied().max().unwrap_or(0) as usize;
            // Nothing to send from any rank (the metrics' sums right after an epoch's end):
            // Open MPI refuses a gather of empty buffers (MPI_ERR_ARG, fatal), which ended
            // every job that checkpointed with a metric on.
            if longest == 0 {
                return vec![Vec::new(); self.size];
            }
            let mut padded = mine.to_vec();
            padded.resize(longest, 0);
            let mut all = vec![0u8; longest * self.size];
            world.all_gather_into(&padded[..], &mut all[..]);
            all.chunks(longest.max(1))
                .zip(&lengths)
                .map(|(chunk, &len)| chunk[..len as usize].to_vec())
                .collect()
        }
        #[cfg(not(feature = "mpi"))]
        vec![mine.to_vec()]
    }

    /// Checks that every rank was started with the same `settings` (flag → value), before any
    /// work: a rank whose settings differ from rank 0's makes every rank refuse, naming the
    /// rank and the setting.
    ///
    /// # Errors
    /// [`Error::Distributed`] naming each differing setting and its values.
    pub fn agree(&self, settings: &BTreeMap<String, String>) -> Result<()> {
        let mine = serde_json::to_vec(settings).expect("a map of strings is JSON");
        let all = self.gather(&mine);
        let first: BTreeMap<String, String> =
            serde_json::from_slice(&all[0]).map_err(|e| Error::Distributed(e.to_string()))?;
        let mut differences = Vec::new();
        for (rank, theirs) in all.iter().enumerate().skip(1) {
            let theirs: BTreeMap<String, String> =
                serde_json::from_slice(theirs).map_err(|e| Error::Distributed(e.to_string()))?;
            differences.extend(
                differing(&first, &theirs).into_iter().map(|(name, a, b)| {
                    format!("rank {rank} has {name} {b}, rank 0 has {name} {a}")
                }),
            );
        }
        match differences.is_empty() {
            true => Ok(()),
            false => Err(Error::Distributed(format!(
                "the ranks were started with other settings: {}; start every rank with the \
                 same flags",
                differences.join("; ")
            ))),
        }
    }
}

/// The value [`Collective::agree`] shows for a setting a rank was started without; a caller
/// that lists a setting on every rank (an output flag that may be left out) writes it the same
/// way, so that one absence reads one way (`none` and `(none)` both showed, and `--sync none`
/// is a value, hostile pass).
pub const NOT_GIVEN: &str = "(not given)";

/// The settings of `b` that differ from `a`'s, with `a`'s and `b`'s values ([`NOT_GIVEN`] where
/// one lacks it).
fn differing(
    a: &BTreeMap<String, String>,
    b: &BTreeMap<String, String>,
) -> Vec<(String, String, String)> {
    let none = NOT_GIVEN.to_string();
    let names: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    names
        .into_iter()
        .filter(|name| a.get(*name) != b.get(*name))
        .map(|name| {
            (
                name.clone(),
                a.get(name).unwrap_or(&none).clone(),
                b.get(name).unwrap_or(&none).clone(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn differing_settings_name_each_flag_with_both_values() {
        let a = map(&[("--lr", "0.1"), ("--seed", "0"), ("--model", "mlp:256")]);
        let b = map(&[("--lr", "0.2"), ("--seed", "0"), ("--wd", "0.01")]);
        assert_eq!(
            differing(&a, &b),
            vec![
                ("--lr".into(), "0.1".into(), "0.2".into()),
                ("--model".into(), "mlp:256".into(), NOT_GIVEN.into()),
                ("--wd".into(), NOT_GIVEN.into(), "0.01".into()),
            ]
        );
        assert!(differing(&a, &a).is_empty());
    }
}
