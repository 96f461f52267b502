//! Where and how a run's steps compute: the replicas each batch is split across, the job of
//! ranks whose gradients each update sums, and the precision of the forward passes' products.

use ember::{Block, Loss, Precision, Replicas};

use super::Fit;
use crate::target::Target;

impl<B, L> Fit<'_, B, L>
where
    B: Block + 'static,
    L: Loss + Send + Sync + 'static,
    L::Target: Target,
{
    /// Data parallelism over `replicas` (see [`ember::parallel`]): each step splits its
    /// batch across the devices, and the policy bounds the steps in flight across all of them.
    /// They replace the device given to [`Fit::new`]; the network must live on the first
    /// one, the main device. Every batch needs at least one example per device.
    ///
    /// ```
    /// use burn::prelude::*;
    /// use ember::{Block, Dense, Init, L2Loss, Replicas, Sequential, Optimizer};
    /// use ember_datasets::Synthetic;
    /// use ember_trainer::fit::{Fit, SyntheticEpochs};
    ///
    /// let device = Device::flex().autodiff();
    /// let net: Sequential = Sequential::new().add(Dense::new(1)).initialize(Init::default(), &device);
    /// let optimizer = Optimizer::new(&net, "sgd", 0.01).unwrap();
    /// let replicas = Replicas::new(vec![device.clone(), device.clone()]).unwrap();
    /// let mut data = SyntheticEpochs::new(Synthetic::chapter(8, 4, 0), 3);
    /// let run = Fit::new(net, L2Loss, optimizer, &device)
    ///     .replicas(replicas)
    ///     .run(&mut data)
    ///     .unwrap();
    /// // Each batch records when each of the two devices finished its half.
    /// assert!(run.trace.batches.iter().all(|b| b.device_done.len() == 2));
    /// ```
    pub fn replicas(mut self, replicas: Replicas) -> Self {
        self.replicas = replicas;
        self
    }

    /// Mixed precision, PyTorch's `torch.autocast`: each step's forward pass runs under
    /// [`ember::autocast`]`(precision)`, so that with [`Precision::Bf16`] Dense's and the
    /// convolutions' products are in bf16 ([`ember::precision`]). The parameters (the master
    /// weights), their gradients, the optimizer's state, the loss and the training metrics
    /// stay in f32; so do the evaluations ([`Fit::evaluate`]) and the parameter files. Every
    /// replica's device must have the precision's arithmetic ([`Precision::check`]): burn's
    /// wgpu has no bf16.
    ///
    /// ```
    /// use burn::prelude::*;
    /// use ember::{Block, Dense, Init, L2Loss, Precision, Sequential, Optimizer};
    /// use ember_datasets::Synthetic;
    /// use ember_trainer::fit::{Fit, SyntheticEpochs};
    ///
    /// let device = Device::flex().autodiff();
    /// let net: Sequential = Sequential::new().add(Dense::new(1)).initialize(Init::default(), &device);
    /// let optimizer = Optimizer::new(&net, "sgd", 0.01).unwrap();
    /// let mut data = SyntheticEpochs::new(Synthetic::chapter(8, 4, 0), 3);
    /// let run = Fit::new(net, L2Loss, optimizer, &device)
    ///     .precision(Precision::Bf16)
    ///     .run(&mut data)
    ///     .unwrap();
    /// assert_eq!(run.trace.batches.len(), 3);
    /// ```
    pub fn precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self
    }

    /// Trains as one rank of `collective`'s job (`mpirun -np N`), as PyTorch's DDP does: the
    /// data given to [`Fit::run`] is this rank's share (`DataLoader::shard`), each update sums
    /// the gradients over the ranks and divides by all their examples, so that N ranks of
    /// batch b step as one process of batch N·b, and every rank steps alike. The epoch's mean
    /// loss and training metrics are the job's. Rank 0 alone writes checkpoints (every rank
    /// takes part in reading the metrics' sums for them); a resumed job reads them on every
    /// rank, from a directory they all see. Every rank must make the same calls to the same
    /// collectives: the same settings, and no stop that one rank could take alone (a
    /// callback's stop at a batch's end, [`crate::signals`]: `ember train` installs no signal
    /// handler in a job). Epoch-end decisions are safe: every rank takes rank 0's metrics.
    pub fn distributed(mut self, collective: ember::parallel::mpi::Collective) -> Self {
        self.distributed = Some(collective);
        self
    }
}
