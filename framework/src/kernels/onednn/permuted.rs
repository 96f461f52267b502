//! A permuted view (`swap_dims`, `permute`) made row-major through oneDNN's reorder, and its
//! gradient handed back in the view's own order.
//!
//! A recurrent layer in `NTC` runs in `TNC` and swaps its output's first two axes: a view, which
//! the next layer's reshape copies. burn-flex copies it element by element in 16 × 16 tiles (on
//! the backend's one thread, `kernels::one_pool`); oneDNN's reorder copies whole rows on
//! OpenMP's team. Backward, burn would hand the gradient back through the swap as a view again,
//! which the layer's own backward pass copies once more; here it is written in the view's
//! memory order instead (a view again, of a new array), so that the swap's backward gives the
//! layer a row-major gradient.

use burn::backend::Flex;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops};
use burn::backend::flex::{FlexTensor, Layout};
use burn::tensor::{DType, Shape, Tensor};

use super::bridge::{self, Input, Inputs};
use super::fallback;
use super::reorder;

/// `x` row-major, where it is a burn-flex f32 view whose axes are a permutation of a row-major
/// array's (no gaps, no overlaps, no reversed axis) and not row-major already; else `None`.
pub fn contiguous<const D: usize>(x: &Tensor<D>) -> Option<Tensor<D>> {
    let input = bridge::input(x)?;
    let array = match &input {
        Input::Plain(t) => t,
        Input::Graph(t) => t.primitive(),
    };
    let order = Order::of(array.layout())?;
    let inputs: Inputs<1> = bridge::same_kind([input])?;
    bridge::run(PermutedBackward, inputs, |[x], training| {
        let y = reorder::strided_to_plain(x, &order.dims, &order.strides)?;
        Ok((y, training.then(|| order.clone())))
    })
    .map_err(|e| crate::kernels::counters::fell_back(&e))
    .ok()
}

/// The view's dimensions and strides, which its gradient is laid out in.
#[derive(Debug, Clone)]
struct Order {
    dims: Vec<usize>,
    strides: Vec<usize>,
}

impl Order {
    /// The strides of a permuted row-major array, from its first element; `None` for a
    /// row-major one (nothing to copy) or any other.
    fn of(layout: &Layout) -> Option<Order> {
        let dims = layout.shape().to_vec();
        // Row-major already, but for the strides of axes of one element: nothing to copy.
        let long: Vec<usize> = (0..dims.len()).filter(|&a| dims[a] > 1).collect();
        let row_major = long.windows(2).all(|w| {
            let inner: usize = dims[w[0] + 1..].iter().product();
            layout.strides()[w[0]] == inner as isize
        }) && long.last().is_none_or(|&a| layout.strides()[a] == 1);
        if layout.is_contiguous() || row_major {
            return None;
        }
        let strides: Vec<usize> = layout
            .strides()
            .iter()
            .map(|&s| usize::try_from(s).ok())
            .collect::<Option<_>>()?;
        // From the innermost axis out, each stride is the elements of those inside it.
        let mut axes: Vec<usize> = (0..dims.len()).collect();
        axes.sort_by_key(|&a| (strides[a], dims[a]));
        let mut inside = 1;
        for &a in &axes {
            if dims[a] == 0 || (dims[a] > 1 && strides[a] != inside) {
                return None;
            }
            inside *= dims[a];
        }
        Some(Order { dims, strides })
    }
}

#[derive(Debug)]
struct PermutedBackward;

impl Backward<Flex, 1> for PermutedBackward {
    type State = Order;

