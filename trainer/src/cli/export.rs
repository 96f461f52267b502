//! `ember export`: a trained network as an ONNX model, Gluon's `net.export`.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Args;
use ember::io;
use ember::{Block, Export, NdTensor};

use super::model::ModelSpec;
use super::task::Task;
use super::workload::{Workload, WorkloadArgs};

/// Options of `ember export`: `train`'s, so that a training command line with `export` and
/// `--out` in it exports what it trained. `--data`, `--classes`, `--features`, `--hidden` and
/// `--model` give the network and its input, as they did to `train`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    #[command(flatten)]
    workload: WorkloadArgs,
    /// The network, as `train --model` took it [default: as `train`].
    #[arg(long)]
    model: Option<ModelSpec>,
    /// The trained parameters (safetensors, as `train --save` wrote them).
    #[arg(long)]
    load: PathBuf,
    /// The ONNX file to write.
    #[arg(long)]
    out: PathBuf,
}

pub fn run(args: ExportArgs) -> anyhow::Result<()> {
    let workload = Workload::try_from(args.workload)?;
    let out =
        io::check(&args.out).with_context(|| format!("invalid --out {}", args.out.display()))?;
    if io::place(&out) == io::place(&args.load) {
        bail!(
            "invalid --out {}: it is the --load file, which the ONNX model would replace; \
             write it to another path",
            args.out.display()
        );
    }
    let task = Task::load(&workload.data, workload.classes)?;
    let model = task.model(args.model, &workload)?;
    let (example, outputs) = task.example_and_outputs(&workload);
    let device = workload.one_device("ember export")?.open()?.device;
    let net = model.build(outputs, model.init(), &device);
    let mut shape = vec![1];
    shape.extend(&example);
    let x = NdTensor::zeros(&shape, &device)?;
    let net = net
        .infer_shape(x)
        .with_context(|| format!("--model {model} cannot take --data {}", workload.data))?
        .load_parameters(&args.load, &device)?;
    net.export(&args.out, &example)?;
    say!(
        "exported {model} (input [batch, {}], {outputs} outputs, ONNX opset {}) to {}",
        example
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        ember::onnx::OPSET,
        args.out.display()
    );
    Ok(())
}
