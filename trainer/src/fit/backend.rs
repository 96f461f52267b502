//! What lives on the engine's worker during a run: the network, the optimizer and the loss,
//! and the units the loop issues to it: the warm-up, a training step, and the reads of the
//! epoch's accuracy and of the network itself.

use burn::optim::GradientsParams;
use burn::tensor::{Device, Int, Tensor};
use ember::engine::Computed;
use ember::{Block, Loss, NdTensor, Optimizer, Replicas, Result, random};
use ember_datasets::Batch;

use super::target::{Target, read_count, tally};

/// The backend's state: it lives on the engine's worker thread during the run. The network is
/// always the one after the last step that succeeded.
pub(super) struct Backend<B, L> {
    pub(super) net: B,
    pub(super) optimizer: Optimizer,
    pub(super) loss: L,
    /// This epoch's correct predictions so far, summed on the device (for targets that have
    /// them), and the examples they were counted over.
    correct: Option<Tensor<1, Int>>,
    counted: usize,
}

impl<B, L> Backend<B, L>
where
    B: Block,
    L: Loss + Sync,
    L::Target: Target,
{
    pub(super) fn new(net: B, optimizer: Optimizer, loss: L) -> Self {
        Self {
            net,
            optimizer,
            loss,
            correct: None,
            counted: 0,
        }
    }

    /// One training step at learning rate `rate`: upload, forward, loss, backward,
    /// `step(batch_size)`, on one device or split across the replicas. Returns each device's
    /// per-example loss.
    pub(super) fn step(
        &mut self,
        batch: Batch,
        replicas: &Replicas,
        seed: Option<u64>,
        rate: f64,
    ) -> Result<StepLosses> {
        let size = batch.len();
        let streams = seed.map(Streams);
        if let Some(streams) = streams {
            // burn's own generator too, for what a user's block draws from it: one per device
            // where the backend has one per device (flex has one per process, which the
            // replicas share).
            for (index, device) in replicas.devices().iter().enumerate().rev() {
                device.seed(streams.of(index));
            }
        }
        let (grads, losses, correct) = gradients(&self.net, &self.loss, batch, replicas, streams)?;
        if let Some(correct) = correct {
            self.counted += size;
            self.correct = Some(tally(self.correct.take(), correct));
        }
        self.optimizer.set_learning_rate(rate);
        self.net = self.optimizer.step_params(self.net.clone(), grads, size)?;
        Ok(StepLosses(losses))
    }

    /// The book's warm-up (`loss(y, net(X)).wait_to_read()`), then a backward pass and an
    /// optimizer step, on every replica, so that every kernel and buffer a training step uses
    /// exists before the clock starts. All of it runs on copies: the network's
    /// (`valid().train()`: its own tensors and running statistics) and the optimizer's (its own
    /// optimizer state). The network, its running statistics and the optimizer state stay as
    /// they are.
    pub(super) fn warmup(&self, batch: &Batch, replicas: &Replicas) -> Result<StepLosses> {
        let copy = self.net.valid().train();
        let (grads, losses, _) = gradients(&copy, &self.loss, batch.clone(), replicas, None)?;
        let stepped = self
            .optimizer
            .clone()
            .step_params(copy, grads, batch.len())?;
        drop(stepped);
        Ok(StepLosses(losses))
    }

    /// The share of this epoch's examples its steps classified right (`None` for targets
    /// without classes), read once; the count starts again for the next epoch.
    pub(super) fn train_accuracy(&mut self) -> Result<Option<f64>> {
        let counted = std::mem::take(&mut self.counted);
        let Some(correct) = self.correct.take() else {
            return Ok(None);
        };
        Ok(Some(read_count(correct)? as f64 / counted.max(1) as f64))
    }
}

/// A step's per-example losses, one tensor per device it ran on. Each is a fence: the step is
/// done when every device has computed its share, and its handle gives the batch's mean loss.
pub(super) struct StepLosses(Vec<Tensor<1>>);

impl Computed for StepLosses {
    type Value = f32;

    fn fences(&self) -> Vec<Tensor<1>> {
        self.0.clone()
    }

    /// The batch's mean: each device's mean weighed by its examples.
    fn value(self, means: &[f32]) -> f32 {
        if let [mean] = means {
            return *mean;
        }
        let sizes: Vec<usize> = self.0.iter().map(|t| t.dims()[0]).collect();
        let total: usize = sizes.iter().sum();
        let sum: f64 = means
            .iter()
            .zip(&sizes)
            .map(|(&mean, &n)| f64::from(mean) * n as f64)
            .sum();
        (sum / total.max(1) as f64) as f32
    }
}

