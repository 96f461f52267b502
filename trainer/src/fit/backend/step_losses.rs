//! A step's losses as the engine reads them: one fence per device, and the batch's mean.

use burn::tensor::Tensor;
use ember::engine::Computed;

/// A step's per-example losses, one tensor per device it ran on. Each is a fence: the step is
/// done when every device has computed its share, and its handle gives the batch's mean loss.
pub(in crate::fit) struct StepLosses(pub(in crate::fit) Vec<Tensor<1>>);

impl Computed for StepLosses {
    type Value = f32;

    fn fences(&self) -> Vec<Tensor<1>> {
        self.0.clone()
    }

    /// The batch's mean: each device's mean weighed by its examples.
    fn value(self, means: &[f32]) -> f32 {
        if let [mean] = means {
            return *mean;
        }
        let sizes: Vec<usize> = self.0.iter().map(|t| t.dims()[0]).collect();
        let total: usize = sizes.iter().sum();
        let sum: f64 = means
            .iter()
            .zip(&sizes)
            .map(|(&mean, &n)| f64::from(mean) * n as f64)
            .sum();
        (sum / total.max(1) as f64) as f32
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::Device;

    use super::*;

    #[test]
    fn a_step_on_several_devices_weighs_each_devices_mean_by_its_examples() {
        let device = Device::flex();
        let losses = StepLosses(vec![
            Tensor::<1>::ones([3], &device),
            Tensor::<1>::full([1], 4.0, &device),
        ]);
        assert_eq!(losses.fences().len(), 2);
        // (1 + 1 + 1 + 4) / 4, not (1 + 4) / 2
        assert_eq!(losses.value(&[1.0, 4.0]), 1.75);
        let one = StepLosses(vec![Tensor::<1>::ones([3], &device)]);
        assert_eq!(one.value(&[2.5]), 2.5);
    }
}
