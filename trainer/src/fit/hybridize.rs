//! [`Fit::hybridize`]: Gluon's `net.hybridize()` for the training loop. The whole step
//! (forward, loss, backward, the optimizer's update) is recorded once on the first batch, as a
//! graph where the device has graphs (cuda, wgpu: [`ember::Capabilities::graphs`]), and
//! replayed for every batch of the first one's shape; burn-flex runs the same recorded code
//! again. The parameters and the optimizer's state live in device slots for the run
//! ([`ember::hybrid`]); a batch of another shape (an epoch's short last one) runs the same
//! code on the same slots without the graph. Where the run asks for something a recording
//! cannot hold, every step runs eagerly, and the run says why once.

use super::Fit;
use super::backend::Holds;
use crate::fit::progress::Progress;

impl<B, L> Fit<'_, B, L> {
    /// Records the training step once and replays it (opt-in, as Gluon's `hybridize()` is).
    /// The numbers are the eager step's: on burn-flex and on wgpu through lavapipe the
    /// parameters after every step equal the eager loop's bit for bit, under every sync policy
    /// (the policies still decide where the frontend waits for each batch's loss); a card's
    /// graphs are not yet checked. The optimizer's state lives in the recording's slots: the
    /// [`FitRun::optimizer`](super::FitRun) handed back has the last rate but not that state.
    ///
    /// Steps run eagerly instead, and the run says why through [`Progress::acted`], with
    /// several replicas, in an MPI job, with gradient accumulation, a carried state,
    /// checkpoints (the recorded optimizer's state is not in burn's record they hold), another
    /// precision than f32, an optimizer other than SGD, Adam and AdamW, clipping, a resumed
    /// optimizer state, and Dropout (a replay would repeat the recording's mask). BatchNorm's
    /// running statistics are kept in slots too, and come out as the eager loop's.
    pub fn hybridize(mut self, on: bool) -> Self {
        self.hybridize = on;
        self
    }

    /// Why this run's steps cannot be recorded, where its settings say so before the backend
    /// sees the network and the optimizer.
    pub(super) fn eager_because(&self) -> Option<String> {
        let reason = if self.replicas.len() > 1 {
            format!("data parallelism over {} replicas", self.replicas.len())
        } else if self.distributed.is_some() {
            "an MPI job (its all-reduce runs between the backward pass and the update)".into()
        } else if self.accumulate > 1 {
            format!("gradient accumulation over {} batches", self.accumulate)
        } else if self.carry.is_some() {
            "a state carried from batch to batch".into()
        } else if self.checkpointing.is_some() || self.resume.is_some() {
            "checkpoints (the recorded update's state is not in the optimizer's record they \
             hold)"
                .into()
        } else if self.precision != ember::Precision::F32 {
            format!(
                "{:?} products (only f32 steps are recorded)",
                self.precision
            )
        } else {
            return None;
        };
        Some(reason)
    }
}

/// Says once how the run's steps run: recorded (replayed as a graph or not, and what the
/// recording holds), or eagerly and why.
pub(super) fn tell(progress: &mut dyn Progress, recorded: Result<(bool, Holds), String>) {
    let how = match recorded {
        Err(reason) => format!("hybridize: every step runs eagerly: {reason}"),
        Ok((true, holds)) => format!(
            "hybridize: the step is recorded once and replayed; {}",
            held(&holds)
        ),
        Ok((false, holds)) => format!(
            "hybridize: the step is recorded once; this device replays no graph (flex has \
             none, or its capture failed), so the recorded code runs again for each batch; {}",
            held(&holds)
        ),
    };
    progress.acted(&how);
}

/// What the recording holds, in words.
fn held(holds: &Holds) -> String {
    let slots = format!(
        "its slots (parameters, optimizer state, the batch) hold {:.2} MB for the run",
        holds.mb()
    );
    match holds.pool {
        Some(pool) => format!(
            "{slots}; the device's memory pool grew by {:.2} MB while it was recorded (a \
             graph's own buffers, and whatever else ran on the device meanwhile)",
            crate::memory::mb(pool as f64)
        ),
        None => slots,
    }
}

/// Says how many steps ran the recording, and how many ran outside it, at the run's end.
pub(super) fn tell_counts(progress: &mut dyn Progress, (recorded, outside): (usize, usize)) {
    progress.acted(&format!(
        "hybridize: {recorded} steps ran the recording, {outside} outside it (batches of \
         another shape)"
    ));
}
