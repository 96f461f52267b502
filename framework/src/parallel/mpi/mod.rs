//! Data parallelism across processes, as PyTorch's DDP and Horovod do it: one process (a
//! *rank*) per device, each on its own share of the data, and the gradients summed by MPI's
//! all-reduce, in which every rank takes part. `mpirun` starts the ranks, on one host or many;
//! MPI (Open MPI, through rsmpi) does the collective and the transport. Nothing here is a
//! protocol of ember's own.
//!
//! [`Mpi::init`] starts MPI on the main thread; the [`Collective`] it gives is what the
//! engine's worker thread calls, one unit at a time (MPI's `THREAD_SERIALIZED`).
//!
//! Where every rank trains on a CUDA card and NCCL's library loads (a `cuda` build), the
//! gradients are summed on the cards by NCCL ([`super::nccl`]); elsewhere they are read back
//! and summed by MPI on the host ([`Via`]).

use std::collections::BTreeMap;
use std::fmt;

use burn::module::{Module, ModuleVisitor, Param, ParamId};
use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor, TensorData};

use crate::error::{Error, Result};

/// Gradients travel in messages of at most this many values (25 MiB of `f32`, DDP's default
/// bucket): one all-reduce per bucket, never one per tensor.
pub const BUCKET_VALUES: usize = 25 * (1 << 20) / 4;

/// MPI, started for this process; it ends (`MPI_Finalize`) when this is dropped. Keep it on
/// the thread that made it, for the whole run.
pub struct Mpi {
    #[cfg(feature = "mpi")]
    _universe: mpi::environment::Universe,
    collective: Collective,
}

impl Mpi {
    /// Starts MPI: under `mpirun`, this process's rank among the job's; without it, a job of
    /// one rank.
    ///
    /// # Errors
    /// [`Error::NotBuilt`] in a build without the `mpi` feature; [`Error::Distributed`] when
    /// MPI was started already or cannot give the thread support the engine needs.
    pub fn init() -> Result<Self> {
        #[cfg(feature = "mpi")]
        {
            use mpi::traits::Communicator;
            let (universe, threading) = mpi::initialize_with_threading(mpi::Threading::Serialized)
                .ok_or_else(|| {
                    Error::Distributed("MPI was started already in this process".to_string())
                })?;
            if threading < mpi::Threading::Serialized {
                return Err(Error::Distributed(format!(
                    "this MPI library gives {threading:?} threads; the engine's worker calls \
                     MPI from a thread of its own, which needs Serialized"
                )));
            }
            let world = universe.world();
            let local_rank = world.split_shared(world.rank()).rank() as usize;
            let collective = Collective {
                rank: world.rank() as usize,
                size: world.size() as usize,
                local_rank,
                checked: false,
                via: None,
                exchanged: Exchanged::default(),
            };
            Ok(Self {
                _universe: universe,
                collective,
            })
        }
        #[cfg(not(feature = "mpi"))]
        Err(Error::NotBuilt {
            device: "--distributed mpi".to_string(),
            backend: "MPI",
            why: "it was compiled without the `mpi` feature (the default build has it): \
                  install Open MPI (`apt-get install libopenmpi-dev openmpi-bin`) and build \
                  with the default features",
        })
    }

    /// The job's collective, for the thread that trains.
    pub fn collective(&self) -> Collective {
        self.collective.clone()
    }
}

/// The job's ranks, as one rank sees them, and the collectives they take part in together.
/// Every rank must call the same collectives in the same order.
#[derive(Debug, Clone)]
pub struct Collective {
    rank: usize,
    size: usize,
    /// This rank among the ranks on its host (MPI's shared-memory split).
    local_rank: usize,
    /// Whether the ranks' gradient sizes were found equal (checked at the first sum).
    checked: bool,
    /// How the gradients meet, once chosen ([`Collective::choose`]).
    via: Option<Via>,
    exchanged: Exchanged,
}

/// How the ranks' gradients meet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Via {
    /// Read back to the host and summed by MPI, which works with every device; says why
    /// NCCL does not sum them.
    Host(String),
    /// Summed in place on the ranks' CUDA cards by NCCL.
    Nccl,
}

impl fmt::Display for Via {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Host(why) => write!(
                f,
                "gradients summed by MPI on the host, in buckets of {} MiB (not by NCCL: {why})",
                (BUCKET_VALUES * size_of::<f32>()) >> 20
            ),
            Self::Nccl => write!(f, "gradients summed on the cards by NCCL"),
        }
    }
}