/// The step's gradients of `net` on `batch`, summed over the replicas (on the main device),
/// with each device's per-example loss and the examples they got right (on the main device).
type StepGradients = (GradientsParams, Vec<Tensor<1>>, Option<Tensor<1, Int>>);

/// Forward and backward of `net` on `batch`: on the main device alone, or split across the
/// replicas with burn's fork, gradient transfer and accumulation ([`Replicas::backward`]). On
/// one device the batch's features become the input tensor, uncopied.
fn gradients<B, L>(
    net: &B,
    loss: &L,
    mut batch: Batch,
    replicas: &Replicas,
    streams: Option<Streams>,
) -> Result<StepGradients>
where
    B: Block,
    L: Loss + Sync,
    L::Target: Target,
{
    let main = replicas.main();
    if replicas.len() == 1 {
        let x = batch.take_x_on(main)?;
        let (l, correct) = loss_of(net, loss, x, &batch, main, streams.map(|s| s.of(0)))?;
        let grads = GradientsParams::from_grads(l.backward(), net);
        return Ok((grads, vec![l], correct));
    }
    let shards = batch.split(replicas.len())?;
    let (grads, shares) = replicas.backward(net, |replica: &B, index, device| {
        let shard = &shards[index];
        let x = shard.x_on(device)?;
        loss_of(
            replica,
            loss,
            x,
            shard,
            device,
            streams.map(|s| s.of(index)),
        )
    })?;
    let mut correct = None;
    let mut losses = Vec::with_capacity(shares.len());
    for (l, right) in shares {
        losses.push(l);
        if let Some(right) = right {
            correct = Some(tally(correct, right.to_device(main)));
        }
    }
    Ok((grads, losses, correct))
}

/// A seeded step's random streams, one per replica: the step's seed for the main device (the
/// one-device run's), and one derived from it for each other replica, so that no two shards
/// draw the same Dropout masks.
#[derive(Debug, Clone, Copy)]
struct Streams(u64);

impl Streams {
    fn of(self, replica: usize) -> u64 {
        match replica {
            0 => self.0,
            _ => ember::random::derive(self.0, replica as u64),
        }
    }
}

/// The per-example loss of `net` on the features `x` of `batch`, already uploaded (upload the
/// targets, forward, check the targets, loss), and how many examples it got right where the
/// targets say ([`Target::correct`]). With a `stream`, the forward pass draws from a stream of
/// this thread's seeded by it ([`random::with_stream`]), whatever other threads draw meanwhile.
fn loss_of<B, L>(
    net: &B,
    loss: &L,
    x: NdTensor,
    batch: &Batch,
    device: &Device,
    stream: Option<u64>,
) -> Result<(Tensor<1>, Option<Tensor<1, Int>>)>
where
    B: Block,
    L: Loss,
    L::Target: Target,
{
    match stream {
        Some(seed) => random::with_stream(seed, || loss_on(net, loss, x, batch, device)),
        None => loss_on(net, loss, x, batch, device),
    }
}

fn loss_on<B, L>(
    net: &B,
    loss: &L,
    x: NdTensor,
    batch: &Batch,
    device: &Device,
) -> Result<(Tensor<1>, Option<Tensor<1, Int>>)>
where
    B: Block,
    L: Loss,
    L::Target: Target,
{
    let y = L::Target::upload(batch, device)?;
    let pred: Tensor<2> = net.forward(x).into_rank()?;
    L::Target::check(batch, pred.dims()[1])?;
    let correct = L::Target::correct(&pred, &y);
    Ok((loss.forward(pred, y)?, correct))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_on_several_devices_weighs_each_devices_mean_by_its_examples() {
        let device = Device::flex();
        let losses = StepLosses(vec![
            Tensor::<1>::ones([3], &device),
            Tensor::<1>::full([1], 4.0, &device),
        ]);
        assert_eq!(losses.fences().len(), 2);
        // (1 + 1 + 1 + 4) / 4, not (1 + 4) / 2
        assert_eq!(losses.value(&[1.0, 4.0]), 1.75);
        let one = StepLosses(vec![Tensor::<1>::ones([3], &device)]);
        assert_eq!(one.value(&[2.5]), 2.5);
    }
}
