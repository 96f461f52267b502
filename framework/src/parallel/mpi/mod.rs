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

use crate::error::{Error, Result};

mod collective;
mod gradients;

pub use collective::{BUCKET_VALUES, Collective, Exchanged, NOT_GIVEN, Via};

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
