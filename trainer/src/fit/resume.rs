//! Where a run starts (from scratch, or from a checkpoint), and the checkpoints it writes.

use std::path::PathBuf;

use ember::engine::{Engine, Host};
use ember::{Block, Loss, Optimizer, Result};

use super::backend::Backend;
use crate::checkpoint::{self, Checkpoint, Checkpointing, Position, TraceLog};
use crate::target::Target;
use crate::trace::{BatchRecord, Trace};

/// The state a run starts from: its position, the trace so far, and the records of the epoch a
/// resumed run stopped in, which go on from where they were.
pub(super) struct Start<B> {
    pub(super) net: B,
    pub(super) optimizer: Optimizer,
    pub(super) at: Position,
    pub(super) trace: Trace,
    pub(super) carried: Vec<BatchRecord>,
}

/// The run's start: step 0 with `net` and `optimizer`, or `resume`'s parameters, optimizer
/// state, position, seed (where the run sets none; another seed than the checkpoint's is an
/// error) and trace.
pub(super) fn start<B: Block>(
    net: B,
    optimizer: Optimizer,
    seed: Option<u64>,
    checkpointing: Option<&Checkpointing>,
    resume: Option<&Checkpoint>,
) -> Result<Start<B>> {
    let mut at = Position {
        epoch: 0,
        next_batch: 0,
        steps: 0,
        seed,
        description: checkpointing
            .map(|c| c.description.clone())
            .unwrap_or_default(),
        checksums: Default::default(),
        metrics: Default::default(),
        trace_bytes: None,
        carried: None,
    };
    let Some(checkpoint) = resume else {
        return Ok(Start {
            net,
            optimizer,
            at,
            trace: Trace::default(),
            carried: Vec::new(),
        });
    };
    at.epoch = checkpoint.position.epoch;
    at.next_batch = checkpoint.position.next_batch;
    at.steps = checkpoint.position.steps;
    // Another seed gives the rest of the run other dropout masks and shuffles than the run it
    // goes on from: that is not resuming it. (`state.json` holds the seed and no checksum
    // covers it, so this is also where an edited one is found.)
    if let (Some(ours), Some(theirs)) = (seed, checkpoint.position.seed)
        && ours != theirs
    {
        return Err(ember::Error::InvalidValue {
            name: "seed",
            value: ours.to_string(),
            reason: format!(
                "{} records seed {theirs}: a run resumed with another seed is another run; \
                 give the seed it was written with, or its state.json was edited",
                checkpoint.dir.display()
            ),
        });
    }
    at.seed = seed.or(checkpoint.position.seed);
    let (net, optimizer, mut trace) = checkpoint.restore(net, optimizer)?;
    let (done, carried) = trace.batches.drain(..).partition(|b| b.epoch < at.epoch);
    trace.batches = done;
    Ok(Start {
        net,
        optimizer,
        at,
        trace,
        carried,
    })
}

/// Writes a checkpoint of the backend's network, optimizer and training metrics' sums as they
/// stand after every issued step, at `position`, with the trace (the run's records and the
/// current epoch's so far) through the run's `log`.
pub(super) fn write<B, L>(
    engine: &Engine<Backend<B, L>>,
    (checkpointing, log): (&Checkpointing, &mut TraceLog),
    position: &Position,
    trace: (&Trace, &[BatchRecord]),
) -> Result<PathBuf>
where
    B: Block + 'static,
    L: Loss + Send + Sync + 'static,
    L::Target: Target,
{
    let (net, optimizer, metrics, carried) = engine
        .issue(|b: &mut Backend<B, L>| {
            // The file is written on this thread: nothing of the worker's may still be in
            // flight under its reads (see `ember::engine::settle`).
            let net = b.net()?.clone();
            ember::engine::settle(&net)?;
            Ok(Host((
                net,
                b.optimizer.clone(),
                b.metric_states()?,
                b.carried_state()?,
            )))
        })
        .wait()?;
    let position = Position {
        metrics,
        // At an epoch's start the next batch starts from the initial state anyway.
        carried: carried.filter(|_| position.next_batch > 0),
        ..position.clone()
    };
    checkpoint::write(checkpointing, &position, (&net, &optimizer), log, trace)
}
