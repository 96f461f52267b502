//! A training run as `ember train` makes it, for code to build: the same checks, the same
//! refusals in the same words, the same outputs. [`TrainSettings`] holds every flag, unchecked
//! (its default is `ember train` with none); [`TrainSettings::check`] gives a [`CheckedRun`] or
//! refuses, naming the flag, before any work; [`CheckedRun::train`] trains and writes.
//!
//! ```no_run
//! use ember_trainer::run::{Notes, TrainSettings};
//!
//! let mut settings = TrainSettings::default();
//! settings.workload.device = "flex".parse()?;
//! settings.workload.batches = Some(20);
//! settings.workload.recipe.optimizer = "adam".to_string();
//! settings.epochs = 2;
//! settings.outputs.save = Some("mlp.safetensors".into());
//! let notes = Notes::printed();
//! settings.check(&notes)?.train(None, &notes)?;
//! # Ok::<(), anyhow::Error>(())
//! ```
//!
//! Its rooms, by what they hold: the workload ([`workload`], with its [`recipe`], [`model`],
//! [`precision`] and the data's content in [`data_content`]), what the data asks of the loop
//! ([`task`], [`eval`]; text and its language models in [`text_data`] and
//! [`sequence_model`]), the files read and written ([`output_paths`], [`clash`]), what makes
//! two runs the same run ([`described`], [`resume_flags`], [`flags`]), and the run itself
//! ([`train`], [`written`], [`rescue_file`], [`book_lines`], [`job`]).

#[macro_use]
pub mod notes;

pub mod book_lines;
pub mod clash;
pub mod data_content;
pub mod described;
pub mod eval;
pub mod flags;
pub mod job;
pub mod list;
pub mod loss_name;
pub mod model;
pub mod output_paths;
pub mod precision;
pub mod recipe;
pub mod rescue_file;
pub mod rescued;
pub mod resume_flags;
pub mod sequence_model;
pub mod task;
pub mod text_data;
pub mod train;
pub mod workload;
pub mod written;

pub use notes::{Note, Notes};
pub use train::{CheckedRun, Outputs, Plan, TrainSettings};
pub use workload::{Workload, WorkloadSettings};
pub use written::Interrupted;
