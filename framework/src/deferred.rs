//! Deferred initialization, Gluon's way: a layer's burn module is created once its input size
//! is known, in the one explicit step [`Block::infer`](crate::Block::infer).
//!
//! [`Deferred`] holds the module (once created) and the initializer and device that
//! `initialize` chose for it. While the module does not exist, it announces itself to burn's
//! visitors as `Deferred:KIND`, which is how [`Block::collect_params`](crate::Block::collect_params)
//! lists deferred layers and `save_parameters` refuses them, with no per-layer bookkeeping.

use std::fmt;

use burn::module::{Devices, Module, ModuleMapper, ModuleVisitor};
use burn::tensor::Device;

use crate::error::{Error, Result};
use crate::init::{Init, Reinitializer};

/// The container type a deferred layer announces to burn's visitors while its module does not
/// exist yet (burn's visitor carries only names): `Deferred:Conv2D`. burn-store's collectors
/// pass over it, as it holds no tensor.
const ANNOUNCED: &str = "Deferred:";

/// The layer kind a container type announces as deferred (`Conv2D`), if it is such an
/// announcement.
pub(crate) fn announced(container_type: &str) -> Option<&str> {
    container_type.strip_prefix(ANNOUNCED)
}

/// A burn module `M` created when its input size becomes known.
#[derive(Debug, Clone)]
pub(crate) struct Deferred<M> {
    kind: &'static str,
    module: Option<M>,
    pending: Option<(Init, Device)>,
}

impl<M: Module> Deferred<M> {
    /// Nothing created yet; `kind` is the layer's Gluon name (`Conv2D`).
    pub(crate) fn new(kind: &'static str) -> Self {
        Self {
            kind,
            module: None,
            pending: None,
        }
    }

    /// The module, once created.
    pub(crate) fn get(&self) -> Option<&M> {
        self.module.as_ref()
    }

    /// The module, for a forward pass.
    ///
    /// # Panics
    /// While the module does not exist: a forward pass before `infer_shape` (or `fit`) is a
    /// bug in the program, like a forward pass on a tensor of the wrong shape.
    pub(crate) fn module(&self, layer: &dyn fmt::Display) -> &M {
        self.module.as_ref().unwrap_or_else(|| {
            panic!(
                "{layer} was run before its input size was known: call infer_shape(example) \
                 first (fit does so on its first batch); a block of one's own that holds it \
                 passes the example to it in its own `infer`"
            )
        })
    }

    /// Gluon's `initialize`: remembers `init` and `device` for a module still to be created,
    /// and re-initializes one that exists. A layer whose size is declared (`in_units`) is
    /// created at once with `build`.
    pub(crate) fn initialize(
        &mut self,
        init: Init,
        device: &Device,
        declared: Option<impl FnOnce(&Device) -> M>,
    ) {
        self.pending = Some((init, device.clone()));
        self.module = match (self.module.take(), declared) {
            (Some(module), _) => Some(module.to_device(device)),
            (None, Some(build)) => Some(build(device)),
            (None, None) => None,
        }
        .map(|module| module.map(&mut Reinitializer::new(init)));
    }

    /// Creates the module for an input on `device` if it does not exist yet.
    ///
    /// # Errors
    /// [`Error::NotInitialized`] before `initialize`, and [`Error::InvalidValue`] for an
    /// input on another device than the one `initialize` chose.
    pub(crate) fn resolve(
        &mut self,
        layer: &dyn fmt::Display,
        device: &Device,
        build: impl FnOnce(&Device) -> Result<M>,
    ) -> Result<&M> {
        if self.module.is_none() {
            let (init, init_device) =
                self.pending.clone().ok_or_else(|| Error::NotInitialized {
                    param: format!("{layer}.weight"),
                })?;
            if &init_device != device {
                return Err(Error::InvalidValue {
                    name: "input device",
                    value: format!("{device:?}"),
                    reason: format!("{layer} was initialized on {init_device:?}"),
                });
            }
            let module = build(&init_device)?.map(&mut Reinitializer::new(init));
            self.module = Some(module);
        }
        Ok(self.module.as_ref().expect("created above"))
    }
}

