//! `perplexity`: a language model's, d2l's `exp` of the mean cross-entropy over every token
//! predicted (8.4).

use burn::tensor::{Device, Tensor};
use ember::{Error, Result};

use super::{CrossEntropy, Goal, Metric, Truth};

/// `perplexity`: `exp` of the mean over every token of `-log softmax(outputs)[token]`. The
/// outputs score each step of each sequence (`[batch × steps, vocabulary]`, or `[batch,
/// steps × vocabulary]`, as [`ember::SequenceCrossEntropyLoss`] takes them), the truth is
/// the `[batch, steps]` tokens. 1 is a model that is always sure and right; the vocabulary's
/// size, one that guesses uniformly.
#[derive(Default)]
pub struct Perplexity(CrossEntropy);

impl Metric for Perplexity {
    fn name(&self) -> String {
        "perplexity".to_string()
    }

    fn goal(&self) -> Goal {
        Goal::Min
    }

    /// The cross-entropy of each step's scores at its token.
    fn update(&mut self, outputs: &Tensor<2>, truth: Truth<'_>) -> Result<()> {
        let Truth::Values(tokens) = truth else {
            return Err(Error::InvalidValue {
                name: "targets for perplexity",
                value: "class labels".to_string(),
                reason: "perplexity takes sequences of tokens, [batch, steps]".to_string(),
            });
        };
        let scores = ember::loss::sequence_rows(outputs.clone(), tokens);
        let [rows, vocabulary] = scores.dims();
        let [batch, steps] = tokens.dims();
        if rows != batch * steps {
            return Err(Error::Shape {
                what: "perplexity's outputs".to_string(),
                expected: format!("[{}, vocabulary]", batch * steps),
                got: vec![rows, vocabulary],
            });
        }
        let labels = tokens.clone().int().reshape([rows]);
        self.0.update(&scores, Truth::Labels(&labels))
    }

    fn get(&self) -> Result<f64> {
        self.0.get().map(f64::exp)
    }

    fn reset(&mut self) {
        self.0.reset();
    }

    fn fresh(&self) -> Box<dyn Metric> {
        Box::new(Self::default())
    }

    fn state(&self) -> Result<Option<Vec<f64>>> {
        self.0.state()
    }

    fn restore(&mut self, state: &[f64], device: &Device) -> Result<()> {
        self.0.restore(state, device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two sequences of two steps over a vocabulary of 3; by hand: the mean of
    /// `-log softmax` at the tokens, then `exp`.
    #[test]
    fn perplexity_is_exp_of_the_mean_cross_entropy_per_token() {
        let device = Device::flex();
        let scores = [
            [1.0, 2.0, 0.5],
            [0.0, 0.0, 0.0],
            [3.0, -1.0, 0.0],
            [0.2, 0.1, 2.0],
        ];
        let tokens = [[1.0, 2.0], [0.0, 2.0]];
        let expected = {
            let mut sum = 0.0f64;
            for (row, &token) in scores.iter().zip(tokens.iter().flatten()) {
                let log_z = row.iter().map(|&v: &f64| v.exp()).sum::<f64>().ln();
                sum += log_z - row[token as usize];
            }
            (sum / 4.0).exp()
        };
        let flat: Vec<f32> = scores.iter().flatten().map(|&v| v as f32).collect();
        let y: Vec<f32> = tokens.iter().flatten().map(|&v| v as f32).collect();
        let tokens = Tensor::<1>::from_floats(y.as_slice(), &device).reshape([2, 2]);
        for shape in [[4, 3], [2, 6]] {
            let outputs = Tensor::<1>::from_floats(flat.as_slice(), &device).reshape(shape);
            let mut metric = Perplexity::default();
            metric.update(&outputs, Truth::Values(&tokens)).unwrap();
            let got = metric.get().unwrap();
            assert!((got - expected).abs() < 1e-5 * expected, "{got} {expected}");
        }
        let labels = Tensor::<1, burn::tensor::Int>::zeros([4], &device);
        let outputs = Tensor::<2>::zeros([4, 3], &device);
        let err = Perplexity::default().update(&outputs, Truth::Labels(&labels));
        assert!(err.unwrap_err().to_string().contains("sequences"));
    }
}
