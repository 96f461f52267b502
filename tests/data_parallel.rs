//! Data parallelism: two devices with batch b make the update one device makes with batch 2b
//! (Gluon's summed gradients and `step(total batch)`), on flex and on two wgpu devices on one
//! lavapipe adapter; a seeded run's Dropout masks repeat on every replica, whatever other
//! threads draw; and a device that fails mid-run is an error naming it and the batch.

mod common;

use common::params::{flat, max_difference};

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use burn::module::Module;
use burn::prelude::*;
use ember::{
    Activation, BatchNorm, Block, Dense, DeviceList, Dropout, Init, L2Loss, Loss, Optimizer,
    OptimizerKind, Replicas, Result, Sequential,
};
use ember_datasets::{Batch, Synthetic};
use ember_trainer::fit::{BatchSource, Fit, FitRun, SyntheticEpochs};

/// Batches whose targets vary (the chapter's are all 1), so that each half of a batch pulls
/// the parameters its own way.
struct Varied {
    data: Synthetic,
    steps: usize,
}

impl BatchSource for Varied {
    fn batches(&mut self, _epoch: usize) -> Box<dyn Iterator<Item = Result<Batch>> + '_> {
        Box::new((0..self.steps as u64).map(|i| {
            let mut batch = self.data.batch(i);
            let features = batch.x_shape[1];
            for (row, y) in batch.y.iter_mut().enumerate() {
                *y = batch.x[row * features..(row + 1) * features]
                    .iter()
                    .sum::<f32>()
                    / 4.0;
            }
            Ok(batch)
        }))
    }
}

/// The network both runs start from, with its input size resolved on `device`, from a fixed
/// seed so that a failure repeats.
fn start(device: &Device) -> Sequential {
    device.seed(7);
    let net: Sequential = Sequential::new()
        .add(Dense::new(24).activation(Activation::Relu))
        .add(Dense::new(12).activation(Activation::Tanh))
        .add(Dense::new(1))
        .initialize(Init::default(), device);
    net.infer_shape(Tensor::<2>::ones([1, 10], device)).unwrap()
}

/// Five steps of `optimizer` from `net` on `devices` (the first main) with batches of `batch`.
fn train(
    net: Sequential,
    devices: &[Device],
    batch: usize,
    optimizer: OptimizerKind,
) -> FitRun<Sequential> {
    let trainer = Optimizer::new(&net, optimizer, 0.02).unwrap();
    let mut data = Varied {
        data: Synthetic::chapter(batch, 10, 7),
        steps: 5,
    };
    Fit::new(net, L2Loss, trainer, &devices[0])
        .replicas(Replicas::new(devices.to_vec()).unwrap())
        .run(&mut data)
        .unwrap()
}

/// Two devices with batch b against one with batch 2b, from the same parameters and data.
///
/// Adam runs with ε = 1e-3. Its step is lr·m/(√v + ε), so a gradient element that cancels
/// to the rounding level of the sum (about 1e-8 here) gets a step whose size is set by that
/// rounding, up to lr·Δg/ε. With PyTorch's ε = 1e-8, 16 + 16 summed in another order than 32
/// moved one parameter by 3e-5 on CI's lavapipe (the same code, another CPU). That is Adam
/// amplifying rounding, not the replicas disagreeing. With ε = 1e-3 the rounding's share
/// stays below 2e-7 a step, while the real gradients here (1e-2 and up) are still divided by
/// their own size.
fn check_equivalence(one: &Device, two: [&Device; 2]) {
    let adam = OptimizerKind::adam().with_epsilon(1e-3).unwrap();
    for optimizer in [OptimizerKind::sgd(), adam] {
        let net = start(one);
        let before = flat(&net);
        let whole = train(net.clone(), std::slice::from_ref(one), 32, optimizer);
        let net_two = net.clone().fork(two[0]);
        let split = train(net_two, &[two[0].clone(), two[1].clone()], 32, optimizer);
        // The split run really ran on two devices, and each step counted all 32 examples.
        assert!(
            split.trace.batches.iter().all(|b| b.device_done.len() == 2),
            "{:?}",
            split.trace.batches
        );
        assert!(whole.trace.batches.iter().all(|b| b.device_done.is_empty()));
        let (whole, split) = (flat(&whole.net), flat(&split.net));
        let moved = max_difference(&before, &whole);
        let apart = max_difference(&whole, &split);
        println!(
            "{optimizer}: the parameters moved by up to {moved:.3e}; the runs differ by {apart:.3e}"
        );
        assert!(
            moved > 1e-3,
            "{optimizer}: training moved the parameters by {moved} only"
        );
        assert!(
            apart <= 1e-5,
            "{optimizer}: 2 devices x 16 and 1 device x 32 differ by {apart} after 5 steps"
        );
    }
}

