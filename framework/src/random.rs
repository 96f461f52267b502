//! Random streams that belong to one thread. burn's backends keep one random generator per
//! process (flex's is a global; `Device::seed` resets it), so what a seeded draw yields depends
//! on what every other thread drew in between: data-parallel replicas (one thread each) or a
//! second training loop in the same process would change each other's Dropout masks, and a
//! resumed run would no longer repeat the uninterrupted one. Inside [`with_stream`], ember's
//! own random layers ([`Dropout`](crate::Dropout)) draw from a generator of this thread's,
//! seeded by the caller, instead. Outside it, a mask on burn-flex comes from a generator seeded
//! by one draw of burn's (so `Device::seed` still decides it), and elsewhere from burn's own.
//!
//! A mask is drawn in bulk: one 32-bit number per element from the generator's block
//! function, kept where it falls below `keep · 2³²`. burn's Bernoulli tensors draw each element
//! through a sampler of their own, and with dropout 0.1 in a small Transformer that was 28 % of
//! its epoch on the CPU.
//!
//! ```
//! use burn::prelude::*;
//! use burn::tensor::Distribution;
//! use ember::{Block, Dropout, random};
//!
//! let device = Device::flex().autodiff();
//! let dropout = Dropout::new(0.5);
//! let mask = || -> Vec<f32> {
//!     random::with_stream(7, || {
//!         let y: Tensor<2> = dropout.forward(Tensor::<2>::ones([8, 8], &device).into()).rank();
//!         y.into_data().try_to_vec().unwrap()
//!     })
//! };
//! let first = mask();
//! assert!(first.contains(&0.0) && first.contains(&2.0));
//! // Whatever burn's generator is asked for meanwhile, the stream repeats itself.
//! device.seed(1);
//! let _ = Tensor::<2>::random([64, 64], Distribution::Default, &device);
//! assert_eq!(mask(), first);
//! ```

use std::cell::{Cell, RefCell};

use burn::tensor::{Device, Distribution, Shape, Tensor, TensorData};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

thread_local! {
    static STREAM: RefCell<Option<StdRng>> = const { RefCell::new(None) };
    static MASKS: Cell<u64> = const { Cell::new(0) };
}

/// How many random masks ember's layers ([`Dropout`](crate::Dropout)) drew on this thread so
/// far. A recorded step ([`crate::hybrid`]) that drew one would replay the recording's mask,
/// so whoever records a step compares this before and after (a block that draws through
/// burn's own random tensors is not counted).
pub fn masks_drawn() -> u64 {
    MASKS.with(Cell::get)
}

/// Counts a mask drawn on this thread ([`masks_drawn`]).
pub(crate) fn count_mask() {
    MASKS.with(|masks| masks.set(masks.get() + 1));
}

/// The seed of stream `index` of a run seeded with `seed` (a step's, a replica's, a block of a
/// batch's): SplitMix64 of the two, so that neighbouring indices give unrelated streams.
pub fn derive(seed: u64, index: u64) -> u64 {
    let mut z = seed ^ index.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Runs `f` with this thread's stream seeded by `seed`; the stream that was there before (or
/// none) is back afterwards, also when `f` panics.
pub fn with_stream<R>(seed: u64, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<StdRng>);
    impl Drop for Restore {
        fn drop(&mut self) {
            STREAM.with(|stream| *stream.borrow_mut() = self.0.take());
        }
    }
    let before = STREAM.with(|stream| stream.replace(Some(StdRng::seed_from_u64(seed))));
    let _restore = Restore(before);
    f()
}

/// A Dropout mask of `shape` from this thread's stream: each element `scale` with probability
/// `keep`, else 0. `None` outside [`with_stream`].
pub(crate) fn kept_mask(shape: Shape, keep: f64, scale: f32) -> Option<TensorData> {
    STREAM.with(|stream| mask(stream.borrow_mut().as_mut()?, shape, keep, scale))
}

