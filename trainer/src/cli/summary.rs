//! `ember summary`: Gluon's `net.summary(x)` for a network of `--model`, each layer's output
//! shape and parameters for an example of `--input`'s shape, and the total.

use anyhow::{Context, bail};
use burn::tensor::Device;
use clap::Args;
use ember::{NdTensor, Summary};

use ember_trainer::run::list::{List, Size};
use ember_trainer::run::model::ModelSpec;

/// Options of `ember summary`.
#[derive(Debug, Args)]
pub struct SummaryArgs {
    /// The network, as `train --model` takes it.
    #[arg(long)]
    model: ModelSpec,
    /// The shape of one example, comma separated [default: 1,28,28, a Fashion-MNIST image].
    #[arg(long)]
    input: Option<List<Size>>,
    /// The outputs of the last layer (classes, or values to regress).
    #[arg(long, default_value_t = 10)]
    outputs: usize,
}

/// The summary of `model` with `outputs` outputs for one example of shape `example`, on flex.
pub fn summary(model: &ModelSpec, example: &[usize], outputs: usize) -> anyhow::Result<Summary> {
    let device = Device::flex();
    let net = model.build(outputs, model.init(), &device);
    let mut shape = vec![1];
    shape.extend_from_slice(example);
    let (_, summary) = net.summarize(NdTensor::zeros(&shape, &device)?)?;
    Ok(summary)
}

pub fn run(args: SummaryArgs) -> anyhow::Result<()> {
    if args.outputs == 0 {
        bail!("invalid --outputs 0: the last layer needs at least one output");
    }
    let input = args
        .input
        .as_ref()
        .map_or(vec![1, 28, 28], ember_trainer::run::list::sizes);
    args.model
        .check_fits(&input, args.outputs, "--model, --input and --outputs")?;
    // Named: a shape the network cannot take said only "a tensor: …" (hostile pass).
    let summary = summary(&args.model, &input, args.outputs).with_context(|| {
        format!(
            "invalid --input {} for --model {}",
            ember_trainer::run::list::join(&input),
            args.model
        )
    })?;
    say!("{}", summary.to_string().trim_end());
    Ok(())
}