    fn backward(self, ops: Ops<Order, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [parent] = ops.parents;
        let grad = grads.consume::<Flex>(&ops.node);
        let Some(parent) = parent else {
            return;
        };
        let order = ops.state;
        let dx = fallback::or_flex(
            || {
                // The reorder reads f32: anything else goes on as it came.
                if grad.dtype() != DType::F32 || bridge::dims(&grad) != order.dims {
                    return Err(super::primitive::Error::UnexpectedGradient(
                        "a permuted copy",
                    ));
                }
                let grad = bridge::dense(&grad);
                let written = reorder::plain_to_strided(&grad, &order.dims, &order.strides)?;
                let strides = order.strides.iter().map(|&s| s as isize).collect();
                let layout = Layout::new(Shape::from(order.dims.clone()), strides, 0);
                Ok(FlexTensor::new(
                    burn::tensor::Bytes::from_elems(written),
                    layout,
                    DType::F32,
                ))
            },
            || grad.clone(),
        );
        grads.register::<Flex>(parent.id, dx);
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::{Device, TensorData};

    use super::*;

    fn ramp<const D: usize>(dims: [usize; D], device: &Device) -> Tensor<D> {
        let n = dims.iter().product();
        let values: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
        Tensor::from_data(TensorData::new(values, dims), device)
    }

    fn flex<const D: usize>(t: &Tensor<D>) -> FlexTensor {
        match bridge::input(t) {
            Some(Input::Plain(t)) => t,
            Some(Input::Graph(t)) => t.primitive().clone(),
            None => panic!("not a burn-flex f32 tensor"),
        }
    }

    #[test]
    fn a_swapped_view_is_copied_row_major_and_its_gradient_comes_back_row_major() {
        let device = Device::flex().autodiff();
        let base = ramp([4, 5, 6], &device).require_grad();
        let view = base.clone().swap_dims(0, 1);
        let y = contiguous(&view).expect("a swapped view");
        assert!(flex(&y).is_contiguous());
        assert_eq!(y.to_data(), view.to_data(), "the copy's values");
        let weights = ramp([5, 4, 6], &Device::flex()).mul_scalar(3.0);
        let w = Tensor::from_data(weights.to_data(), &device);
        let grads = (y * w).sum().backward();
        let grad = base.grad(&grads).unwrap();
        // burn's swap would hand back a view; the layer's gradient arrives row-major.
        assert!(flex(&grad).is_contiguous(), "{:?}", flex(&grad).layout());
        assert_eq!(grad.to_data(), weights.swap_dims(0, 1).to_data());
    }

    #[test]
    fn a_permutation_of_four_axes_is_copied_and_differentiated() {
        let device = Device::flex().autodiff();
        let base = ramp([2, 3, 4, 5], &device).require_grad();
        let view = base.clone().permute([2, 0, 3, 1]);
        let y = contiguous(&view).unwrap();
        assert_eq!(y.to_data(), view.clone().to_data());
        let w = ramp([4, 2, 5, 3], &device);
        let grads = (y * w.clone()).sum().backward();
        let expected = w.permute([1, 3, 0, 2]);
        assert_eq!(
            base.grad(&grads).unwrap().to_data(),
            expected.inner().to_data()
        );
    }

    #[test]
    fn a_view_that_starts_inside_its_array_is_copied_from_its_first_element() {
        let device = Device::flex().autodiff();
        let base = ramp([4, 5, 6], &device).require_grad();
        let view = base.clone().narrow(0, 1, 2).swap_dims(0, 1);
        let y = contiguous(&view).expect("a swapped view from row 1");
        assert_eq!(y.to_data(), view.to_data());
        let grads = y.sum().backward();
        let expected: Vec<f32> = (0..120)
            .map(|i| f32::from((6..18).contains(&(i / 5))))
            .collect();
        let grad = base.grad(&grads).unwrap();
        assert_eq!(grad.to_data(), TensorData::new(expected, [4, 5, 6]));
    }

    #[test]
    fn row_major_arrays_and_other_views_are_left_to_burn() {
        let device = Device::flex();
        let x = ramp([4, 5, 6], &device);
        assert!(contiguous(&x).is_none(), "already row-major");
        assert!(
            contiguous(&x.clone().flip([1])).is_none(),
            "a reversed axis"
        );
        let gapped = x.clone().narrow(2, 1, 3).swap_dims(0, 1);
        assert!(contiguous(&gapped).is_none(), "a view with gaps");
        let broadcast = ramp([1, 6], &device).expand([4, 6]);
        assert!(contiguous(&broadcast).is_none(), "a broadcast");
        // Outside autodiff too.
        let y = contiguous(&x.clone().swap_dims(0, 2)).unwrap();
        assert_eq!(y.to_data(), x.swap_dims(0, 2).to_data());
    }
}
