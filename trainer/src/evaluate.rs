//! Evaluation metrics over a data loader, computed without autodiff.

use burn::tensor::{Device, Int, Tensor};
use ember::{Block, Loss, Result};
use ember_datasets::DataLoader;

use crate::fit::{Target, read_count, tally};

/// The share of examples whose largest output is their class label: the rule of
/// [`Target::correct`], counted on the device and read back once.
///
/// `net` should be a snapshot without autodiff (`Module::valid`) living on `device`.
///
/// # Errors
/// What the network's forward pass returns for a batch it cannot take (a shape it does not
/// accept), [`ember::Error::Shape`] for targets that are not one label per example, and
/// [`ember::Error::Execution`] when the count cannot be read back.
pub fn accuracy<B: Block>(net: &B, data: &DataLoader, device: &Device) -> Result<f64> {
    let (mut correct, mut seen): (Option<Tensor<1, Int>>, usize) = (None, 0);
    for batch in data.epoch(0) {
        let scores: Tensor<2> = net.forward(batch.x_on(device)?).into_rank()?;
        let labels = <Tensor<1, Int> as Target>::upload(&batch, device)?;
        if let Some(right) = <Tensor<1, Int> as Target>::correct(&scores, &labels) {
            correct = Some(tally(correct, right));
        }
        seen += batch.len();
    }
    let correct = correct.map(read_count).transpose()?.unwrap_or(0);
    Ok(correct as f64 / seen.max(1) as f64)
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
        Some(sum) => sum
            .into_data()
            .convert::<f64>()
            .try_to_vec::<f64>()
            .map_err(|e| ember::Error::Readback {
                what: "a loss".to_string(),
                reason: format!("{e:?}"),
            })?
            .first()
            .copied()
            .unwrap_or(0.0),
        None => 0.0,
    };
    Ok(total / seen.max(1) as f64)
}