/// [`kept_mask`] outside any stream, for a tensor on `device`: on burn-flex, from a stream
/// seeded by one draw of burn's generator; `None` elsewhere (burn's dropout runs on the device
/// itself, and a draw read back would wait for it).
pub(crate) fn kept_mask_on(
    device: &Device,
    shape: Shape,
    keep: f64,
    scale: f32,
) -> Option<TensorData> {
    if device.clone().without_autodiff() != Device::flex() {
        return None;
    }
    // Each uniform f32 carries 24 random bits: three of them, for a seed of 64.
    let draw = Tensor::<1>::random([3], Distribution::Default, device).into_data();
    let bits = draw.iter::<f32>().fold(0u64, |seed, v| {
        (seed << 24) ^ u64::from((v * 16_777_216.0) as u32)
    });
    mask(&mut StdRng::seed_from_u64(bits), shape, keep, scale)
}

/// Each element `scale` with probability `keep`, else 0: one 32-bit draw per element.
fn mask(rng: &mut StdRng, shape: Shape, keep: f64, scale: f32) -> Option<TensorData> {
    // A `keep` outside [0, 1] (a rate that `infer` was never asked to check) draws no mask.
    if !(0.0..=1.0).contains(&keep) {
        return None;
    }
    let below = (keep * 4_294_967_296.0) as u64;
    let mut bits = vec![0u32; shape.num_elements()];
    rng.fill(&mut bits[..]);
    let values: Vec<f32> = bits
        .into_iter()
        .map(|b| if u64::from(b) < below { scale } else { 0.0 })
        .collect();
    Some(TensorData::new(values, shape))
}

#[cfg(test)]
mod tests {
    use burn::prelude::*;

    use crate::{Block, Dropout};

    fn dropped(device: &Device, rate: f64) -> Vec<f32> {
        let y: Tensor<2> = Dropout::new(rate)
            .forward(Tensor::<2>::ones([200, 200], device).into())
            .rank();
        y.into_data().try_to_vec().unwrap()
    }

    /// Outside a stream, each mask on burn-flex is another, and keeps its share of the units at
    /// 1 / (1 − rate). (That burn's seed decides them is not asserted here: burn's generator is
    /// the process's, and the other tests of this binary draw from it meanwhile.)
    #[test]
    fn a_mask_outside_a_stream_keeps_its_share() {
        let device = Device::flex().autodiff();
        let first = dropped(&device, 0.3);
        assert_ne!(dropped(&device, 0.3), first, "the next mask is another");
        let kept = first.iter().filter(|&&v| v != 0.0).count() as f64 / first.len() as f64;
        assert!((kept - 0.7).abs() < 0.01, "{kept} kept at rate 0.3");
        let scale = (1.0 / 0.7f64) as f32;
        assert!(first.iter().all(|&v| v == 0.0 || v == scale));
    }

    /// Inside a stream: the share kept, all of them at rate 0, the stream repeating itself.
    #[test]
    fn a_streams_mask_keeps_its_share() {
        let device = Device::flex().autodiff();
        for rate in [0.1, 0.5, 0.9] {
            let mask = super::with_stream(3, || dropped(&device, rate));
            let kept = mask.iter().filter(|&&v| v != 0.0).count() as f64 / mask.len() as f64;
            assert!(
                (kept - (1.0 - rate)).abs() < 0.01,
                "{kept} kept at rate {rate}"
            );
            assert_eq!(super::with_stream(3, || dropped(&device, rate)), mask);
        }
        let all = super::kept_mask([4, 4].into(), 1.0, 1.0);
        assert!(all.is_none(), "no stream, no mask");
        let all = super::with_stream(1, || super::kept_mask([64, 64].into(), 1.0, 1.0)).unwrap();
        assert!(all.iter::<f32>().all(|v| v == 1.0));
        let none = super::with_stream(1, || super::kept_mask([64, 64].into(), 0.0, 1.0)).unwrap();
        assert!(none.iter::<f32>().all(|v| v == 0.0));
    }
}
