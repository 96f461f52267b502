//! Workloads shared by the whole-workspace tests.
#![allow(dead_code)]

pub mod cli;
pub mod fashion;
pub mod memory;
pub mod npy;
pub mod params;

use burn::prelude::*;
use ember::{Activation, Block, Dense, DeviceName, Init, L2Loss, Optimizer, Sequential};
use ember_datasets::{Batch, Synthetic};
use ember_trainer::fit::{BatchSource, Fit};
use ember_trainer::policy::SyncPolicy;
use ember_trainer::trace::Trace;

/// wgpu is required, never skipped: CI installs lavapipe.
pub fn wgpu() -> Device {
    DeviceName::Wgpu
        .resolve()
        .expect("this test needs wgpu: apt-get install -y mesa-vulkan-drivers")
        .device
}

/// Host data: every batch is a fresh copy of one template, so preparing it is cheap (a
/// memcpy) while each queued batch holds its own host memory.
pub struct Copies {
    pub template: Batch,
    pub batches: usize,
}

impl Copies {
    pub fn new(batch_size: usize, features: usize, batches: usize) -> Self {
        Self {
            template: Synthetic::chapter(batch_size, features, 1).batch(0),
            batches,
        }
    }
}

impl BatchSource for Copies {
    fn batches(&mut self, _epoch: usize) -> Box<dyn Iterator<Item = ember::Result<Batch>> + '_> {
        Box::new((0..self.batches).map(|_| Ok(self.template.clone())))
    }
}

/// A network whose backend compute dominates: narrow in, several square layers.
pub fn busy_net(width: usize, layers: usize) -> Sequential {
    let mut net = Sequential::new().add(Dense::new(32).activation(Activation::Relu));
    for _ in 0..layers {
        net = net.add(Dense::new(width).activation(Activation::Relu));
    }
    net.add(Dense::new(1))
}

/// Trains `net` for one epoch of `data` under `policy` on `device` and returns the trace.
pub fn run(
    device: &Device,
    net: Sequential,
    data: &mut dyn BatchSource,
    policy: &mut dyn SyncPolicy,
    lr: f64,
) -> ember::Result<Trace> {
    let device = device.clone().autodiff();
    let net = net.initialize(Init::default(), &device);
    let trainer = Optimizer::new(&net, "sgd", lr)?;
    Fit::new(net, L2Loss, trainer, &device)
        .policy(policy)
        .run(data)
        .map(|run| run.trace)
}
