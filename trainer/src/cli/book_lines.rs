//! The book's progress lines for `ember train` (`batch 50, time … sec`, `epoch 1: time per
//! epoch …`), or a bar on a terminal.

use ember_trainer::fit::Progress;
use ember_trainer::trace::EpochRecord;
use indicatif::ProgressBar;

/// The book's progress lines, or a bar on a terminal.
pub struct BookLines {
    pub bar: Option<ProgressBar>,
    /// Batches per epoch, the bar's length.
    pub batches: usize,
}

impl Progress for BookLines {
    fn issued(&mut self, epoch: usize, batch: usize, elapsed: f64) {
        let done = batch + 1;
        if let Some(bar) = &self.bar {
            bar.set_message(format!("epoch {}", epoch + 1));
            bar.set_position(done as u64);
        } else if done.is_multiple_of(50) {
            say!("batch {done}, time {elapsed:.4} sec");
        }
    }

    fn acted(&mut self, why: &str) {
        say!("{why}");
    }

    fn epoch_done(&mut self, r: &EpochRecord) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
            bar.reset();
            bar.set_length(self.batches as u64);
        }
        say!(
            "epoch {}: time per epoch: {:.4} sec (issued in {:.4} sec), increased memory: {:.1} MB \
             (peak growth {:.1} MB), mean loss {:.6}, max in flight {}",
            r.epoch + 1,
            r.time,
            r.issue_time,
            r.increased_mb,
            r.peak_growth_mb,
            r.mean_loss,
            r.max_depth
        );
        if !r.device_time.is_empty() {
            let devices: Vec<String> = r
                .device_time
                .iter()
                .enumerate()
                .map(|(device, time)| format!("device {device} {time:.4} sec"))
                .collect();
            say!(
                "epoch {}: per-device completion, mean from issue: {}",
                r.epoch + 1,
                devices.join(", ")
            );
        }
        if let (Some(time), Some(mb)) = (r.allreduce_time, r.allreduce_mb) {
            say!(
                "epoch {}: gradients all-reduced in {time:.4} sec ({:.1}% of the epoch), \
                 {mb:.2} MB sent by this rank ({:.3} MB a batch)",
                r.epoch + 1,
                100.0 * time / r.time.max(f64::MIN_POSITIVE),
                mb / r.batches.max(1) as f64
            );
        }
        if let Some(pool) = r.peak_pool_mb {
            say!("epoch {}: peak device pool: {pool:.1} MB", r.epoch + 1);
        }
        if !r.metrics.is_empty() {
            let metrics: Vec<String> = r
                .metrics
                .iter()
                .map(|(k, v)| format!("{k} {v:.4}"))
                .collect();
            say!(
                "epoch {}: train loss {:.4}, {}",
                r.epoch + 1,
                r.mean_loss,
                metrics.join(", ")
            );
        }
    }
}
