//! Data parallelism across processes, as PyTorch's DDP and Horovod do it: one process (a
//! *rank*) per device, each on its own share of the data, and the gradients summed by MPI's
//! all-reduce, in which every rank takes part. `mpirun` starts the ranks, on one host or many;
//! MPI (Open MPI, through rsmpi) does the collective and the transport. Nothing here is a
//! protocol of ember's own.
//!
//! [`Mpi::init`] starts MPI on the main thread; the [`Collective`] it gives is what the
//! engine's worker thread calls, one unit at a time (MPI's `THREAD_SERIALIZED`).
//!
//! Where every rank trains on a CUDA card and NCCL's library loads (a `cuda` build), the
//! gradients are summed on the cards by NCCL ([`super::nccl`]); elsewhere they are read back
//! and summed by MPI on the host ([`Via`]).

use std::collections::BTreeMap;

use crate::error::{Error, Result};

mod gradients;
pub use gradients::{Exchanged, Via};

/// Gradients travel in messages of at most this many values (25 MiB of `f32`, DDP's default
/// bucket): one all-reduce per bucket, never one per tensor.
pub const BUCKET_VALUES: usize = 25 * (1 << 20) / 4;

/// MPI, started for this process; it ends (`MPI_Finalize`) when this is dropped. Keep it on
/// the thread that made it, for the whole run.
pub struct Mpi {
    #[cfg(feature = "mpi")]
    _universe: mpi::environment::Universe,
    collective: Collective,
}

impl Mpi {
    /// Starts MPI: under `mpirun`, this process's rank among the job's; without it, a job of
    /// one rank.
    ///
    /// # Errors
    /// [`Error::NotBuilt`] in a build without the `mpi` feature; [`Error::Distributed`] when
    /// MPI was started already or cannot give the thread support the engine needs.
    pub fn init() -> Result<Self> {
        #[cfg(feature = "mpi")]
        {
            use mpi::traits::Communicator;
            let (universe, threading) = mpi::initialize_with_threading(mpi::Threading::Serialized)
                .ok_or_else(|| {
                    Error::Distributed("MPI was started already in this process".to_string())
                })?;
            if threading < mpi::Threading::Serialized {
                return Err(Error::Distributed(format!(
                    "this MPI library gives {threading:?} threads; the engine's worker calls \
                     MPI from a thread of its own, which needs Serialized"
                )));
            }
            let world = universe.world();
            let local_rank = world.split_shared(world.rank()).rank() as usize;
            let collective = Collective {
                rank: world.rank() as usize,
                size: world.size() as usize,
                local_rank,
                checked: false,
                via: None,
                exchanged: Exchanged::default(),
            };
            Ok(Self {
                _universe: universe,
                collective,
            })
        }
        #[cfg(not(feature = "mpi"))]
        Err(Error::NotBuilt {
            device: "--distributed mpi".to_string(),
            backend: "MPI",
            why: "it was compiled without the `mpi` feature (the default build has it): \
                  install Open MPI (`apt-get install libopenmpi-dev openmpi-bin`) and build \
                  with the default features",
        })
    }

    /// The job's collective, for the thread that trains.
    pub fn collective(&self) -> Collective {
        self.collective.clone()
    }
}

/// The job's ranks, as one rank sees them, and the collectives they take part in together.
/// Every rank must call the same collectives in the same order.
#[derive(Debug, Clone)]
pub struct Collective {
    rank: usize,
    size: usize,
    /// This rank among the ranks on its host (MPI's shared-memory split).
    local_rank: usize,
    /// Whether the ranks' gradient sizes were found equal (checked at the first sum).
    checked: bool,
    /// How the gradients meet, once chosen ([`Collective::choose`]).
    via: Option<Via>,
    exchanged: Exchanged,
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

/// The settings of `b` that differ from `a`'s, with `a`'s and `b`'s values (`(none)` where one
/// lacks it).
fn differing(
    a: &BTreeMap<String, String>,
    b: &BTreeMap<String, String>,
) -> Vec<(String, String, String)> {
    let none = "(none)".to_string();
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
                ("--model".into(), "mlp:256".into(), "(none)".into()),
                ("--wd".into(), "(none)".into(), "0.01".into()),
            ]
        );
        assert!(differing(&a, &a).is_empty());
    }
}
