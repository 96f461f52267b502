//! # ember-trainer
//!
//! The training loop of ember and the sync policies it enforces, the per-batch trace, and the
//! `ember` CLI. See [`fit::fit`] for the loop and [`policy`] for the policies.
#![warn(missing_docs)]

pub mod baseline;
pub mod compare;
pub mod evaluate;
pub mod fit;
pub mod memory;
pub mod plot;
pub mod policy;
pub mod trace;
