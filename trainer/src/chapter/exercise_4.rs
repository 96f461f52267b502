//! Exercise 4: with several operations in flight, what does waiting for everything (waitall)
//! cost against waiting for one intermediate result?

use std::time::Instant;

use burn::tensor::Tensor;
use ember::engine::{Engine, Handle};

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
    let (n, k) = (s.size(600, 48), 8);
    let [first, rest, all, handle_first, handle_all] = measure(s, n, k)?;
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
        Timing {
            label: format!("engine: the 1st of {k} units' handle"),
            seconds: handle_first,
        },
        Timing {
            label: format!("engine: waitall on {k} units"),
            seconds: handle_all,
        },
    ];
    let direct = timings[0].median() / timings[2].median();
    let ratio = timings[3].median() / timings[4].median();
    let held = ratio < 0.5;
    Ok(Outcome {
        experiment: &EXPERIMENT,
        context: s.on_gpu(&format!("{k} independent {n}x{n} products in flight")),
        timings,
        notes: vec![],
        ratio: ("engine: handle of the 1st / waitall".into(), ratio),
        claim: "waiting for one early result costs clearly less than waitall (under half)".into(),
        held,
        why: why(s, held, ratio, direct),
        picture: Picture::Bars,
    })
}

/// `k` independent `n`×`n` products, `repeat` times each way: burn's reads (the 1st, then the
/// rest; all) and the engine's handles (the 1st; all), in seconds.
fn measure(s: &Setup, n: usize, k: usize) -> anyhow::Result<[Vec<f64>; 5]> {
    let device = &s.gpu.device;
    let a = normal(n, device);
    // k independent products; the first is the "intermediate" result.
    let issue =
        |a: &Tensor<2>| -> Vec<Tensor<2>> { (0..k).map(|_| a.clone().matmul(a.clone())).collect() };
    drop(issue(&a));
    wait_all(device)?; // warm-up
    // The same products as units of ember's engine: each unit's readback is queued right behind
    // its own kernels, so its handle can complete before the later units run.
    let engine = Engine::new(a.clone(), None);
    let units = || -> Vec<Handle<Tensor<1>>> {
        (0..k)
            .map(|_| {
                engine.issue(move |a: &mut Tensor<2>| {
                    Ok(a.clone().matmul(a.clone()).reshape([n * n]))
                })
            })
            .collect()
    };
    drop(units());
    engine.wait_all()?; // warm-up
    let mut times: [Vec<f64>; 5] = Default::default();
    let [first, rest, all, handle_first, handle_all] = &mut times;
    for _ in 0..s.repeat {
        let handles = units();
        let start = Instant::now();
        handles[0].wait()?;
        handle_first.push(start.elapsed().as_secs_f64());
        engine.wait_all()?;
        let handles = units();
        let start = Instant::now();
        engine.wait_all()?;
        handle_all.push(start.elapsed().as_secs_f64());
        drop(handles);

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
    Ok(times)
}

/// Why the claim held or not: the engine handle's share of waitall (`ratio`), and what burn's
/// own read of the 1st product did (`direct`, its share of waitall).
fn why(s: &Setup, held: bool, ratio: f64, direct: f64) -> String {
    let burn_read = if direct < 0.5 {
        "a read issued after all of them returned early as well".to_string()
    } else if s.gpu.capabilities().asynchronous {
        format!(
            "a burn read issued after all of them waited for all of them ({} runs its queue \
             in issue order, and the read is queued last)",
            s.gpu.name
        )
    } else {
        format!(
            "a burn read issued after all of them found them done ({} computes each product as \
             it is issued)",
            s.gpu.name
        )
    };
    if held {
        format!(
            "the engine's handle of the 1st unit returned after {:.0}% of waitall's time, its \
             readback queued behind its own kernels; {burn_read}: ratio {direct:.2}",
            100.0 * ratio
        )
    } else {
        format!(
            "the engine's handle of the 1st unit took {:.0}% of waitall's time; {burn_read}: \
             ratio {direct:.2}",
            100.0 * ratio
        )
    }
}
