//! 12.1 "Hybridization": the MLP 512 -> 256 -> 128 -> 2 run forward 1000 times without and with
//! kernel fusion, burn's counterpart of `hybridize()`, then with the fused pass recorded once as
//! a graph of launches and replayed ([`ember::hybrid`]: a CUDA graph on cuda, cubecl's recorded
//! dispatches on wgpu, the pass run again where the device has no graphs), and its parameters
//! exported and reloaded.
//!
//! burn switches fusion on at build time, and its optimizers can only be removed before a
//! process's first tensor operation, so each mode runs in a child process of its own: with
//! fusion's built-in optimizers (`with`), with all of them removed (`without`), and recorded
//! (`graph`, fusion on). The children load the same parameter file and the same input.

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use burn::tensor::{Device, Tensor};
use ember::hybrid::Hybrid;
use ember::{Activation, Block, Dense, DeviceName, Init, PickedDevice, Sequential};
use ember_datasets::Synthetic;
use serde::{Deserialize, Serialize};

use super::{Experiment, Outcome, Picture, Setup, Timing, to_host};

const BOOK: &str = "d2l builds Dense(256, relu), Dense(128, relu), Dense(2) on a (1, 512) \
    input and times 1000 forward passes before and after net.hybridize(): the \
    hybridized network is clearly faster: the symbolic graph lets MXNet \
    fuse and schedule the operators. net.export() then writes the parameters (and the graph) \
    to files that load back.";

/// The chapter's network, initialized on `device`.
fn network(device: &Device) -> anyhow::Result<Sequential> {
    let net: Sequential = Sequential::new()
        .add(Dense::new(256).activation(Activation::Relu))
        .add(Dense::new(128).activation(Activation::Relu))
        .add(Dense::new(2))
        .initialize(Init::default(), device);
    Ok(net.infer_shape(input(device)?)?)
}

/// The book's input: one row of 512 standard normals, the same in every process.
fn input(device: &Device) -> anyhow::Result<Tensor<2>> {
    Ok(Synthetic::chapter(1, 512, 12)
        .batch(0)
        .x_on(device)?
        .into_rank()?)
}

/// The network's output for `x`, as the tensor of rank 2 it is.
fn run_net(net: &Sequential, x: &Tensor<2>) -> anyhow::Result<Tensor<2>> {
    Ok(net.forward(x.clone().into()).into_rank()?)
}

/// One mode of 12.1, as [`measure`] runs it in a process of its own.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Whether kernel fusion's optimizers are kept (burn's hybridization) or removed.
    pub fusion: bool,
    /// Whether the pass is recorded once and replayed ([`Hybrid`]); with fusion on.
    pub graph: bool,
    /// Training steps (SGD with momentum on a batch of 64, `passes / 10` of them) rather than
    /// forward passes ([`super::hybrid_steps`]).
    pub training: bool,
    /// Where the network runs.
    pub device: DeviceName,
    /// The parameters, written by the parent.
    pub params: PathBuf,
    /// Forward passes per measurement.
    pub passes: usize,
    /// Measurements.
    pub repeat: usize,
}

/// What one mode measured.
#[derive(Debug, Serialize, Deserialize)]
pub struct Measured {
    /// The time of each measurement's passes, in seconds.
    pub seconds: Vec<f64>,
    /// The last pass's output.
    pub output: Vec<f32>,
    /// Whether the passes were replays of recorded launches (false: eager passes, or a device
    /// without graphs, where the recorded pass ran again).
    pub replayed: bool,
    /// For training steps: how far they moved the output (the largest change of a value).
    #[serde(default)]
    pub moved: Option<f32>,
}

