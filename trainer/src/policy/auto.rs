//! `auto[:MB]` ([`Auto`]): a window that picks its own size while training.
//!
//! It starts as the barrier and times the frontend's pace: the seconds from one batch's
//! release (the end of the policy's call before it) to the next, over [`PROBE`] intervals,
//! each between two batches of one epoch once the window has filled (more batches released
//! since it changed, or since the epoch began, than it holds); a window's timing may span
//! epochs. An epoch too short to time the window at all ends the probing with what it timed. Then it doubles the
//! window and times again, until doubling gains less than [`GAIN`] (1 %): the pace of unbounded
//! issue is then within that of the last window, as a window past the backend's queue adds
//! nothing. It keeps the smallest window whose pace is within 1 % of the best it timed: the
//! throughput of running ahead, with the least memory that needs.
//!
//! It also never lets the process grow by more than its budget within an epoch (`auto:MB`;
//! without one, the memory free when it starts, and no bound where the system does not say):
//! it waits for the oldest batch while the growth since the epoch began is over it, as
//! `memory:MB` does, and stops doubling where the batches in flight, at the most growth per
//! batch in flight seen so far, would not fit. That estimate counts all the epoch's growth
//! (the optimizer's first state, memory the allocator keeps), so it errs on the side of a
//! smaller window.
//!
//! Its state is not in checkpoints: a resumed run probes again from the barrier.
//!
//! Where it cannot decide well: it reads one pace, the frontend's, so it cannot tell a
//! device queue from a host one; a backend that gives no progress until a readback (every
//! completion is a batch's loss) shows its pace only through the waits; and timings on a busy
//! machine vary by more than 1 %, so it may keep a window one step larger or smaller than a
//! quiet machine would. Its choice is each batch's `window` in the trace and a counter in the
//! profile.

use std::time::Instant;

use super::{InFlight, PolicyKind, Result, SyncPolicy};
use crate::memory::available_bytes;

/// Batches timed for each window.
pub const PROBE: usize = 10;
/// The least gain in pace that makes a doubling worth its memory.
pub const GAIN: f64 = 0.01;
/// The largest window it tries.
pub const LARGEST: usize = 64;

/// The self-sizing window (see the module's documentation).
#[derive(Debug, Clone)]
pub struct Auto {
    budget_mb: Option<f64>,
    /// The budget in bytes, read at the first batch where none was given.
    budget: Option<f64>,
    window: usize,
    probing: bool,
    /// Batches released since the window last began to fill (when it changed, and at each
    /// epoch's start, after the waitall emptied it).
    seen: usize,
    /// The last release, and the seconds and intervals timed so far at this window: only
    /// intervals between two releases of one epoch, once the window was full.
    last: Option<Instant>,
    timed: f64,
    intervals: usize,
    /// Intervals timed at this window in the current epoch.
    this_epoch: usize,
    /// Whether this window has been in force since the current epoch began: only such an
    /// epoch that timed nothing shows that the epochs are too short for it.
    whole_epoch: bool,
    /// Seconds per batch of each window timed, in order.
    paces: Vec<(usize, f64)>,
    /// The most memory growth per batch in flight seen so far, in bytes.
    per_batch: f64,
}

impl Auto {
    /// The self-sizing window under a memory budget of `budget_mb` MB of growth (`None`: the
    /// memory free when the run starts).
    pub fn new(budget_mb: Option<f64>) -> Self {
        Self {
            budget_mb,
            budget: budget_mb.map(|mb| mb * 1024.0 * 1024.0),
            window: 1,
            probing: true,
            seen: 0,
            last: None,
            timed: 0.0,
            intervals: 0,
            this_epoch: 0,
            whole_epoch: false,
            paces: Vec::new(),
            per_batch: 0.0,
        }
    }

    /// The window in force.
    pub fn window(&self) -> usize {
        self.window
    }

    /// The windows timed so far, each with its seconds per batch.
    pub fn paces(&self) -> &[(usize, f64)] {
        &self.paces
    }

    /// Whether it has settled on its window.
    pub fn settled(&self) -> bool {
        !self.probing
    }

    /// After a window's timing: double it, or settle.
    fn next(&mut self, budget: f64) {
        let gained = match self.paces.as_slice() {
            [.., (_, before), (_, last)] => *last < before * (1.0 - GAIN),
            _ => true,
        };
        let doubled = self.window * 2;
        let fits = doubled as f64 * self.per_batch <= budget;
        if gained && doubled <= LARGEST && fits {
            self.window = doubled;
            self.seen = 0;
            self.timed = 0.0;
            self.intervals = 0;
            self.this_epoch = 0;
            self.whole_epoch = false;
        } else {
            self.settle();
        }
    }

    /// Keeps the smallest window timed within [`GAIN`] of the best pace (the window in force
    /// where none was timed).
    fn settle(&mut self) {
        let best = self.paces.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
        self.window = self
            .paces
            .iter()
            .find(|p| p.1 <= best * (1.0 + GAIN))
            .map_or(self.window, |p| p.0);
        self.probing = false;
    }
}

