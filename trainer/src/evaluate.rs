//! Evaluation metrics over a data loader, computed without autodiff.

use burn::tensor::{Device, Int, Tensor};
use ember::{Block, Loss, Result};
use ember_datasets::DataLoader;

use crate::metric::{Accuracy, Metric, read_floats};
use crate::target::Target;

/// Each of `metrics` over every example of `data`, in their order: one forward pass a batch,
/// the metrics' counts and rows kept on the device and read back once each, at the end. Each metric starts
/// from nothing.
///
/// `net` should be a snapshot without autodiff (`Module::valid`) living on `device`; `T` is
/// the kind of targets (class labels, `Tensor<1, Int>`, or values, `Tensor<2>`).
///
/// # Errors
/// What the network's forward pass returns for a batch it cannot take (a shape it does not
/// accept), the targets' and the metrics' errors for targets they do not take, and
/// [`ember::Error::Readback`] when a value cannot be read back.
pub fn metrics<B: Block, T: Target>(
    net: &B,
    metrics: &mut [Box<dyn Metric>],
    data: &DataLoader,
    device: &Device,
) -> Result<Vec<f64>> {
    for metric in metrics.iter_mut() {
        metric.reset();
    }
    for batch in data.epoch(0) {
        let outputs: Tensor<2> = net.forward(batch.x_on(device)?).into_rank()?;
        let y = T::upload(&batch, device)?;
        T::check(&batch, outputs.dims()[1])?;
        for metric in metrics.iter_mut() {
            metric.update(&outputs, y.truth())?;
        }
    }
    metrics.iter().map(|m| m.get()).collect()
}

/// The share of examples whose largest output is their class label ([`Accuracy`]), counted on
/// the device and read back once.
///
/// `net` should be a snapshot without autodiff (`Module::valid`) living on `device`.
///
/// # Errors
/// As [`metrics`], and [`ember::Error::Shape`] for targets that are not one label per example.
pub fn accuracy<B: Block>(net: &B, data: &DataLoader, device: &Device) -> Result<f64> {
    let mut acc: [Box<dyn Metric>; 1] = [Box::new(Accuracy::default())];
    Ok(metrics::<B, Tensor<1, Int>>(net, &mut acc, data, device)?[0])
}

/// The mean of `loss` over every example of `data`, summed on the device and read back once.
///
/// `net` should be a snapshot without autodiff (`Module::valid`) living on `device`.
///
/// # Errors
/// As [`accuracy`], and the loss's own errors for targets it does not take.
pub fn mean_loss<B, L>(net: &B, loss: &L, data: &DataLoader, device: &Device) -> Result<f64>
where
    B: Block,
    L: Loss,
    L::Target: Target,
{
    let (mut sum, mut seen): (Option<Tensor<1>>, usize) = (None, 0);
    for batch in data.epoch(0) {
        let pred: Tensor<2> = net.forward(batch.x_on(device)?).into_rank()?;
        let y = L::Target::upload(&batch, device)?;
        let losses = loss.forward(pred, y)?.sum();
        sum = Some(match sum {
            Some(sum) => sum.add(losses),
            None => losses,
        });
        seen += batch.len();
    }
    let total = match sum {
        Some(sum) => read_floats(sum, "a loss")?[0],
        None => 0.0,
    };
    Ok(total / seen.max(1) as f64)
}
