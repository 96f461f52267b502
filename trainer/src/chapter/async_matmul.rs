//! 12.2.1 "Asynchrony via Backend": ten random matrices and their products, on the CPU, then on
//! the GPU with and without a final `waitall`.

use super::{Experiment, Outcome, Picture, Setup, no_overlap_reason, normal, timed, wait_all};

const BOOK: &str = "d2l warms the GPU up, then times 10 x (a = random 1000x1000, b = a @ a): \
    numpy: 0.4711 sec on the CPU, mxnet.np: 0.0015 sec on the GPU with waitall. \
    Without waitall the GPU loop only issues the work, and returns in a small fraction of that: \
    the frontend gives the work to the backend and returns at once.";

/// 12.2.1: ten 1000x1000 random matrices and their products on the CPU, on the GPU (issue only), and on the GPU with wait_all.
pub const EXPERIMENT: Experiment = Experiment {
    key: "async-matmul",
    title: "Asynchrony via backend (12.2.1)",
    about: "12.2.1: ten 1000x1000 random matrices and their products on the CPU, on the GPU (issue only), and on the GPU with wait_all",
    book: BOOK,
    run,
};

fn run(s: &Setup) -> anyhow::Result<Outcome> {
    let n = s.size(1000, 64);
    let reps = 10;
    let (cpu, gpu) = (&s.cpu.device, &s.gpu.device);
    // Warm-up: kernels compiled and memory reserved before anything is timed.
    for device in [cpu, gpu] {
        let a = normal(n, device);
        let _ = a.clone().matmul(a);
        wait_all(device)?;
    }
    let cpu_label = format!("{} (the numpy baseline)", s.cpu.name);
    let cpu_time = timed(&cpu_label, s.repeat, || {
        for _ in 0..reps {
            let a = normal(n, cpu);
            let _b = a.clone().matmul(a);
        }
        wait_all(cpu)
    })?;
    let mut issue = Vec::new();
    let mut finished = Vec::new();
    for _ in 0..s.repeat {
        let mut kept = Vec::new();
        let start = std::time::Instant::now();
        for _ in 0..reps {
            let a = normal(n, gpu);
            kept.push(a.clone().matmul(a));
        }
        issue.push(start.elapsed().as_secs_f64());
        wait_all(gpu)?;
        drop(kept);

        let mut kept = Vec::new();
        let start = std::time::Instant::now();
        for _ in 0..reps {
            let a = normal(n, gpu);
            kept.push(a.clone().matmul(a));
        }
        wait_all(gpu)?;
        finished.push(start.elapsed().as_secs_f64());
    }
    let gpu_name = s.gpu.name;
    let issue = super::Timing {
        label: format!("{gpu_name}, issue only"),
        seconds: issue,
    };
    let finished = super::Timing {
        label: format!("{gpu_name}, with wait_all"),
        seconds: finished,
    };
    let ratio = issue.median() / finished.median();
    let held = ratio < 0.1;
    let why = match no_overlap_reason(&s.gpu) {
        Some(reason) if !held => reason,
        _ if held => format!(
            "the frontend issued the 10 products in {:.1}% of the time the backend took to finish them",
            100.0 * ratio
        ),
        _ => "the device's queue is short here, so issuing waited for the backend".to_string(),
    };
    let notes = vec![format!(
        "{gpu_name} finished / {} time: {:.3} (the book's GPU: 0.003)",
        s.cpu.name,
        finished.median() / cpu_time.median()
    )];
    Ok(Outcome {
        experiment: &EXPERIMENT,
        context: format!(
            "CPU {}, GPU {}; 10 x {n}x{n} matmul, median of {}",
            s.cpu.label(),
            s.gpu.label(),
            s.repeat
        ),
        timings: vec![cpu_time, issue, finished],
        notes,
        ratio: (format!("{gpu_name} issue only / with wait_all"), ratio),
        claim: "issuing alone takes a small fraction (under 10%) of the finished time".into(),
        held,
        why,
        picture: Picture::Bars,
    })
}
