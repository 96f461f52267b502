//! A network's parameters in slots: what a recorded training step reads its network from and
//! writes the updated values back to.

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::optim::GradientsParams;
use burn::tensor::Tensor;

use super::slot::Slot;
use crate::error::{Error, Result};

/// One slot per float parameter of a network, each flattened, in the order burn visits them.
/// A network with running statistics (BatchNorm's) is refused: its forward pass updates them
/// in Rust code of its own, which a replay does not run.
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
    ///
    /// # Errors
    /// [`Error::InvalidValue`] naming a running statistic (BatchNorm's `running_mean`,
    /// `running_var`): a recorded step would keep the one it recorded.
    pub fn new<M: Module>(net: &M) -> Result<Self> {
        let params = collect(net)?;
        Ok(ParamSlots { params })
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
        let params = collect(net)?;
        if params.len() != self.params.len() {
            return Err(mismatch(format!(
                "the network has {} parameters, the slots {}",
                params.len(),
                self.params.len()
            )));
        }
        for (index, (held, new)) in self.params.iter_mut().zip(params).enumerate() {
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

    /// Each parameter's gradient in `grads`, flattened; `None` for one without (a frozen
    /// parameter). `net` is the network the gradients are of ([`ParamSlots::net`]'s).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for a network whose parameters are not the slots'.
    pub fn gradients<M: Module>(
        &self,
        net: &M,
        grads: &GradientsParams,
    ) -> Result<Vec<Option<Tensor<1>>>> {
        let mut found = Gradients {
            grads,
            found: Vec::with_capacity(self.params.len()),
            ids: Vec::with_capacity(self.params.len()),
        };
        net.visit(&mut found);
        let ours = self.params.iter().map(|p| p.id);
        if found.ids.len() != self.params.len() || !ours.eq(found.ids.iter().copied()) {
            return Err(mismatch(format!(
                "gradients of a network of {} parameters, not the slots' {}",
                found.ids.len(),
                self.params.len()
            )));
        }
        Ok(found.found)
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

/// `net`'s parameters, copied into slots, or the first running statistic it holds.
fn collect<M: Module>(net: &M) -> Result<Vec<Held>> {
    let mut collect = Collect {
        params: Vec::new(),
        path: Vec::new(),
        running: None,
    };
    net.visit(&mut collect);
    match collect.running {
        Some(path) => Err(Error::InvalidValue {
            name: "network for a recorded step",
            value: path,
            reason: "running statistics (BatchNorm's) are updated by the forward pass's own \
                     code, which a replay does not run"
                .into(),
        }),
        None => Ok(collect.params),
    }
}

struct Collect {
    params: Vec<Held>,
    /// The fields entered, from the network down.
    path: Vec<String>,
    running: Option<String>,
}

/// burn's names for BatchNorm's running statistics (`RunningState`s, visited as parameters).
const RUNNING: [&str; 2] = ["running_mean", "running_var"];

impl ModuleVisitor for Collect {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if self
            .path
            .last()
            .is_some_and(|name| RUNNING.contains(&name.as_str()))
        {
            self.running.get_or_insert_with(|| self.path.join("."));
            return;
        }
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
    ids: Vec<ParamId>,
}

impl ModuleVisitor for Gradients<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        self.ids.push(param.id);
        let grad = self.grads.get::<D>(param.id).map(|g| {
            let n: usize = g.dims().iter().product();
            g.reshape([n])
        });
        self.found.push(grad);
    }
}
