//! `auto[:MB]` ([`Auto`]): a window that picks its own size while training.
//!
//! It starts as the barrier and compares the window in force with twice that window by timing
//! the frontend's pace: the seconds from one batch's release (the end of the policy's call
//! before it) to the next, over blocks of [`BLOCK`] intervals, each between two batches of one
//! epoch once the window has filled (more batches released since it changed, or since the epoch
//! began, than it holds); a block may span epochs. The two windows take turns, the smaller one
//! first and last (`k 2k k 2k k 2k k`), and each block of the doubled window is divided by the
//! mean of the two blocks around it: a machine whose speed drifts, or jumps, during the
//! comparison moves both alike, and the median of the [`PAIRS`] ratios ignores the pair a jump
//! fell into. Timed one after the other, the windows were compared at different speeds of the
//! machine: on a 2-vCPU EPYC the same policy's pace moved between 27 and 29.5 ms per batch
//! within one run, which is more than the 1 % to be told apart. Where the [`PAIRS`] pairs
//! disagree on whether the doubled window gains (some ratios below `1 − GAIN`, some not), it
//! times two more and takes the median of [`MOST_PAIRS`]: on that EPYC the window of 4, which
//! gains nothing there over 2, once came out 1 % faster by three pairs, and timing 8 next grew
//! the process by 8.0 MB, nearly 4 batches, where the barrier grew it by 0.1.
//!
//! Where the doubled window's pace is at least [`GAIN`] (1 %) below the smaller one's, it
//! compares that window with its double in turn; where not, it keeps the smaller one: the pace
//! of unbounded issue is then within 1 % of it, as a window past the backend's queue adds
//! nothing. That is the smallest window whose pace is within 1 % of its double's: the throughput
//! of running ahead, with the least memory that needs. Where the budget stops a comparison, it
//! keeps the smaller window without that evidence.
//!
//! It also never lets the process grow by more than its budget within an epoch (`auto:MB`;
//! without one, the memory free when it starts, and no bound where the system does not say):
//! it waits for the oldest batch while the growth since the epoch began is over it, as
//! `memory:MB` does, and never tries a doubled window that, at the most growth per batch in
//! flight seen so far, would not fit. That estimate counts all the epoch's growth (the
//! optimizer's first state, memory the allocator keeps), so it errs on the side of a smaller
//! window. An epoch too short to time a block at all ends the probing with the smaller window.
//!
//! Its state is not in checkpoints: a resumed run probes again from the barrier.
//!
//! Where it cannot decide well: it reads one pace, the frontend's, so it cannot tell a
//! device queue from a host one; a backend that gives no progress until a readback (every
//! completion is a batch's loss) shows its pace only through the waits; and a machine whose
//! pace varies by more than 1 % from one block to the next, in most of the pairs, may make it
//! keep a window one step larger or smaller than a quiet machine would. Its choice is each
//! batch's `window` in the trace and a counter in the profile.

use std::time::Instant;

use ember::Result;

use super::kind::PolicyKind;
use super::sync::{InFlight, SyncPolicy};
use crate::memory::available_bytes;

