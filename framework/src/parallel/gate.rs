//! Where the replicas of an NCCL step meet before the all-reduce: NCCL's collective waits for
//! every card, so a replica that failed must make the others stand down rather than wait.

use std::sync::{Condvar, Mutex, MutexGuard};

/// Where the replicas of an NCCL step meet before the all-reduce: each arrives once, saying
/// whether it has its gradients, and learns whether all of them do.
pub(super) struct Gate {
    expected: usize,
    state: Mutex<(usize, bool)>,
    all_here: Condvar,
}

impl Gate {
    pub(super) fn new(expected: usize) -> Self {
        Self {
            expected,
            state: Mutex::new((0, true)),
            all_here: Condvar::new(),
        }
    }

    /// Arrives with `ok`, waits for the others, and says whether every replica arrived ok.
    pub(super) fn arrive(&self, ok: bool) -> bool {
        let mut state = self.arrived(ok);
        while state.0 < self.expected {
            state = self.all_here.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        state.1
    }

    /// Arrives failed for a replica whose thread never started.
    pub(super) fn arrive_without_waiting(&self) {
        drop(self.arrived(false));
    }

    fn arrived(&self, ok: bool) -> MutexGuard<'_, (usize, bool)> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.0 += 1;
        state.1 &= ok;
        self.all_here.notify_all();
        state
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_opens_when_all_arrive_and_says_whether_all_were_ready() {
        for (oks, started, want) in [
            (vec![true, true, true], 3, true),
            (vec![true, false, true], 3, false),
            (vec![true, true], 2, false),
        ] {
            let gate = Gate::new(3);
            let seen: Vec<bool> = std::thread::scope(|scope| {
                let threads: Vec<_> = oks
                    .iter()
                    .map(|&ok| {
                        let gate = &gate;
                        scope.spawn(move || gate.arrive(ok))
                    })
                    .collect();
                for _ in started..3 {
                    gate.arrive_without_waiting();
                }
                threads.into_iter().map(|t| t.join().unwrap()).collect()
            });
            assert_eq!(seen, vec![want; oks.len()], "{oks:?}, {started} started");
        }
    }
}
