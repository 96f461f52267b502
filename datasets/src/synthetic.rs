//! Seeded synthetic data: the chapter's `X ~ N(0, 1), y = 1` and a learnable regression.
//!
//! Batch `t` depends only on the seed and `t`, so a run can regenerate any batch, and two
//! policies compared side by side see the same data.

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, Normal, StandardNormal};

use crate::batch::Batch;

/// How targets are made.
#[derive(Debug, Clone, PartialEq)]
enum Target {
    /// y = 1, as in the chapter: nothing to learn beyond a constant.
    Ones,
    /// y = X·w + b + noise, with w and b drawn once from the seed.
    Linear { w: Vec<f32>, b: f32, noise: f32 },
}

/// A seeded generator of minibatches.
#[derive(Debug, Clone, PartialEq)]
pub struct Synthetic {
    batch_size: usize,
    features: usize,
    seed: u64,
    target: Target,
}

impl Synthetic {
    /// The chapter's data: `X ~ N(0, 1)` of `batch_size × features`, `y = 1`.
    pub fn chapter(batch_size: usize, features: usize, seed: u64) -> Self {
        Self {
            batch_size,
            features,
            seed,
            target: Target::Ones,
        }
    }

    /// A learnable regression: `y = X·w + b + ε`, `w ~ N(0, 1/features)`, `b ~ N(0, 1)`,
    /// `ε ~ N(0, noise²)`.
    pub fn regression(batch_size: usize, features: usize, noise: f32, seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x0000_5eed_0f7a_26e7);
        let scale = 1.0 / (features.max(1) as f32).sqrt();
        let w = (0..features)
            .map(|_| {
                let z: f32 = StandardNormal.sample(&mut rng);
                scale * z
            })
            .collect();
        let b: f32 = StandardNormal.sample(&mut rng);
        Self {
            batch_size,
            features,
            seed,
            target: Target::Linear { w, b, noise },
        }
    }

    /// Examples per batch.
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// Features per example.
    pub fn features(&self) -> usize {
        self.features
    }

    /// Bytes of one batch in host memory.
    pub fn batch_bytes(&self) -> usize {
        self.batch_size * (self.features + 1) * std::mem::size_of::<f32>()
    }

    /// Batch number `index`: the same seed and index always give the same batch.
    pub fn batch(&self, index: u64) -> Batch {
        let mut rng = StdRng::seed_from_u64(
            self.seed
                .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                .wrapping_add(index),
        );
        let x: Vec<f32> = (0..self.batch_size * self.features)
            .map(|_| StandardNormal.sample(&mut rng))
            .collect();
        let y = match &self.target {
            Target::Ones => vec![1.0; self.batch_size],
            Target::Linear { w, b, noise } => {
                let noise = Normal::new(0.0, f64::from(*noise)).unwrap_or_else(|_| {
                    Normal::new(0.0, 0.0).expect("zero deviation is a valid normal")
                });
                x.chunks(self.features.max(1))
                    .map(|row| {
                        let dot: f32 = row.iter().zip(w).map(|(a, b)| a * b).sum();
                        dot + b + noise.sample(&mut rng) as f32
                    })
                    .collect()
            }
        };
        Batch {
            x,
            x_shape: vec![self.batch_size, self.features],
            y,
            y_shape: [self.batch_size, 1],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chapter_batches_are_standard_normal_and_differ_by_index() {
        let data = Synthetic::chapter(256, 64, 1);
        let a = data.batch(0);
        let b = data.batch(1);
        assert_ne!(a.x, b.x);
        let n = a.x.len() as f32;
        let mean = a.x.iter().sum::<f32>() / n;
        let var = a.x.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
        assert!(
            mean.abs() < 0.02 && (var - 1.0).abs() < 0.05,
            "mean {mean} var {var}"
        );
        assert_eq!(a.bytes(), data.batch_bytes());
    }

    #[test]
    fn regression_targets_follow_the_hidden_weights() {
        let data = Synthetic::regression(64, 8, 0.0, 3);
        let a = data.batch(5);
        let again = Synthetic::regression(64, 8, 0.0, 3).batch(5);
        assert_eq!(a, again);
        let other_seed = Synthetic::regression(64, 8, 0.0, 4).batch(5);
        assert_ne!(a.y, other_seed.y);
        // Noise-free targets are an exact linear function of the features.
        let Target::Linear { w, b, .. } = &data.target else {
            unreachable!()
        };
        for (row, y) in a.x.chunks(8).zip(&a.y) {
            let expect: f32 = row.iter().zip(w).map(|(x, w)| x * w).sum::<f32>() + b;
            assert!((expect - y).abs() < 1e-5);
        }
    }
}