/// Intervals timed in each block.
pub const BLOCK: usize = 8;
/// Blocks of the doubled window in a comparison whose pairs agree; the smaller window's
/// surround them. Odd, so that the median is one of the ratios.
pub const PAIRS: usize = 3;
/// Blocks of the doubled window in a comparison whose first [`PAIRS`] disagree on whether it
/// gains; odd too.
pub const MOST_PAIRS: usize = 5;
const _: () = assert!(PAIRS % 2 == 1 && MOST_PAIRS % 2 == 1 && MOST_PAIRS >= PAIRS);
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
    /// The smaller window of the comparison under way; once settled, the window kept.
    base: usize,
    /// The window in force: `base`, or twice it in the comparison's odd blocks.
    window: usize,
    probing: bool,
    /// Batches released since the window last began to fill (when it changed, and at each
    /// epoch's start, after the waitall emptied it).
    seen: usize,
    /// The last release, and the seconds and intervals timed so far in this block: only
    /// intervals between two releases of one epoch, once the window was full.
    last: Option<Instant>,
    timed: f64,
    intervals: usize,
    /// Intervals timed in this block in the current epoch.
    this_epoch: usize,
    /// Whether this block has been under way since the current epoch began: only such an
    /// epoch that timed nothing shows that the epochs are too short for it.
    whole_epoch: bool,
    /// Seconds per batch of each block of the comparison under way, the windows in turn.
    blocks: Vec<f64>,
    /// Each comparison made: the doubled window, and its pace over the smaller one's.
    comparisons: Vec<(usize, f64)>,
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
            base: 1,
            window: 1,
            probing: true,
            seen: 0,
            last: None,
            timed: 0.0,
            intervals: 0,
            this_epoch: 0,
            whole_epoch: false,
            blocks: Vec::new(),
            comparisons: Vec::new(),
            per_batch: 0.0,
        }
    }

    /// The window in force.
    pub fn window(&self) -> usize {
        self.window
    }

    /// The comparisons made so far: each doubled window, and its pace (seconds per batch)
    /// over that of the window half its size, the median of the pairs.
    pub fn comparisons(&self) -> &[(usize, f64)] {
        &self.comparisons
    }

    /// Whether it has settled on its window.
    pub fn settled(&self) -> bool {
        !self.probing
    }

    /// Whether a window of `window` fits the budget at the most growth per batch seen.
    fn fits(&self, window: usize, budget: f64) -> bool {
        window <= LARGEST && window as f64 * self.per_batch <= budget
    }

    /// After a block's timing, `pace` seconds per batch: the next block, with the other
    /// window, or the comparison's verdict.
    fn block_timed(&mut self, pace: f64, budget: f64) {
        self.blocks.push(pace);
        // Odd blocks are the doubled window's; an odd count ends a pair.
        let next = match (self.blocks.len() % 2, self.verdict()) {
            (0, _) => self.base,
            (_, None) if self.fits(2 * self.base, budget) => 2 * self.base,
            (_, None) => return self.settle(),
            (_, Some(ratio)) => {
                self.comparisons.push((2 * self.base, ratio));
                self.blocks.clear();
                // A NaN ratio (nothing timed) gains nothing.
                if ratio >= 1.0 - GAIN || ratio.is_nan() {
                    return self.settle();
                }
                self.base *= 2;
                if !self.fits(2 * self.base, budget) {
                    return self.settle();
                }
                self.base
            }
        };
        self.window = next;
        self.seen = 0;
        self.timed = 0.0;
        self.intervals = 0;
        self.this_epoch = 0;
        self.whole_epoch = false;
    }

    /// The comparison's verdict once its blocks end a pair: the doubled window's pace over
    /// the smaller one's, the median of the pairs' ratios, after [`PAIRS`] pairs where they
    /// all fall on one side of `1 − GAIN`, else after [`MOST_PAIRS`]; `None` while more pairs
    /// are to be timed.
    fn verdict(&self) -> Option<f64> {
        let pairs = self.blocks.len() / 2;
        if self.blocks.len().is_multiple_of(2) || pairs < PAIRS {
            return None;
        }
        let mut ratios: Vec<f64> = (0..pairs)
            .map(|k| {
                let around = 0.5 * (self.blocks[2 * k] + self.blocks[2 * k + 2]);
                self.blocks[2 * k + 1] / around
            })
            .collect();
        let gains = ratios.iter().filter(|r| **r < 1.0 - GAIN).count();
        let split = gains != 0 && gains != pairs;
        if pairs.is_multiple_of(2) || (split && pairs < MOST_PAIRS) {
            return None;
        }
        ratios.sort_by(f64::total_cmp);
        Some(ratios[pairs / 2])
    }

    /// Notes the most growth per batch in flight seen so far.
    fn note_growth(&mut self, flight: &InFlight) {
        if !flight.is_empty() {
            let growth = flight.memory_growth().max(0) as f64;
            self.per_batch = self.per_batch.max(growth / flight.len() as f64);
        }
    }

    /// Keeps the smaller window of the comparison under way.
    fn settle(&mut self) {
        self.window = self.base;
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
        // The growth per batch in flight, before any wait empties the flight: under a window
        // of 1 it is the only time a batch's growth is seen.
        self.note_growth(flight);
        if let Some(last) = batch.checked_sub(self.window) {
            flight.wait_through(last)?;
        }
        let mut capped = false;
        while !flight.is_empty() && flight.memory_growth() as f64 > budget {
            flight.wait_oldest()?;
            capped = true;
        }
        // The budget, not the window, held the batches back: the window under trial does not
        // fit, whatever the growth per batch seen so far said. It is not timed (its blocks
        // would time the budget's depth, and the trace would show a window that never ran).
        if capped && self.probing {
            self.settle();
        }
        self.note_growth(flight);
        if !self.probing {
            return Ok(());
        }
        let now = Instant::now();
        if batch == 0 {
            // An epoch's first batch comes after its waitall and metrics, which are no
            // window's pace, and the window fills again. An epoch too short to time this
            // block at all ends the probing.
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
        if self.intervals == BLOCK {
            self.block_timed(self.timed / BLOCK as f64, budget);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds block paces to the probing, as the timing does, until it settles or the paces
    /// end; `pace(window, block)` gives each block's seconds per batch.
    fn probe(per_batch: f64, budget: f64, pace: impl Fn(usize, usize) -> f64) -> Auto {
        let mut auto = Auto::new(None);
        auto.per_batch = per_batch;
        for block in 0..1000 {
            if auto.settled() {
                break;
            }
            auto.block_timed(pace(auto.window, block), budget);
        }
        assert!(auto.settled(), "{:?}", auto.comparisons());
        auto
    }

    /// The barrier pays the issue on top of the compute, 4 %; from 2 on the pace is flat.
    fn chapter(window: usize) -> f64 {
        if window == 1 { 0.104 } else { 0.100 }
    }

    #[test]
    fn it_keeps_the_smallest_window_within_a_percent_of_the_doubled_ones_pace() {
        let auto = probe(0.0, f64::INFINITY, |w, _| chapter(w));
        assert_eq!(auto.window(), 2);
        let windows: Vec<usize> = auto.comparisons().iter().map(|c| c.0).collect();
        assert_eq!(windows, [2, 4]);
        // Gains go on to 8, then stop.
        let auto = probe(0.0, f64::INFINITY, |w, _| 0.1 / w.min(8) as f64);
        assert_eq!(auto.window(), 8);
        // A doubled window that is slower is not kept.
        let auto = probe(0.0, f64::INFINITY, |w, _| if w == 1 { 0.1 } else { 0.11 });
        assert_eq!((auto.window(), auto.comparisons().len()), (1, 1));
    }

    /// The machine slows by 3 % a block while it probes: timed one after the other, the
    /// doubled window would look 3 % slower and the barrier would be kept. Taking turns, each
    /// doubled block is set against the blocks around it.
    #[test]
    fn a_drifting_machine_does_not_decide_the_window() {
        let drift = |block: usize| 1.03f64.powi(block as i32);
        let auto = probe(0.0, f64::INFINITY, |w, block| chapter(w) * drift(block));
        assert_eq!(auto.window(), 2, "{:?}", auto.comparisons());
        let ratio = auto.comparisons()[0].1;
        assert!((ratio - 0.100 / 0.104).abs() < 0.001, "{ratio}");
        // Speeding up instead would make the barrier look 3 % slower than it is: still 2.
        let auto = probe(0.0, f64::INFINITY, |w, block| chapter(w) / drift(block));
        assert_eq!(auto.window(), 2, "{:?}", auto.comparisons());
    }

    /// One jump of 10 % in the machine's speed, within the first comparison, spoils one pair:
    /// the median of the three, or of five where the pairs then disagree, ignores it, either
    /// way.
    #[test]
    fn one_jump_in_the_machines_speed_is_outvoted() {
        for (at, by) in [(1, 1.1), (1, 1.0 / 1.1), (3, 1.1), (5, 1.0 / 1.1)] {
            let auto = probe(0.0, f64::INFINITY, |w, block| {
                chapter(w) * if block >= at { by } else { 1.0 }
            });
            assert_eq!(
                auto.window(),
                2,
                "jump at {at} by {by}: {:?}",
                auto.comparisons()
            );
        }
    }

    /// Three pairs that disagree on whether the doubled window gains are not enough: two more
    /// pairs are timed and the median of five decides, either way.
    #[test]
    fn pairs_that_disagree_are_timed_twice_more() {
        for (later, doubles) in [(0.97, true), (1.0, false)] {
            // The first three pairs' ratios: 0.97, 1.0, 0.97, then `later` twice.
            let ratios = [0.97, 1.0, 0.97, later, later];
            let mut auto = Auto::new(None);
            let mut blocks = 0;
            while !auto.settled() && auto.comparisons().is_empty() {
                let pace = match blocks % 2 {
                    0 => 0.1,
                    _ => 0.1 * ratios[blocks / 2],
                };
                auto.block_timed(pace, f64::INFINITY);
                blocks += 1;
            }
            assert_eq!(blocks, 2 * MOST_PAIRS + 1, "{:?}", auto.comparisons());
            let (doubled, ratio) = auto.comparisons()[0];
            assert_eq!(doubled, 2);
            assert!(
                (ratio - if doubles { 0.97 } else { 1.0 }).abs() < 1e-12,
                "{ratio}"
            );
            assert_eq!(auto.settled(), !doubles);
        }
        // Three pairs that agree decide at once.
        let mut auto = Auto::new(None);
        for pace in [0.1, 0.097, 0.1, 0.098, 0.1, 0.096, 0.1] {
            assert!(auto.comparisons().is_empty());
            auto.block_timed(pace, f64::INFINITY);
        }
        assert_eq!(auto.comparisons().len(), 1);
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
        assert!(auto.settled(), "{:?}", auto.blocks);
        assert_eq!(auto.window(), 1);
        assert!(auto.comparisons().is_empty());
        // A block that began late in an epoch is timed in the next: 12-batch epochs time the
        // barrier's first block within the first, and the window of 2 from the second on.
        let mut auto = Auto::new(Some(1e6));
        for _ in 0..2 {
            for batch in 0..12 {
                auto.before_issue(batch, &mut flight).unwrap();
            }
        }
        assert!(
            !auto.settled() && auto.blocks.len() >= 2,
            "{:?}",
            auto.blocks
        );
        // Epochs of 2 time nothing: the barrier stays.
        let mut auto = Auto::new(Some(1e6));
        for _ in 0..3 {
            for batch in 0..2 {
                auto.before_issue(batch, &mut flight).unwrap();
            }
        }
        assert!(auto.settled() && auto.window() == 1 && auto.blocks.is_empty());
    }

    #[test]
    fn it_never_doubles_past_its_memory_budget_or_the_largest_window() {
        // 10 MB a batch in flight and a 45 MB budget: 4 fits, 8 does not.
        let mb = 1024.0 * 1024.0;
        let halving = |w: usize, _| 1.0 / w as f64;
        let auto = probe(10.0 * mb, 45.0 * mb, halving);
        assert_eq!(auto.window(), 4);
        let windows: Vec<usize> = auto.comparisons().iter().map(|c| c.0).collect();
        assert_eq!(windows, [2, 4], "8 is never tried");
        let auto = probe(0.0, f64::INFINITY, halving);
        assert_eq!(auto.window(), LARGEST);
    }
}
