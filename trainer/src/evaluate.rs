//! Evaluation metrics over a data loader, computed without autodiff.

use burn::tensor::{Device, Tensor};
use ember::{Block, Result};
use ember_datasets::DataLoader;

/// The share of examples whose largest output is their class label.
///
/// `net` should be a snapshot without autodiff (`Module::valid`) living on `device`.
///
/// # Errors
/// What the network's forward pass returns for a batch it cannot take (a shape it does not
/// accept), and [`ember::Error::Execution`] when the predictions cannot be read back.
pub fn accuracy<B: Block>(net: &B, data: &DataLoader, device: &Device) -> Result<f64> {
    let (mut correct, mut seen) = (0usize, 0usize);
    for batch in data.epoch(0) {
        let x = batch.x_on(device)?;
        let scores: Tensor<2> = net.forward(x).into_rank()?;
        let predicted = scores.argmax(1).into_data().convert::<i64>();
        let predicted: Vec<i64> = predicted
            .try_to_vec()
            .map_err(|e| ember::Error::Execution(format!("{e:?}")))?;
        correct += predicted
            .iter()
            .zip(&batch.y)
            .filter(|(p, y)| **p == **y as i64)
            .count();
        seen += batch.len();
    }
    Ok(correct as f64 / seen.max(1) as f64)
}
