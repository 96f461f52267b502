//! A network's gradients as one flat tensor on their device, and back: what an all-reduce of
//! them all at once takes (NCCL's, on the cards, in one buffer). Pure burn, on any device, so
//! that its tests run on the CPU.

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor};

use super::gradient::take_gradient;

/// `net`'s gradients, taken out of `grads` and concatenated into one tensor of their own on
/// `device`, in the module's parameter order (zeros where a trainable parameter has none);
/// `None` for a network without trainable parameters.
pub(crate) fn flatten<M: Module>(
    net: &M,
    grads: GradientsParams,
    device: &Device,
) -> (GradientsParams, Option<Tensor<1>>) {
    let mut parts = OnDevice {
        grads,
        device: device.clone(),
        parts: Vec::new(),
    };
    net.visit(&mut parts);
    let flat = (!parts.parts.is_empty()).then(|| Tensor::cat(parts.parts, 0));
    (parts.grads, flat)
}

/// Puts the sums in `flat` back into `grads`, cut into `net`'s parameters' shapes.
pub(crate) fn cut<M: Module>(net: &M, grads: GradientsParams, flat: Tensor<1>) -> GradientsParams {
    let mut cut = Cut { grads, flat, at: 0 };
    net.visit(&mut cut);
    cut.grads
}

/// Takes each trainable parameter's gradient (zeros where it has none) out of `grads`,
/// flattened, on the device: `mpi`'s `Flatten` without the readback.
struct OnDevice {
    grads: GradientsParams,
    device: Device,
    parts: Vec<Tensor<1>>,
}

impl ModuleVisitor for OnDevice {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if !param.is_require_grad() {
            return;
        }
        let grad = take_gradient(&mut self.grads, param, &self.device);
        let len = grad.shape().num_elements();
        self.parts.push(grad.reshape([len]));
    }
}

/// Cuts the summed gradients out of `flat` into `grads`, parameter by parameter, in the same
/// order: `mpi`'s `Unflatten` on the device.
struct Cut {
    grads: GradientsParams,
    flat: Tensor<1>,
    at: usize,
}

impl ModuleVisitor for Cut {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if !param.is_require_grad() {
            return;
        }
        let shape = param.val().shape();
        let len = shape.num_elements();
        let grad: Tensor<D> = self
            .flat
            .clone()
            .slice(self.at..self.at + len)
            .reshape(shape);
        self.at += len;
        self.grads.register(param.id, grad);
    }
}

#[cfg(test)]
mod tests {
    use burn::module::Module;
    use burn::optim::GradientsParams;
    use burn::tensor::{Device, Tensor};

    use super::{cut, flatten};
    use crate::{Block, Dense, Init, L2Loss, Loss, Sequential};

    /// A network with a matrix and a bias per layer, its gradients of one step on `device`.
    fn step(device: &Device) -> (Sequential, GradientsParams) {
        let net = Sequential::new()
            .add(Dense::new(5))
            .add(Dense::new(3))
            .initialize(Init::default(), device)
            .infer_shape(Tensor::<2>::zeros([2, 4], device))
            .unwrap();
        let x = Tensor::<2>::from_floats([[0.5, -1.0, 2.0, 0.25], [1.5, 0.0, -0.5, 1.0]], device);
        let y = Tensor::<2>::ones([2, 3], device);
        let pred: Tensor<2> = net.forward(x.into()).rank();
        let loss = L2Loss.forward(pred, y).unwrap().mean();
        let grads = GradientsParams::from_grads(loss.backward(), &net);
        (net, grads)
    }

    fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
        t.into_data().try_to_vec::<f32>().unwrap()
    }

    /// The flat tensor holds every gradient in the module's order, and cutting it gives each
    /// parameter its own gradient back, bit for bit: what a one-rank all-reduce (a sum of
    /// one) must leave as it was.
    #[test]
    fn flattening_and_cutting_back_returns_every_gradient_bit_for_bit() {
        let device = Device::flex().autodiff();
        let (net, grads) = step(&device);
        let inner = device.clone().inner();
        let mut expected = Vec::new();
        let mut order = Vec::new();
        net.visit(&mut Collect(&grads, &mut expected, &mut order));
        let (rest, flat) = flatten(&net, grads, &inner);
        let flat = flat.expect("a network with parameters");
        // 4·5 + 5 + 5·3 + 3 values, in the parameters' order.
        assert_eq!(flat.dims(), [43]);
        assert_eq!(values(flat.clone()), expected.concat());
        let back = cut(&net, rest, flat);
        let mut again = Vec::new();
        net.visit(&mut Collect(&back, &mut again, &mut Vec::new()));
        assert_eq!(again, expected);
        assert_eq!(
            order.len(),
            4,
            "weights and biases of two layers: {order:?}"
        );
    }

    /// Each trainable parameter's gradient, as values, in the visit's order.
    struct Collect<'a>(
        &'a GradientsParams,
        &'a mut Vec<Vec<f32>>,
        &'a mut Vec<Vec<usize>>,
    );

    impl burn::module::ModuleVisitor for Collect<'_> {
        fn visit_float<const D: usize>(&mut self, param: &burn::module::Param<Tensor<D>>) {
            if !param.is_require_grad() {
                return;
            }
            let grad = self
                .0
                .get::<D>(param.id)
                .expect("a gradient for every parameter");
            self.2.push(grad.dims().to_vec());
            self.1.push(values(grad));
        }
    }
}