/// What [`Collective::sum_gradients`] did since it was last asked.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Exchanged {
    /// All-reduces of the whole gradient (each of one or more buckets).
    pub sums: u64,
    /// Gradient values each rank sent, over all of them.
    pub values: u64,
    /// Seconds in them, from the first bucket's call to the last one's return: the transfer,
    /// the additions and the wait for the slowest rank.
    pub seconds: f64,
}

impl Collective {
    /// This process's rank, from 0.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// How many ranks the job has.
    pub fn size(&self) -> usize {
        self.size
    }

    /// This rank among the ranks on its host, from 0: the card it takes (`cuda:local_rank`),
    /// as DDP's `LOCAL_RANK`.
    pub fn local_rank(&self) -> usize {
        self.local_rank
    }

    /// Chooses, with every rank, how the gradients of a network on `device` meet: NCCL on
    /// the cards where every rank can use it, MPI on the host otherwise (naming a rank that
    /// cannot, and why). Every rank must call it at the same point; [`Self::sum_gradients`]
    /// calls it at its first sum where the caller did not.
    pub fn choose(&mut self, device: &Device) -> &Via {
        if self.via.is_none() {
            self.via = Some(self.agree_via(device));
        }
        self.via.as_ref().expect("chosen above")
    }

    fn agree_via(&self, device: &Device) -> Via {
        #[cfg(all(feature = "cuda", feature = "mpi"))]
        {
            // Each rank's card, or why it has none NCCL can use, as JSON (`agree`'s way).
            let mine = serde_json::to_vec(&super::nccl::card(device)).expect("strings are JSON");
            let all: Vec<std::result::Result<String, String>> = self
                .gather(&mine)
                .iter()
                .map(|b| serde_json::from_slice(b).unwrap_or_else(|e| Err(e.to_string())))
                .collect();
            let mut cards = Vec::new();
            for (rank, card) in all.into_iter().enumerate() {
                match card {
                    Err(why) => return Via::Host(format!("rank {rank}: {why}")),
                    Ok(card) => cards.push(card),
                }
            }
            // NCCL takes each card once ("Duplicate GPU detected").
            for (rank, card) in cards.iter().enumerate() {
                if let Some(first) = cards[..rank].iter().position(|other| other == card) {
                    return Via::Host(format!(
                        "ranks {first} and {rank} share {card}, and NCCL takes each card once"
                    ));
                }
            }
            Via::Nccl
        }
        #[cfg(not(all(feature = "cuda", feature = "mpi")))]
        {
            let _ = device;
            Via::Host("this build has no `cuda` feature".to_string())
        }
    }

    /// Ends every rank of the job with `code` (`MPI_Abort`): what a rank that failed does, as
    /// the others may be waiting for it in a collective that would never end.
    pub fn abort(&self, code: i32) -> ! {
        #[cfg(feature = "mpi")]
        {
            use mpi::traits::Communicator;
            mpi::topology::SimpleCommunicator::world().abort(code)
        }
        #[cfg(not(feature = "mpi"))]
        std::process::exit(code)
    }

    /// Waits until every rank has called it.
    pub fn barrier(&self) {
        #[cfg(feature = "mpi")]
        {
            use mpi::collective::CommunicatorCollectives;
            mpi::topology::SimpleCommunicator::world().barrier();
        }
    }

    /// Sums `values` over the ranks, in place, in buckets of [`BUCKET_VALUES`].
    pub fn sum_f32(&self, values: &mut [f32]) {
        #[cfg(feature = "mpi")]
        {
            use mpi::collective::{CommunicatorCollectives, SystemOperation};
            let world = mpi::topology::SimpleCommunicator::world();
            for bucket in values.chunks_mut(BUCKET_VALUES) {
                let send = bucket.to_vec();
                world.all_reduce_into(&send[..], bucket, SystemOperation::sum());
            }
        }
        #[cfg(not(feature = "mpi"))]
        let _ = values;
    }

    /// Sums `values` over the ranks, in place (one message).
    pub fn sum_f64(&self, values: &mut [f64]) {
        #[cfg(feature = "mpi")]
        {
            use mpi::collective::{CommunicatorCollectives, SystemOperation};
            let world = mpi::topology::SimpleCommunicator::world();
            let send = values.to_vec();
            world.all_reduce_into(&send[..], values, SystemOperation::sum());
        }
        #[cfg(not(feature = "mpi"))]
        let _ = values;
    }

