//! One parameter's gradient as data parallelism sends it: every way the gradients meet (the
//! replicas' sum, the flat buffer for NCCL, MPI's buckets) takes each parameter's from here.

use burn::module::Param;
use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor};

/// `param`'s gradient, taken out of `grads`, or zeros on `device` where it has none: a
/// parameter that no replica or rank used still takes part, as every one must send the same
/// values.
pub(super) fn take_gradient<const D: usize>(
    grads: &mut GradientsParams,
    param: &Param<Tensor<D>>,
    device: &Device,
) -> Tensor<D> {
    grads
        .remove::<D>(param.id)
        .unwrap_or_else(|| Tensor::zeros(param.val().shape(), device))
}
