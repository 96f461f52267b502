//! Gluon's losses. Each returns **one value per example** (shape `[batch]`), averaged over the
//! non-batch axes; `backward` on that vector sums it, and [`Optimizer::step`](crate::Optimizer::step)
//! divides by the batch size, as in Gluon.
//!
//! ```
//! use burn::prelude::*;
//! use ember::{L2Loss, Loss};
//! let device = Device::flex();
//! let pred = Tensor::<2>::from_floats([[1.0, 3.0], [0.0, 0.0]], &device);
//! let label = Tensor::<2>::from_floats([[0.0, 1.0], [0.0, 2.0]], &device);
//! let l = L2Loss.forward(pred, label).unwrap();
//! // ½·mean((1², 2²)) = 1.25 and ½·mean((0², 2²)) = 1.0
//! assert_eq!(l.into_data().try_to_vec::<f32>().unwrap(), vec![1.25, 1.0]);
//! ```

use burn::tensor::activation::log_softmax;
use burn::tensor::{Int, Tensor};

use crate::error::{Error, Result};

/// A loss: predictions and targets in, one value per example out.
pub trait Loss {
    /// What the targets are: a float tensor for regression, class indices for classification.
    type Target;

    /// The per-example loss.
    ///
    /// # Shapes
    /// - `pred`: `[batch, outputs]`
    /// - output: `[batch]`
    fn forward(&self, pred: Tensor<2>, target: Self::Target) -> Result<Tensor<1>>;
}

/// Gluon's `L2Loss`: ½(ŷ − y)², averaged over the non-batch axes.
#[derive(Debug, Clone, Copy, Default)]
pub struct L2Loss;

/// Gluon's `L1Loss`: |ŷ − y|, averaged over the non-batch axes.
#[derive(Debug, Clone, Copy, Default)]
pub struct L1Loss;

/// Gluon's `SoftmaxCrossEntropyLoss` with sparse labels: −log softmax(ŷ)[y].
#[derive(Debug, Clone, Copy, Default)]
pub struct SoftmaxCrossEntropyLoss;

/// A language model's cross-entropy: for each sequence, −log softmax(ŷ)[y] averaged over its
/// steps, one value per sequence for [`Optimizer::step`](crate::Optimizer::step)'s batch size;
/// `exp` of its mean is the perplexity. The targets are `[batch, steps]` token indices (as
/// floats, as an `ember_datasets::text::Subsequences` batch holds them); the predictions are
/// `[batch × steps, vocabulary]` **sequence by sequence**: row `b × steps + s` scores step `s`
/// of sequence `b`, as a `[batch, steps, vocabulary]` output flattened gives them (a recurrent
/// layer's `Layout::Ntc`). A `Layout::Tnc` output flattened is step by step (d2l's
/// `Y.T.reshape(-1)` order): swap its first two axes first. `[batch, steps × vocabulary]`, a
/// chain's `[batch, steps, vocabulary]` through `Flatten`, is taken too ([`sequence_rows`]).
/// Only the number of rows can be checked here.
#[derive(Debug, Clone, Copy, Default)]
pub struct SequenceCrossEntropyLoss;

/// The target reshaped like the prediction, as Gluon does (`_reshape_like`); a different
/// number of elements is an error naming both shapes.
fn reshape_like(pred: &Tensor<2>, target: Tensor<2>, loss: &str) -> Result<Tensor<2>> {
    let pred_dims = pred.dims();
    let target_dims = target.dims();
    if pred_dims == target_dims {
        return Ok(target);
    }
    if pred_dims.iter().product::<usize>() != target_dims.iter().product::<usize>() {
        return Err(Error::Shape {
            what: format!("{loss} label"),
            expected: format!("the prediction's shape {pred_dims:?}"),
            got: target_dims.to_vec(),
        });
    }
    Ok(target.reshape(pred_dims))
}

impl Loss for L2Loss {
    type Target = Tensor<2>;

    fn forward(&self, pred: Tensor<2>, target: Tensor<2>) -> Result<Tensor<1>> {
        let target = reshape_like(&pred, target, "L2Loss")?;
        let diff = pred - target;
        Ok((diff.clone() * diff)
            .mean_dim(1)
            .squeeze_dim(1)
            .mul_scalar(0.5))
    }
}

impl Loss for L1Loss {
    type Target = Tensor<2>;

    fn forward(&self, pred: Tensor<2>, target: Tensor<2>) -> Result<Tensor<1>> {
        let target = reshape_like(&pred, target, "L1Loss")?;
        Ok((pred - target).abs().mean_dim(1).squeeze_dim(1))
    }
}

impl Loss for SoftmaxCrossEntropyLoss {
    type Target = Tensor<1, Int>;

    fn forward(&self, pred: Tensor<2>, target: Tensor<1, Int>) -> Result<Tensor<1>> {
        let [batch, _classes] = pred.dims();
        let [labels] = target.dims();
        if labels != batch {
            return Err(Error::Shape {
                what: "SoftmaxCrossEntropyLoss labels".to_string(),
                expected: format!("[{batch}] (one class index per example)"),
                got: vec![labels],
            });
        }
        let picked = log_softmax(pred, 1).gather(1, target.reshape([batch, 1]));
        Ok(picked.squeeze_dim(1).neg())
    }
}

