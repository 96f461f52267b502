//! Data parallelism, Gluon's way, on burn's own machinery: each device runs forward and backward
//! on its share of the batch with its own copy of the network (burn's `Module::fork`), the
//! gradients are summed, and one [`Optimizer::step_params`](crate::Optimizer::step_params) with
//! the whole batch's size applies them. So N devices with batch b make the update one device
//! makes with batch N·b, as Gluon's `split_and_load` and `trainer.step(batch_size)` do.
//!
//! The sum ([`Exchange`]): across distinct CUDA cards with NCCL present, burn's all-reduce (NCCL)
//! sums each gradient in place on the cards; otherwise the gradients go to the main device
//! (`GradientsParams::to_device`) and are summed there (`GradientsAccumulator`), the pattern of
//! burn-train 0.22's multi-device strategy. No all-reduce of ember's own.
//!
//! ```
//! use burn::prelude::*;
//! use ember::parallel::Replicas;
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
use crate::parallel::exchange::{self, AllReduce, Exchange};
use crate::parallel::gate::Gate;
use crate::running_statistics::settle_running_statistics;

/// The devices of a data-parallel step. The first is the main device: it holds the network,
/// the optimizer state and the summed gradients.
#[derive(Debug, Clone)]
pub struct Replicas {
    devices: Vec<Device>,
    exchange: Exchange,
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
        let exchange = Exchange::for_devices(&devices);
        Ok(Self { devices, exchange })
    }

    /// One device: no split, the step as on a single device.
    pub fn single(device: Device) -> Self {
        Self {
            devices: vec![device],
            exchange: Exchange::single(),
        }
    }

    /// How the replicas' gradients are summed, and why.
    pub fn exchange(&self) -> &Exchange {
        &self.exchange
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
    /// back-propagated on its device, and the gradients are summed as [`Replicas::exchange`]
    /// says, never divided. Returns the sums (on the main device), for
    /// [`crate::Optimizer::step_params`], and each device's loss and extra, in device order,
    /// still on their devices.
    ///
    /// # Errors
    /// The first error in device order, as [`Error::OnDevice`] naming the device: a `share`'s
    /// own error, or [`Error::Panic`] for a thread that panicked (a device that failed
    /// mid-step). With NCCL, no replica starts the all-reduce unless every one got its
    /// gradients, so a failed device does not leave the others waiting for it.
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
        let nccl = matches!(self.exchange, Exchange::Nccl(_));
        // With NCCL, every replica waits here until all have their gradients (or failed), and
        // joins the collectives only if none failed.
        let gate = &Gate::new(self.devices.len());
        let devices = &self.devices;
        let sharers = cpu_sharers(devices);
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
                    let sharers = if *device == Device::flex() {
                        sharers
                    } else {
                        1
                    };
                    let thread = spawn_replica(scope, index, sharers, move || -> Result<_> {
                        let backward = || -> Result<_> {
                            let (loss, extra) = share(&replica, index, device)?;
                            let grads = GradientsParams::from_grads(loss.backward(), &replica);
                            Ok((grads, loss, extra))
                        };
                        if !nccl {
                            let (grads, loss, extra) = backward()?;
                            let grads = match index {
                                0 => grads,
                                _ => grads.to_device(main, &replica),
                            };
                            return Ok(Some((grads, loss, extra)));
                        }
                        let outcome =
                            std::panic::catch_unwind(std::panic::AssertUnwindSafe(backward))
                                .unwrap_or_else(|panic| Err(Error::Panic(panic_text(&panic))));
                        let all_ready = gate.arrive(outcome.is_ok());
                        let (grads, loss, extra) = outcome?;
                        if !all_ready {
                            // Stood down: the device that failed reports it.
                            return Ok(None);
                        }
                        let grads =
                            exchange::sum_across(&replica, grads, device, AllReduce(devices));
                        Ok(Some((grads, loss, extra)))
                    });
                    if thread.is_err() {
                        // Its replica never arrives: count it as failed now, so the others
                        // stand down instead of waiting (they are joined in order, so later
                        // would be too late).
                        gate.arrive_without_waiting();
                    }
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
                        Err(e) => Err(Error::Thread {
                            what: "its thread".to_string(),
                            source: std::sync::Arc::new(e),
                        }),
                    }
                    .map_err(|e| {
                        crate::device::remote::name_in(e, &devices[index]).on_device(index)
                    })
                })
                .collect()
        });
        // Each replica's thread is new, so burn's running statistics (BatchNorm's) hold one
        // update per replica that no thread reads again: taken in now, they become the
        // replicas' mean, and the next step's replicas start from it. Left alone, every step of
        // an epoch read the epoch's first value, and the updates piled up until a `valid()`.
        settle_running_statistics(net);
        let mut sum = GradientsAccumulator::<M>::new();
        let mut summed = None;
        let mut shares = Vec::with_capacity(outcomes.len());
        let outcomes: Vec<_> = outcomes.into_iter().collect::<Result<_>>()?;
        for (grads, loss, extra) in outcomes.into_iter().flatten() {
            match (nccl, summed.is_none()) {
                // Every card holds the sum after the all-reduce: keep the main one's.
                (true, true) => summed = Some(grads),
                (true, false) => {}
                (false, _) => sum.accumulate(net, grads),
            }
            shares.push((loss, extra));
        }
        Ok((summed.unwrap_or_else(|| sum.grads()), shares))
    }
}

