//! The book's progress lines for `ember train` (`batch 50, time … sec`, `epoch 1: time per
//! epoch …`), or a bar on a terminal.

use crate::fit::Progress;
use crate::trace::EpochRecord;
use indicatif::ProgressBar;

use super::notes::Notes;

/// The book's progress lines, or a bar on a terminal.
pub struct BookLines {
    /// The bar, on a terminal.
    pub bar: Option<ProgressBar>,
    /// Batches per epoch, the bar's length.
    pub batches: usize,
    /// Where the lines go.
    pub notes: Notes,
}

impl Progress for BookLines {
    fn issued(&mut self, epoch: usize, batch: usize, elapsed: f64) {
        let done = batch + 1;
        if let Some(bar) = &self.bar {
            bar.set_message(format!("epoch {}", epoch + 1));
            bar.set_position(done as u64);
        } else if done.is_multiple_of(50) {
            note!(self.notes, "batch {done}, time {elapsed:.4} sec");
        }
    }

    fn acted(&mut self, why: &str) {
        note!(self.notes, "{why}");
    }

    fn epoch_done(&mut self, r: &EpochRecord) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
            bar.reset();
            bar.set_length(self.batches as u64);
        }
        note!(
            self.notes,
            "epoch {}: time per epoch: {:.4} sec (issued in {:.4} sec), increased memory: {:.1} MB \
             (peak growth {:.1} MB), mean loss {}, max in flight {}",
            r.epoch + 1,
            r.time,
            r.issue_time,
            r.increased_mb,
            r.peak_growth_mb,
            fixed(r.mean_loss, 6),
            r.max_depth
        );
        if !r.device_time.is_empty() {
            let devices: Vec<String> = r
                .device_time
                .iter()
                .enumerate()
                .map(|(device, time)| format!("device {device} {time:.4} sec"))
                .collect();
            note!(
                self.notes,
                "epoch {}: per-device completion, mean from issue: {}",
                r.epoch + 1,
                devices.join(", ")
            );
        }
        if let (Some(time), Some(mb)) = (r.allreduce_time, r.allreduce_mb) {
            note!(
                self.notes,
                "epoch {}: gradients all-reduced in {time:.4} sec ({:.1}% of the epoch), \
                 {mb:.2} MB sent by this rank ({:.3} MB a batch)",
                r.epoch + 1,
                100.0 * time / r.time.max(f64::MIN_POSITIVE),
                mb / r.batches.max(1) as f64
            );
        }
        if let Some(pool) = r.peak_pool_mb {
            note!(
                self.notes,
                "epoch {}: peak device pool: {pool:.1} MB",
                r.epoch + 1
            );
        }
        if !r.metrics.is_empty() {
            let metrics: Vec<String> = r
                .metrics
                .iter()
                .map(|(k, v)| format!("{k} {}", fixed(*v, 4)))
                .collect();
            note!(
                self.notes,
                "epoch {}: train loss {}, {}",
                r.epoch + 1,
                fixed(r.mean_loss, 4),
                metrics.join(", ")
            );
        }
    }
}

/// `value` with `decimals` places, as the book prints losses; in exponent form where that
/// would be long (a loss of 1e30 printed as 31 digits and 6 decimals) or show less than two
/// digits of it.
fn fixed(value: f64, decimals: usize) -> String {
    let magnitude = value.abs();
    let smallest = 10f64.powi(1 - decimals as i32);
    if value == 0.0 || !value.is_finite() || (smallest..1e6).contains(&magnitude) {
        format!("{value:.decimals$}")
    } else {
        format!("{value:.decimals$e}")
    }
}

#[cfg(test)]
mod tests {
    use super::fixed;

    #[test]
    fn large_and_tiny_values_take_the_exponent_form() {
        assert_eq!(fixed(0.25, 4), "0.2500");
        assert_eq!(fixed(0.0, 6), "0.000000");
        assert_eq!(fixed(1e30, 6), "1.000000e30");
        assert_eq!(fixed(-2.5e-7, 4), "-2.5000e-7");
        assert_eq!(fixed(0.0012, 4), "0.0012");
        assert_eq!(fixed(0.0009, 4), "9.0000e-4");
        assert_eq!(fixed(f64::NAN, 4), "NaN");
    }
}
