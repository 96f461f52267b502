//! A step's passes on the backend's worker: forward and backward of the network on a batch, on
//! the main device alone or split across the replicas, each device's pass under its own random
//! stream and in the run's precision.

use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor};
use ember::{Block, Loss, NdTensor, Precision, Replicas, Result, random};
use ember_datasets::Batch;

use super::super::carry::Carry;
use crate::target::Target;

/// The step's gradients of `net` on `batch`, summed over the replicas (on the main device),
/// with each device's per-example loss and, where asked, its outputs (detached) and targets,
/// moved to the main device for the metrics.
type StepGradients<T> = (GradientsParams, Vec<Tensor<1>>, Vec<(Tensor<2>, T)>);

/// Forward and backward of `net` on `batch`: on the main device alone, or split across the
/// replicas with burn's fork, gradient transfer and accumulation ([`Replicas::backward`]). On
/// one device the batch's features become the input tensor, uncopied.
pub(super) fn gradients<B, L>(
    net: &B,
    loss: &L,
    mut batch: Batch,
    replicas: &Replicas,
    (streams, mut carry): (Option<Streams>, Option<&mut Carry<B>>),
    pass: Pass,
) -> Result<StepGradients<L::Target>>
where
    B: Block,
    L: Loss + Sync,
    L::Target: Target,
{
    let main = replicas.main();
    if replicas.len() == 1 {
        let x = batch.take_x_on(main)?;
        let examples = batch.len();
        let mut forward = |x: NdTensor| match &mut carry {
            Some(carry) => carry.forward(net, x, examples),
            None => Ok(net.forward(x)),
        };
        let stream = streams.map(|s| s.of(0));
        let (l, out) = loss_of(&mut forward, loss, x, &batch, main, stream, pass)?;
        let grads = GradientsParams::from_grads(l.backward(), net);
        return Ok((grads, vec![l], out.into_iter().collect()));
    }
    // `Fit::run` refuses a carried state with replicas: each would need its rows' share.
    debug_assert!(carry.is_none(), "a carried state on several replicas");
    let shards = batch.split(replicas.len())?;
    let (grads, shares) = replicas.backward(net, |replica: &B, index, device| {
        let shard = &shards[index];
        let x = shard.x_on(device)?;
        loss_of(
            &mut |x| Ok(replica.forward(x)),
            loss,
            x,
            shard,
            device,
            streams.map(|s| s.of(index)),
            pass,
        )
    })?;
    let mut outputs = Vec::new();
    let mut losses = Vec::with_capacity(shares.len());
    for (l, out) in shares {
        losses.push(l);
        if let Some((out, y)) = out {
            outputs.push((out.to_device(main), y.to_device(main)));
        }
    }
    Ok((grads, losses, outputs))
}

/// A seeded step's random streams, one per replica: the step's seed for the main device (the
/// one-device run's), and one derived from it for each other replica, so that no two shards
/// draw the same Dropout masks.
#[derive(Debug, Clone, Copy)]
pub(super) struct Streams(pub(super) u64);

impl Streams {
    pub(super) fn of(self, replica: usize) -> u64 {
        match replica {
            0 => self.0,
            _ => ember::random::derive(self.0, replica as u64),
        }
    }
}

/// The per-example loss of `net` on the features `x` of `batch`, already uploaded (upload the
/// targets, forward, check the targets, loss), and where `pass.metered` the outputs, detached, with
/// the targets, for the metrics. With a `stream`, the forward pass draws from a stream of
/// this thread's seeded by it ([`random::with_stream`]), whatever other threads draw meanwhile.
fn loss_of<L>(
    forward: &mut dyn FnMut(NdTensor) -> Result<NdTensor>,
    loss: &L,
    x: NdTensor,
    batch: &Batch,
    device: &Device,
    stream: Option<u64>,
    pass: Pass,
) -> Result<Shared<L::Target>>
where
    L: Loss,
    L::Target: Target,
{
    match stream {
        Some(seed) => random::with_stream(seed, || loss_on(forward, loss, x, batch, device, pass)),
        None => loss_on(forward, loss, x, batch, device, pass),
    }
}

/// How a step's forward pass runs on each device.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pass {
    /// Whether its outputs go to the training metrics.
    pub(super) metered: bool,
    /// The precision of its products: the forward pass runs under [`ember::autocast`]; the
    /// loss, the gradients and the update stay in f32.
    pub(super) precision: Precision,
}

/// A device's per-example loss, and its outputs and targets for the metrics.
type Shared<T> = (Tensor<1>, Option<(Tensor<2>, T)>);

fn loss_on<L>(
    forward: &mut dyn FnMut(NdTensor) -> Result<NdTensor>,
    loss: &L,
    x: NdTensor,
    batch: &Batch,
    device: &Device,
    pass: Pass,
) -> Result<Shared<L::Target>>
where
    L: Loss,
    L::Target: Target,
{
    let y = L::Target::upload(batch, device)?;
    let pred: Tensor<2> = ember::autocast(pass.precision, || forward(x))?.into_rank()?;
    L::Target::check(batch, pred.dims()[1])?;
    let out = pass.metered.then(|| (pred.clone().detach(), y.clone()));
    Ok((loss.forward(pred, y)?, out))
}
