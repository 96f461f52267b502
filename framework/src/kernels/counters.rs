//! What oneDNN ran on this thread, and why any operation fell back to burn-flex.
//!
//! The counts are per thread, as the choice of kernels is ([`super::with_kernels`]): a test
//! that runs a layer on the oneDNN path reads only what its own thread ran, so another test
//! running beside it cannot hide a silent fallback.

use std::cell::{Cell, RefCell};

thread_local! {
    static RAN: Cell<u64> = const { Cell::new(0) };
    static FELL_BACK: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// How many layer operations oneDNN has run on this thread, and why any fell back to burn-flex
/// on it (a configuration oneDNN has no kernel for, or a primitive it could not make), each
/// reason once.
pub fn counts() -> (u64, Vec<String>) {
    (RAN.with(Cell::get), FELL_BACK.with(|r| r.borrow().clone()))
}

/// Counts one operation that oneDNN ran.
#[cfg_attr(not(feature = "onednn"), allow(dead_code))]
pub(crate) fn ran() {
    RAN.with(|r| r.set(r.get() + 1));
}

/// Records why an operation fell back to burn-flex (once per reason).
#[cfg_attr(not(feature = "onednn"), allow(dead_code))]
pub(crate) fn fell_back(why: &dyn std::fmt::Display) {
    let why = why.to_string();
    FELL_BACK.with(|reasons| {
        let mut reasons = reasons.borrow_mut();
        if !reasons.contains(&why) {
            reasons.push(why);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With counts shared by the process (as before), another thread's operation on the oneDNN
    /// path would hide that this thread ran nothing, or fell back.
    #[test]
    fn another_threads_operations_and_fallbacks_are_not_counted_here() {
        ran();
        let (here, _) = counts();
        std::thread::spawn(|| {
            ran();
            ran();
            fell_back(&"a reason of another thread");
        })
        .join()
        .unwrap();
        let (after, reasons) = counts();
        assert_eq!(after, here);
        assert!(
            !reasons.iter().any(|r| r == "a reason of another thread"),
            "{reasons:?}"
        );
        fell_back(&"twice");
        fell_back(&"twice");
        assert_eq!(counts().1.iter().filter(|r| *r == "twice").count(), 1);
    }
}
