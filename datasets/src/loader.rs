//! `DataLoader`: minibatches of in-memory examples, with a seeded shuffle, `drop_last`, and a
//! background thread that prepares up to `prefetch` host batches ahead of the training loop.
//!
//! ```
//! use ember_datasets::{DataLoader, Examples};
//! let data = Examples::regression((0..20).map(|v| v as f32).collect(), 2, vec![0.0; 10], 1).unwrap();
//! let loader = DataLoader::new(data, 4).unwrap().shuffle(7).drop_last(true).prefetch(2);
//! assert_eq!(loader.num_batches(), 2);
//! let batches: Vec<_> = loader.epoch(0).collect();
//! assert_eq!(batches.len(), 2);
//! assert_eq!(batches[0].x_shape, [4, 2]);
//! ```

use std::sync::Arc;
use std::sync::mpsc;

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

use crate::batch::Batch;
use crate::error::{DatasetError, Result};
use crate::examples::Examples;

/// Minibatches of a set of examples, epoch by epoch.
#[derive(Debug, Clone)]
pub struct DataLoader {
    data: Arc<Examples>,
    batch_size: usize,
    shuffle: Option<u64>,
    drop_last: bool,
    prefetch: usize,
    /// This process's share of each epoch: `(rank, ranks)`.
    shard: (usize, usize),
}

impl DataLoader {
    /// Batches of `batch_size` in order, the last one possibly smaller, no prefetch.
    pub fn new(data: Examples, batch_size: usize) -> Result<Self> {
        check_batch_size(batch_size)?;
        Ok(Self {
            data: Arc::new(data),
            batch_size,
            shuffle: None,
            drop_last: false,
            prefetch: 0,
            shard: (0, 1),
        })
    }

    /// Takes only rank `rank`'s share of each epoch out of `ranks` (PyTorch's
    /// `DistributedSampler` with `drop_last=True`): the epoch's order (shuffled alike on every
    /// rank, by the same seed) loses its last `len % ranks` examples, and rank `r` takes every
    /// `ranks`-th from the `r`-th on. The shares are equal and disjoint; batch `k` of every
    /// rank together are batch `k` of one process with a batch `ranks` times larger.
    ///
    /// # Errors
    /// A rank not below `ranks`, or fewer examples than ranks.
    pub fn shard(mut self, rank: usize, ranks: usize) -> Result<Self> {
        if rank >= ranks {
            return Err(DatasetError::InvalidValue {
                name: "shard",
                value: format!("rank {rank} of {ranks}"),
                reason: format!(
                    "a job of {ranks} ranks numbers them from 0 to {}",
                    ranks - 1
                ),
            });
        }
        if self.data.len() < ranks {
            let len = self.data.len();
            return Err(DatasetError::InvalidValue {
                name: "data",
                value: format!("of {len} example{}", if len == 1 { "" } else { "s" }),
                reason: format!(
                    "{len} cannot be split across {ranks} ranks, which need one example each \
                     at least"
                ),
            });
        }
        self.shard = (rank, ranks);
        Ok(self)
    }

    /// Shuffles the examples every epoch; the same seed and epoch give the same order.
    pub fn shuffle(mut self, seed: u64) -> Self {
        self.shuffle = Some(seed);
        self
    }

    /// Drops the last batch when it would be smaller than the others.
    pub fn drop_last(mut self, drop_last: bool) -> Self {
        self.drop_last = drop_last;
        self
    }

    /// Prepares up to `depth` batches ahead on a background thread (0: prepare on demand).
    pub fn prefetch(mut self, depth: usize) -> Self {
        self.prefetch = depth;
        self
    }

    /// A loader over the same examples (shared, not copied) in order, with another batch size:
    /// for evaluation passes.
    pub fn rebatched(&self, batch_size: usize) -> Result<Self> {
        check_batch_size(batch_size)?;
        Ok(Self {
            data: self.data.clone(),
            batch_size,
            shuffle: None,
            drop_last: false,
            prefetch: 0,
            shard: (0, 1),
        })
    }

    /// The examples.
    pub fn examples(&self) -> &Examples {
        &self.data
    }

    /// Batches per epoch.
    pub fn num_batches(&self) -> usize {
        let n = self.data.len() / self.shard.1;
        if self.drop_last {
            n / self.batch_size
        } else {
            n.div_ceil(self.batch_size)
        }
    }

