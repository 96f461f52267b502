//! `ember train --distributed mpi`: this process is one rank of a job that `mpirun` started,
//! as PyTorch's DDP and Horovod run (see [`ember::parallel::mpi`] and
//! [`ember_trainer::fit::Fit::distributed`]).

use std::collections::BTreeMap;

use clap::ValueEnum;
use ember::DeviceName;
use ember::device::DeviceSpec;
use ember::parallel::mpi::{Collective, Mpi};
use ember_trainer::checkpoint::{Checkpoint, Checkpointing};

use super::workload::Workload;

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

/// This process's place in the job: MPI, started until this is dropped.
pub struct Job {
    _mpi: Mpi,
    collective: Collective,
}

/// How long a failed rank other than 0 waits before it ends the job ([`Job::end`]): for rank
/// 0 to write what it recorded, where it failed too.
const WRITING: std::time::Duration = std::time::Duration::from_secs(10);

impl Job {
    /// Starts MPI and joins the job.
    pub fn start(kind: Distributed) -> anyhow::Result<Self> {
        match kind {
            Distributed::Mpi => {
                let mpi = Mpi::init()?;
                let collective = mpi.collective();
                Ok(Self {
                    _mpi: mpi,
                    collective,
                })
            }
        }
    }

    /// This process's rank, from 0.
    pub fn rank(&self) -> usize {
        self.collective.rank()
    }

    /// `workload` as this rank runs it: `--device cuda` without a card's number is
    /// `cuda:LOCAL_RANK`, this rank's place among the ranks on its host, as DDP's ranks take
    /// `cuda:local_rank`. A named card, another device or `--devices` stay as given.
    pub fn rank_device(&self, workload: Workload) -> Workload {
        Workload {
            device: rank_device(workload.device.clone(), self.collective.local_rank()),
            ..workload
        }
    }

    /// The job's collective, for the training loop.
    pub fn collective(&self) -> Collective {
        self.collective.clone()
    }

    /// Ends the job after this rank's `result`, where it failed and other ranks may wait for
    /// it in a collective: its error is printed, then `MPI_Abort` ends every rank, as `mpirun`
    /// ends the job when a rank dies, rather than leaving them waiting. A rank other than 0
    /// gives rank 0 [`WRITING`] first: where the job failed as a whole (a loss that diverged,
    /// which every rank sees), rank 0 writes what it recorded and then ends the job itself; an
    /// abort at once killed it half way through (`--metrics`' epochs file was lost in 2 of 3
    /// such jobs, hostile pass).
    pub fn end(&self, result: anyhow::Result<()>) -> anyhow::Result<()> {
        if result.is_err() && self.collective.size() > 1 {
            let _ = super::exit_status(result);
            if self.collective.rank() != 0 {
                std::thread::sleep(WRITING);
            }
            self.collective.abort(1);
        }
        result
    }

    /// Before any step, that every rank was started alike: `description` (what a resume must
    /// match), and what decides where the collectives fall: the run's `epochs`, the `batches`
    /// of each, the checkpoints' interval, and the checkpoint a resume goes on from (its step
    /// and its files' checksums). A rank started otherwise would train another model, or wait
    /// in a collective the others never call.
    pub fn agree(
        &self,
        description: &BTreeMap<String, String>,
        epochs: usize,
        batches: usize,
        checkpoint: &Option<Checkpointing>,
        resume: &Option<Checkpoint>,
    ) -> anyhow::Result<()> {
        let mut settings = description.clone();
        // The directory as given too: rank 0 alone writes there, so another rank's was
        // dropped in silence.
        let every = checkpoint.as_ref().map(|c| match c.every {
            Some(every) => format!(
                "{} every {every} batches (--checkpoint-every)",
                c.dir.display()
            ),
            None => format!("{} every epoch", c.dir.display()),
        });
        // The step, and the checkpoint's files by their checksums: two checkpoints of one
        // step from other runs would give the ranks other parameters.
        let resumed = resume.as_ref().map(|c| {
            let sums: Vec<String> = c
                .position
                .checksums
                .iter()
                .map(|(file, sum)| format!("{file} {sum:08x}"))
                .collect();
            format!("step {} ({})", c.position.steps, sums.join(", "))
        });
        settings.extend([
            ("--epochs".to_string(), epochs.to_string()),
            ("batches per epoch".to_string(), batches.to_string()),
            ("--checkpoint".to_string(), every.unwrap_or("none".into())),
            (
                "the checkpoint resumed".to_string(),
                resumed.unwrap_or("none".into()),
            ),
        ]);
        Ok(self.collective.agree(&settings)?)
    }

    /// The job's size, as `--resume` records it: `mpi:N`.
    pub fn describe(&self) -> String {
        format!("mpi:{}", self.collective.size())
    }
}

/// `spec` for the rank at `local_rank` on its host: `cuda` is `cuda:local_rank`.
fn rank_device(spec: DeviceSpec, local_rank: usize) -> DeviceSpec {
    match (spec.name, spec.index) {
        (DeviceName::Cuda, None) => DeviceSpec {
            index: Some(local_rank),
            ..spec
        },
        _ => spec,
    }
}

/// This process's rank and the job's size where an MPI launcher started it as one rank of
/// several: Open MPI's `OMPI_COMM_WORLD_RANK`/`_SIZE`, or the PMI variables of MPICH and Slurm.
pub fn launched() -> Option<(usize, usize)> {
    let read = |name: &str| std::env::var(name).ok()?.trim().parse::<usize>().ok();
    [
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
        ("PMI_RANK", "PMI_SIZE"),
        ("PMIX_RANK", "PMIX_SIZE"),
    ]
    .into_iter()
    .find_map(|(rank, size)| Some((read(rank)?, read(size)?)))
    .filter(|&(_, size)| size > 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rank_takes_the_card_of_its_local_rank_unless_one_is_named() {
        // Specs built here, not parsed: a build without `cuda` refuses to parse `cuda`.
        let spec = |name, index| DeviceSpec {
            name,
            index,
            address: None,
        };
        let on = |name, index, local_rank| rank_device(spec(name, index), local_rank);
        assert_eq!(
            on(DeviceName::Cuda, None, 0),
            spec(DeviceName::Cuda, Some(0))
        );
        assert_eq!(
            on(DeviceName::Cuda, None, 3),
            spec(DeviceName::Cuda, Some(3))
        );
        assert_eq!(
            on(DeviceName::Cuda, Some(1), 3),
            spec(DeviceName::Cuda, Some(1))
        );
        assert_eq!(on(DeviceName::Flex, None, 3), spec(DeviceName::Flex, None));
        assert_eq!(on(DeviceName::Wgpu, None, 1), spec(DeviceName::Wgpu, None));
    }
}
