//! A user's own learning-rate schedule in `Fit`: a rate that is no number stops the run,
//! naming the schedule and the step, before the step runs.

use burn::prelude::*;
use ember::{L2Loss, Optimizer};
use ember_datasets::Synthetic;
use ember_trainer::fit::{Fit, SyntheticEpochs};

use super::callbacks::network;

/// A schedule of one's own that goes wrong at step 4.
#[derive(Debug)]
struct Broken;

impl ember::optim::LrSchedule for Broken {
    fn rate(&self, base: f64, at: ember::optim::ScheduleAt) -> f64 {
        if at.step < 4 { base } else { f64::NAN }
    }
}

#[test]
fn a_schedule_that_gives_no_rate_stops_the_run_naming_it_and_the_step() {
    let device = Device::flex().autodiff();
    let net = network(&device);
    let optimizer = Optimizer::new(&net, "sgd", 0.01).unwrap();
    let Err(err) = Fit::new(net, L2Loss, optimizer, &device)
        .lr_schedule(Broken)
        .epochs(2)
        .run(&mut SyntheticEpochs::new(Synthetic::chapter(4, 3, 0), 3))
    else {
        panic!("a NaN rate must stop the run");
    };
    let err = err.to_string();
    assert!(
        err.contains("NaN") && err.contains("Broken") && err.contains("step 4"),
        "{err}"
    );
}