// The module's parameters appear directly under the layer's name (`0.weight`): no path
// segment of its own.
impl<M: Module> Module for Deferred<M> {
    fn collect_devices(&self, devices: Devices) -> Devices {
        self.module.collect_devices(devices)
    }
    fn fork(mut self, device: &Device) -> Self {
        self.module = self.module.fork(device);
        self
    }
    fn to_device(mut self, device: &Device) -> Self {
        self.module = self.module.to_device(device);
        self
    }
    fn train(mut self) -> Self {
        self.module = self.module.train();
        self
    }
    fn valid(&self) -> Self {
        Self {
            kind: self.kind,
            module: self.module.valid(),
            pending: self.pending.clone(),
        }
    }
    fn materialize(mut self) -> Self {
        self.module = self.module.materialize();
        self
    }
    fn visit<V: ModuleVisitor>(&self, visitor: &mut V) {
        match &self.module {
            Some(module) => module.visit(visitor),
            None => {
                let kind = format!("{ANNOUNCED}{}", self.kind);
                visitor.enter_module(self.kind, &kind);
                visitor.exit_module(self.kind, &kind);
            }
        }
    }
    fn map<Mp: ModuleMapper>(mut self, mapper: &mut Mp) -> Self {
        self.module = Module::map(self.module, mapper);
        self
    }
}

/// Implements burn's `Module` (and its display) for an ember layer by passing every
/// operation to one field, with no path segment of its own, so that the parameters are
/// named `0.weight` as in Gluon and PyTorch. Without a field, the layer holds no parameter.
macro_rules! layer_module {
    ($layer:ty, $field:ident) => {
        impl burn::module::Module for $layer {
            fn collect_devices(&self, devices: burn::module::Devices) -> burn::module::Devices {
                burn::module::Module::collect_devices(&self.$field, devices)
            }
            fn fork(mut self, device: &burn::tensor::Device) -> Self {
                self.$field = burn::module::Module::fork(self.$field, device);
                self
            }
            fn to_device(mut self, device: &burn::tensor::Device) -> Self {
                self.$field = burn::module::Module::to_device(self.$field, device);
                self
            }
            fn train(mut self) -> Self {
                self.$field = burn::module::Module::train(self.$field);
                self
            }
            fn valid(&self) -> Self {
                let mut copy = self.clone();
                copy.$field = burn::module::Module::valid(&self.$field);
                copy
            }
            fn materialize(mut self) -> Self {
                self.$field = burn::module::Module::materialize(self.$field);
                self
            }
            fn visit<V: burn::module::ModuleVisitor>(&self, visitor: &mut V) {
                burn::module::Module::visit(&self.$field, visitor)
            }
            fn map<M: burn::module::ModuleMapper>(mut self, mapper: &mut M) -> Self {
                self.$field = burn::module::Module::map(self.$field, mapper);
                self
            }
        }
        $crate::deferred::layer_module!(@display $layer);
    };
    ($layer:ty) => {
        impl burn::module::Module for $layer {
            fn collect_devices(&self, devices: burn::module::Devices) -> burn::module::Devices {
                devices
            }
            fn fork(self, _device: &burn::tensor::Device) -> Self {
                self
            }
            fn to_device(self, _device: &burn::tensor::Device) -> Self {
                self
            }
            fn train(self) -> Self {
                self
            }
            fn valid(&self) -> Self {
                self.clone()
            }
            fn materialize(self) -> Self {
                self
            }
            fn visit<V: burn::module::ModuleVisitor>(&self, _visitor: &mut V) {}
            fn map<M: burn::module::ModuleMapper>(self, _mapper: &mut M) -> Self {
                self
            }
        }
        $crate::deferred::layer_module!(@display $layer);
    };
    (@display $layer:ty) => {
        impl burn::module::ModuleDisplayDefault for $layer {
            fn content(&self, content: burn::module::Content) -> Option<burn::module::Content> {
                content.add_formatted(self).optional()
            }
        }
        impl burn::module::ModuleDisplay for $layer {}
    };
}
pub(crate) use layer_module;