#[test]
fn two_flex_devices_with_batch_b_equal_one_with_batch_2b_under_sgd_and_adam() {
    let device = Device::flex().autodiff();
    check_equivalence(&device, [&device, &device]);
}

#[test]
fn two_wgpu_devices_on_one_adapter_equal_one_with_batch_2b_under_sgd_and_adam() {
    let picked = "wgpu,wgpu"
        .parse::<DeviceList>()
        .unwrap()
        .open()
        .expect("this test needs wgpu: apt-get install -y mesa-vulkan-drivers");
    let devices: Vec<Device> = picked.iter().map(|p| p.device.clone().autodiff()).collect();
    assert_ne!(devices[0], devices[1], "two distinct wgpu devices");
    check_equivalence(&devices[0], [&devices[0], &devices[1]]);
}

#[test]
fn a_half_batch_on_one_device_is_not_the_same_update() {
    // The control of the tolerance above: dropping one device's half changes the result.
    let device = Device::flex().autodiff();
    let net = start(&device);
    let whole = flat(
        &train(
            net.clone(),
            std::slice::from_ref(&device),
            32,
            OptimizerKind::sgd(),
        )
        .net,
    );
    let half = flat(&train(net, std::slice::from_ref(&device), 16, OptimizerKind::sgd()).net);
    assert!(max_difference(&whole, &half) > 1e-4);
}

#[test]
fn seeded_dropout_masks_repeat_on_every_replica_whatever_other_threads_draw() {
    let device = Device::flex().autodiff();
    let net: Sequential = Sequential::new()
        .add(Dense::new(24).activation(Activation::Relu))
        .add(Dropout::new(0.5))
        .add(Dense::new(1))
        .initialize(Init::default(), &device);
    let net = net
        .infer_shape(Tensor::<2>::ones([1, 10], &device))
        .unwrap();
    let run = |replicas: usize, seed: u64| -> Vec<f32> {
        let trainer = Optimizer::new(&net, "sgd", 0.05).unwrap();
        let mut data = Varied {
            data: Synthetic::chapter(32, 10, 7),
            steps: 8,
        };
        let fit = Fit::new(net.clone(), L2Loss, trainer, &device)
            .replicas(Replicas::new(vec![device.clone(); replicas]).unwrap())
            .seed(seed)
            .run(&mut data)
            .unwrap();
        flat(&fit.net)
    };
    // Meanwhile another thread re-seeds burn's generator (flex has one per process) and draws
    // from it, as a second training loop in this process would.
    let done = AtomicBool::new(false);
    /// Stops the drawing thread, also when an assertion fails (the scope waits for it).
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                device.seed(1);
                let _ = Tensor::<2>::random([64, 64], burn::tensor::Distribution::Default, &device);
            }
        });
        let _stop = Stop(&done);
        for replicas in [1, 2] {
            let first = run(replicas, 3);
            assert_eq!(run(replicas, 3), first, "{replicas} replica(s), seed 3");
            // The masks come from the seed: another seed, other masks, another result.
            assert!(max_difference(&run(replicas, 4), &first) > 1e-4);
        }
    });
}

