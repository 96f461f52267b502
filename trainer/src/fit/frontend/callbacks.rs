//! The frontend's side of the callbacks: each batch's end told as the loop observes it, their
//! answers acted on (a scaled learning rate, the run's end), and the best epoch's network.

use ember::{Block, Loss, Result};

use super::Frontend;
use crate::fit::backend::Backend;
use crate::fit::callback::{Action, Callback};
use crate::fit::epoch::Epoch;
use crate::target::Target;

impl<B, L> Frontend<'_, B, L>
where
    B: Block + 'static,
    L: Loss + Send + Sync + 'static,
    L::Target: Target,
{
    /// Moves the completions the loop has observed into their records, and tells the
    /// callbacks of each batch's end, in issue order.
    pub(super) fn observe(&mut self, current: &mut Epoch) -> Result<()> {
        for done in current.absorb(&|at| self.seconds(at)) {
            let record = &current.records[done];
            self.ask_callbacks(|callback| callback.batch_end(record))?;
        }
        Ok(())
    }

    /// Each callback's answer to `ask`, acted on in turn: a scaled learning rate for the steps
    /// issued after it, or the run's end (the first reason given stays).
    pub(super) fn ask_callbacks(
        &mut self,
        mut ask: impl FnMut(&mut dyn Callback) -> Result<Action>,
    ) -> Result<()> {
        for callback in &mut self.callbacks {
            let action = ask(callback.as_mut())?;
            if let Some((scale, why)) = action.scale_lr {
                match self.rates.cut(scale, (self.at.epoch, self.epochs)) {
                    Ok(_) => self.progress.acted(&why),
                    Err(vanishing) => self.progress.acted(&format!(
                        "{why}: not done, since it would make {vanishing}, which single \
                         precision makes 0 (below about 1.2e-38); the base rate stays {}",
                        ember::error::number(self.rates.base)
                    )),
                }
            }
            if let Some(why) = action.stop
                && self.ended_early.is_none()
            {
                self.progress.acted(&why);
                self.ended_early = Some(why);
            }
        }
        Ok(())
    }

    /// The network, to what [`crate::fit::Fit::save_best`] gave, where the epoch's `record`
    /// improves the watched metric ([`Best::improves`](crate::fit::best::Best::improves)).
    pub(super) fn save_best(&mut self, record: &crate::trace::EpochRecord) -> Result<()> {
        let Some(best) = &mut self.best else {
            return Ok(());
        };
        if !best.improves(record)? {
            return Ok(());
        }
        let snapshot = self
            .engine
            .issue(|b: &mut Backend<B, L>| Ok(b.net()?.valid()))
            .wait()?;
        (best.save)(&snapshot, record)
    }
}
