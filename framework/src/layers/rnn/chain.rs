//! A chain's recurrent states: [`Sequential::forward_state`] threads a state through every
//! [`Recurrent`] child of a [`Sequential`], so that a chain such as `Embedding`, `LSTM`,
//! `Dense` carries its state from one batch to the next as a block of one's own does.

use burn::tensor::Tensor;

use super::Recurrent;
use crate::{Block, Layer, NdTensor, Sequential};

impl<U: Block> Sequential<U> {
    /// The chain's output on `x`, from `states`, and the states it ends in: each
    /// [`Recurrent`] child's states ([`Recurrent::forward_state`]'s, `[h]` or `[h, c]`) in the
    /// order of the chain, nested chains included; `None` starts every one from zeros. The
    /// other children run their `forward`; a block of one's own is not given a state.
    ///
    /// ```
    /// use burn::prelude::*;
    /// use ember::{Block, Dense, Embedding, Flatten, Init, Layout, NdTensor, Recurrent, Sequential};
    ///
    /// let device = Device::flex();
    /// let net: Sequential = Sequential::new()
    ///     .add(Embedding::new(10, 4))
    ///     .add(Recurrent::lstm(8).layers(2).layout(Layout::Ntc))
    ///     .add(Dense::new(10).flatten(false))
    ///     .initialize(Init::Xavier, &device);
    /// let x = NdTensor::from_host(&[1., 2., 3., 4., 5., 6.], &[2, 3], &device).unwrap();
    /// let net = net.infer_shape(x.clone()).unwrap();
    /// let (y, states) = net.forward_state(x.clone(), None);
    /// assert_eq!(y.dims(), [2, 3, 10]);
    /// // h and c, each [layers, batch, hidden]
    /// assert_eq!(states.len(), 2);
    /// assert_eq!(states[0].dims(), [2, 2, 8]);
    /// let (_, next) = net.forward_state(x, Some(states));
    /// assert_eq!(next.len(), 2);
    /// ```
    ///
    /// # Panics
    /// As [`Block::forward`]; where `states` hold fewer or more tensors than the chain's
    /// recurrent layers carry, or of other shapes, naming them.
    pub fn forward_state(
        &self,
        x: NdTensor,
        states: Option<Vec<Tensor<3>>>,
    ) -> (NdTensor, Vec<Tensor<3>>) {
        let count = states.as_ref().map(Vec::len);
        let mut given = states.map(Vec::into_iter);
        let mut ended = Vec::new();
        let y = self.thread(x, &mut given, &mut ended);
        if let Some(left) = given.map(Iterator::count).filter(|&left| left > 0) {
            panic!(
                "{} state tensors given, and the chain's recurrent layers carry {}: {left} \
                 left over",
                count.unwrap_or(0),
                ended.len()
            );
        }
        (y, ended)
    }

    fn thread(
        &self,
        mut x: NdTensor,
        given: &mut Option<std::vec::IntoIter<Tensor<3>>>,
        ended: &mut Vec<Tensor<3>>,
    ) -> NdTensor {
        for layer in self.layers() {
            x = match layer {
                Layer::Recurrent(layer) => {
                    let (y, states) = step(layer, x.rank(), given);
                    ended.extend(states);
                    y.into()
                }
                Layer::Sequential(chain) => chain.thread(x, given, ended),
                layer => layer.forward(x),
            };
        }
        x
    }
}

/// `layer`'s pass from its share of `given`: as many tensors as it carries.
fn step(
    layer: &Recurrent,
    x: Tensor<3>,
    given: &mut Option<std::vec::IntoIter<Tensor<3>>>,
) -> (Tensor<3>, Vec<Tensor<3>>) {
    let states = given
        .as_mut()
        .map(|given| given.take(layer.mode().states()).collect());
    layer.forward_state(x, states)
}
