//! Exercise 3: training on the CPU and on the GPU at the same time, from one program. Does a
//! barrier on every batch of one device slow the other down? Measured both ways.

use crate::fit::SyntheticEpochs;
use crate::policy::{NoSync, SyncPolicy, Window};
use crate::summary::median;
use burn::tensor::Device;
use ember::{Init, L2Loss};
use ember_datasets::Synthetic;

use super::{Experiment, Outcome, Picture, Setup, Timing};
use crate::run::recipe::Recipe;
use crate::run::workload::{fit, mlp};

const BOOK: &str = "Exercise 3 of 12.2 asks what happens when the same program trains on the \
    CPU and on the GPU at once, and whether synchronizing after every batch on one device \
    hurts the other. Each device has its own backend queue, so a barrier on one should only \
    stall that device's frontend, not the other's.";

struct Sizes {
    batches: usize,
    batch: usize,
    features: usize,
    hidden: Vec<usize>,
}

/// One epoch on `device` under a barrier (`true`) or none; its time per epoch.
fn epoch(device: &Device, sizes: &Sizes, barrier: bool) -> anyhow::Result<f64> {
    let device = device.clone().autodiff();
    let net = mlp(&sizes.hidden, 1, Init::default(), &device);
    let mut data = SyntheticEpochs::new(
        Synthetic::chapter(sizes.batch, sizes.features, 3),
        sizes.batches,
    );
    let mut policy: Box<dyn SyncPolicy> = if barrier {
        Box::new(Window(1))
    } else {
        Box::new(NoSync)
    };
    let run = fit(&Recipe::default(), 0.01, net, L2Loss, &device)?
        .policy(policy.as_mut())
        .run(&mut data)?;
    Ok(run.trace.epochs[0].time)
}

/// Both devices at once, each on its own frontend thread; (cpu time, gpu time).
fn together(
    s: &Setup,
    sizes: &Sizes,
    cpu_barrier: bool,
    gpu_barrier: bool,
) -> anyhow::Result<(f64, f64)> {
    let (cpu_device, gpu_device) = (&s.cpu.device, &s.gpu.device);
    std::thread::scope(|scope| {
        let cpu = scope.spawn(|| epoch(cpu_device, sizes, cpu_barrier));
        let gpu = scope.spawn(|| epoch(gpu_device, sizes, gpu_barrier));
        let join = |h: std::thread::ScopedJoinHandle<'_, anyhow::Result<f64>>| {
            h.join()
                .map_err(|_| anyhow::anyhow!("a training thread panicked"))?
        };
        Ok((join(cpu)?, join(gpu)?))
    })
}

/// Exercise 3: training on the CPU and the GPU at once; a barrier on one, both ways.
pub const EXPERIMENT: Experiment = Experiment {
    key: "exercise-3",
    title: "Exercise 3: training on the CPU and the GPU at once",
    about: "Exercise 3: training on the CPU and the GPU at once; a barrier on one, both ways",
    book: BOOK,
    run,
};

/// The sizes of a run: the book's scale, or a quick one for tests.
fn sizes(s: &Setup) -> Sizes {
    if s.quick {
        Sizes {
            batches: 4,
            batch: 16,
            features: 8,
            hidden: vec![16],
        }
    } else {
        Sizes {
            batches: 30,
            batch: 256,
            features: 512,
            hidden: vec![512, 128],
        }
    }
}

/// Each scenario's epoch times, `repeat` times: each device alone, both at once without
/// barriers, and each beside the other with a barrier per batch.
fn measure(s: &Setup, sizes: &Sizes) -> anyhow::Result<[Vec<f64>; 6]> {
    // Warm-up: kernels compiled on both devices.
    epoch(&s.cpu.device, sizes, false)?;
    epoch(&s.gpu.device, sizes, false)?;
    let mut t: [Vec<f64>; 6] = Default::default();
    for _ in 0..s.repeat {
        t[0].push(epoch(&s.cpu.device, sizes, false)?);
        t[1].push(epoch(&s.gpu.device, sizes, false)?);
        let (c, g) = together(s, sizes, false, false)?;
        t[2].push(c);
        t[3].push(g);
        let (c, _) = together(s, sizes, false, true)?;
        t[4].push(c);
        let (_, g) = together(s, sizes, true, false)?;
        t[5].push(g);
    }
    Ok(t)
}

fn run(s: &Setup) -> anyhow::Result<Outcome> {
    let sizes = sizes(s);
    let t = measure(s, &sizes)?;
    let (cpu_name, gpu_name) = (
        format!("CPU ({})", s.cpu.name),
        format!("GPU ({})", s.gpu.name),
    );
    let labels = [
        format!("{cpu_name} alone"),
        format!("{gpu_name} alone"),
        format!("{cpu_name} beside {gpu_name}, no barriers"),
        format!("{gpu_name} beside {cpu_name}, no barriers"),
        format!("{cpu_name} while {gpu_name} has a barrier per batch"),
        format!("{gpu_name} while {cpu_name} has a barrier per batch"),
    ];
    let timings: Vec<Timing> = labels
        .into_iter()
        .zip(t)
        .map(|(label, seconds)| Timing { label, seconds })
        .collect();
    let m = |i: usize| median(timings[i].seconds.clone());
    let cpu_hurt = m(4) / m(2);
    let gpu_hurt = m(5) / m(3);
    let held = cpu_hurt <= 1.1 && gpu_hurt <= 1.1;
    Ok(Outcome {
        experiment: &EXPERIMENT,
        context: format!(
            "CPU {}, GPU {}; {} batches of {} x {}, hidden {:?}, one epoch per device and \
             scenario, median of {}",
            s.cpu.label(),
            s.gpu.label(),
            sizes.batches,
            sizes.batch,
            sizes.features,
            sizes.hidden,
            s.repeat
        ),
        notes: vec![
            format!(
                "{cpu_name} with a barrier on {gpu_name} / without: {cpu_hurt:.3}; {gpu_name} \
                 with a barrier on {cpu_name} / without: {gpu_hurt:.3}"
            ),
            format!(
                "running both at once: {:.4} sec for the slower against {:.4} sec one after the other",
                m(2).max(m(3)),
                m(0) + m(1)
            ),
        ],
        timings,
        ratio: (
            "worst slowdown from the other device's barrier".into(),
            cpu_hurt.max(gpu_hurt),
        ),
        claim: "a barrier on one device does not slow the other (within 10%)".into(),
        held,
        why: why(s, held),
        picture: Picture::Bars,
    })
}

/// Why the claim held or not.
fn why(s: &Setup, held: bool) -> String {
    if held {
        "each device has its own queue: a barrier stalls only its own frontend".to_string()
    } else if s.gpu.on_cpu() && s.cpu.on_cpu() {
        format!(
            "both 'devices' compute on the same {} CPU cores here ({} is a software \
             rasterizer or a CPU backend), so what one device stops doing, the other gets",
            std::thread::available_parallelism().map_or(0, |n| n.get()),
            s.gpu.label()
        )
    } else {
        "the two frontends share the host: a barrier changes how the host's time is split".into()
    }
}
