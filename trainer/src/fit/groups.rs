//! Gradient accumulation's bookkeeping ([`super::Fit::accumulate`]): which batches form each
//! optimizer update, how many updates the run has taken (the learning-rate schedule's step),
//! and whether a checkpoint fell due inside the update that just ended.

use crate::checkpoint::Position;
use crate::trace::Trace;

/// The optimizer's updates, each the summed gradients of `every` batches (the last group of an
/// epoch may be shorter): where the run stands in them.
pub(super) struct Groups {
    every: usize,
    /// Batches issued since the last update.
    open: usize,
    /// Updates issued so far.
    updates: u64,
    /// The run's steps (batches) at the last update's end, for `--checkpoint-every`.
    at_last_update: u64,
}

impl Groups {
    /// Groups of `every` batches, from where `at` stands after the epochs of `trace`: the
    /// updates of its whole epochs, and those of the one it stopped in. A run stops only where
    /// no batch waits for an update: at a group's end, or at an epoch's end after its shorter
    /// last group's update (a signal there), so the groups up to `next_batch` are all whole
    /// but the last.
    pub(super) fn start(every: usize, at: &Position, trace: &Trace) -> Self {
        let updates = match every {
            1 => at.steps,
            _ => {
                let done: usize = trace.epochs.iter().map(|e| e.batches.div_ceil(every)).sum();
                (done + at.next_batch.div_ceil(every)) as u64
            }
        };
        Self {
            every,
            open: 0,
            updates,
            at_last_update: at.steps,
        }
    }

    /// The update the next batch's gradients go into: the schedule's step.
    pub(super) fn update(&self) -> u64 {
        self.updates
    }

    /// Counts a batch issued; returns whether it ends its update.
    pub(super) fn issue(&mut self) -> bool {
        self.open += 1;
        let ends = self.open == self.every;
        if ends {
            self.open = 0;
            self.updates += 1;
        }
        ends
    }

    /// At the epoch's end: whether batches wait for an update, which then ends.
    pub(super) fn close(&mut self) -> bool {
        if self.closed() {
            return false;
        }
        self.open = 0;
        self.updates += 1;
        true
    }

    /// No batch waits for an update: a checkpoint or a stop may come here.
    pub(super) fn closed(&self) -> bool {
        self.open == 0
    }

    /// At an update's end, the run's steps `now`: whether a multiple of `every` steps passed
    /// since the last update's end. Each batch ends an update without accumulation, where
    /// this is `now` being a multiple.
    pub(super) fn passed(&mut self, now: u64, every: Option<usize>) -> bool {
        let before = std::mem::replace(&mut self.at_last_update, now);
        every.is_some_and(|every| now / every as u64 > before / every as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(steps: u64, epoch: usize, next_batch: usize) -> Position {
        Position {
            epoch,
            next_batch,
            steps,
            seed: None,
            description: Default::default(),
            checksums: Default::default(),
            metrics: Default::default(),
            trace_bytes: None,
            carried: None,
        }
    }

    #[test]
    fn batches_form_updates_and_checkpoints_wait_for_their_ends() {
        let mut groups = Groups::start(3, &at(0, 0, 0), &Trace::default());
        let ends: Vec<bool> = (0..7).map(|_| groups.issue()).collect();
        assert_eq!(ends, [false, false, true, false, false, true, false]);
        assert_eq!(groups.update(), 2);
        assert!(!groups.closed());
        assert!(groups.close(), "the epoch's shorter last group");
        assert!(!groups.close());
        assert_eq!(groups.update(), 3);
        // A checkpoint every 2 steps: due at the ends of steps 3 and 6 (2 and 4, 6 passed).
        let mut groups = Groups::start(3, &at(0, 0, 0), &Trace::default());
        assert!(groups.passed(3, Some(2)));
        assert!(groups.passed(6, Some(2)));
        assert!(!groups.passed(7, Some(4)));
        assert!(!groups.passed(9, None));
        // Resumed at batch 6 of the first epoch: two updates done.
        assert_eq!(
            Groups::start(3, &at(6, 0, 6), &Trace::default()).update(),
            2
        );
        assert_eq!(
            Groups::start(1, &at(6, 0, 6), &Trace::default()).update(),
            6
        );
        // Stopped at the end of an epoch of 7, after its last group (batch 7) was applied.
        assert_eq!(
            Groups::start(3, &at(7, 0, 7), &Trace::default()).update(),
            3
        );
    }
}
