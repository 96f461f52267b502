//! Metrics of outputs against target values: the mean squared and the mean absolute error,
//! each summed on the device over every output.

use burn::tensor::{Device, Tensor};
use ember::{Error, Result};

use super::eval_metric::{Goal, Mean, Metric, Truth, wrong_truth};

/// Each row's sum over its outputs of `error(outputs - targets)`, and the outputs they sum
/// over.
fn errors(
    metric: &str,
    outputs: &Tensor<2>,
    truth: Truth<'_>,
    error: impl Fn(Tensor<2>) -> Tensor<2>,
) -> Result<(Tensor<1>, usize)> {
    let Truth::Values(targets) = truth else {
        return Err(wrong_truth(metric, "target values", "class labels"));
    };
    if targets.dims() != outputs.dims() {
        return Err(Error::Shape {
            what: format!("the targets for metric {metric}"),
            expected: format!("{:?}, the outputs' shape", outputs.dims()),
            got: targets.dims().to_vec(),
        });
    }
    let difference = outputs.clone().detach() - targets.clone();
    let [rows, _] = outputs.dims();
    let per_row = error(difference).sum_dim(1).reshape([rows]);
    Ok((per_row, outputs.dims().iter().product()))
}

/// `mse`: the mean over every output of `(output - target)²`, PyTorch's `mse_loss` (Gluon's
/// `MSE` averages per batch instead, which weighs a short last batch as a full one).
#[derive(Default)]
pub struct MeanSquaredError(Mean);

impl Metric for MeanSquaredError {
    fn name(&self) -> String {
        "mse".to_string()
    }

    fn goal(&self) -> Goal {
        Goal::Min
    }

    fn update(&mut self, outputs: &Tensor<2>, truth: Truth<'_>) -> Result<()> {
        let (sum, count) = errors("mse", outputs, truth, |d| d.clone() * d)?;
        self.0.add(sum, count);
        Ok(())
    }

    fn get(&self) -> Result<f64> {
        self.0.get("a squared error's sum")
    }

    fn reset(&mut self) {
        self.0 = Mean::default();
    }

    fn fresh(&self) -> Box<dyn Metric> {
        Box::new(Self::default())
    }

    fn state(&self) -> Result<Option<Vec<f64>>> {
        self.0.state("a squared error's sum")
    }

    fn restore(&mut self, state: &[f64], _device: &Device) -> Result<()> {
        self.0 = Mean::restore("mse", state)?;
        Ok(())
    }
}

/// `mae`: the mean over every output of `|output - target|`, PyTorch's `l1_loss`.
#[derive(Default)]
pub struct MeanAbsoluteError(Mean);

impl Metric for MeanAbsoluteError {
    fn name(&self) -> String {
        "mae".to_string()
    }

    fn goal(&self) -> Goal {
        Goal::Min
    }

    fn update(&mut self, outputs: &Tensor<2>, truth: Truth<'_>) -> Result<()> {
        let (sum, count) = errors("mae", outputs, truth, |d| d.abs())?;
        self.0.add(sum, count);
        Ok(())
    }

    fn get(&self) -> Result<f64> {
        self.0.get("an absolute error's sum")
    }

    fn reset(&mut self) {
        self.0 = Mean::default();
    }

    fn fresh(&self) -> Box<dyn Metric> {
        Box::new(Self::default())
    }

    fn state(&self) -> Result<Option<Vec<f64>>> {
        self.0.state("an absolute error's sum")
    }

    fn restore(&mut self, state: &[f64], _device: &Device) -> Result<()> {
        self.0 = Mean::restore("mae", state)?;
        Ok(())
    }
}