impl SyncPolicy for Auto {
    fn kind(&self) -> PolicyKind {
        PolicyKind::Auto(self.budget_mb)
    }

    fn window(&self) -> Option<usize> {
        Some(self.window)
    }

    fn before_issue(&mut self, batch: usize, flight: &mut InFlight) -> Result<()> {
        let budget = *self
            .budget
            .get_or_insert_with(|| available_bytes().map_or(f64::INFINITY, |b| b as f64));
        if let Some(last) = batch.checked_sub(self.window) {
            flight.wait_through(last)?;
        }
        while !flight.is_empty() && flight.memory_growth() as f64 > budget {
            flight.wait_oldest()?;
        }
        if !flight.is_empty() {
            let growth = flight.memory_growth().max(0) as f64;
            self.per_batch = self.per_batch.max(growth / flight.len() as f64);
        }
        if !self.probing {
            return Ok(());
        }
        let now = Instant::now();
        if batch == 0 {
            // An epoch's first batch comes after its waitall and metrics, which are no
            // window's pace, and the window fills again. An epoch too short to time this
            // window at all ends the probing with what was timed.
            if self.whole_epoch && self.this_epoch == 0 {
                self.settle();
                return Ok(());
            }
            self.seen = 0;
            self.this_epoch = 0;
            self.whole_epoch = true;
        } else if let Some(last) = self.last
            && self.seen > self.window
        {
            self.timed += now.duration_since(last).as_secs_f64();
            self.intervals += 1;
            self.this_epoch += 1;
        }
        self.last = Some(now);
        self.seen += 1;
        if self.intervals == PROBE {
            self.paces.push((self.window, self.timed / PROBE as f64));
            self.next(budget);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `next` on timed paces, as the probing does.
    fn settle(paces: &[f64], per_batch: f64, budget: f64) -> Auto {
        let mut auto = Auto::new(None);
        auto.per_batch = per_batch;
        for &pace in paces {
            assert!(!auto.settled(), "settled before {pace}");
            auto.paces.push((auto.window, pace));
            auto.next(budget);
        }
        auto
    }

    #[test]
    fn it_keeps_the_smallest_window_within_a_percent_of_the_best_pace() {
        // The barrier pays the issue on top of the compute; from 2 on the pace is flat.
        let auto = settle(&[0.100, 0.080, 0.0799], 0.0, f64::INFINITY);
        assert!(auto.settled());
        assert_eq!(auto.window(), 2);
        assert_eq!(auto.paces().len(), 3);
        // Gains go on to 8, then stop.
        let auto = settle(&[0.1, 0.08, 0.06, 0.05, 0.0499], 0.0, f64::INFINITY);
        assert_eq!(auto.window(), 8);
        // A noisy last timing that is slower does not win.
        let auto = settle(&[0.1, 0.08, 0.09], 0.0, f64::INFINITY);
        assert_eq!(auto.window(), 2);
    }

    /// Epochs of 3 batches time the barrier (one interval an epoch, across epochs), and are
    /// too short to time the window of 2: it settles on the barrier, never waiting forever.
    #[test]
    fn epochs_too_short_for_a_window_end_the_probing() {
        let mut auto = Auto::new(Some(1e6));
        let mut flight = InFlight::new(0, 0);
        for _ in 0..40 {
            for batch in 0..3 {
                auto.before_issue(batch, &mut flight).unwrap();
            }
        }
        assert!(auto.settled(), "{:?}", auto.paces());
        assert_eq!(auto.window(), 1);
        assert_eq!(auto.paces().len(), 1);
        // A window that began late in an epoch is timed in the next: 12-batch epochs time the
        // barrier within the first, and the window of 2 from the second on.
        let mut auto = Auto::new(Some(1e6));
        for _ in 0..3 {
            for batch in 0..12 {
                auto.before_issue(batch, &mut flight).unwrap();
            }
        }
        assert!(auto.paces().len() >= 2, "{:?}", auto.paces());
        // Epochs of 2 time nothing: the barrier stays.
        let mut auto = Auto::new(Some(1e6));
        for _ in 0..3 {
            for batch in 0..2 {
                auto.before_issue(batch, &mut flight).unwrap();
            }
        }
        assert!(auto.settled() && auto.window() == 1 && auto.paces().is_empty());
    }

    #[test]
    fn it_never_doubles_past_its_memory_budget_or_the_largest_window() {
        // 10 MB a batch in flight and a 45 MB budget: 4 fits, 8 does not.
        let mb = 1024.0 * 1024.0;
        let auto = settle(&[0.4, 0.2, 0.1], 10.0 * mb, 45.0 * mb);
        assert!(auto.settled());
        assert_eq!(auto.window(), 4);
        let halving: Vec<f64> = (0..7).map(|i| 1.0 / f64::from(1 << i)).collect();
        let auto = settle(&halving, 0.0, f64::INFINITY);
        assert_eq!(auto.window(), LARGEST);
    }
}
