//! A module kept on the heap, so that a layer with many parameters does not make every child
//! of a [`Sequential`](crate::Sequential) as large as itself (its `Layer` is an enum of them
//! all): a transformer layer's parameters take 1.5 kB inline, the other layers' at most 640 B.

use std::ops::Deref;

use burn::module::{Devices, Module, ModuleMapper, ModuleVisitor};
use burn::tensor::Device;

/// `M` behind a box; burn's module operations pass through with no path segment of their own.
#[derive(Debug, Clone)]
pub(crate) struct Boxed<M>(Box<M>);

impl<M> Boxed<M> {
    pub(crate) fn new(module: M) -> Self {
        Self(Box::new(module))
    }
}

impl<M> Deref for Boxed<M> {
    type Target = M;

    fn deref(&self) -> &M {
        &self.0
    }
}

impl<M: Module> Module for Boxed<M> {
    fn collect_devices(&self, devices: Devices) -> Devices {
        self.0.collect_devices(devices)
    }
    fn fork(self, device: &Device) -> Self {
        Self::new(self.0.fork(device))
    }
    fn to_device(self, device: &Device) -> Self {
        Self::new(self.0.to_device(device))
    }
    fn train(self) -> Self {
        Self::new(self.0.train())
    }
    fn valid(&self) -> Self {
        Self::new(self.0.valid())
    }
    fn materialize(self) -> Self {
        Self::new(self.0.materialize())
    }
    fn visit<V: ModuleVisitor>(&self, visitor: &mut V) {
        self.0.visit(visitor)
    }
    fn map<Mp: ModuleMapper>(self, mapper: &mut Mp) -> Self {
        Self::new(self.0.map(mapper))
    }
}
