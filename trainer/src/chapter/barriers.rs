//! 12.2.2 "Barriers and Blockers": `waitall` against `wait_to_read` after one product.

use super::{Experiment, Outcome, Picture, Setup, normal, timed, wait_all, wait_to_read};

const BOOK: &str = "d2l times b = np.dot(a, a) followed by npx.waitall() and by \
    b.wait_to_read(): with one operation in flight both wait \
    for the same work, so they cost about the same; waitall is the blunter tool.";

/// 12.2.2: waitall against wait_to_read after one product.
pub const EXPERIMENT: Experiment = Experiment {
    key: "barriers",
    title: "Barriers: waitall and wait_to_read (12.2.2)",
    about: "12.2.2: waitall against wait_to_read after one product",
    book: BOOK,
    run,
};

fn run(s: &Setup) -> anyhow::Result<Outcome> {
    let n = s.size(1000, 64);
    let device = &s.gpu.device;
    let a = normal(n, device);
    wait_to_read(&a.clone().matmul(a.clone()))?; // warm-up
    let all = timed("waitall", s.repeat, || {
        let _b = a.clone().matmul(a.clone());
        wait_all(device)
    })?;
    let one = timed("wait_to_read", s.repeat, || {
        let b = a.clone().matmul(a.clone());
        wait_to_read(&b)
    })?;
    let ratio = one.median() / all.median();
    let held = (0.5..=2.0).contains(&ratio);
    Ok(Outcome {
        experiment: &EXPERIMENT,
        context: s.on_gpu(&format!("{n}x{n} matmul")),
        timings: vec![all, one],
        notes: vec!["wait_to_read reads one element of b back: burn has no per-tensor wait".into()],
        ratio: ("wait_to_read / waitall".into(), ratio),
        claim: "with one operation in flight, waitall and wait_to_read cost about the same \
                (ratio within 0.5-2)"
            .into(),
        held,
        why: if held {
            "both block until the one product is done".into()
        } else {
            "one of the two paid for more than the product: timing noise or a readback cost \
             larger than the product at this size"
                .into()
        },
        picture: Picture::Bars,
    })
}
