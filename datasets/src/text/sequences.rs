//! A corpus of token indices cut into minibatches of subsequences for a language model, d2l's
//! `seq_data_iter_random` and `seq_data_iter_sequential`: each batch's inputs `X` are
//! `[batch, steps]` indices and its targets `Y` the same shifted by one token.
//!
//! Under [`Partition::Sequential`], row `r` of batch `t + 1` goes on where row `r` of batch `t`
//! stopped, so a recurrent network may carry its state from one batch into the next (detached);
//! under [`Partition::Random`], subsequences are drawn in a random order and no state carries.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};

use crate::batch::Batch;
use crate::error::{DatasetError, Result};

/// How a corpus is cut into batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partition {
    /// d2l's random sampling: subsequences from a random offset, in a random order.
    Random,
    /// d2l's sequential partitioning: the corpus split into `batch` rows read side by side.
    Sequential,
}

/// A corpus's minibatches of subsequences, new ones each epoch from the seed.
///
/// ```
/// use ember_datasets::text::{Partition, Subsequences};
/// let corpus: Vec<usize> = (0..35).collect();
/// let data = Subsequences::new(corpus, 2, 5, Partition::Sequential, 0).unwrap();
/// let batches = data.epoch(0);
/// // Row 0 of the second batch goes on where row 0 of the first stopped.
/// assert_eq!(batches[1].x[0], batches[0].x[4] + 1.0);
/// assert_eq!(batches[0].y[0], batches[0].x[0] + 1.0); // the next token
/// ```
#[derive(Debug, Clone)]
pub struct Subsequences {
    corpus: Vec<usize>,
    batch: usize,
    steps: usize,
    partition: Partition,
    seed: u64,
    /// The first token's offset every epoch, where fixed; drawn from the seed otherwise.
    offset: Option<usize>,
}

impl Subsequences {
    /// `batch` subsequences of `steps` tokens per minibatch.
    ///
    /// # Errors
    /// [`DatasetError::InvalidValue`] naming a `batch` or `steps` of 0, or a corpus too short
    /// for one minibatch.
    pub fn new(
        corpus: Vec<usize>,
        batch: usize,
        steps: usize,
        partition: Partition,
        seed: u64,
    ) -> Result<Self> {
        let invalid = |name, value: String, reason: String| {
            Err(DatasetError::InvalidValue {
                name,
                value,
                reason,
            })
        };
        for (name, value) in [("batch size", batch), ("steps", steps)] {
            if value == 0 {
                return invalid(name, "0".into(), "subsequences need 1 or more".into());
            }
        }
        // What one batch needs from the largest offset: a random one is below `steps`, a
        // sequential one up to it.
        let extra = match partition {
            Partition::Random => 0,
            Partition::Sequential => 1,
        };
        let least = batch
            .checked_mul(steps)
            .and_then(|n| n.checked_add(steps)?.checked_add(extra));
        if least.is_none_or(|least| corpus.len() < least) {
            let least = least.map_or("more than this machine counts".to_string(), |n| {
                format!("{n} tokens or more")
            });
            return invalid(
                "corpus",
                format!("of {} tokens", corpus.len()),
                format!("a batch of {batch} subsequences of {steps} tokens takes {least}"),
            );
        }
        Ok(Self {
            corpus,
            batch,
            steps,
            partition,
            seed,
            offset: None,
        })
    }

    /// Starts every epoch at token `offset` instead of at one drawn from the seed and the
    /// epoch, as d2l draws it (below `steps` for random sampling, up to `steps` for sequential
    /// partitioning, the ranges d2l draws from): epochs then differ only in the order random
    /// sampling shuffles. For a peer that must see the same batches as ember.
    ///
    /// # Errors
    /// [`DatasetError::InvalidValue`] naming an offset past that range.
    pub fn offset(mut self, offset: usize) -> Result<Self> {
        let most = match self.partition {
            Partition::Random => self.steps - 1,
            Partition::Sequential => self.steps,
        };
        if offset > most {
            return Err(DatasetError::InvalidValue {
                name: "offset",
                value: offset.to_string(),
                reason: format!(
                    "at most {most} under {:?} partitioning of subsequences of {} steps",
                    self.partition, self.steps
                ),
            });
        }
        self.offset = Some(offset);
        Ok(self)
    }