/// A loss whose device fails (panics, as burn does when a device is lost) on its `fail_at`-th
/// call.
struct FailsAt {
    calls: AtomicUsize,
    fail_at: usize,
}

impl Loss for FailsAt {
    type Target = Tensor<2>;

    fn forward(&self, pred: Tensor<2>, target: Tensor<2>) -> Result<Tensor<1>> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        assert!(call != self.fail_at, "the device was lost");
        L2Loss.forward(pred, target)
    }
}

#[test]
fn a_device_failing_mid_run_is_an_error_naming_the_device_and_the_batch() {
    let device = Device::flex().autodiff();
    let net = start(&device);
    let trainer = Optimizer::new(&net, "sgd", 0.01).unwrap();
    // Warm-up: 2 calls; steps 0..3: 2 calls each; the 9th call is step 3's.
    let loss = FailsAt {
        calls: AtomicUsize::new(0),
        fail_at: 9,
    };
    let mut data = SyntheticEpochs::new(Synthetic::chapter(8, 10, 0), 6);
    let err = Fit::new(net, loss, trainer, &device)
        .replicas(Replicas::new(vec![device.clone(), device.clone()]).unwrap())
        .run(&mut data)
        .err()
        .expect("the run must fail")
        .to_string();
    assert!(err.contains("batch 4 of epoch 1"), "{err}");
    assert!(
        err.contains("device") && err.contains("the device was lost"),
        "{err}"
    );
}

#[test]
fn a_batch_smaller_than_the_device_count_is_refused_before_training() {
    let device = Device::flex().autodiff();
    let net = start(&device);
    let trainer = Optimizer::new(&net, "sgd", 0.01).unwrap();
    let mut data = SyntheticEpochs::new(Synthetic::chapter(2, 10, 0), 3);
    let err = Fit::new(net, L2Loss, trainer, &device)
        .replicas(Replicas::new(vec![device.clone(); 3]).unwrap())
        .run(&mut data)
        .err()
        .expect("2 examples cannot be split across 3 devices")
        .to_string();
    assert!(
        err.contains("batch size 2") && err.contains("3 devices"),
        "{err}"
    );
}

/// BatchNorm under replicas: each step's running statistics are the mean of the replicas'
/// updates, as Gluon averages the devices' copies. With equal shards the mean of their batch
/// means is the batch's mean, so at a rate too small to move the weights, two replicas end an
/// epoch of 8 steps with one device's running means (the variances differ by the spread of
/// the shards' means). They ended with one step's worth: every replica's thread is new, and
/// burn kept each update per thread until a `valid()`.
#[test]
fn batch_norm_running_means_under_two_replicas_are_one_devices() {
    let device = Device::flex().autodiff();
    let net: Sequential = Sequential::new()
        .add(Dense::new(6))
        .add(BatchNorm::new())
        .add(Dense::new(1))
        .initialize(Init::Xavier, &device);
    let net = net
        .infer_shape(Tensor::<2>::ones([1, 10], &device))
        .unwrap();
    let means = |replicas: usize| -> Vec<f32> {
        // A copy with running statistics of its own (a clone's are shared).
        let net = net.valid().train();
        let trainer = Optimizer::new(&net, "sgd", 1e-9).unwrap();
        let mut data = Varied {
            data: Synthetic::chapter(32, 10, 7),
            steps: 8,
        };
        let run = Fit::new(net, L2Loss, trainer, &device)
            .replicas(Replicas::new(vec![device.clone(); replicas]).unwrap())
            .run(&mut data)
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("net.safetensors");
        run.net.valid().save_parameters(&path).unwrap();
        common::params::floats(&path)
            .remove("1.running_mean")
            .unwrap()
    };
    let (one, two) = (means(1), means(2));
    let scale = one.iter().fold(0f32, |m, v| m.max(v.abs()));
    assert!(scale > 0.01, "the running means did not move: {one:?}");
    assert!(
        max_difference(&one, &two) <= 1e-4 * scale,
        "one device {one:?}, two replicas {two:?}"
    );
}
