//! What attention may not look at: PyTorch's additive `attn_mask` (`[queries, keys]`, added to
//! the scores) and d2l's valid lengths (one per sequence of the batch: the keys at positions
//! `>= length` are padding). d2l's `masked_softmax` replaces a padded key's score with −10⁶
//! before the softmax, which gives it a weight of 0 as PyTorch's `key_padding_mask` does.
//!
//! **Edge cases, as d2l's `masked_softmax` has them.** A length of 0 masks every key: all the
//! scores are −10⁶, and the softmax spreads the weight evenly over all the keys (PyTorch's
//! `key_padding_mask` with every key masked gives NaN instead). A length above the number of
//! keys masks none.

use burn::tensor::{Device, Int, Tensor};

/// The score d2l's `masked_softmax` gives a padded key.
const PADDED: f32 = -1e6;

/// The masks of one attention call: `Mask::new().valid_lens(lens)`, `Mask::causal(steps)`.
#[derive(Debug, Clone, Default)]
pub struct Mask {
    additive: Option<Tensor<2>>,
    valid_lens: Option<Tensor<1, Int>>,
}

impl Mask {
    /// No mask.
    pub fn new() -> Self {
        Self::default()
    }

    /// PyTorch's float `attn_mask` of shape `[queries, keys]`, added to every head's scores
    /// (−∞ forbids a pair).
    pub fn additive(mut self, mask: Tensor<2>) -> Self {
        self.additive = Some(mask);
        self
    }

    /// d2l's `valid_lens`, `[batch]`: sequence `b` attends to its first `lens[b]` keys only.
    pub fn valid_lens(mut self, lens: Tensor<1, Int>) -> Self {
        self.valid_lens = Some(lens);
        self
    }

    /// PyTorch's `generate_square_subsequent_mask(steps)`: step `i` sees steps `0..=i`, the
    /// later ones are −∞.
    pub fn causal(steps: usize, device: &Device) -> Self {
        let values: Vec<f32> = (0..steps)
            .flat_map(|i| (0..steps).map(move |j| if j > i { f32::NEG_INFINITY } else { 0.0 }))
            .collect();
        let mask = Tensor::<1>::from_floats(values.as_slice(), device).reshape([steps, steps]);
        Self::new().additive(mask)
    }

    /// Applies the masks to the scores `[batch, heads, queries, keys]`.
    ///
    /// # Panics
    /// On an additive mask that is not `[queries, keys]`, or lengths that are not `[batch]`,
    /// naming both shapes.
    pub(super) fn apply(&self, scores: Tensor<4>) -> Tensor<4> {
        let [batch, _, queries, keys] = scores.dims();
        let device = scores.device();
        let mut scores = scores;
        if let Some(additive) = &self.additive {
            assert!(
                additive.dims() == [queries, keys],
                "an additive attention mask is [queries, keys] = [{queries}, {keys}]; it was \
                 given {:?}",
                additive.dims()
            );
            let additive = additive.clone().to_device(&device);
            scores = scores + additive.reshape([1, 1, queries, keys]);
        }
        if let Some(lens) = &self.valid_lens {
            assert!(
                lens.dims() == [batch],
                "valid lengths are one per sequence, [{batch}]; they were given as {:?}",
                lens.dims()
            );
            let positions = Tensor::<1, Int>::arange(0..keys as i64, &device)
                .reshape([1, keys])
                .expand([batch, keys]);
            let lens = lens.clone().to_device(&device).reshape([batch, 1]);
            let padded = positions.greater_equal(lens.expand([batch, keys]));
            scores = scores.mask_fill(padded.reshape([batch, 1, 1, keys]), PADDED);
        }
        scores
    }
}