/// How many replicas compute on the CPU's cores at once: those on burn's CPU backends (flex,
/// whose layers run oneDNN's primitives, and ndarray). A card's replica mostly waits for it.
fn cpu_sharers(devices: &[Device]) -> usize {
    #[allow(deprecated)] // burn-ndarray: still a device ember opens
    let cpu = [Device::flex(), Device::ndarray()];
    devices.iter().filter(|device| cpu.contains(device)).count()
}

/// Starts replica `index`'s thread: its oneDNN primitives run on teams of the CPU's cores
/// divided among the `sharers` replicas that compute on them at once (2 on 2 cores: one thread
/// each), as more OpenMP threads than cores would spin and wait for one another. Tests make one
/// fail as the system would when out of threads.
fn spawn_replica<'scope, T: Send + 'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    index: usize,
    sharers: usize,
    work: impl FnOnce() -> T + Send + 'scope,
) -> std::io::Result<std::thread::ScopedJoinHandle<'scope, T>> {
    #[cfg(test)]
    if tests::NO_THREAD_FOR.get() == Some(index) {
        return Err(std::io::Error::from(std::io::ErrorKind::OutOfMemory));
    }
    std::thread::Builder::new()
        .name(format!("ember-replica-{index}"))
        .spawn_scoped(scope, move || {
            crate::kernels::sharing_threads(sharers, work)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Block, Dense, Init, L2Loss, Loss, Sequential};

    thread_local! {
        /// Set on a test's own thread: this replica's thread cannot start.
        pub(super) static NO_THREAD_FOR: std::cell::Cell<Option<usize>> =
            const { std::cell::Cell::new(None) };
    }

    /// A Dense layer of one output on two features.
    fn one_dense(device: &Device) -> Sequential {
        let net: Sequential = Sequential::new()
            .add(Dense::new(1))
            .initialize(Init::default(), device);
        net.infer_shape(Tensor::<2>::ones([1, 2], device)).unwrap()
    }

    /// A replica's share of a step: the L2 loss of `replica` on two rows of ones, target zero.
    fn l2_share(replica: &Sequential, device: &Device) -> Result<(Tensor<1>, ())> {
        let x = Tensor::<2>::ones([2, 2], device);
        let y = Tensor::zeros([2, 1], device);
        Ok((L2Loss.forward(replica.forward(x.into()).rank(), y)?, ()))
    }

    /// Three replicas on flex with NCCL as their exchange: an all-reduce started there would
    /// panic in burn (flex has no collectives), so reaching it shows as a panic.
    fn nccl_on_flex(device: &Device) -> Replicas {
        Replicas {
            devices: vec![device.clone(); 3],
            exchange: Exchange::Nccl(vec![0, 1, 2]),
        }
    }

    #[cfg(feature = "onednn")]
    #[test]
    fn the_replicas_divide_the_cores_among_their_openmp_teams() {
        let device = Device::flex().autodiff();
        let net = one_dense(&device);
        // The replicas narrow their teams where oneDNN is open, as it is after any layer ran.
        assert!(crate::kernels::onednn_opens(), "oneDNN did not open");
        let cores = crate::kernels::openmp_width();
        assert!(cores >= 2, "one core: nothing to divide");
        for count in [2, cores + 1] {
            let replicas = Replicas::new(vec![device.clone(); count]).unwrap();
            let widths = std::sync::Mutex::new(Vec::new());
            replicas
                .backward(&net, |replica: &Sequential, _, device| {
                    widths.lock().unwrap().push(crate::kernels::openmp_width());
                    l2_share(replica, device)
                })
                .unwrap();
            let widths = widths.into_inner().unwrap();
            assert_eq!(
                widths,
                vec![(cores / count).max(1); count],
                "{count} replicas"
            );
        }
        // The replicas on the CPU's backends share its cores; one on a card (here wgpu, on
        // lavapipe in CI) takes no share, and only flex's threads are narrowed.
        #[allow(deprecated)] // burn-ndarray: a CPU device oneDNN never runs on
        let ndarray = Device::ndarray().autodiff();
        let card = Device::wgpu(burn::tensor::DeviceKind::DefaultDevice).autodiff();
        let half = (cores / 2).max(1);
        for (devices, expected) in [
            (vec![device.clone(), ndarray], vec![half, cores]),
            (vec![device.clone(), card], vec![cores, cores]),
        ] {
            let count = devices.len();
            let replicas = Replicas::new(devices).unwrap();
            let widths = std::sync::Mutex::new(vec![0; count]);
            replicas
                .backward(&net, |replica: &Sequential, index, device| {
                    widths.lock().unwrap()[index] = crate::kernels::openmp_width();
                    l2_share(replica, device)
                })
                .unwrap();
            assert_eq!(widths.into_inner().unwrap(), expected, "{replicas:?}");
        }
        assert_eq!(
            crate::kernels::openmp_width(),
            cores,
            "the caller's width is its own"
        );
    }

    #[test]
    fn a_panicking_device_is_an_error_naming_it() {
        let device = Device::flex().autodiff();
        let net = one_dense(&device);
        let replicas = Replicas::new(vec![device.clone(), device.clone()]).unwrap();
        let err = replicas
            .backward(&net, |replica: &Sequential, index, device| {
                assert!(index == 0, "device lost");
                l2_share(replica, device)
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

    #[test]
    fn with_nccl_a_failed_replica_makes_the_others_stand_down_before_the_all_reduce() {
        let device = Device::flex().autodiff();
        let net = one_dense(&device);
        let replicas = nccl_on_flex(&device);
        for fails in [Err("out of memory"), Ok("device lost")] {
            let err = replicas
                .backward(&net, |replica: &Sequential, index, device| {
                    if index == 1 {
                        match fails {
                            Err(why) => {
                                return Err(Error::Device {
                                    device: index.to_string(),
                                    reason: why.to_string(),
                                });
                            }
                            Ok(why) => panic!("{why}"),
                        }
                    }
                    l2_share(replica, device)
                })
                .unwrap_err();
            assert!(
                matches!(&err, Error::OnDevice { device: 1, .. }),
                "the failed device is named, not one that stood down: {err}"
            );
            let why = fails.unwrap_or_else(|why| why);
            assert!(err.to_string().contains(why), "{err}");
        }
    }

    #[test]
    fn with_nccl_a_replica_whose_thread_cannot_start_is_an_error_not_a_hang() {
        // On a thread of its own, so that a hang fails the test instead of stopping the run.
        let (done, outcome) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let device = Device::flex().autodiff();
            let net = one_dense(&device);
            NO_THREAD_FOR.set(Some(2));
            let result = nccl_on_flex(&device).backward(&net, |replica: &Sequential, _, device| {
                l2_share(replica, device)
            });
            done.send(result.map(drop).map_err(|e| e.to_string()))
                .unwrap();
        });
        let err = outcome
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the step hung waiting for a replica that never started")
            .unwrap_err();
        assert!(
            err.contains("device 2") && err.contains("starting its thread"),
            "{err}"
        );
    }
}