    /// The minibatches of `epoch`: `x` holds `[batch, steps]` token indices (as floats, as an
    /// [`Embedding`](ember::Embedding) takes them), `y` the tokens that follow each.
    pub fn epoch(&self, epoch: u64) -> Vec<Batch> {
        // Seed and epoch mixed, so that no (seed, epoch) draws another's order.
        let mut rng = StdRng::seed_from_u64(self.seed ^ epoch.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let (corpus, batch, steps) = (&self.corpus, self.batch, self.steps);
        // Rows of `batch` starts, one batch each.
        let starts: Vec<Vec<usize>> = match self.partition {
            Partition::Random => {
                let drawn = rng.random_range(0..steps);
                let offset = self.offset.unwrap_or(drawn);
                let count = (corpus.len() - offset - 1) / steps;
                let mut starts: Vec<usize> = (0..count).map(|i| offset + i * steps).collect();
                starts.shuffle(&mut rng);
                starts.chunks_exact(batch).map(<[usize]>::to_vec).collect()
            }
            Partition::Sequential => {
                let drawn = rng.random_range(0..=steps);
                let offset = self.offset.unwrap_or(drawn);
                let row = (corpus.len() - offset - 1) / batch;
                (0..row / steps)
                    .map(|b| (0..batch).map(|r| offset + r * row + b * steps).collect())
                    .collect()
            }
        };
        starts
            .into_iter()
            .map(|rows| {
                let take = |shift: usize| -> Vec<f32> {
                    rows.iter()
                        .flat_map(|&s| corpus[s + shift..s + shift + steps].iter())
                        .map(|&t| t as f32)
                        .collect()
                };
                Batch {
                    x: take(0),
                    x_shape: vec![batch, steps],
                    y: take(1),
                    y_shape: [batch, steps],
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each batch's rows, as token numbers.
    fn rows(batch: &Batch, of: &[f32]) -> Vec<Vec<usize>> {
        of.chunks(batch.x_shape[1])
            .map(|r| r.iter().map(|&t| t as usize).collect())
            .collect()
    }

    #[test]
    fn sequential_rows_go_on_from_one_batch_to_the_next_and_targets_are_the_next_tokens() {
        let corpus: Vec<usize> = (0..1000).collect();
        for seed in 0..20 {
            let data =
                Subsequences::new(corpus.clone(), 3, 7, Partition::Sequential, seed).unwrap();
            let batches = data.epoch(0);
            let offset = batches[0].x[0] as usize;
            assert!(offset <= 7, "offset {offset}");
            // d2l: (1000 - offset - 1) // 3 tokens a row, as many whole batches as fit.
            assert_eq!(batches.len(), (999 - offset) / 3 / 7, "seed {seed}");
            for (t, batch) in batches.iter().enumerate() {
                let (x, y) = (rows(batch, &batch.x), rows(batch, &batch.y));
                for r in 0..3 {
                    assert!(x[r].windows(2).all(|w| w[1] == w[0] + 1), "{x:?}");
                    assert!(x[r].iter().zip(&y[r]).all(|(a, b)| *b == a + 1), "{y:?}");
                    if t > 0 {
                        let before = rows(&batches[t - 1], &batches[t - 1].x);
                        assert_eq!(x[r][0], before[r][6] + 1, "seed {seed}, batch {t}, row {r}");
                    }
                }
            }
        }
    }

    #[test]
    fn random_subsequences_are_disjoint_in_a_seeded_order_new_each_epoch() {
        let corpus: Vec<usize> = (0..500).collect();
        let data = Subsequences::new(corpus, 4, 6, Partition::Random, 3).unwrap();
        let epoch = data.epoch(0);
        assert_eq!(
            epoch,
            data.epoch(0),
            "the same seed and epoch, the same batches"
        );
        assert_ne!(epoch, data.epoch(1), "a new order each epoch");
        let mut starts: Vec<usize> = Vec::new();
        for batch in &epoch {
            for (x, y) in rows(batch, &batch.x).iter().zip(rows(batch, &batch.y)) {
                assert!(x.windows(2).all(|w| w[1] == w[0] + 1), "{x:?}");
                assert!(x.iter().zip(&y).all(|(a, b)| *b == a + 1), "{y:?}");
                starts.push(x[0]);
            }
        }
        let offset = starts.iter().min().unwrap() % 6;
        assert!(starts.iter().all(|s| s % 6 == offset), "{starts:?}");
        let count = starts.len();
        starts.sort();
        starts.dedup();
        assert_eq!(starts.len(), count, "a subsequence drawn twice");
        // d2l: (500 - offset - 1) // 6 subsequences, whole batches of 4 of them.
        assert_eq!(count, (499 - offset) / 6 / 4 * 4);
        // Drawn in a random order, not read along the corpus.
        let firsts: Vec<f32> = epoch.iter().map(|b| b.x[0]).collect();
        assert!(!firsts.windows(2).all(|w| w[0] < w[1]), "{firsts:?}");
    }

    #[test]
    fn a_fixed_offset_makes_every_epoch_of_sequential_partitioning_alike() {
        let corpus: Vec<usize> = (0..200).collect();
        let data = Subsequences::new(corpus, 3, 5, Partition::Sequential, 9).unwrap();
        let drawn: Vec<f32> = (0..8).map(|e| data.epoch(e)[0].x[0]).collect();
        assert!(drawn.windows(2).any(|w| w[0] != w[1]), "{drawn:?}");
        let fixed = data.offset(4).unwrap();
        assert_eq!(fixed.epoch(0)[0].x[0], 4.0);
        assert_eq!(fixed.epoch(0), fixed.epoch(7));
        let err = fixed.offset(6).unwrap_err().to_string();
        assert!(err.contains("offset 6") && err.contains("5 steps"), "{err}");
        // Random sampling from offset `steps` would leave the smallest corpus no batch.
        let corpus: Vec<usize> = (0..24).collect();
        let random = Subsequences::new(corpus, 2, 8, Partition::Random, 0).unwrap();
        assert!(random.clone().offset(8).is_err());
        assert!(!random.offset(7).unwrap().epoch(0).is_empty());
    }

    #[test]
    fn sizes_that_cannot_make_a_batch_are_named() {
        let corpus: Vec<usize> = (0..30).collect();
        let err = |batch, steps| {
            Subsequences::new(corpus.clone(), batch, steps, Partition::Random, 0)
                .unwrap_err()
                .to_string()
        };
        assert!(err(0, 5).contains("batch size 0"), "{}", err(0, 5));
        assert!(err(2, 0).contains("steps 0"), "{}", err(2, 0));
        let short = err(4, 7);
        assert!(
            short.contains("of 30 tokens") && short.contains("35 tokens or more"),
            "{short}"
        );
        // Random sampling needs b·s + s tokens, sequential partitioning one more (d2l's
        // offsets run to s − 1 and to s).
        let made = |n: usize, partition, seed| {
            Subsequences::new(corpus[..n].to_vec(), 4, 5, partition, seed)
        };
        assert!(made(24, Partition::Random, 0).is_err() && made(25, Partition::Random, 0).is_ok());
        let sequential = Partition::Sequential;
        assert!(made(25, sequential, 0).is_err() && made(26, sequential, 0).is_ok());
        for seed in 0..50 {
            for (partition, n) in [(Partition::Random, 25), (sequential, 26)] {
                let batches = made(n, partition, seed).unwrap().epoch(0);
                assert!(!batches.is_empty(), "{partition:?}, seed {seed}");
            }
        }
        let huge = Subsequences::new(corpus, usize::MAX, 2, Partition::Random, 0).unwrap_err();
        assert!(
            huge.to_string().contains("more than this machine counts"),
            "{huge}"
        );
    }
}
