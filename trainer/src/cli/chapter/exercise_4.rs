//! Exercise 4: with several operations in flight, what does waiting for everything (waitall)
//! cost against waiting for one intermediate result?

use std::time::Instant;

use burn::tensor::Tensor;

use super::{Experiment, Outcome, Picture, Setup, Timing, normal, wait_all, wait_to_read};

const BOOK: &str = "Exercise 4 of 12.2: with several instructions in flight, compare waitall \
    with waiting for an intermediate result (wait_to_read on an early output). MXNet's engine \
    tracks dependencies, so waiting for an early result need not wait for the later, \
    independent work: it should be cheaper than waitall.";

/// Exercise 4: waitall against waiting for an intermediate result, several in flight.
pub const EXPERIMENT: Experiment = Experiment {
    key: "exercise-4",
    title: "Exercise 4: waitall against waiting for an intermediate result",
    about: "Exercise 4: waitall against waiting for an intermediate result, several in flight",
    book: BOOK,
    run,
};

fn run(s: &Setup) -> anyhow::Result<Outcome> {
    let n = s.size(600, 48);
    let k = 8;
    let device = &s.gpu.device;
    let a = normal(n, device);
    // k independent products; the first is the "intermediate" result.
    let issue =
        |a: &Tensor<2>| -> Vec<Tensor<2>> { (0..k).map(|_| a.clone().matmul(a.clone())).collect() };
    drop(issue(&a));
    wait_all(device)?; // warm-up
    let (mut first, mut rest, mut all) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..s.repeat {
        let products = issue(&a);
        let start = Instant::now();
        wait_to_read(&products[0])?;
        first.push(start.elapsed().as_secs_f64());
        let start = Instant::now();
        wait_all(device)?;
        rest.push(start.elapsed().as_secs_f64());
        drop(products);

        let products = issue(&a);
        let start = Instant::now();
        wait_all(device)?;
        all.push(start.elapsed().as_secs_f64());
        drop(products);
    }
    let timings = vec![
        Timing {
            label: format!("wait_to_read on the 1st of {k} products"),
            seconds: first,
        },
        Timing {
            label: "then waitall for the rest".into(),
            seconds: rest,
        },
        Timing {
            label: format!("waitall on {k} products"),
            seconds: all,
        },
    ];
    let ratio = timings[0].median() / timings[2].median();
    let held = ratio < 0.5;
    let why = if held {
        "the first product was ready before the later ones ran".to_string()
    } else if s.gpu.name == ember::DeviceName::Wgpu {
        "burn's wgpu device runs its queue in issue order and a read is queued behind \
         everything issued before it, so waiting for the first product waits for all of them; \
         MXNet's dependency engine can return earlier"
            .to_string()
    } else {
        format!(
            "{} computed each product as it was issued, so everything was done before either \
             wait",
            s.gpu.name
        )
    };
    Ok(Outcome {
        experiment: &EXPERIMENT,
        context: s.on_gpu(&format!("{k} independent {n}x{n} products in flight")),
        timings,
        notes: vec![],
        ratio: ("wait for the 1st / waitall".into(), ratio),
        claim: "waiting for one early result costs clearly less than waitall (under half)".into(),
        held,
        why,
        picture: Picture::Bars,
    })
}
