//! # ember-trainer
//!
//! The training loop of ember, its sync policies, traces and plots, and the `ember` CLI.
//! This first version provides the `ember devices` command.
#![warn(missing_docs)]