    /// The order in which epoch `epoch` visits the examples.
    pub fn order(&self, epoch: usize) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.data.len()).collect();
        if let Some(seed) = self.shuffle {
            let mut rng = StdRng::seed_from_u64(
                seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)
                    .wrapping_add(epoch as u64),
            );
            order.shuffle(&mut rng);
        }
        let (rank, ranks) = self.shard;
        if ranks > 1 {
            let kept = order.len() - order.len() % ranks;
            order = order[..kept]
                .iter()
                .skip(rank)
                .step_by(ranks)
                .copied()
                .collect();
        }
        order
    }

    /// The batches of epoch `epoch`. With a prefetch depth, a background thread prepares them;
    /// dropping the iterator stops that thread. Where the system cannot start one (out of
    /// threads or memory), the same batches are prepared on demand instead.
    pub fn epoch(&self, epoch: usize) -> Box<dyn Iterator<Item = Batch> + Send> {
        self.epoch_from(epoch, 0)
    }

    /// The batches of epoch `epoch` from batch `first` on, as [`DataLoader::epoch`] gives
    /// them; the earlier ones are not made.
    pub fn epoch_from(&self, epoch: usize, first: usize) -> Box<dyn Iterator<Item = Batch> + Send> {
        let batches = self.num_batches();
        let first = first.min(batches);
        if self.prefetch > 0 {
            let (tx, rx) = mpsc::sync_channel(self.prefetch);
            let make = self.maker(epoch);
            let spawned = spawn_prefetch(move || {
                for b in first..batches {
                    if tx.send(make(b)).is_err() {
                        break;
                    }
                }
            });
            if spawned.is_ok() {
                // `take` lets the iterator report its end (size_hint) before blocking on the
                // channel.
                return Box::new(rx.into_iter().take(batches - first));
            }
        }
        Box::new((first..batches).map(self.maker(epoch)))
    }

    /// Makes batch `b` of epoch `epoch`.
    fn maker(&self, epoch: usize) -> impl Fn(usize) -> Batch + Send + 'static {
        let order = self.order(epoch);
        let (data, size) = (self.data.clone(), self.batch_size);
        move |b: usize| {
            let end = ((b + 1) * size).min(order.len());
            data.batch(&order[b * size..end])
        }
    }
}

/// Starts the prefetch thread. Tests make it fail as the system would when out of threads.
fn spawn_prefetch(work: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    #[cfg(test)]
    if tests::NO_THREADS.get() {
        return Err(std::io::Error::from(std::io::ErrorKind::OutOfMemory));
    }
    std::thread::Builder::new()
        .name("ember-prefetch".into())
        .spawn(work)
        .map(drop)
}

