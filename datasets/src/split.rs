//! A seeded hold-out: [`Examples::split`] takes a share of the training examples as a
//! validation set, for data without one (Keras' `validation_split`, drawn at random).

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

use crate::error::{DatasetError, Result};
use crate::examples::Examples;

impl Examples {
    /// `(train, valid)`: a share `fraction` of the examples, drawn by a shuffle seeded with
    /// `seed` (the same seed, the same split), held out as `valid`; the rest is `train`. Both
    /// keep the examples' order.
    ///
    /// ```
    /// use ember_datasets::Examples;
    /// let data = Examples::regression((0..10).map(|i| i as f32).collect(), 1,
    ///                                 vec![0.0; 10], 1).unwrap();
    /// let (train, valid) = data.split(0.2, 7).unwrap();
    /// assert_eq!((train.len(), valid.len()), (8, 2));
    /// assert_eq!(data.split(0.2, 7).unwrap(), (train, valid));
    /// ```
    ///
    /// # Errors
    /// [`DatasetError::InvalidValue`] for a share outside (0, 1), or one that leaves either
    /// part empty.
    pub fn split(&self, fraction: f64, seed: u64) -> Result<(Examples, Examples)> {
        let invalid = |reason: String| DatasetError::InvalidValue {
            name: "validation split",
            value: fraction.to_string(),
            reason,
        };
        if !(fraction > 0.0 && fraction < 1.0) {
            return Err(invalid("must lie in (0, 1)".to_string()));
        }
        let n = self.len();
        let held = (n as f64 * fraction).round() as usize;
        if held == 0 || held == n {
            return Err(invalid(format!(
                "of {n} examples it holds out {held}, leaving a part empty"
            )));
        }
        let mut order: Vec<usize> = (0..n).collect();
        order.shuffle(&mut StdRng::seed_from_u64(seed ^ 0x5eed_5b11_7000_0001));
        let mut valid: Vec<usize> = order[..held].to_vec();
        let mut train: Vec<usize> = order[held..].to_vec();
        valid.sort_unstable();
        train.sort_unstable();
        Ok((self.subset(&train), self.subset(&valid)))
    }
}
