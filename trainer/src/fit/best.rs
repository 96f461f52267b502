//! The best epoch's network ([`super::Fit::save_best`]): after each epoch whose watched metric
//! improves, a snapshot of the network goes to the caller's `save`, where the epoch's metrics
//! were already read, so no barrier is added. A resumed run learns the best so far from its
//! checkpoint's epochs, and saves again only on a better one.

use ember::Result;

use super::watched::Watched;
use crate::trace::EpochRecord;

/// What saves the best network: it gets the snapshot (without autodiff) and the epoch's record.
pub type SaveFn<'a, B> = Box<dyn FnMut(&B, &EpochRecord) -> Result<()> + 'a>;

/// The metric watched, and what saves the network when it improves.
pub(super) struct Best<'a, B> {
    pub(super) watched: Watched,
    pub(super) save: SaveFn<'a, B>,
}

impl<B> Best<'_, B> {
    /// Whether `epoch` is the best so far: the watched metric improves, and nothing the epoch
    /// measured is NaN or infinite (its loss, any metric), since a network whose outputs are
    /// not numbers somewhere is no network to keep, whatever the watched metric says.
    pub(super) fn improves(&mut self, epoch: &EpochRecord) -> Result<bool> {
        let finite = epoch.mean_loss.is_finite() && epoch.metrics.values().all(|v| v.is_finite());
        Ok(finite && self.watched.improves(epoch)?)
    }

    /// Replays a resumed run's earlier epochs: the best so far, nothing saved.
    pub(super) fn replay(&mut self, epochs: &[EpochRecord]) -> Result<()> {
        for epoch in epochs {
            self.improves(epoch)?;
        }
        Ok(())
    }
}
