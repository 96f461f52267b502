//! What `ember train` keeps of a run that failed ([`rescue`]); where the parameters go when
//! `--save` cannot take them is [`super::rescued`]'s.

use crate::checkpoint::Checkpoint;
use crate::trace::Trace;

use super::model::Net;
use super::notes::Notes;
use super::output_paths::OutputPaths;
use super::rescued::beside;
use super::written::{left_as_it_was, write};

/// What `ember train` does when its run fails after training began (`Fit::rescue`): the
/// network as the last completed step left it goes to `--save` (unless it diverged: NaN is
/// never written over a file), the trace so far to `--metrics`, and where resuming can work,
/// the way to go on; the run's error follows, and the exit status is non-zero.
pub fn rescue(
    outputs: &OutputPaths,
    (flag, value): (String, String),
    notes: Notes,
) -> impl FnOnce(Option<&Net>, &Trace, &ember::Error) + 'static {
    let save = outputs.save.clone();
    let traces = outputs.traces();
    let checkpoints = outputs.checkpoint.as_ref().map(|c| c.dir.clone());
    let resumed = outputs.resume.as_ref().map(|c| c.dir.clone());
    move |net, trace, error| {
        let at = trace.batches.last().map_or(String::new(), |b| {
            format!(" after batch {} of epoch {}", b.batch + 1, b.epoch + 1)
        });
        // Parameters that gave a NaN or infinite loss are no model: the file keeps its old
        // content.
        // A run the user stopped (a second signal cut a checkpoint short) is not saved either.
        let stopped = crate::signals::requested();
        // Parameters on a device that is gone (a remote server that died) cannot be read, and
        // a worker stuck on a server that stopped answering never hands them over: nothing is
        // tried, beside --save or anywhere else.
        let unreadable = match (&save, net, error.silent_device()) {
            (None, _, _) => None,
            // Of several devices too: the others wait on it (a second whole bound, hostile
            // pass).
            (Some(_), _, Some(device)) => Some(format!("{device} stopped answering")),
            (Some(_), None, _) => Some("the backend worker stopped".to_string()),
            (Some(_), Some(net), _) => ember::io::safetensors::readable(net)
                .err()
                .map(|e| e.to_string()),
        };
        let save = match (save, unreadable, error.diverged() || stopped.is_some()) {
            (Some(path), Some(unreadable), _) => {
                warn_note!(
                    notes,
                    "error: --save {} not written: what the run trained cannot be read back \
                     from its device ({unreadable}); {}",
                    path.display(),
                    left_as_it_was(&path)
                );
                None
            }
            (Some(path), None, true) => {
                warn_note!(
                    notes,
                    "error: --save {} not written: {}; {}",
                    path.display(),
                    match stopped {
                        Some(signal) => format!("the run was stopped by {signal}"),
                        None => "the run diverged".to_string(),
                    },
                    left_as_it_was(&path)
                );
                None
            }
            // A file that was there before the run may be worth more than a run cut short:
            // what it trained goes beside it.
            (Some(path), None, false) if path.is_file() => {
                let beside = beside(&path, "rescued");
                let beside = std::path::absolute(&beside).unwrap_or(beside);
                warn_note!(
                    notes,
                    "error: --save {} keeps its old content: the run failed, so what it \
                     trained goes beside it, to {}",
                    path.display(),
                    beside.display()
                );
                Some(beside)
            }
            (save, _, _) => save,
        };
        // What is written: the network where --save takes it, the trace where asked.
        let written = match (&save, traces.any()) {
            (Some(_), _) => ": writing what it had trained",
            (None, true) => ": writing what it recorded",
            (None, false) => "",
        };
        note!(notes, "the run failed{at}{written}");
        for failure in write(net, trace, save.as_ref(), traces, &notes) {
            warn_note!(notes, "error: {failure}");
        }
        let Some(dir) = checkpoints else { return };
        match Checkpoint::latest(&dir) {
            // It diverged again from the checkpoint it resumed, before writing another: that
            // checkpoint's parameters may be past saving at any rate.
            Ok(Some(last)) if error.diverged() && resumed.as_ref() == Some(&last.dir) => note!(
                notes,
                "it diverged again from {}, the checkpoint it resumed: go on from it at a much \
                 lower rate with --resume {} {flag}R (this run had {flag}{value}), or train again \
                 from the start in a new directory",
                last.dir.display(),
                dir.display()
            ),
            // Its parameters gave a finite loss: checkpoints are kept only then.
            Ok(Some(last)) if error.diverged() => note!(
                notes,
                "its last checkpoint is {}, from before the parameters diverged: go on from it \
                 at a lower learning rate with --resume {} {flag}R (this run had {flag}{value})",
                last.dir.display(),
                dir.display()
            ),
            Ok(Some(last)) => note!(
                notes,
                "its last checkpoint is {}: go on with --resume {}",
                last.dir.display(),
                dir.display()
            ),
            _ if error.diverged() => note!(
                notes,
                "no checkpoint in {} holds parameters that gave a finite loss: train again at a \
                 lower learning rate (this run had {flag}{value})",
                dir.display()
            ),
            _ => note!(
                notes,
                "no checkpoint of it is complete in {}",
                dir.display()
            ),
        }
    }
}
