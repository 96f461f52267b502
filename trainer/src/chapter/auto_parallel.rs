//! 12.3 "Automatic Parallelism": work on two devices at once, and computation overlapped with
//! copying results to the CPU.

use anyhow::anyhow;
use burn::tensor::{Device, Tensor};

use super::{Experiment, Outcome, Picture, Setup, Timing, normal, timed, wait_all};

const BOOK: &str = "d2l runs 50 products of 4000x4000 matrices on GPU1, on GPU2, and on both \
    at once ('GPU1 & GPU2'): the frontend issues both \
    and the two devices work in parallel, so together takes less than the sum. It then times \
    'Run on GPU1', 'Copy to CPU' and 'Run on GPU1 and copy to CPU', which takes less than \
    the first two together: copying finished results overlaps with computing the rest.";

/// `run(x)`: `reps` products of x with itself.
fn products(x: &Tensor<2>, reps: usize) -> Vec<Tensor<2>> {
    (0..reps).map(|_| x.clone().matmul(x.clone())).collect()
}

/// Copies every result to `cpu` through host memory.
fn copy_to(results: Vec<Tensor<2>>, cpu: &Device) -> anyhow::Result<Vec<Tensor<2>>> {
    results
        .into_iter()
        .map(|y| {
            let data = y.into_data();
            data.as_slice::<f32>()
                .map_err(|e| anyhow!("copying a result to the CPU failed: {e:?}"))?;
            Ok(Tensor::<2>::from_data(data, cpu))
        })
        .collect()
}

fn run(s: &Setup) -> anyhow::Result<Outcome> {
    let n = s.size(1000, 64);
    let reps = 10;
    let (cpu, gpu) = (&s.cpu.device, &s.gpu.device);
    let (cpu_name, gpu_name) = (
        format!("CPU ({})", s.cpu.name),
        format!("GPU ({})", s.gpu.name),
    );
    let x_cpu = normal(n, cpu);
    let x_gpu = normal(n, gpu);
    drop(products(&x_cpu, 1));
    drop(products(&x_gpu, 1));
    wait_all(gpu)?; // warm-up both devices
    let on_cpu = timed(format!("Run on {cpu_name}"), s.repeat, || {
        drop(products(&x_cpu, reps));
        wait_all(cpu)
    })?;
    let on_gpu = timed(format!("Run on {gpu_name}"), s.repeat, || {
        drop(products(&x_gpu, reps));
        wait_all(gpu)
    })?;
    let both = timed(format!("{cpu_name} & {gpu_name}"), s.repeat, || {
        // The GPU's work is issued first, so it runs while this thread computes on the CPU.
        let on_gpu = products(&x_gpu, reps);
        drop(products(&x_cpu, reps));
        wait_all(gpu)?;
        drop(on_gpu);
        Ok(())
    })?;
    let (copy, run_and_copy) = copies(s, &x_gpu, reps, &cpu_name, &gpu_name)?;
    let parallel = both.median() / (on_cpu.median() + on_gpu.median());
    let overlap = run_and_copy.median() / (on_gpu.median() + copy.median());
    let held = parallel < 0.9;
    Ok(Outcome {
        experiment: &EXPERIMENT,
        context: format!(
            "CPU {}, GPU {}; {reps} products of {n}x{n}, median of {}",
            s.cpu.label(),
            s.gpu.label(),
            s.repeat
        ),
        timings: vec![on_cpu, on_gpu, both, copy, run_and_copy],
        notes: vec![copy_note(overlap, reps)],
        ratio: (
            format!("{cpu_name} & {gpu_name} / ({cpu_name} + {gpu_name})"),
            parallel,
        ),
        claim: "computing on both devices at once takes less than the sum (under 90%)".into(),
        held,
        why: why(s, held, parallel),
        picture: Picture::Bars,
    })
}

/// The copies of `reps` products' results from the GPU to the CPU: alone, after they are
/// computed, and issued right behind the products.
fn copies(
    s: &Setup,
    x_gpu: &Tensor<2>,
    reps: usize,
    cpu_name: &str,
    gpu_name: &str,
) -> anyhow::Result<(Timing, Timing)> {
    let (cpu, gpu) = (&s.cpu.device, &s.gpu.device);
    let mut copy = Vec::new();
    for _ in 0..s.repeat {
        let results = products(x_gpu, reps);
        wait_all(gpu)?;
        let start = std::time::Instant::now();
        drop(copy_to(results, cpu)?);
        copy.push(start.elapsed().as_secs_f64());
    }
    let copy = Timing {
        label: format!("Copy to {cpu_name}"),
        seconds: copy,
    };
    let run_and_copy = timed(
        format!("Run on {gpu_name} and copy to {cpu_name}"),
        s.repeat,
        || {
            let results = products(x_gpu, reps);
            drop(copy_to(results, cpu)?);
            Ok(())
        },
    )?;
    Ok((copy, run_and_copy))
}

/// Why the claim held or not, from the share of the sum that both at once took.
fn why(s: &Setup, held: bool, parallel: f64) -> String {
    if held {
        format!(
            "the two devices worked at the same time: together took {:.0}% of the sum",
            100.0 * parallel
        )
    } else if s.cpu.on_cpu() && s.gpu.on_cpu() {
        format!(
            "{} computes on the same {} CPU cores as {}, so running both at once only splits \
             those cores between them",
            s.gpu.label(),
            std::thread::available_parallelism().map_or(0, |n| n.get()),
            s.cpu.name
        )
    } else {
        "the two devices did not overlap".into()
    }
}

/// What the copies did: overlapped the products, or waited for them all.
fn copy_note(overlap: f64, reps: usize) -> String {
    if overlap < 0.9 {
        format!(
            "run and copy together took {:.0}% of run plus copy: the copies overlapped the products",
            100.0 * overlap
        )
    } else {
        format!(
            "run and copy together took {:.0}% of run plus copy: no overlap, because a burn \
             readback is queued behind every product issued before it, so the first copy \
             waits for all {reps} products",
            100.0 * overlap
        )
    }
}

/// 12.3: products on the CPU, the GPU and both at once; run and copy to the CPU.
pub const EXPERIMENT: Experiment = Experiment {
    key: "auto-parallel",
    title: "Automatic parallelism (12.3)",
    about: "12.3: products on the CPU, the GPU and both at once; run and copy to the CPU",
    book: BOOK,
    run,
};
