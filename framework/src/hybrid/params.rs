//! A network's parameters in slots: what a recorded training step reads its network from and
//! writes the updated values back to.

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::optim::GradientsParams;
use burn::tensor::Tensor;

use super::slot::Slot;
use crate::error::{Error, Result};

/// One slot per float parameter of a network, each flattened, in the order burn visits them,
/// and one per running statistic (BatchNorm's `running_mean`, `running_var`). A training
/// forward pass updates the running statistics in Rust code of its own, which a replay does not
/// run: the step writes what that code computed into their slots
/// ([`ParamSlots::write_running`]), so that a replay's launches carry the update on.
#[derive(Debug)]
pub struct ParamSlots {
    params: Vec<Held>,
    running: Vec<Held>,
}

#[derive(Debug)]
struct Held {
    id: ParamId,
    dims: Vec<usize>,
    slot: Slot<1>,
}

impl ParamSlots {
    /// Copies of `net`'s parameters and running statistics.
    ///
    /// # Errors
    /// None yet: the signature keeps room for a network a slot cannot hold.
    pub fn new<M: Module>(net: &M) -> Result<Self> {
        let found = Found::of(net);
        let slots = |raw: Vec<Raw>| {
            raw.into_iter()
                .map(|r| Held {
                    id: r.id,
                    dims: r.dims,
                    slot: Slot::new(r.flat),
                })
                .collect()
        };
        Ok(ParamSlots {
            params: slots(found.params),
            running: slots(found.running),
        })
    }

    /// How many parameters there are.
    pub fn len(&self) -> usize {
        self.params.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.params.is_empty()
    }

    /// The bytes the slots hold: the parameters' and the running statistics'.
    pub fn bytes(&self) -> usize {
        self.params
            .iter()
            .chain(&self.running)
            .map(|held| held.slot.bytes())
            .sum()
    }

    /// Each parameter's number of values.
    pub fn sizes(&self) -> Vec<usize> {
        self.params
            .iter()
            .map(|p| p.dims.iter().product())
            .collect()
    }

    /// `net` (of the same structure as the one the slots were made from) reading each
    /// parameter and running statistic from its slot: its value a view of the slot, its id and
    /// whether it takes a gradient as they were. Its running statistics are its own (a clone
    /// of a network shares burn's with the original), so mapping it leaves `net` as it was.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for a network whose parameters are not the slots' (another id,
    /// shape or count).
    pub fn net<M: Module>(&self, net: M) -> Result<M> {
        self.mapped(&net, false)
    }

    /// `net` holding copies of the slots' values, which later writes do not change: the
    /// trained network, for outside a step.
    ///
    /// # Errors
    /// As [`ParamSlots::net`].
    pub fn copied_net<M: Module>(&self, net: M) -> Result<M> {
        self.mapped(&net, true)
    }

    fn mapped<M: Module>(&self, net: &M, copy: bool) -> Result<M> {
        let mut views = Views {
            slots: self,
            copy,
            path: Vec::new(),
            next: (0, 0),
            mismatch: None,
        };
        let net = unshared(net).map(&mut views);
        let counts = (self.params.len(), self.running.len());
        match views.mismatch {
            Some(what) => Err(mismatch(what)),
            None if views.next != counts => Err(mismatch(format!(
                "the network has {} parameters and {} running statistics, the slots {} and {}",
                views.next.0, views.next.1, counts.0, counts.1
            ))),
            None => Ok(net),
        }
    }

    /// Writes `net`'s parameter values and running statistics into the slots, in place (as a
    /// replay needs: a slot replaced is not what it reads): the state to start from after a
    /// capture's runs, or a saved network.
    ///
    /// # Errors
    /// As [`ParamSlots::net`] for another network's parameters, and as [`Slot::write`].
    pub fn load<M: Module>(&mut self, net: &M) -> Result<()> {
        let found = Found::of(net);
        write_all(&mut self.params, found.params, "parameter")?;
        write_all(&mut self.running, found.running, "running statistic")
    }

