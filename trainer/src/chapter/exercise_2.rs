//! Exercise 2 of 12.2: a training loop where batch t must finish before batch t + 2 starts,
//! beside the barrier and no barrier. Each run is `ember train` in a fresh process.

use crate::policy::PolicyKind;

use super::memory_footprint::{Measured, context};
use super::{Experiment, Outcome, Picture, Setup};

const BOOK: &str = "Exercise 2 asks for a loop where batch t must finish before batch \
    t + 2 starts: the frontend may run one batch ahead, so it overlaps preparing the next batch \
    with computing the current one, while memory stays bounded like the barrier's.";

/// Exercise 2: batch t finishes before batch t + 2 starts, beside barrier and none.
pub const EXPERIMENT: Experiment = Experiment {
    key: "exercise-2",
    title: "Exercise 2: batch t finishes before batch t + 2 starts",
    about: "Exercise 2: batch t finishes before batch t + 2 starts, beside barrier and none",
    book: BOOK,
    run,
};

fn run(s: &Setup) -> anyhow::Result<Outcome> {
    let barrier = Measured::new(s, PolicyKind::Window(1))?;
    let t2 = Measured::new(s, PolicyKind::Window(2))?;
    let none = Measured::new(s, PolicyKind::NoSync)?;
    let time = |m: &Measured| m.time().median();
    let ratio = time(&t2) / time(&barrier);
    let bounded = t2.peak() <= 0.5 * none.peak();
    let held = bounded && ratio <= 1.05;
    let why = match (bounded, ratio <= 1.05) {
        (true, true) => format!(
            "t+2 kept memory at {:.1} MB against none's {:.1} MB, in {:.0}% of barrier's time",
            t2.peak(),
            none.peak(),
            100.0 * ratio
        ),
        (true, false) => format!(
            "memory stayed bounded ({:.1} MB against none's {:.1} MB), but t+2 was {:.0}% \
             slower than the barrier: on this machine the backend uses every core, so \
             preparing the next batch competes with the current one instead of overlapping it",
            t2.peak(),
            none.peak(),
            100.0 * (ratio - 1.0)
        ),
        (false, _) => format!(
            "none's queue stayed short ({:.1} MB), so bounding it saved little",
            none.peak()
        ),
    };
    Ok(Outcome {
        experiment: &EXPERIMENT,
        context: context(s),
        timings: vec![barrier.time(), t2.time(), none.time()],
        notes: vec![barrier.line(), t2.line(), none.line()],
        ratio: ("t+2 / barrier time per epoch".into(), ratio),
        claim: "t+2 keeps memory bounded (at most half of none's peak) and is no slower than \
                the barrier (within 5%)"
            .into(),
        held,
        why,
        picture: Picture::Timeline(vec![
            barrier.runs[0].clone(),
            t2.runs[0].clone(),
            none.runs[0].clone(),
        ]),
    })
}