    /// Sums `mine` over the ranks where their lengths may differ: a rank that has nothing
    /// (an empty slice) adds nothing; the others must be as long as each other.
    ///
    /// # Errors
    /// [`Error::Distributed`] for two ranks with sums of other lengths.
    pub fn sum_sparse(&self, mine: &[f64], what: &str) -> Result<Vec<f64>> {
        let bytes: Vec<u8> = mine.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut sum: Vec<f64> = Vec::new();
        for (rank, theirs) in self.gather(&bytes).iter().enumerate() {
            let theirs: Vec<f64> = theirs
                .chunks_exact(8)
                .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
                .collect();
            match (sum.is_empty(), theirs.is_empty()) {
                (_, true) => {}
                (true, false) => sum = theirs,
                (false, false) if sum.len() == theirs.len() => {
                    sum.iter_mut().zip(&theirs).for_each(|(s, t)| *s += t)
                }
                (false, false) => {
                    return Err(Error::Distributed(format!(
                        "{what}: rank {rank} holds {} values, an earlier rank {}",
                        theirs.len(),
                        sum.len()
                    )));
                }
            }
        }
        Ok(sum)
    }

    /// Each rank's `mine`, by rank: every rank gets all of them.
    pub fn gather(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        #[cfg(feature = "mpi")]
        {
            use mpi::collective::CommunicatorCollectives;
            let world = mpi::topology::SimpleCommunicator::world();
            let mut lengths = vec![0u64; self.size];
            world.all_gather_into(&(mine.len() as u64), &mut lengths[..]);
            let longest = lengths.iter().copied().max().unwrap_or(0) as usize;
            let mut padded = mine.to_vec();
            padded.resize(longest, 0);
            let mut all = vec![0u8; longest * self.size];
            world.all_gather_into(&padded[..], &mut all[..]);
            all.chunks(longest.max(1))
                .zip(&lengths)
                .map(|(chunk, &len)| chunk[..len as usize].to_vec())
                .collect()
        }
        #[cfg(not(feature = "mpi"))]
        vec![mine.to_vec()]
    }

    /// Checks that every rank was started with the same `settings` (flag → value), before any
    /// work: a rank whose settings differ from rank 0's makes every rank refuse, naming the
    /// rank and the setting.
    ///
    /// # Errors
    /// [`Error::Distributed`] naming each differing setting and its values.
    pub fn agree(&self, settings: &BTreeMap<String, String>) -> Result<()> {
        let mine = serde_json::to_vec(settings).expect("a map of strings is JSON");
        let all = self.gather(&mine);
        let first: BTreeMap<String, String> =
            serde_json::from_slice(&all[0]).map_err(|e| Error::Distributed(e.to_string()))?;
        let mut differences = Vec::new();
        for (rank, theirs) in all.iter().enumerate().skip(1) {
            let theirs: BTreeMap<String, String> =
                serde_json::from_slice(theirs).map_err(|e| Error::Distributed(e.to_string()))?;
            differences.extend(
                differing(&first, &theirs).into_iter().map(|(name, a, b)| {
                    format!("rank {rank} has {name} {b}, rank 0 has {name} {a}")
                }),
            );
        }
        match differences.is_empty() {
            true => Ok(()),
            false => Err(Error::Distributed(format!(
                "the ranks were started with other settings: {}; start every rank with the \
                 same flags",
                differences.join("; ")
            ))),
        }
    }

    /// Replaces each of `net`'s gradients in `grads` by its sum over the ranks, in the module's
    /// parameter order: on the cards by NCCL, all of them in one buffer, where the ranks chose
    /// it ([`Self::choose`]), else read back and summed by MPI in buckets of
    /// [`BUCKET_VALUES`]. A trainable parameter without a gradient takes part with zeros, as
    /// every rank must send the same values. The first call checks that every rank holds as
    /// many gradient values.
    ///
    /// # Errors
    /// [`Error::Distributed`] when the ranks' networks differ in size; a readback's error.
    pub fn sum_gradients<M: Module>(
        &mut self,
        net: &M,
        grads: GradientsParams,
        device: &Device,
    ) -> Result<GradientsParams> {
        let device = device.clone().inner();
        if *self.choose(&device) == Via::Nccl {
            return self.sum_on_cards(net, grads, &device);
        }
        let mut flat = Flatten {
            grads,
            device: device.clone(),
            values: Vec::new(),
            error: None,
        };
        net.visit(&mut flat);
        if let Some(error) = flat.error {
            return Err(error);
        }
        if !self.checked {
            self.check_sizes(flat.values.len())?;
            self.checked = true;
        }
        let started = std::time::Instant::now();
        self.sum_f32(&mut flat.values);
        self.exchanged.seconds += started.elapsed().as_secs_f64();
        self.exchanged.sums += 1;
        self.exchanged.values += flat.values.len() as u64;
        let mut unflat = Unflatten {
            grads: flat.grads,
            device,
            values: flat.values,
            at: 0,
        };
        net.visit(&mut unflat);
        Ok(unflat.grads)
    }

