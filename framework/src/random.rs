//! Random streams that belong to one thread. burn's backends keep one random generator per
//! process (flex's is a global; `Device::seed` resets it), so what a seeded draw yields depends
//! on what every other thread drew in between: data-parallel replicas (one thread each) or a
//! second training loop in the same process would change each other's Dropout masks, and a
//! resumed run would no longer repeat the uninterrupted one. Inside [`with_stream`], ember's
//! own random layers ([`Dropout`](crate::Dropout)) draw from a generator of this thread's,
//! seeded by the caller, instead; outside it they draw from burn's, as before.
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

use std::cell::RefCell;

use burn::tensor::{Shape, TensorData};
use rand::SeedableRng;
use rand::distr::{Bernoulli, Distribution};
use rand::rngs::StdRng;

thread_local! {
    static STREAM: RefCell<Option<StdRng>> = const { RefCell::new(None) };
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
    STREAM.with(|stream| {
        let mut stream = stream.borrow_mut();
        let rng = stream.as_mut()?;
        // A `keep` outside [0, 1] (a rate that `infer` was never asked to check) draws no mask.
        let kept = Bernoulli::new(keep).ok()?;
        let values: Vec<f32> = (0..shape.num_elements())
            .map(|_| if kept.sample(rng) { scale } else { 0.0 })
            .collect();
        Some(TensorData::new(values, shape))
    })
}
