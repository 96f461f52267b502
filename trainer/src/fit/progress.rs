//! What a run tells its caller as it goes: for progress lines and bars.

use crate::trace::EpochRecord;

/// Hears about the run as it goes: for progress lines and bars.
pub trait Progress {
    /// The frontend just issued `batch` of `epoch`, `elapsed` seconds into the epoch.
    fn issued(&mut self, _epoch: usize, _batch: usize, _elapsed: f64) {}
    /// An epoch finished.
    fn epoch_done(&mut self, _record: &EpochRecord) {}
    /// A checkpoint was written.
    fn checkpointed(&mut self, _dir: &std::path::Path) {}
    /// A callback acted (stopped the run, scaled the learning rate), or the run did (set a
    /// damaged checkpoint aside), saying why.
    fn acted(&mut self, _why: &str) {}
}

impl Progress for () {}

impl<P: Progress + ?Sized> Progress for &mut P {
    fn issued(&mut self, epoch: usize, batch: usize, elapsed: f64) {
        (**self).issued(epoch, batch, elapsed);
    }
    fn epoch_done(&mut self, record: &EpochRecord) {
        (**self).epoch_done(record);
    }
    fn checkpointed(&mut self, dir: &std::path::Path) {
        (**self).checkpointed(dir);
    }
    fn acted(&mut self, why: &str) {
        (**self).acted(why);
    }
}
