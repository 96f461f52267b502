//! `ember train --distributed mpi`: this process is one rank of a job that `mpirun` started
//! ([`ember_trainer::run::job`]).

use clap::ValueEnum;
use ember_trainer::run::job::Job;

/// `--distributed`'s long help.
pub const HELP: &str = "Train as one rank of a job of processes, one a device, that \
    `mpirun -np N` started (on one host, or many with --hostfile), as PyTorch's DDP does: each \
    rank takes its share of every epoch after the same seeded shuffle (PyTorch's \
    DistributedSampler with drop_last: the last examples that do not divide by N are left out \
    of the epoch), runs forward and backward on its own device, and an all-reduce sums the gradients \
    before the same optimizer step on every rank: NCCL's, on the cards, where every rank \
    trains on a CUDA card and loads libnccl (a `cuda` build), else MPI's on the host, in \
    buckets of 25 MiB (a line before the first epoch's says which, and why). `--device cuda` gives each rank \
    cuda:LOCAL_RANK, its place among the ranks on its host (DDP's local_rank). \
    --batch-size is per rank: N ranks of batch b step as one process of batch N·b. The epoch's \
    loss and metrics are the job's; rank 0 alone prints and writes --save, --metrics, \
    --profile, --tensorboard and the checkpoints, which every rank reads on --resume (give a \
    directory they all see). Every rank must be started with the same flags: one that was not \
    makes the job refuse before training, naming the flag. The job's size is part of what a \
    --resume must match. A rank that fails ends the job (MPI_Abort); Ctrl-C or SIGTERM ends it \
    at once (not after the batch, as a process alone does): --checkpoint-every bounds what is \
    trained again on --resume. Without mpirun, a job of one.";

/// The engine that joins the ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Distributed {
    /// MPI (Open MPI): `mpirun -np N ember train --distributed mpi …`.
    Mpi,
}

impl Distributed {
    /// Joins the job this process is a rank of.
    pub fn start(self) -> anyhow::Result<Job> {
        match self {
            Distributed::Mpi => Job::mpi(),
        }
    }
}

/// Ends `job` after this rank's `result`: where it failed in a job of several ranks, its error
/// is printed, then every rank is ended ([`Job::end_failed`]) rather than left waiting for it
/// in a collective. A job of one returns `result`, as a process alone.
pub fn end(job: &Job, result: anyhow::Result<()>) -> anyhow::Result<()> {
    match result {
        Err(error) if job.collective().size() > 1 => {
            let _ = super::exit_status(Err(error));
            job.end_failed()
        }
        result => result,
    }
}
