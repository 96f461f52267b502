//! A network's parameters in slots: what a recorded training step reads its network from and
//! writes the updated values back to.

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::optim::GradientsParams;
use burn::tensor::Tensor;

use super::slot::Slot;
use crate::error::{Error, Result};

/// One slot per float parameter of a network (and per running statistic burn keeps as one),
/// each parameter flattened, in the order burn visits them.
#[derive(Debug)]
pub struct ParamSlots {
    params: Vec<Held>,
}

#[derive(Debug)]
struct Held {
    id: ParamId,
    dims: Vec<usize>,
    slot: Slot<1>,
}

impl ParamSlots {
    /// Copies of `net`'s parameters.
    pub fn new<M: Module>(net: &M) -> Self {
        let mut collect = Collect { params: Vec::new() };
        net.visit(&mut collect);
        ParamSlots {
            params: collect.params,
        }
    }

    /// How many parameters there are.
    pub fn len(&self) -> usize {
        self.params.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.params.is_empty()
    }

    /// Each parameter's number of values.
    pub fn sizes(&self) -> Vec<usize> {
        self.params
            .iter()
            .map(|p| p.dims.iter().product())
            .collect()
    }

    /// `net` (of the same structure as the one the slots were made from) reading each
    /// parameter from its slot: its value a view of the slot, its id and whether it takes a
    /// gradient as they were.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for a network whose parameters are not the slots' (another id,
    /// shape or count).
    pub fn net<M: Module>(&self, net: M) -> Result<M> {
        self.mapped(net, false)
    }

    /// `net` holding copies of the slots' values, which later writes do not change: the
    /// trained network, for outside a step.
    ///
    /// # Errors
    /// As [`ParamSlots::net`].
    pub fn copied_net<M: Module>(&self, net: M) -> Result<M> {
        self.mapped(net, true)
    }

    fn mapped<M: Module>(&self, net: M, copy: bool) -> Result<M> {
        let mut views = Views {
            slots: self,
            copy,
            next: 0,
            mismatch: None,
        };
        let net = net.map(&mut views);
        match views.mismatch {
            Some(what) => Err(mismatch(what)),
            None if views.next != self.params.len() => Err(mismatch(format!(
                "the network has {} parameters, the slots {}",
                views.next,
                self.params.len()
            ))),
            None => Ok(net),
        }
    }

    /// Writes `net`'s parameter values into the slots, in place (as a replay needs: a slot
    /// replaced is not what it reads): the state to start from after a capture's runs, or a
    /// saved network.
    ///
    /// # Errors
    /// As [`ParamSlots::net`] for another network's parameters, and as [`Slot::write`].
    pub fn load<M: Module>(&mut self, net: &M) -> Result<()> {
        let mut collect = Collect { params: Vec::new() };
        net.visit(&mut collect);
        if collect.params.len() != self.params.len() {
            return Err(mismatch(format!(
                "the network has {} parameters, the slots {}",
                collect.params.len(),
                self.params.len()
            )));
        }
        for (index, (held, new)) in self.params.iter_mut().zip(collect.params).enumerate() {
            if held.id != new.id || held.dims != new.dims {
                return Err(mismatch(format!(
                    "parameter {index}: the slot holds {} of shape {:?}, the network {} of {:?}",
                    held.id, held.dims, new.id, new.dims
                )));
            }
            held.slot.write(new.slot.read())?;
        }
        Ok(())
    }

    /// The parameters' values, flattened: views of the slots, for an update to read (drop
    /// them before the slots are written).
    pub fn values(&self) -> Vec<Tensor<1>> {
        self.params.iter().map(|p| p.slot.read()).collect()
    }

    /// Copies of the parameters' values, flattened, that later writes do not change.
    pub fn copies(&self) -> Vec<Tensor<1>> {
        self.params.iter().map(|p| p.slot.value()).collect()
    }

    /// Each parameter's gradient in `grads`, flattened; `None` for one without (a running
    /// statistic, a frozen parameter). `net` is the network the gradients are of.
    pub fn gradients<M: Module>(&self, net: &M, grads: &GradientsParams) -> Vec<Option<Tensor<1>>> {
        let mut found = Gradients {
            grads,
            found: Vec::with_capacity(self.params.len()),
        };
        net.visit(&mut found);
        found.found
    }

    /// Writes each parameter's new values (flattened) into its slot; `None` leaves one as it
    /// is.
    ///
    /// # Errors
    /// As [`Slot::write`], and [`Error::InvalidValue`] for another count of values.
    pub fn write(&mut self, values: Vec<Option<Tensor<1>>>) -> Result<()> {
        if values.len() != self.params.len() {
            return Err(mismatch(format!(
                "{} new values for {} parameters",
                values.len(),
                self.params.len()
            )));
        }
        for (held, value) in self.params.iter_mut().zip(values) {
            if let Some(value) = value {
                held.slot.write(value)?;
            }
        }
        Ok(())
    }
}

fn mismatch(what: String) -> Error {
    Error::InvalidValue {
        name: "network",
        value: what,
        reason: "a network's parameters go to the slots made from it, in its order".into(),
    }
}

struct Collect {
    params: Vec<Held>,
}

impl ModuleVisitor for Collect {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let value = param.val();
        let dims = value.dims().to_vec();
        let n: usize = dims.iter().product();
        self.params.push(Held {
            id: param.id,
            dims,
            slot: Slot::new(value.reshape([n])),
        });
    }
}

struct Views<'a> {
    slots: &'a ParamSlots,
    /// Copies of the slots' values rather than views.
    copy: bool,
    next: usize,
    mismatch: Option<String>,
}

impl ModuleMapper for Views<'_> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let index = self.next;
        self.next += 1;
        let Some(held) = self.slots.params.get(index) else {
            return param;
        };
        let dims = param.val().dims();
        if held.id != param.id || held.dims != dims {
            self.mismatch.get_or_insert_with(|| {
                format!(
                    "parameter {index}: the slot holds {} of shape {:?}, the network {} of {dims:?}",
                    held.id, held.dims, param.id
                )
            });
            return param;
        }
        let flat = match self.copy {
            true => held.slot.value(),
            false => held.slot.read(),
        };
        let view: Tensor<D> = flat.reshape(dims);
        param.map(|old| {
            let grad = old.is_require_grad();
            view.set_require_grad(grad)
        })
    }
}

struct Gradients<'a> {
    grads: &'a GradientsParams,
    found: Vec<Option<Tensor<1>>>,
}

impl ModuleVisitor for Gradients<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let grad = self.grads.get::<D>(param.id).map(|g| {
            let n: usize = g.dims().iter().product();
            g.reshape([n])
        });
        self.found.push(grad);
    }
}
