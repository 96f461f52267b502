//! A run as one rank of a job that `mpirun` started (`ember train --distributed mpi`), as
//! PyTorch's DDP and Horovod run (see [`ember::parallel::mpi`] and
//! [`crate::fit::Fit::distributed`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::checkpoint::{Checkpoint, Checkpointing};
use ember::DeviceName;
use ember::device::DeviceSpec;
use ember::parallel::mpi::{Collective, Mpi, NOT_GIVEN};

use super::loss_name::LossName;
use super::workload::Workload;
use crate::policy::PolicyKind;

/// This process's place in the job: MPI, started until this is dropped.
pub struct Job {
    _mpi: Mpi,
    collective: Collective,
}

/// How long a failed rank other than 0 waits before it ends the job ([`Job::end_failed`]): for rank
/// 0 to write what it recorded, where it failed too.
const WRITING: std::time::Duration = std::time::Duration::from_secs(10);

impl Job {
    /// Starts MPI and joins the job that `mpirun` started (a job of one without it).
    ///
    /// # Errors
    /// MPI that cannot start, or a build without it.
    pub fn mpi() -> anyhow::Result<Self> {
        let mpi = Mpi::init()?;
        let collective = mpi.collective();
        Ok(Self {
            _mpi: mpi,
            collective,
        })
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

    /// Ends every rank of the job (`MPI_Abort`), as `mpirun` ends the job when a rank dies,
    /// rather than leaving the others waiting in a collective for this one, which failed (its
    /// error printed first). A rank other than 0 gives rank 0 [`WRITING`] first: where the job
    /// failed as a whole (a loss that diverged, which every rank sees), rank 0 writes what it
    /// recorded and then ends the job itself; an abort at once killed it half way through
    /// (`--metrics`' epochs file was lost in 2 of 3 such jobs, hostile pass).
    pub fn end_failed(&self) -> ! {
        if self.collective.rank() != 0 {
            std::thread::sleep(WRITING);
        }
        self.collective.abort(1)
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
            (
                "--checkpoint".to_string(),
                every.unwrap_or(NOT_GIVEN.into()),
            ),
            (
                "the checkpoint resumed".to_string(),
                resumed.unwrap_or(NOT_GIVEN.into()),
            ),
        ]);
        Ok(self.collective.agree(&settings)?)
    }

    /// The job's size, as `--resume` records it: `mpi:N`.
    pub fn describe(&self) -> String {
        format!("mpi:{}", self.collective.size())
    }
}

/// What the ranks of a job must be started with alike, besides what a resume must match: the
/// outputs as given (rank 0 writes them, and another rank's would be dropped in silence), the
/// parameters `--load` starts from, by content (a rank that loaded others, or none, trained
/// another network in silence, hostile pass), the classes and the loss (they failed only after
/// training began, as networks of other sizes), and the sync policy. The CPU's kernels, which
/// change a rank's arithmetic, are in the run's description, which a resume compares too.
pub fn alike(
    outputs: [(&str, &Option<PathBuf>); 5],
    load: &Option<PathBuf>,
    classes: Option<usize>,
    loss: LossName,
    sync: &PolicyKind,
) -> BTreeMap<String, String> {
    // `./x.st` is `x.st` (they were refused as two files, hostile pass); nothing is resolved
    // on disk, as another host's rank would resolve it in its own directories.
    let path = |p: &Option<PathBuf>| {
        p.as_ref().map_or(NOT_GIVEN.to_string(), |p| {
            let plain: PathBuf = p
                .components()
                .filter(|c| *c != std::path::Component::CurDir)
                .collect();
            plain.display().to_string()
        })
    };
    let mut alike: BTreeMap<String, String> = outputs
        .into_iter()
        .map(|(flag, given)| (flag.to_string(), path(given)))
        .collect();
    alike.extend([
        ("--load".to_string(), loaded(load)),
        (
            "--classes".to_string(),
            classes.map_or(NOT_GIVEN.to_string(), |c| c.to_string()),
        ),
        ("--loss".to_string(), loss.to_string()),
        ("--sync".to_string(), sync.to_string()),
    ]);
    alike
}

/// `--load`'s file by its content, for the ranks to compare: each rank reads its own (another
/// host's path may name another copy).
fn loaded(load: &Option<PathBuf>) -> String {
    match load {
        None => NOT_GIVEN.to_string(),
        Some(path) => format!(
            "a file of {}",
            super::data_content::of(std::slice::from_ref(path))
        ),
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
