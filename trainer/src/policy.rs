//! Sync policies: how far the frontend may run ahead of the backend.
//!
//! Before the frontend starts batch `t`, the loop asks the policy, which may wait on batches
//! still in flight through [`InFlight`]. At the end of every epoch the loop waits for all of
//! them (`waitall`), whatever the policy.
//!
//! The built-ins are [`Window`], [`NoSync`], [`EveryN`], [`MemoryBudget`] and [`Auto`]. Each
//! says what it is as data, a [`PolicyKind`]: traces record it, plots and comparisons read it
//! back, and it parses from and prints as the names that [`BUILT_INS`] lists, each with its
//! rule (the table `ember train --help` prints).
//!
//! A user's own policy implements [`SyncPolicy`]:
//!
//! ```
//! use ember_trainer::policy::{InFlight, PolicyKind, SyncPolicy};
//!
//! /// A barrier every 10 batches, and never more than 4 in flight.
//! struct Tens;
//! impl SyncPolicy for Tens {
//!     fn kind(&self) -> PolicyKind { PolicyKind::Custom("tens".into()) }
//!     fn before_issue(&mut self, batch: usize, flight: &mut InFlight) -> ember::Result<()> {
//!         if batch % 10 == 0 { flight.wait_all() } else { flight.wait_while_longer_than(4) }
//!     }
//! }
//! ```

use ember::{Error, Result};

pub mod auto;
mod builtins;
mod kind;
mod sync;
pub use auto::Auto;
pub use builtins::{EveryN, MemoryBudget, NoSync, Window};
pub use kind::{BUILT_INS, BuiltIn, PolicyKind, forms};
pub use sync::{InFlight, SyncPolicy};

/// Building a policy from its kind: here, above both the kinds and the policies, so that
/// neither imports the other.
impl PolicyKind {
    /// The built-in policy of this kind.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for a user's own policy, which only its own code can build.
    pub fn build(&self) -> Result<Box<dyn SyncPolicy>> {
        Ok(match self {
            PolicyKind::Window(k) => Box::new(Window(*k)),
            PolicyKind::NoSync => Box::new(NoSync),
            PolicyKind::EveryN(n) => Box::new(EveryN(*n)),
            PolicyKind::MemoryBudget(mb) => Box::new(MemoryBudget(*mb)),
            PolicyKind::Auto(mb) => Box::new(Auto::new(*mb)),
            PolicyKind::Custom(name) => {
                return Err(Error::InvalidValue {
                    name: "sync policy",
                    value: name.clone(),
                    reason: format!("not a built-in one ({})", forms()),
                });
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_built_in_reports_its_own_kind_and_names_round_trip_through_a_trace() {
        for kind in [
            PolicyKind::Window(1),
            PolicyKind::Window(3),
            PolicyKind::NoSync,
            PolicyKind::EveryN(4),
            PolicyKind::MemoryBudget(12.5),
            PolicyKind::Auto(None),
            PolicyKind::Auto(Some(300.0)),
        ] {
            assert_eq!(kind.build().unwrap().kind(), kind);
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(
                serde_json::from_str::<PolicyKind>(&json).unwrap(),
                kind,
                "{json}"
            );
        }
        let mine = PolicyKind::Custom("tens".to_string());
        assert!(mine.build().is_err());
        assert_eq!(PolicyKind::from_name("tens"), mine);
    }
}
