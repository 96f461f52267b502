//! Optimizers: [`Optimizer`], Gluon's `Trainer`, with `step(batch_size)`; the optimizers by
//! name ([`OptimizerKind`]), gradient [`Clipping`], and learning-rate schedules
//! ([`LrSchedule`]).

mod build;
pub mod clip;
mod fused;
pub mod kind;
pub mod optimizer;
mod positive;
pub mod schedule;

pub use clip::Clipping;
pub use kind::{IntoOptimizer, OPTIMIZERS, OptimizerKind};
pub use optimizer::Optimizer;
pub use positive::{SMALLEST, positive, vanishes};
pub use schedule::{LrSchedule, Schedule, ScheduleAt};