    /// After a training forward pass of `net` ([`ParamSlots::net`]'s), the running statistics
    /// it updated (BatchNorm's), written into their slots, where the next step reads them.
    /// burn's forward pass keeps its update aside until the statistic is next read; this reads
    /// it, as the eager loop's next forward pass would (the same arithmetic), and copies it.
    /// Without this call, a replayed step would go on from the statistics it was recorded
    /// with. Nothing happens for a network without running statistics.
    ///
    /// # Errors
    /// As [`ParamSlots::load`].
    pub fn write_running<M: Module>(&mut self, net: M) -> Result<()> {
        if self.running.is_empty() {
            return Ok(());
        }
        let found = Found::of(&net);
        // Copies, so that no tensor of the step (its own statistic, where the forward pass
        // updated none) holds a slot's buffer when it is written.
        let running = found
            .running
            .into_iter()
            .map(|r| Raw {
                flat: super::slot::copy(r.flat),
                ..r
            })
            .collect();
        drop(net);
        write_all(&mut self.running, running, "running statistic")
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
            path: Vec::new(),
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

/// Writes `new` into `held`'s slots, one for one, checking that each is the same tensor.
fn write_all(held: &mut [Held], new: Vec<Raw>, what: &str) -> Result<()> {
    if new.len() != held.len() {
        return Err(mismatch(format!(
            "the network has {} of kind {what}, the slots {}",
            new.len(),
            held.len()
        )));
    }
    for (index, (held, new)) in held.iter_mut().zip(new).enumerate() {
        if held.id != new.id || held.dims != new.dims {
            return Err(mismatch(format!(
                "{what} {index}: the slot holds {} of shape {:?}, the network {} of {:?}",
                held.id, held.dims, new.id, new.dims
            )));
        }
        held.slot.write(new.flat)?;
    }
    Ok(())
}

/// `net` with running statistics of its own. A clone shares burn's `RunningState`s with its
/// original, and mapping either writes into both; `valid` makes new ones (and `train` puts an
/// autodiff network back on its device, its parameters' gradients as they were; on a plain
/// device `valid` alone, whose training flags are off, as nothing trains there).
fn unshared<M: Module>(net: &M) -> M {
    match net.devices().iter().any(|d| d.is_autodiff()) {
        true => net.valid().train(),
        false => net.valid(),
    }
}

/// A tensor of the network, flattened (a view, not a copy).
struct Raw {
    id: ParamId,
    dims: Vec<usize>,
    flat: Tensor<1>,
}

/// burn's names for BatchNorm's running statistics (`RunningState`s, visited as parameters).
const RUNNING: [&str; 2] = ["running_mean", "running_var"];

/// Whether the module entered last is a running statistic.
fn is_running(path: &[String]) -> bool {
    path.last()
        .is_some_and(|name| RUNNING.contains(&name.as_str()))
}

/// A network's parameters and running statistics, in visiting order.
struct Found {
    params: Vec<Raw>,
    running: Vec<Raw>,
    /// The fields entered, from the network down.
    path: Vec<String>,
}

impl Found {
    /// `net`'s tensors, its running statistics with the update a forward pass left aside
    /// (burn keeps it per thread until the next read: `valid` reads it, as a forward pass
    /// would).
    fn of<M: Module>(net: &M) -> Found {
        drop(net.valid());
        let mut found = Found {
            params: Vec::new(),
            running: Vec::new(),
            path: Vec::new(),
        };
        net.visit(&mut found);
        found
    }
}

impl ModuleVisitor for Found {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let value = param.val();
        let dims = value.dims().to_vec();
        let n: usize = dims.iter().product();
        let raw = Raw {
            id: param.id,
            dims,
            flat: value.reshape([n]),
        };
        match is_running(&self.path) {
            true => self.running.push(raw),
            false => self.params.push(raw),
        }
    }
}

struct Views<'a> {
    slots: &'a ParamSlots,
    /// Copies of the slots' values rather than views.
    copy: bool,
    path: Vec<String>,
    /// The parameters and running statistics mapped so far.
    next: (usize, usize),
    mismatch: Option<String>,
}

impl ModuleMapper for Views<'_> {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let (held, index, what) = match is_running(&self.path) {
            true => {
                self.next.1 += 1;
                (&self.slots.running, self.next.1 - 1, "running statistic")
            }
            false => {
                self.next.0 += 1;
                (&self.slots.params, self.next.0 - 1, "parameter")
            }
        };
        let Some(held) = held.get(index) else {
            return param;
        };
        let dims = param.val().dims();
        if held.id != param.id || held.dims != dims {
            self.mismatch.get_or_insert_with(|| {
                format!(
                    "{what} {index}: the slot holds {} of shape {:?}, the network {} of {dims:?}",
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
    path: Vec<String>,
    found: Vec<Option<Tensor<1>>>,
    ids: Vec<ParamId>,
}

impl ModuleVisitor for Gradients<'_> {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if is_running(&self.path) {
            return;
        }
        self.ids.push(param.id);
        let grad = self.grads.get::<D>(param.id).map(|g| {
            let n: usize = g.dims().iter().product();
            g.reshape([n])
        });
        self.found.push(grad);
    }
}
