//! What a sweep hands back: the network and optimizer untouched, the curve's points, the
//! suggested rate and why the sweep ended. Its own file, below the sweep's loop: `fit`
//! re-exports it, and the loop imports `fit`.

use ember::Optimizer;

use super::suggestion::{LrPoint, Suggestion, SweepEnd};
use super::sweep::LrSweep;

/// What [`Fit::lr_find`] hands back.
pub struct LrFinding<B> {
    /// The network as given, untrained (its deferred sizes resolved from the first batch):
    /// the sweep trained a copy.
    pub net: B,
    /// The optimizer as given, its state untouched.
    pub optimizer: Optimizer,
    /// One point a batch, in order.
    pub points: Vec<LrPoint>,
    /// The suggested rate, or why there is none.
    pub suggestion: Suggestion,
    /// Why the sweep ended.
    pub ended: SweepEnd,
    /// The sweep.
    pub sweep: LrSweep,
}

impl<B> LrFinding<B> {
    /// The suggestion with other skips (Lightning's `suggestion(skip_begin, skip_end)`).
    pub fn suggest(&self, skip_begin: usize, skip_end: usize) -> Suggestion {
        Suggestion::of(&self.points, self.sweep.mode, skip_begin, skip_end)
    }
}
