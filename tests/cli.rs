//! The `ember` binary as a user runs it: output lines, files, and bad input. One file a command
//! or concept under `cli/`; running the binary is `common::cli`.

mod common;

#[path = "cli/callbacks.rs"]
mod callbacks;
#[path = "cli/data.rs"]
mod data;
#[path = "cli/devices.rs"]
mod devices;
#[path = "cli/distributed.rs"]
mod distributed;
#[path = "cli/distributed_alike.rs"]
mod distributed_alike;
#[path = "cli/distributed_stop.rs"]
mod distributed_stop;
#[path = "cli/gpu_suite.rs"]
mod gpu_suite;
#[path = "cli/html.rs"]
mod html;
#[path = "cli/hybridize.rs"]
mod hybridize;
#[path = "cli/lr_find.rs"]
mod lr_find;
#[path = "cli/metrics.rs"]
mod metrics;
#[path = "cli/models.rs"]
mod models;
#[path = "cli/nothing_trained.rs"]
mod nothing_trained;
#[path = "cli/precision.rs"]
mod precision;
#[path = "cli/profile.rs"]
mod profile;
#[path = "cli/recipes.rs"]
mod recipes;
#[path = "cli/remote.rs"]
mod remote;
#[cfg(feature = "remote")]
#[path = "cli/remote_lost.rs"]
mod remote_lost;
#[path = "cli/summary.rs"]
mod summary;
#[path = "cli/tensorboard.rs"]
mod tensorboard;
#[path = "cli/text.rs"]
mod text;
#[path = "cli/train.rs"]
mod train;