/// `pred` with one row per step of `target`'s sequences: `[batch, steps × vocabulary]` (a
/// chain's `[batch, steps, vocabulary]` flattened) becomes `[batch × steps, vocabulary]`,
/// rows in the same order; any other shape stays as it is.
pub fn sequence_rows(pred: Tensor<2>, target: &Tensor<2>) -> Tensor<2> {
    let [rows, columns] = pred.dims();
    let [batch, steps] = target.dims();
    match rows == batch && steps > 1 && columns.is_multiple_of(steps) {
        true => pred.reshape([batch * steps, columns / steps]),
        false => pred,
    }
}

impl Loss for SequenceCrossEntropyLoss {
    type Target = Tensor<2>;

    fn forward(&self, pred: Tensor<2>, target: Tensor<2>) -> Result<Tensor<1>> {
        let pred = sequence_rows(pred, &target);
        let [rows, vocabulary] = pred.dims();
        let [batch, steps] = target.dims();
        if rows != batch * steps {
            return Err(Error::Shape {
                what: "SequenceCrossEntropyLoss predictions".to_string(),
                expected: format!(
                    "[{}, vocabulary]: one row per step of the targets' {batch} sequences of \
                     {steps}",
                    batch * steps
                ),
                got: vec![rows, vocabulary],
            });
        }
        let labels = target.int().reshape([rows, 1]);
        let picked = log_softmax(pred, 1).gather(1, labels).neg();
        Ok(picked.reshape([batch, steps]).mean_dim(1).squeeze_dim(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::Device;

    // Reference (MXNet 1.9):
    //   pred = nd.array([[2., 1., 0.], [0., 0., 3.]]); label = nd.array([0, 2])
    //   gluon.loss.SoftmaxCrossEntropyLoss()(pred, label) -> [0.40760596 0.09492489]
    //   gluon.loss.L1Loss()(nd.array([[1., -2.]]), nd.array([[0., 0.]])) -> [1.5]
    // Reference (PyTorch 2.15): F.cross_entropy(pred, labels, reduction='none') for
    //   pred = [[2, 1, 0], [0, 0, 3], [1, 1, 1], [0, 2, 0]], labels = [0, 2, 1, 0]
    //   -> [0.40760596, 0.09492489, 1.09861229, 2.23954481]; sequences of 2: their means.
    #[test]
    fn sequence_cross_entropy_is_each_sequences_mean_over_its_steps() {
        let device = Device::flex();
        let pred = Tensor::<2>::from_floats(
            [
                [2.0, 1.0, 0.0],
                [0.0, 0.0, 3.0],
                [1.0, 1.0, 1.0],
                [0.0, 2.0, 0.0],
            ],
            &device,
        );
        let target = Tensor::<2>::from_floats([[0.0, 2.0], [1.0, 0.0]], &device);
        let l: Vec<f32> = SequenceCrossEntropyLoss
            .forward(pred.clone(), target)
            .unwrap()
            .into_data()
            .try_to_vec()
            .unwrap();
        let want = [
            (0.407_605_96 + 0.094_924_89) / 2.0,
            (1.098_612_3 + 2.239_545) / 2.0,
        ];
        assert!(
            (l[0] - want[0]).abs() < 1e-5 && (l[1] - want[1]).abs() < 1e-5,
            "{l:?}"
        );
        let three = Tensor::<2>::from_floats([[0.0, 2.0, 1.0]], &device);
        let err = SequenceCrossEntropyLoss.forward(pred, three).unwrap_err();
        assert!(err.to_string().contains("[3, vocabulary]"), "{err}");
    }

    #[test]
    fn cross_entropy_and_l1_match_gluon() {
        let device = Device::flex();
        let pred = Tensor::<2>::from_floats([[2.0, 1.0, 0.0], [0.0, 0.0, 3.0]], &device);
        let label = Tensor::<1, Int>::from_ints([0, 2], &device);
        let l: Vec<f32> = SoftmaxCrossEntropyLoss
            .forward(pred, label)
            .unwrap()
            .into_data()
            .try_to_vec()
            .unwrap();
        assert!(
            (l[0] - 0.407_605_96).abs() < 1e-5 && (l[1] - 0.094_924_89).abs() < 1e-5,
            "{l:?}"
        );
        let l1: Vec<f32> = L1Loss
            .forward(
                Tensor::from_floats([[1.0, -2.0]], &device),
                Tensor::from_floats([[0.0, 0.0]], &device),
            )
            .unwrap()
            .into_data()
            .try_to_vec()
            .unwrap();
        assert_eq!(l1, vec![1.5]);
    }

    #[test]
    fn mismatched_labels_are_errors() {
        let device = Device::flex();
        let err = L2Loss
            .forward(
                Tensor::zeros([4, 1], &device),
                Tensor::zeros([3, 1], &device),
            )
            .unwrap_err();
        assert!(err.to_string().contains("[3, 1]"), "{err}");
    }
}
