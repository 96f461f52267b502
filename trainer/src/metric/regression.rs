//! Metrics of outputs against target values: the mean squared and the mean absolute error,
//! each summed on the device over every output.

use burn::tensor::{Device, Tensor};
use ember::{Error, Result};

use super::eval_metric::{Goal, Metric, Truth, add, read_floats, state_of, sums_of, wrong_truth};

/// The sum over every output of `error(outputs - targets)`, and the outputs counted.
#[derive(Default)]
struct ErrorSum {
    sum: Option<Tensor<1>>,
    outputs: usize,
}

impl ErrorSum {
    fn update(
        &mut self,
        metric: &str,
        outputs: &Tensor<2>,
        truth: Truth<'_>,
        error: impl Fn(Tensor<2>) -> Tensor<2>,
    ) -> Result<()> {
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
        self.sum = Some(add(self.sum.take(), error(difference).sum()));
        self.outputs += outputs.dims().iter().product::<usize>();
        Ok(())
    }

    /// `[sum, outputs]`, for a checkpoint.
    fn state(&self, what: &str) -> Result<Option<Vec<f64>>> {
        state_of(self.sum.as_slice(), self.outputs, what)
    }

    fn restore(metric: &str, state: &[f64], device: &Device) -> Result<Self> {
        Ok(match sums_of(metric, state, 1, Some(1))? {
            None => Self::default(),
            Some((sums, outputs)) => Self {
                sum: Some(Tensor::from_floats([sums[0][0] as f32], device)),
                outputs,
            },
        })
    }

    fn mean(&self, what: &str) -> Result<f64> {
        Ok(match &self.sum {
            Some(sum) => read_floats(sum.clone(), what)?[0] / self.outputs as f64,
            None => f64::NAN,
        })
    }
}

/// `mse`: the mean over every output of `(output - target)²`, PyTorch's `mse_loss` (Gluon's
/// `MSE` averages per batch instead, which weighs a short last batch as a full one).
#[derive(Default)]
pub struct MeanSquaredError(ErrorSum);

impl Metric for MeanSquaredError {
    fn name(&self) -> String {
        "mse".to_string()
    }

    fn goal(&self) -> Goal {
        Goal::Min
    }

    fn update(&mut self, outputs: &Tensor<2>, truth: Truth<'_>) -> Result<()> {
        self.0.update("mse", outputs, truth, |d| d.clone() * d)
    }

    fn get(&self) -> Result<f64> {
        self.0.mean("a squared error's sum")
    }

    fn reset(&mut self) {
        self.0 = ErrorSum::default();
    }

    fn fresh(&self) -> Box<dyn Metric> {
        Box::new(Self::default())
    }

    fn state(&self) -> Result<Option<Vec<f64>>> {
        self.0.state("a squared error's sum")
    }

    fn restore(&mut self, state: &[f64], device: &Device) -> Result<()> {
        self.0 = ErrorSum::restore("mse", state, device)?;
        Ok(())
    }
}

/// `mae`: the mean over every output of `|output - target|`, PyTorch's `l1_loss`.
#[derive(Default)]
pub struct MeanAbsoluteError(ErrorSum);

impl Metric for MeanAbsoluteError {
    fn name(&self) -> String {
        "mae".to_string()
    }

    fn goal(&self) -> Goal {
        Goal::Min
    }

    fn update(&mut self, outputs: &Tensor<2>, truth: Truth<'_>) -> Result<()> {
        self.0.update("mae", outputs, truth, |d| d.abs())
    }

    fn get(&self) -> Result<f64> {
        self.0.mean("an absolute error's sum")
    }

    fn reset(&mut self) {
        self.0 = ErrorSum::default();
    }

    fn fresh(&self) -> Box<dyn Metric> {
        Box::new(Self::default())
    }

    fn state(&self) -> Result<Option<Vec<f64>>> {
        self.0.state("an absolute error's sum")
    }

    fn restore(&mut self, state: &[f64], device: &Device) -> Result<()> {
        self.0 = ErrorSum::restore("mae", state, device)?;
        Ok(())
    }
}
