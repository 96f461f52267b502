//! Nothing lost, nothing damaged: outputs that refuse devices, FIFOs and directories; checks
//! before any work; parameters written first; temporaries removed; signals that checkpoint;
//! runs killed with SIGKILL that resume to the same bits; errors instead of panics and aborts.
//! One file a concept under `safety/`, with `runs.rs` holding what they share.
//!
//! Every device node, FIFO and symlink here is made in a temporary directory; nothing touches
//! /dev.

mod common;

#[path = "safety/clashes.rs"]
mod clashes;
#[path = "safety/data.rs"]
mod data;
#[path = "safety/divergence.rs"]
mod divergence;
#[path = "safety/outputs.rs"]
mod outputs;
#[path = "safety/parameter_files.rs"]
mod parameter_files;
#[path = "safety/resume.rs"]
mod resume;
#[path = "safety/runs.rs"]
mod runs;
#[path = "safety/signals.rs"]
mod signals;
#[path = "safety/sizes.rs"]
mod sizes;
#[path = "safety/stdout.rs"]
mod stdout;
#[path = "safety/warm_up.rs"]
mod warm_up;
