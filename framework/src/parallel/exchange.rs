//! How a data-parallel step's gradients meet ([`crate::Replicas`]): moved to the main device and
//! summed there, or, across distinct NVIDIA cards with NCCL's library present, all-reduced in
//! place by NCCL through burn's own collective (`burn::tensor::distributed::all_reduce`, which
//! burn's CUDA backend runs as `ncclAllReduce` on a stream of its own).
//!
//! ```
//! use ember::parallel::exchange::Exchange;
//! // Two replicas on flex (one device, no cards): the gradients are summed on the main device.
//! let device = burn::tensor::Device::flex().autodiff();
//! let exchange = Exchange::for_devices(&[device.clone(), device]);
//! assert!(matches!(exchange, Exchange::OnMain(_)), "{exchange}");
//! ```

use std::fmt;

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::distributed::{ReduceOperation, all_reduce};
use burn::tensor::{Device, Tensor};

use super::gradient::take_gradient;

/// Where the replicas' gradients are summed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exchange {
    /// Each replica's gradients move to the main device and are summed there (burn-train's
    /// multi-device pattern). Says why NCCL does not do it.
    OnMain(String),
    /// NCCL all-reduces each gradient across these CUDA ordinals, main first.
    Nccl(Vec<usize>),
}

impl Exchange {
    /// The exchange for replicas on `devices` (main first): NCCL when every device is a CUDA
    /// card, no card appears twice, there are at least two, and NCCL's library loads; the sum
    /// on the main device otherwise.
    pub fn for_devices(devices: &[Device]) -> Self {
        Self::choose(
            &crate::device::cuda::ordinals(devices),
            crate::device::cuda::nccl,
        )
    }

    /// The exchange of a single device: nothing to sum across.
    pub fn single() -> Self {
        Self::OnMain("a single device".to_string())
    }

    /// The rule of [`Exchange::for_devices`], on each device's CUDA ordinal (`None`: not a
    /// card) and a check that NCCL's library loads (asked only when it would be used).
    fn choose(ordinals: &[Option<usize>], nccl: impl FnOnce() -> Result<(), String>) -> Self {
        if ordinals.len() < 2 {
            return Self::single();
        }
        let Some(cards) = ordinals.iter().copied().collect::<Option<Vec<_>>>() else {
            return Self::OnMain("NCCL joins CUDA cards only".to_string());
        };
        if let Some((at, card)) = cards
            .iter()
            .enumerate()
            .find(|(at, card)| cards[..*at].contains(card))
        {
            return Self::OnMain(format!(
                "cuda:{card} is replica {at} and an earlier one too; NCCL takes each card once"
            ));
        }
        match nccl() {
            Ok(()) => Self::Nccl(cards),
            Err(why) => Self::OnMain(why),
        }
    }
}

impl fmt::Display for Exchange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::OnMain(why) => write!(f, "gradients summed on the main device ({why})"),
            Self::Nccl(cards) => {
                let cards: Vec<_> = cards.iter().map(|c| format!("cuda:{c}")).collect();
                write!(
                    f,
                    "gradients all-reduced by NCCL across {}",
                    cards.join(", ")
                )
            }
        }
    }
}

/// Sums one gradient across the replicas; every replica calls it on the same gradients in the
/// same order, as a collective requires.
pub(crate) trait Reduce {
    fn sum<const D: usize>(&mut self, grad: Tensor<D>) -> Tensor<D>;
}

/// burn's all-reduce over the replicas' devices (NCCL on CUDA).
pub(crate) struct AllReduce<'a>(pub(crate) &'a [Device]);

impl Reduce for AllReduce<'_> {
    fn sum<const D: usize>(&mut self, grad: Tensor<D>) -> Tensor<D> {
        all_reduce(grad, ReduceOperation::Sum, self.0.to_vec()).resolve()
    }
}

/// Replaces each of `replica`'s gradients in `grads` by its sum over the replicas, in the
/// module's parameter order. A trainable parameter without a gradient on this replica takes
/// part with zeros, so every replica issues the same collectives in the same order (one that
/// skipped a collective would leave the others waiting for it). So a parameter the forward
/// pass never used comes back with a zero gradient, which an optimizer with weight decay or
/// momentum still applies; the sum on the main device leaves such a parameter out.
pub(crate) fn sum_across<M: Module>(
    replica: &M,
    grads: GradientsParams,
    device: &Device,
    reduce: impl Reduce,
) -> GradientsParams {
    let mut visitor = SumAcross {
        grads,
        device: device.clone().inner(),
        reduce,
    };
    replica.visit(&mut visitor);
    visitor.grads
}