fn check_batch_size(batch_size: usize) -> Result<()> {
    if batch_size == 0 {
        return Err(DatasetError::InvalidValue {
            name: "batch size",
            value: "0".to_string(),
            reason: "a batch needs at least one example".to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbered(n: usize) -> Examples {
        Examples::regression(
            (0..n).map(|v| v as f32).collect(),
            1,
            (0..n).map(|v| v as f32).collect(),
            1,
        )
        .unwrap()
    }

    fn seen(loader: &DataLoader, epoch: usize) -> Vec<Vec<f32>> {
        loader.epoch(epoch).map(|b| b.x).collect()
    }

    #[test]
    fn shards_are_equal_disjoint_and_together_make_the_larger_batches() {
        // 23 examples on 3 ranks: 2 dropped, 7 each; batches of 2 there, of 6 alone.
        for epoch in 0..2 {
            let alone = DataLoader::new(numbered(23), 6).unwrap().shuffle(5);
            let alone = seen(&alone, epoch);
            let ranks: Vec<Vec<Vec<f32>>> = (0..3)
                .map(|r| {
                    let loader = DataLoader::new(numbered(23), 2).unwrap().shuffle(5);
                    let loader = loader.shard(r, 3).unwrap();
                    assert_eq!(loader.num_batches(), 4, "7 examples in batches of 2");
                    seen(&loader, epoch)
                })
                .collect();
            let mut everything: Vec<f32> = ranks.concat().concat();
            assert_eq!(everything.len(), 21, "the last 23 % 3 dropped");
            everything.sort_by(f32::total_cmp);
            everything.dedup();
            assert_eq!(everything.len(), 21, "no example on two ranks");
            for k in 0..3 {
                let mut together: Vec<f32> = ranks.iter().flat_map(|r| r[k].clone()).collect();
                let mut one = alone[k].clone();
                together.sort_by(f32::total_cmp);
                one.sort_by(f32::total_cmp);
                assert_eq!(together, one, "epoch {epoch}, batch {k}");
            }
        }
        assert!(
            DataLoader::new(numbered(5), 2)
                .unwrap()
                .shard(3, 3)
                .is_err()
        );
        assert!(
            DataLoader::new(numbered(2), 2)
                .unwrap()
                .shard(0, 3)
                .is_err()
        );
    }

    #[test]
    fn shuffle_is_a_seeded_permutation_per_epoch() {
        let loader = DataLoader::new(numbered(50), 8).unwrap().shuffle(3);
        let mut all: Vec<f32> = seen(&loader, 0).concat();
        assert_ne!(
            all,
            (0..50).map(|v| v as f32).collect::<Vec<_>>(),
            "shuffled"
        );
        all.sort_by(f32::total_cmp);
        assert_eq!(
            all,
            (0..50).map(|v| v as f32).collect::<Vec<_>>(),
            "a permutation"
        );
        let again = DataLoader::new(numbered(50), 8).unwrap().shuffle(3);
        assert_eq!(seen(&loader, 0), seen(&again, 0), "same seed, same order");
        assert_ne!(seen(&loader, 0), seen(&loader, 1), "a new order each epoch");
        assert_ne!(
            seen(&loader, 0),
            seen(&DataLoader::new(numbered(50), 8).unwrap().shuffle(4), 0)
        );
    }

    #[test]
    fn drop_last_drops_only_the_short_batch() {
        let keep = DataLoader::new(numbered(10), 4).unwrap();
        let sizes: Vec<usize> = keep.epoch(0).map(|b| b.len()).collect();
        assert_eq!(sizes, [4, 4, 2]);
        let drop = keep.clone().drop_last(true);
        let sizes: Vec<usize> = drop.epoch(0).map(|b| b.len()).collect();
        assert_eq!(sizes, [4, 4]);
        assert_eq!(drop.num_batches(), 2);
        assert!(
            DataLoader::new(numbered(3), 0)
                .unwrap_err()
                .to_string()
                .contains("batch size 0")
        );
    }

    thread_local! {
        /// Set on a test's own thread: the prefetch thread cannot start.
        pub(super) static NO_THREADS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    #[test]
    fn without_a_prefetch_thread_the_same_batches_come_on_demand() {
        let ahead = DataLoader::new(numbered(23), 4)
            .unwrap()
            .shuffle(5)
            .prefetch(2);
        let expected: Vec<Batch> = ahead.epoch(1).collect();
        NO_THREADS.set(true);
        let mut batches = ahead.epoch(1);
        NO_THREADS.set(false);
        assert_eq!(batches.size_hint().1, Some(6));
        assert_eq!(batches.by_ref().collect::<Vec<_>>(), expected);
    }

    #[test]
    fn prefetch_changes_when_batches_are_made_not_which() {
        let plain = DataLoader::new(numbered(37), 5).unwrap().shuffle(11);
        for depth in [1, 2, 8] {
            let ahead = plain.clone().prefetch(depth);
            let a: Vec<Batch> = plain.epoch(2).collect();
            let b: Vec<Batch> = ahead.epoch(2).collect();
            assert_eq!(a, b, "prefetch depth {depth}");
        }
        // Both report where the epoch ends, so that the loop asks no policy about a batch
        // that does not exist.
        for loader in [plain.clone(), plain.clone().prefetch(3)] {
            let mut batches = loader.epoch(0);
            assert_eq!(batches.size_hint().1, Some(8));
            batches.by_ref().for_each(drop);
            assert_eq!(batches.size_hint().1, Some(0));
        }
        // Dropping a prefetching iterator early ends its thread instead of blocking it.
        let mut early = plain.prefetch(1).epoch(0);
        assert!(early.next().is_some());
        drop(early);
    }
}
