//! The gradients' sum over the ranks: how they meet ([`Via`], chosen with every rank), and
//! the sum itself, on the cards by NCCL or read back and summed by MPI on the host.

use burn::module::{Module, ModuleVisitor, Param, ParamId};
use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor, TensorData};

use super::collective::{Collective, Exchanged, Via};
use crate::error::{Error, Result};
use crate::parallel::gradient::take_gradient;

impl Collective {
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
            let mine =
                serde_json::to_vec(&crate::parallel::nccl::card(device)).expect("strings are JSON");
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

    /// Replaces each of `net`'s gradients in `grads` by its sum over the ranks, in the module's
    /// parameter order: on the cards by NCCL, all of them in one buffer, where the ranks chose
    /// it ([`Self::choose`]), else read back and summed by MPI in buckets of
    /// [`BUCKET_VALUES`](super::collective::BUCKET_VALUES). A trainable parameter without a
    /// gradient takes part with zeros, as every rank must send the same values. The first call
    /// checks that every rank holds as many gradient values.
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
    /// their own, summed in place by NCCL, and cut back into the parameters' shapes. Chosen
    /// only in a build with `cuda` and `mpi`.
    fn sum_on_cards<M: Module>(
        &mut self,
        net: &M,
        grads: GradientsParams,
        device: &Device,
    ) -> Result<GradientsParams> {
        #[cfg(all(feature = "cuda", feature = "mpi"))]
        {
            use crate::parallel::{flat, nccl};
            let (grads, flat) = flat::flatten(net, grads, device);
            let values = flat.as_ref().map_or(0, |f| f.dims()[0]);
            if !self.checked {
                self.check_sizes(values)?;
                self.checked = true;
            }
            let Some(flat) = flat else {
                return Ok(grads);
            };
            self.exchanged.seconds += nccl::sum_in_place(&flat, self.rank, self.size)?;
            self.exchanged.sums += 1;
            self.exchanged.values += values as u64;
            Ok(flat::cut(net, grads, flat))
        }
        #[cfg(not(all(feature = "cuda", feature = "mpi")))]
        {
            let _ = (net, grads, device);
            unreachable!("NCCL is chosen only in a build with `cuda` and `mpi`")
        }
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
        let grad = take_gradient(&mut self.grads, param, &self.device);
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
