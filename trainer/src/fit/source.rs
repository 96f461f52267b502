//! Where a run's batches come from: any [`BatchSource`], epoch by epoch.

use ember::Result;
use ember_datasets::{Batch, Synthetic};

/// Host batches, epoch by epoch.
pub trait BatchSource {
    /// The batches of epoch `epoch`, in the order they are to be issued.
    fn batches(&mut self, epoch: usize) -> Box<dyn Iterator<Item = Result<Batch>> + '_>;

    /// The batches of epoch `epoch` from batch `first` on, for a run that resumes inside an
    /// epoch. By default the earlier ones are made and passed over.
    fn batches_from(
        &mut self,
        epoch: usize,
        first: usize,
    ) -> Box<dyn Iterator<Item = Result<Batch>> + '_> {
        Box::new(self.batches(epoch).skip(first))
    }

    /// How many batches each epoch has, where the source can tell without making them: a
    /// learning-rate schedule over the whole run needs it.
    fn batches_per_epoch(&self) -> Option<usize> {
        None
    }
}

/// The chapter's seeded synthetic data, `batches` per epoch; each epoch gets new batches.
#[derive(Debug, Clone)]
pub struct SyntheticEpochs {
    data: Synthetic,
    batches: usize,
    /// This process's share: `(rank, ranks)`.
    shard: (usize, usize),
}

impl SyntheticEpochs {
    /// `batches` batches per epoch from `data`.
    pub fn new(data: Synthetic, batches: usize) -> Self {
        Self {
            data,
            batches,
            shard: (0, 1),
        }
    }

    /// Rank `rank`'s share of a job of `ranks`: each rank draws its own `batches` batches per
    /// epoch, batch `i` of epoch `e` being the data's batch `(e × batches + i) × ranks + rank`,
    /// so that no two ranks train on the same batch, and a job of one is the process alone.
    pub fn shard(mut self, rank: usize, ranks: usize) -> Self {
        self.shard = (rank, ranks.max(1));
        self
    }
}

impl BatchSource for SyntheticEpochs {
    fn batches(&mut self, epoch: usize) -> Box<dyn Iterator<Item = Result<Batch>> + '_> {
        self.batches_from(epoch, 0)
    }

    fn batches_from(
        &mut self,
        epoch: usize,
        first: usize,
    ) -> Box<dyn Iterator<Item = Result<Batch>> + '_> {
        let start = (epoch * self.batches) as u64;
        let (rank, ranks) = (self.shard.0 as u64, self.shard.1 as u64);
        Box::new(
            (first.min(self.batches) as u64..self.batches as u64)
                .map(move |i| Ok(self.data.batch((start + i) * ranks + rank))),
        )
    }

    fn batches_per_epoch(&self) -> Option<usize> {
        Some(self.batches)
    }
}

impl BatchSource for ember_datasets::DataLoader {
    fn batches(&mut self, epoch: usize) -> Box<dyn Iterator<Item = Result<Batch>> + '_> {
        Box::new(self.epoch(epoch).map(Ok))
    }

    fn batches_from(
        &mut self,
        epoch: usize,
        first: usize,
    ) -> Box<dyn Iterator<Item = Result<Batch>> + '_> {
        Box::new(self.epoch_from(epoch, first).map(Ok))
    }

    fn batches_per_epoch(&self) -> Option<usize> {
        Some(self.num_batches())
    }
}

/// A language model's subsequences: new ones each epoch, from the seed and the epoch.
impl BatchSource for ember_datasets::text::Subsequences {
    fn batches(&mut self, epoch: usize) -> Box<dyn Iterator<Item = Result<Batch>> + '_> {
        Box::new(self.epoch(epoch as u64).into_iter().map(Ok))
    }
}