/// One mode, in this process: fusion's optimizers removed (where `request` says so) before
/// the first tensor operation, then `repeat` timings of `passes` forward passes, eager or
/// replayed. Removing them holds for the rest of the process.
///
/// # Errors
/// An optimizer that cannot be removed (a tensor operation ran before), a device that cannot
/// be opened, parameters that cannot be read.
pub fn measure(request: &Request) -> anyhow::Result<Measured> {
    if !request.fusion {
        for name in burn_cubecl::fusion::BUILTIN_NAMES {
            burn_cubecl::fusion::remove(name)
                .map_err(|e| anyhow!("switching fusion's {name} optimizer off: {e}"))?;
        }
    }
    let picked = request.device.resolve()?;
    let device = picked.device.clone();
    if request.training {
        let trained = device.clone().autodiff();
        let net = network(&trained)?.load_parameters(&request.params, &trained)?;
        return super::hybrid_steps::measure(request, &picked, net);
    }
    let net = network(&device)?;
    let x = input(&device)?;
    let net = net.load_parameters(&request.params, &device)?;
    if request.graph {
        return replayed(request, &picked, net, x);
    }
    let forward = || -> anyhow::Result<Tensor<2>> {
        let mut out = run_net(&net, &x)?;
        for _ in 1..request.passes {
            out = run_net(&net, &x)?;
        }
        Ok(out)
    };
    to_host(forward()?)?; // warm-up: kernels compiled, fusion plans found
    let mut seconds = Vec::new();
    let mut output = Vec::new();
    for _ in 0..request.repeat {
        let start = std::time::Instant::now();
        let out = forward()?;
        super::wait_all(&device)?;
        seconds.push(start.elapsed().as_secs_f64());
        output = to_host(out)?;
    }
    Ok(Measured {
        seconds,
        output,
        replayed: false,
        moved: None,
    })
}

/// The passes as replays of one recorded pass: the network reads its parameters and the
/// input from the buffers the recording read, so nothing is written between replays.
fn replayed(
    request: &Request,
    picked: &PickedDevice,
    net: Sequential,
    x: Tensor<2>,
) -> anyhow::Result<Measured> {
    let device = &picked.device;
    let mut pass = Hybrid::capture(device, move || run_net(&net, &x).map_err(|e| e.to_string()));
    recorded_where_it_can(picked, pass.is_graph(), "pass")?;
    let output = |pass: &Hybrid<_, _>| -> anyhow::Result<Vec<f32>> {
        let out: &Result<Tensor<2>, String> = pass.output();
        to_host(out.clone().map_err(|e| anyhow!("the recorded pass: {e}"))?)
    };
    // SAFETY (here and below): the pass writes nothing in place; its output is read only
    // after the last run, and its network and input stay alive in the closure.
    unsafe { pass.run() };
    output(&pass)?; // warm-up, as the eager modes'
    let mut seconds = Vec::new();
    for _ in 0..request.repeat {
        let start = std::time::Instant::now();
        for _ in 0..request.passes {
            unsafe { pass.run() };
        }
        super::wait_all(device)?;
        seconds.push(start.elapsed().as_secs_f64());
    }
    Ok(Measured {
        seconds,
        output: output(&pass)?,
        replayed: pass.is_graph(),
        moved: None,
    })
}

/// An error where `picked` records graphs but the recording of `what` did not take: burn then
/// runs it again each time, which a timing must not pass off as a replay.
pub(super) fn recorded_where_it_can(
    picked: &PickedDevice,
    recorded: bool,
    what: &str,
) -> anyhow::Result<()> {
    if picked.capabilities().graphs && !recorded {
        return Err(anyhow!(
            "{} records graphs, but recording the {what} failed (burn would run it again each \
             time)",
            picked.name
        ));
    }
    Ok(())
}

/// `s`'s runner's [`measure`] of one mode.
fn spawn(
    s: &Setup,
    (fusion, graph, training): (bool, bool, bool),
    params: &Path,
    passes: usize,
) -> anyhow::Result<Measured> {
    s.runner.hybridize(&Request {
        fusion,
        graph,
        training,
        device: s.gpu.name,
        params: params.to_path_buf(),
        passes,
        repeat: s.repeat,
    })
}

/// The largest |a − b|; infinite for another length or a NaN on either side.
pub(super) fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return f32::INFINITY;
    }
    a.iter()
        .zip(b)
        .map(|(a, b)| match (a - b).abs() {
            d if d.is_nan() => f32::INFINITY,
            d => d,
        })
        .fold(0.0, f32::max)
}

/// 12.1: the MLP 512-256-128-2 forward 1000 times without and with kernel fusion; export.
pub const EXPERIMENT: Experiment = Experiment {
    key: "hybridize",
    title: "Hybridization: kernel fusion and export (12.1)",
    about: "12.1: the MLP 512-256-128-2 forward 1000 times without and with kernel fusion; export",
    book: BOOK,
    run,
};

