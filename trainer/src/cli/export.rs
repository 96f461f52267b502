//! `ember export`: a trained network as an ONNX model, Gluon's `net.export`.
//!
//! A file `ember train --save` wrote records the model, the input shape and the outputs in its
//! metadata ([`ember_trainer::run::model::recorded`]), so `ember export --load m.safetensors --out m.onnx` needs nothing
//! else. A file without them (from an older ember, or from PyTorch) takes `--model` and
//! `--data` (with `--classes` or `--features`) as `train` did.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use burn::tensor::Device;
use clap::Args;
use ember::io;
use ember::{Block, DeviceName, Export, NdTensor};

use ember_trainer::run::clash::Files;
use ember_trainer::run::model::{INPUT, MODEL, ModelSpec, OUTPUTS};
use ember_trainer::run::task::Task;
use ember_trainer::run::workload::{DataSpec, Workload};

/// Options of `ember export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The trained parameters (safetensors): a file `ember train --save` wrote says what
    /// network it holds; any other needs --model and --data.
    #[arg(long)]
    load: PathBuf,
    /// The ONNX file to write.
    #[arg(long)]
    out: PathBuf,
    /// The network, as `train --model` took it: for a file that does not say [default: as
    /// `train`].
    #[arg(long)]
    model: Option<ModelSpec>,
    /// The data the network was trained on, as `train --data` took it: for a file that does
    /// not say its input shape and outputs.
    #[arg(long)]
    data: Option<DataSpec>,
    /// With `--data csv:` or `npy:`: the number of classes, as `train --classes` took it.
    #[arg(long)]
    classes: Option<usize>,
    /// With synthetic `--data`: features per example [default: 512].
    #[arg(long)]
    features: Option<usize>,
}

/// The network a file's metadata records, or `None` for a file without ember's metadata.
fn from_file(path: &Path) -> anyhow::Result<Option<(ModelSpec, Vec<usize>, usize)>> {
    let meta = io::header::metadata(path)?;
    let (Some(model), Some(input), Some(outputs)) =
        (meta.get(MODEL), meta.get(INPUT), meta.get(OUTPUTS))
    else {
        return Ok(None);
    };
    let bad = |what: &str, value: &str| anyhow::anyhow!("its metadata's {what} is {value:?}");
    let model = model.parse().map_err(|_| bad(MODEL, model))?;
    let input = input
        .split(',')
        .map(|d| d.parse::<usize>().ok().filter(|&d| d > 0))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| bad(INPUT, input))?;
    let outputs = outputs
        .parse::<usize>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| bad(OUTPUTS, outputs))?;
    Ok(Some((model, input, outputs)))
}

/// The network, its input shape and its outputs, from `--model` and `--data` as `train` takes
/// them.
fn from_flags(args: &ExportArgs) -> anyhow::Result<(ModelSpec, Vec<usize>, usize)> {
    // --features alone describes synthetic data.
    let synthetic = args.features.map(|_| DataSpec::Synthetic);
    let Some(data) = args.data.as_ref().or(synthetic.as_ref()) else {
        bail!(
            "--load {} does not say what network it holds (it was not written by `ember train \
             --save`, or by an ember before 2026-11-25): give --model and --data as train had them",
            args.load.display()
        );
    };
    let mut workload = Workload::chapter(DeviceName::Flex);
    workload.data = data.clone();
    workload.classes = args.classes;
    if let Some(features) = args.features {
        workload.features = ember_trainer::run::workload::positive("features", features)?;
    }
    let task = Task::load(&workload.data, workload.classes)?;
    let model = task.model(args.model.clone(), &workload)?;
    let (example, outputs) = task.example_and_outputs(&workload);
    Ok((model, example, outputs))
}

pub fn run(args: ExportArgs) -> anyhow::Result<()> {
    let out =
        io::check(&args.out).with_context(|| format!("invalid --out {}", args.out.display()))?;
    let mut files = Files::default();
    if let Some(data) = &args.data {
        files.data(data);
    }
    files
        .input(format!("--load {}", args.load.display()), &args.load)
        .output(format!("--out {}", args.out.display()), &out)
        .check()?;
    let recorded =
        from_file(&args.load).with_context(|| format!("invalid --load {}", args.load.display()))?;
    let (model, example, outputs, sizes) = match recorded {
        Some((recorded, example, outputs)) => {
            if let Some(given) = &args.model
                && *given != recorded
            {
                bail!(
                    "--model {given}: --load {} holds {recorded}; leave --model out",
                    args.load.display()
                );
            }
            // --data and its sizes, given too, must say what the file says.
            if args.data.is_some() || args.classes.is_some() || args.features.is_some() {
                let (_, given, given_outputs) = from_flags(&args)?;
                if (&given, given_outputs) != (&example, outputs) {
                    bail!(
                        "--data, --classes or --features give inputs of shape {given:?} and \
                         {given_outputs} outputs, and --load {} holds a network for {example:?} \
                         and {outputs}; leave them out",
                        args.load.display()
                    );
                }
            }
            let sizes = format!("--load {}'s metadata", args.load.display());
            (recorded, example, outputs, sizes)
        }
        None => {
            let (model, example, outputs) = from_flags(&args)?;
            (model, example, outputs, "--model and --data".to_string())
        }
    };
    model.check_fits(&example, outputs, &sizes)?;
    let device = Device::flex();
    let net = model.build(outputs, model.init(), &device);
    let mut shape = vec![1];
    shape.extend(&example);
    let x = NdTensor::zeros(&shape, &device)?;
    let net = net
        .infer_shape(x)
        // Named where it came from: a file's metadata is no flag the user gave (hostile pass).
        .with_context(|| format!("{sizes}: {model} cannot take inputs of shape {example:?}"))?
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