    /// [`Self::sum_gradients`] on the cards: the gradients concatenated into one buffer of
    /// their own, summed in place by NCCL, and cut back into the parameters' shapes.
    #[cfg(all(feature = "cuda", feature = "mpi"))]
    fn sum_on_cards<M: Module>(
        &mut self,
        net: &M,
        grads: GradientsParams,
        device: &Device,
    ) -> Result<GradientsParams> {
        let (grads, flat) = super::nccl::flatten(net, grads, device);
        let values = flat.as_ref().map_or(0, |f| f.dims()[0]);
        if !self.checked {
            self.check_sizes(values)?;
            self.checked = true;
        }
        let Some(flat) = flat else {
            return Ok(grads);
        };
        self.exchanged.seconds += super::nccl::sum_in_place(&flat, self.rank, self.size)?;
        self.exchanged.sums += 1;
        self.exchanged.values += values as u64;
        Ok(super::nccl::cut(net, grads, flat))
    }

    #[cfg(not(all(feature = "cuda", feature = "mpi")))]
    fn sum_on_cards<M: Module>(
        &mut self,
        _: &M,
        _: GradientsParams,
        _: &Device,
    ) -> Result<GradientsParams> {
        unreachable!("NCCL is chosen only in a build with `cuda` and `mpi`")
    }

    /// What the gradients' all-reduces did since the last call, which starts the count again.
    pub fn take_exchanged(&mut self) -> Exchanged {
        std::mem::take(&mut self.exchanged)
    }

    /// Every rank's count of gradient values must be `mine`: the same network.
    fn check_sizes(&self, mine: usize) -> Result<()> {
        let sizes = self.gather(&(mine as u64).to_le_bytes());
        let sizes: Vec<u64> = sizes
            .iter()
            .map(|s| u64::from_le_bytes(s[..8].try_into().expect("8 bytes")))
            .collect();
        match sizes.iter().all(|&s| s == sizes[0]) {
            true => Ok(()),
            false => Err(Error::Distributed(format!(
                "the ranks' networks differ: their parameters hold {} values, by rank; start \
                 every rank with the same --model and data",
                sizes
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }
}

/// The settings of `b` that differ from `a`'s, with `a`'s and `b`'s values (`(none)` where one
/// lacks it).
fn differing(
    a: &BTreeMap<String, String>,
    b: &BTreeMap<String, String>,
) -> Vec<(String, String, String)> {
    let none = "(none)".to_string();
    let names: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    names
        .into_iter()
        .filter(|name| a.get(*name) != b.get(*name))
        .map(|name| {
            (
                name.clone(),
                a.get(name).unwrap_or(&none).clone(),
                b.get(name).unwrap_or(&none).clone(),
            )
        })
        .collect()
}

/// Appends each trainable parameter's gradient (zeros where it has none) to `values`, taking
/// it out of `grads`.
struct Flatten {
    grads: GradientsParams,
    device: Device,
    values: Vec<f32>,
    error: Option<Error>,
}

impl ModuleVisitor for Flatten {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if !param.is_require_grad() || self.error.is_some() {
            return;
        }
        let grad = super::take_gradient(&mut self.grads, param, &self.device);
        match grad.into_data().try_into_vec::<f32>() {
            Ok(values) => self.values.extend_from_slice(&values),
            Err(e) => {
                self.error = Some(Error::Readback {
                    what: "a gradient".to_string(),
                    reason: format!("{e:?}"),
                })
            }
        }
    }
}

/// Puts the summed values back into `grads`, parameter by parameter, in the same order.
struct Unflatten {
    grads: GradientsParams,
    device: Device,
    values: Vec<f32>,
    at: usize,
}

impl ModuleVisitor for Unflatten {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if !param.is_require_grad() {
            return;
        }
        let shape = param.val().shape().to_vec();
        let len: usize = shape.iter().product();
        let values = self.values[self.at..self.at + len].to_vec();
        self.at += len;
        let data = TensorData::new(values, shape);
        let id: ParamId = param.id;
        self.grads
            .register(id, Tensor::<D>::from_data(data, &self.device));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn differing_settings_name_each_flag_with_both_values() {
        let a = map(&[("--lr", "0.1"), ("--seed", "0"), ("--model", "mlp:256")]);
        let b = map(&[("--lr", "0.2"), ("--seed", "0"), ("--wd", "0.01")]);
        assert_eq!(
            differing(&a, &b),
            vec![
                ("--lr".into(), "0.1".into(), "0.2".into()),
                ("--model".into(), "mlp:256".into(), "(none)".into()),
                ("--wd".into(), "(none)".into(), "0.01".into()),
            ]
        );
        assert!(differing(&a, &a).is_empty());
    }
}