struct SumAcross<R> {
    grads: GradientsParams,
    device: Device,
    reduce: R,
}

impl<R: Reduce> ModuleVisitor for SumAcross<R> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if !param.is_require_grad() {
            return;
        }
        let grad = take_gradient(&mut self.grads, param, &self.device);
        let sum = self.reduce.sum(grad);
        self.grads.register(param.id, sum);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Block, Dense, Init, Sequential};

    #[test]
    fn nccl_only_across_distinct_cards_and_only_when_its_library_loads() {
        let loads = || Ok(());
        let missing = || Err("no NCCL: none of libnccl.so could be loaded".to_string());
        assert_eq!(
            Exchange::choose(&[Some(0), Some(1)], loads),
            Exchange::Nccl(vec![0, 1])
        );
        assert_eq!(
            Exchange::choose(&[Some(3), Some(1), Some(2)], loads),
            Exchange::Nccl(vec![3, 1, 2])
        );
        let on_main =
            |ordinals: &[Option<usize>], nccl: fn() -> Result<(), String>| match Exchange::choose(
                ordinals, nccl,
            ) {
                Exchange::OnMain(why) => why,
                nccl => panic!("{ordinals:?} chose {nccl}"),
            };
        assert_eq!(Exchange::choose(&[Some(0)], loads), Exchange::single());
        assert_eq!(on_main(&[Some(0)], loads), "a single device");
        assert!(on_main(&[Some(0), None], loads).contains("CUDA cards only"));
        assert!(on_main(&[Some(1), Some(0), Some(1)], loads).contains("cuda:1 is replica 2"));
        assert!(on_main(&[Some(0), Some(1)], missing).contains("libnccl"));
        // The library is not even looked for where NCCL could not be used.
        let never = || -> Result<(), String> { panic!("looked for NCCL") };
        assert!(matches!(
            Exchange::choose(&[None, None], never),
            Exchange::OnMain(_)
        ));
        assert_eq!(
            Exchange::Nccl(vec![0, 1]).to_string(),
            "gradients all-reduced by NCCL across cuda:0, cuda:1"
        );
    }

    /// A stand-in for the collective: records each gradient's rank and shape, and doubles it
    /// (the sum over two replicas holding the same gradient).
    struct Doubling<'a>(&'a mut Vec<Vec<usize>>);

    impl Reduce for Doubling<'_> {
        fn sum<const D: usize>(&mut self, grad: Tensor<D>) -> Tensor<D> {
            self.0.push(grad.shape().to_vec());
            grad.mul_scalar(2.0)
        }
    }

    /// Each float parameter's id and rank, in module order.
    struct Ids(Vec<(burn::module::ParamId, usize)>);

    impl ModuleVisitor for Ids {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            self.0.push((param.id, D));
        }
    }

    fn values(grads: &GradientsParams, (id, rank): (burn::module::ParamId, usize)) -> Vec<f32> {
        match rank {
            1 => grads.get::<1>(id).unwrap().into_data(),
            _ => grads.get::<2>(id).unwrap().into_data(),
        }
        .try_to_vec()
        .unwrap()
    }

    #[test]
    fn every_trainable_parameter_is_summed_in_module_order_even_without_a_gradient() {
        let device = Device::flex().autodiff();
        let net: Sequential = Sequential::new()
            .add(Dense::new(3))
            .add(Dense::new(2))
            .initialize(Init::default(), &device);
        let net = net.infer_shape(Tensor::<2>::ones([1, 4], &device)).unwrap();
        let grads = || {
            let y = net.forward(Tensor::<2>::ones([5, 4], &device).into());
            GradientsParams::from_grads(y.rank::<2>().sum().backward(), &net)
        };
        let mut ids = Ids(Vec::new());
        net.visit(&mut ids);
        let ids = ids.0;
        assert_eq!(ids.len(), 4, "two weights and two biases");
        // This replica lacks the last bias's gradient.
        let (last, _) = ids[3];
        let mut partial = grads();
        partial.remove::<1>(last).unwrap();

        let mut seen = Vec::new();
        let summed = sum_across(&net, partial, &device, Doubling(&mut seen));
        assert_eq!(
            seen,
            vec![vec![4, 3], vec![3], vec![3, 2], vec![2]],
            "each trainable parameter once, in module order"
        );
        assert_eq!(summed.len(), 4);
        let whole = grads();
        for &id in &ids[..3] {
            let twice: Vec<f32> = values(&whole, id).iter().map(|g| g * 2.0).collect();
            assert_eq!(values(&summed, id), twice);
        }
        assert_eq!(
            values(&summed, ids[3]),
            vec![0.0, 0.0],
            "the missing gradient took part as zeros"
        );
    }
}