fn run(s: &Setup) -> anyhow::Result<Outcome> {
    let passes = s.size(1000, 50);
    // Export: the parameters, written by this process on the CPU and read back.
    let cpu = Device::flex();
    cpu.seed(12);
    let net = network(&cpu)?;
    let x = input(&cpu)?;
    let before = to_host(run_net(&net, &x)?)?;
    let params = s.scratch.join("hybrid-mlp.safetensors");
    net.save_parameters(&params)?;
    let reloaded = network(&cpu)?.load_parameters(&params, &cpu)?;
    let after = to_host(run_net(&reloaded, &x)?)?;
    let export_diff = max_diff(&before, &after);

    let off = spawn(s, (false, false, false), &params, passes)?;
    let on = spawn(s, (true, false, false), &params, passes)?;
    let graph = spawn(s, (true, true, false), &params, passes)?;
    let steps_eager = spawn(s, (true, false, true), &params, passes)?;
    let steps_graph = spawn(s, (true, true, true), &params, passes)?;
    let steps_diff = max_diff(&steps_graph.output, &steps_eager.output);
    let fusion_diff = max_diff(&off.output, &on.output);
    let graph_diff = max_diff(&graph.output, &on.output);
    let device_diff = max_diff(&on.output, &before);
    let timing = |label: &str, m: &Measured| Timing {
        label: label.into(),
        seconds: m.seconds.clone(),
    };
    let recorded_label = |what: &str, m: &Measured| match m.replayed {
        true => format!("{what}recorded once, replayed (fusion on)"),
        false => format!("{what}recorded, but run again: no graphs here (fusion on)"),
    };
    let recorded = timing(&recorded_label("", &graph), &graph);
    let recorded_steps = timing(
        &recorded_label("training steps, ", &steps_graph),
        &steps_graph,
    );
    let without = timing("without hybridization (fusion off)", &off);
    let with = timing("with hybridization (fusion on)", &on);
    let eager_steps = timing("training steps, eager (fusion on)", &steps_eager);
    let ratio = without.median() / with.median();
    let graph_ratio = with.median() / recorded.median();
    let steps_ratio = eager_steps.median() / recorded_steps.median();
    let fuses = s.gpu.capabilities().fusion;
    let held = fuses && ratio > 1.05 && fusion_diff <= 1e-5 && export_diff == 0.0;
    let why = if fusion_diff > 1e-5 || export_diff != 0.0 {
        format!("the outputs differ: fusion on/off by {fusion_diff:e}, export by {export_diff:e}")
    } else if !fuses {
        format!(
            "{} has no kernel fusion: both runs execute the same operations, and their ratio \
             is noise",
            s.gpu.name
        )
    } else if held {
        format!(
            "fusion joined the element-wise work into fewer kernels: {ratio:.2}x faster, same outputs"
        )
    } else {
        "a (1, 512) input is so small that each pass is dominated by launching kernels and \
         queueing, which fusion does not remove on this device"
            .into()
    };
    Ok(Outcome {
        experiment: &EXPERIMENT,
        context: format!(
            "{}; MLP 512-256-128-2, {passes} forward passes of a (1, 512) input, and {} steps \
             of SGD with momentum on 64 rows, each mode in its own process, median of {}",
            s.gpu.label(),
            (passes / 10).max(1),
            s.repeat
        ),
        timings: vec![without, with, recorded, eager_steps, recorded_steps],
        notes: vec![
            format!("fusion on / off outputs: max |difference| {fusion_diff:e}"),
            format!(
                "graph / fused outputs: max |difference| {graph_diff:e}; {}",
                if graph.replayed {
                    format!(
                        "{} replayed the recorded launches, {graph_ratio:.2}x the fused passes' speed",
                        s.gpu.name
                    )
                } else {
                    format!(
                        "{} has no graphs: the recorded pass ran again each time",
                        s.gpu.name
                    )
                }
            ),
            format!(
                "training steps recorded / eager outputs: max |difference| {steps_diff:e} (the \
                 steps moved them by up to {:e}); {}",
                steps_eager.moved.unwrap_or(f32::NAN),
                if steps_graph.replayed {
                    format!(
                        "{} replayed the recorded steps, {steps_ratio:.2}x the eager steps' speed",
                        s.gpu.name
                    )
                } else {
                    format!(
                        "{} has no graphs: the recorded step ran again each time",
                        s.gpu.name
                    )
                }
            ),
            format!(
                "export: {} written and reloaded, max |difference| {export_diff:e}; {} against the CPU: {device_diff:e}",
                params
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or("parameters"),
                s.gpu.name
            ),
        ],
        ratio: ("without / with hybridization".into(), ratio),
        claim: format!("fusion makes the {passes} passes faster (over 5%), with the same outputs"),
        held,
        why,
        picture: Picture::Bars,
    })
}
