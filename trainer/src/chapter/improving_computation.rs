//! 12.2.3 "Improving Computation": many tiny operations, waited for one by one or once at the
//! end, and the book's cost model t1 (frontend issue), t2 (backend compute), t3 (result return).

use std::time::Instant;

use burn::tensor::Tensor;

use super::{
    Experiment, Outcome, Picture, Setup, Timing, no_overlap_reason, timed, to_host, wait_all,
};

const BOOK: &str = "d2l runs y = x + 1 on a (1, 2) matrix 10000 times, with y.wait_to_read() \
    after each ('synchronous') and with one npx.waitall() at the end ('asynchronous'): the \
    asynchronous loop is several times faster. With t1 the frontend's time to issue one operation, t2 the backend's time to run \
    it and t3 the time to return its result, the synchronous loop costs about \
    n(t1 + t2 + t3) and the asynchronous one about t1 + n t2 + t3 when t2 >= t1: the frontend \
    runs ahead and only the backend's work adds up.";

/// `y.wait_to_read()` on a 1x2 result: the whole of it comes back.
fn read(y: &Tensor<2>) -> anyhow::Result<()> {
    to_host(y.clone()).map(drop)
}

/// 12.2.3: 1000 x (y = x + 1), waited for one by one or once; t1, t2, t3.
pub const EXPERIMENT: Experiment = Experiment {
    key: "improving-computation",
    title: "Improving computation (12.2.3)",
    about: "12.2.3: 1000 x (y = x + 1), waited for one by one or once; t1, t2, t3",
    book: BOOK,
    run,
};

fn run(s: &Setup) -> anyhow::Result<Outcome> {
    let n = s.size(1000, 100);
    let device = &s.gpu.device;
    let x = Tensor::<2>::ones([1, 2], device);
    read(&(x.clone().add_scalar(1.0)))?; // warm-up
    let sync = timed("synchronous", s.repeat, || {
        for _ in 0..n {
            let y = x.clone().add_scalar(1.0);
            read(&y)?; // y.wait_to_read()
        }
        Ok(())
    })?;
    let asynchronous = timed("asynchronous", s.repeat, || {
        let mut y = x.clone();
        for _ in 0..n {
            y = x.clone().add_scalar(1.0);
        }
        drop(y);
        wait_all(device)
    })?;
    let (t1, t3) = issue_and_return(s, &x, n)?;
    // t2: what is left of one synchronous step.
    let t2 = (sync.median() / n as f64 - t1 - t3).max(0.0);
    let measured = asynchronous.median();
    let ratio = sync.median() / measured;
    let held = ratio > 1.2;
    let timings: Vec<Timing> = vec![sync, asynchronous];
    Ok(Outcome {
        experiment: &EXPERIMENT,
        context: s.on_gpu(&format!("{n} x (y = x + 1) on a 1x2 matrix")),
        timings,
        notes: notes(n, t1, t2, t3, measured),
        ratio: ("synchronous / asynchronous".into(), ratio),
        claim: "one wait at the end is faster than a wait after every operation".into(),
        held,
        why: match no_overlap_reason(&s.gpu) {
            Some(reason) if !held => reason,
            _ if held => format!(
                "each wait pays t3 = {:.1} us and stops the frontend from running ahead",
                t3 * 1e6
            ),
            _ => "a wait costs little next to the operation here".into(),
        },
        picture: Picture::Bars,
    })
}

/// The book's t1 (the frontend alone, issuing one of `n` operations without waiting) and t3
/// (returning a result already computed), medians in seconds.
fn issue_and_return(s: &Setup, x: &Tensor<2>, n: usize) -> anyhow::Result<(f64, f64)> {
    let device = &s.gpu.device;
    let mut t1 = Vec::new();
    for _ in 0..s.repeat {
        let start = Instant::now();
        let mut y = x.clone();
        for _ in 0..n {
            y = x.clone().add_scalar(1.0);
        }
        t1.push(start.elapsed().as_secs_f64() / n as f64);
        read(&y)?;
        wait_all(device)?;
    }
    // t3: returning a result that is already computed.
    let y = x.clone().add_scalar(1.0);
    read(&y)?;
    let mut t3 = Vec::new();
    for _ in 0..s.repeat {
        let reads = 20;
        let start = Instant::now();
        for _ in 0..reads {
            read(&y)?;
        }
        t3.push(start.elapsed().as_secs_f64() / reads as f64);
    }
    Ok((crate::summary::median(t1), crate::summary::median(t3)))
}

/// The three times, and the book's prediction of the asynchronous loop against `measured`.
fn notes(n: usize, t1: f64, t2: f64, t3: f64, measured: f64) -> Vec<String> {
    let predicted = if t2 >= t1 {
        t1 + n as f64 * t2 + t3
    } else {
        n as f64 * t1 + t2 + t3
    };
    vec![
        format!(
            "t1 (issue one op): {:.2} us, t2 (compute one op): {:.2} us, t3 (return a result): {:.2} us",
            t1 * 1e6,
            t2 * 1e6,
            t3 * 1e6
        ),
        format!(
            "book's formula {}: {predicted:.4} sec predicted for the asynchronous loop, {measured:.4} sec measured (measured / predicted {:.2})",
            if t2 >= t1 {
                "t1 + n t2 + t3"
            } else {
                "n t1 + t2 + t3 (frontend-bound)"
            },
            measured / predicted
        ),
    ]
}
