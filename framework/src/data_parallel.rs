//! Data parallelism, Gluon's way, on burn's own machinery: each device runs forward and backward
//! on its share of the batch with its own copy of the network (burn's `Module::fork`), the
//! gradients go to the main device (`GradientsParams::to_device`) and are summed there
//! (`GradientsAccumulator`), and one [`Optimizer::step_params`](crate::Optimizer::step_params) with
//! the whole batch's size applies them. So N devices with batch b make the update one device
//! makes with batch N·b, as Gluon's `split_and_load` and `trainer.step(batch_size)` do. This is
//! the pattern of burn-train 0.22's multi-device strategy; no all-reduce of ember's own.
//!
//! ```
//! use burn::prelude::*;
//! use ember::data_parallel::Replicas;
//! use ember::{Block, Dense, Init, L2Loss, Loss, Sequential, Optimizer};
//!
//! let device = Device::flex().autodiff();
//! let net: Sequential = Sequential::new().add(Dense::new(1)).initialize(Init::default(), &device);
//! let mut net = net.infer_shape(Tensor::<2>::ones([1, 3], &device)).unwrap();
//! let mut trainer = Optimizer::new(&net, "sgd", 0.1).unwrap();
//! // Two replicas (flex has one device, so both share it: the split, transfer and sum still run).
//! let replicas = Replicas::new(vec![device.clone(), device.clone()]).unwrap();
//! let (grads, shares) = replicas
//!     .backward(&net, |replica: &Sequential, _index, device| {
//!         let (x, y) = (Tensor::<2>::ones([4, 3], device), Tensor::<2>::zeros([4, 1], device));
//!         Ok((L2Loss.forward(replica.forward(x.into()).rank(), y)?, ()))
//!     })
//!     .unwrap();
//! assert_eq!(shares.len(), 2);
//! net = trainer.step_params(net, grads, 8).unwrap();
//! ```

use burn::module::Module;
use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::tensor::{Device, Tensor};

use crate::error::{Error, Result, panic_text};

/// The devices of a data-parallel step. The first is the main device: it holds the network,
/// the optimizer state and the summed gradients.
#[derive(Debug, Clone)]
pub struct Replicas {
    devices: Vec<Device>,
}

impl Replicas {
    /// Replicas on `devices` (autodiff devices), the first one main. A device may appear more
    /// than once (flex has a single device): each entry is a replica of its own.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] when `devices` is empty.
    pub fn new(devices: Vec<Device>) -> Result<Self> {
        if devices.is_empty() {
            return Err(Error::InvalidValue {
                name: "device list",
                value: "(empty)".to_string(),
                reason: "data parallelism needs at least one device".to_string(),
            });
        }
        Ok(Self { devices })
    }

    /// One device: no split, the step as on a single device.
    pub fn single(device: Device) -> Self {
        Self {
            devices: vec![device],
        }
    }

    /// The devices, main first.
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// The main device.
    pub fn main(&self) -> &Device {
        &self.devices[0]
    }

    /// How many replicas.
    pub fn len(&self) -> usize {
        self.devices.len()
    }

    /// Always false: there is at least the main device.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Runs `share(replica, index, device)` for each device, each on a thread of its own, with
    /// the network itself on the main device and a fork of it on every other; `share` returns
    /// that device's per-example loss (and anything else it wants back). Each loss is
    /// back-propagated on its device, and the gradients are moved to the main device and summed
    /// there, never divided. Returns the sums, for [`crate::Optimizer::step_params`], and each
    /// device's loss and extra, in device order, still on their devices.
    ///
    /// # Errors
    /// The first error in device order, as [`Error::OnDevice`] naming the device: a `share`'s
    /// own error, or [`Error::Panic`] for a thread that panicked (a device that failed
    /// mid-step).
    pub fn backward<M, T>(
        &self,
        net: &M,
        share: impl Fn(&M, usize, &Device) -> Result<(Tensor<1>, T)> + Sync,
    ) -> Result<(GradientsParams, Vec<(Tensor<1>, T)>)>
    where
        M: Module,
        T: Send,
    {
        let main = self.main();
        let share = &share;
        let outcomes: Vec<_> = std::thread::scope(|scope| {
            let threads: Vec<_> = self
                .devices
                .iter()
                .enumerate()
                .map(|(index, device)| {
                    let replica = if index == 0 {
                        net.clone()
                    } else {
                        net.clone().fork(device)
                    };
                    let thread = std::thread::Builder::new()
                        .name(format!("ember-replica-{index}"))
                        .spawn_scoped(scope, move || -> Result<_> {
                            let (loss, extra) = share(&replica, index, device)?;
                            let grads = GradientsParams::from_grads(loss.backward(), &replica);
                            let grads = if index == 0 {
                                grads
                            } else {
                                grads.to_device(main, &replica)
                            };
                            Ok((grads, loss, extra))
                        });
                    (index, thread)
                })
                .collect();
            threads
                .into_iter()
                .map(|(index, thread)| {
                    match thread {
                        Ok(thread) => thread
                            .join()
                            .unwrap_or_else(|panic| Err(Error::Panic(panic_text(&panic)))),
                        Err(e) => Err(Error::Execution(format!("starting its thread: {e}"))),
                    }
                    .map_err(|e| e.on_device(index))
                })
                .collect()
        });
        let mut sum = GradientsAccumulator::<M>::new();
        let mut shares = Vec::with_capacity(outcomes.len());
        for outcome in outcomes {
            let (grads, loss, extra) = outcome?;
            sum.accumulate(net, grads);
            shares.push((loss, extra));
        }
        Ok((sum.grads(), shares))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Block, Dense, Init, L2Loss, Loss, Sequential};

    #[test]
    fn a_panicking_device_is_an_error_naming_it() {
        let device = Device::flex().autodiff();
        let net: Sequential = Sequential::new()
            .add(Dense::new(1))
            .initialize(Init::default(), &device);
        let net = net.infer_shape(Tensor::<2>::ones([1, 2], &device)).unwrap();
        let replicas = Replicas::new(vec![device.clone(), device.clone()]).unwrap();
        let err = replicas
            .backward(&net, |replica: &Sequential, index, device| {
                assert!(index == 0, "device lost");
                let x = Tensor::<2>::ones([2, 2], device);
                Ok((
                    L2Loss.forward(
                        replica.forward(x.into()).rank(),
                        Tensor::zeros([2, 1], device),
                    )?,
                    (),
                ))
            })
            .unwrap_err();
        assert!(
            matches!(&err, Error::OnDevice { device: 1, source } if matches!(**source, Error::Panic(_))),
            "{err}"
        );
        let err = err.to_string();
        assert!(
            err.contains("device 1") && err.contains("device lost"),
            "{err}"
        );
        assert!(Replicas::new(Vec::new()).is_err());
    }
}
