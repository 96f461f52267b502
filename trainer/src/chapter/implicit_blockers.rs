//! 12.2.2 "Implicit Blockers": converting a result to host data or to a scalar waits for it.

use super::{
    Experiment, Outcome, Picture, Setup, no_overlap_reason, normal, timed, to_host, wait_all,
};

const BOOK: &str = "d2l times b = np.dot(a, a) followed by b.asnumpy() ('numpy \
    conversion') and by b.sum().item() ('scalar conversion'): both convert to the \
    host, so both block until the product is done, like waitall.";

fn run(s: &Setup) -> anyhow::Result<Outcome> {
    let n = s.size(1000, 64);
    let device = &s.gpu.device;
    let a = normal(n, device);
    let _ = a.clone().matmul(a.clone()).into_data(); // warm-up
    let issue = timed("matmul, issue only", s.repeat, || {
        let _b = a.clone().matmul(a.clone());
        Ok(())
    });
    wait_all(device)?;
    let issue = issue?;
    let host = timed("numpy conversion", s.repeat, || {
        let b = a.clone().matmul(a.clone());
        to_host(b).map(drop)
    })?;
    let scalar = timed("scalar conversion", s.repeat, || {
        let b = a.clone().matmul(a.clone());
        let _: f32 = b.sum().into_scalar();
        Ok(())
    })?;
    let ratio = host.median().min(scalar.median()) / issue.median().max(1e-9);
    let held = ratio >= 5.0;
    Ok(Outcome {
        experiment: &EXPERIMENT,
        context: s.on_gpu(&format!("{n}x{n} matmul")),
        timings: vec![issue, host, scalar],
        notes: vec![],
        ratio: ("fastest conversion / issue only".into(), ratio),
        claim: "each conversion blocks until the product is computed (at least 5x the issue \
                time)"
            .into(),
        held,
        why: match no_overlap_reason(&s.gpu) {
            Some(reason) if !held => reason,
            _ if held => {
                "into_data and into_scalar wait for the backend, as asnumpy and item do".into()
            }
            _ => "the product is too small here for its compute to stand out".into(),
        },
        picture: Picture::Bars,
    })
}

/// 12.2.2: conversion to host data and to a scalar block.
pub const EXPERIMENT: Experiment = Experiment {
    key: "implicit-blockers",
    title: "Implicit blockers: numpy and scalar conversion (12.2.2)",
    about: "12.2.2: conversion to host data and to a scalar block",
    book: BOOK,
    run,
};
