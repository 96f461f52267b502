//! How long a remote device may keep ember waiting. A server that stops answering (stopped,
//! swapped out, behind a dead link) leaves its TCP connection open, so burn-remote waits for
//! its answer forever. ember bounds every wait on a remote device it makes: a unit's readback
//! (the engine's watcher), finishing the work queued on a device ([`settle`]), and the
//! frontend's own reads through [`bounded`] (a network read back to be written, a checkpoint's
//! network and optimizer state, an evaluation's sums). A device silent for longer is an
//! [`Error::Silent`](crate::Error::Silent) naming it. A read of one's own (`into_data` in a
//! callback) is bounded only where it goes through [`bounded`] too.
//!
//! The bound is [`answer_within`], 60 s unless [`set_answer_within`] changed it (`ember train
//! --remote-timeout`). Local devices have none: a kernel that runs long is not a silent server.
//!
//! [`settle`]: crate::engine::settle

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use burn::tensor::Device;

use crate::error::{Error, Result};

#[cfg(feature = "remote")]
mod lost;

/// `error`, where this process opened remote devices, with the ones whose servers do not
/// answer a new connection now, and why: [`Error::ServersLost`]. Where one server of several
/// dies or stops, every device that waits on it fails alike. `error` itself where every server
/// answers, or where none was opened. The servers are asked at once, each for at most a second.
pub fn diagnosed(error: Error) -> Error {
    #[cfg(feature = "remote")]
    let lost = lost::unanswered_of(&names());
    #[cfg(not(feature = "remote"))]
    let lost: Vec<String> = Vec::new();
    match lost.is_empty() {
        true => error,
        false => Error::ServersLost {
            lost: lost.join("; "),
            source: Box::new(error),
        },
    }
}

/// `error` from `device`, where a panic on a remote device names it: burn's words ("Failed to
/// read tensor during cross-backend transfer") did not, and its server may have gone.
pub fn name_in(error: Error, device: &Device) -> Error {
    match (error, name(device)) {
        (Error::Panic(text), Some(name)) => Error::Panic(format!("{text}, on {name}")),
        (error, _) => error,
    }
}

/// The bound, in milliseconds.
static ANSWER_WITHIN_MS: AtomicU64 = AtomicU64::new(60_000);
/// Every remote device opened in this process, with its name as given (`remote:ws://…`).
static OPENED: Mutex<Vec<(Device, String)>> = Mutex::new(Vec::new());
/// When an engine on a remote device last completed a unit.
static PROGRESS: Mutex<Option<Instant>> = Mutex::new(None);

/// Notes that an engine on a remote device completed a unit now.
pub(crate) fn progressed() {
    *PROGRESS.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
}

/// How long since an engine on a remote device last completed a unit (`None` before the
/// first): what a stop that waits on such a device judges it by.
pub fn since_progress() -> Option<Duration> {
    PROGRESS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .map(|at| at.elapsed())
}

/// How long a remote device may leave a wait unanswered before it is an error.
pub fn answer_within() -> Duration {
    Duration::from_millis(ANSWER_WITHIN_MS.load(Ordering::SeqCst))
}

/// Sets [`answer_within`] for every wait from now on.
///
/// # Errors
/// [`Error::InvalidValue`] for a bound under 1 ms or over a day.
pub fn set_answer_within(bound: Duration) -> Result<()> {
    if bound < Duration::from_millis(1) || bound > Duration::from_secs(86_400) {
        return Err(Error::InvalidValue {
            name: "--remote-timeout",
            value: format!("{}", bound.as_secs_f64()),
            reason: "a remote device's bound is 0.001 s to 86400 s (a day)".to_string(),
        });
    }
    ANSWER_WITHIN_MS.store(bound.as_millis() as u64, Ordering::SeqCst);
    Ok(())
}

/// Notes an opened remote device under its name, for [`name`].
#[cfg_attr(not(feature = "remote"), allow(dead_code))]
pub(super) fn opened(device: &Device, as_given: String) {
    let mut opened = OPENED.lock().unwrap_or_else(|p| p.into_inner());
    if !opened.iter().any(|(d, _)| d == device) {
        opened.push((device.clone(), as_given));
    }
}

/// The name of `device` as given (`remote:ws://127.0.0.1:3000`) when it is a remote device
/// ember opened; `None` for any other. burn's autodiff wrapping makes no difference.
pub fn name(device: &Device) -> Option<String> {
    OPENED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .find(|(d, _)| d == device)
        .map(|(_, name)| name.clone())
}

/// The names of the remote devices this process opened, in order.
pub fn names() -> Vec<String> {
    OPENED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .map(|(_, name)| name.clone())
        .collect()
}

/// Whether this process opened a remote device.
pub fn any_opened() -> bool {
    !OPENED.lock().unwrap_or_else(|p| p.into_inner()).is_empty()
}

/// `error` from connecting to the remote device `device`: where the connection ran out of
/// [`answer_within`] (a short `--remote-timeout`) and the address refuses connections or
/// cannot be reached, that, as [`Error::Unreachable`]: a server that was never started was
/// called one that "stopped answering" (hostile pass).
#[cfg(feature = "remote")]
pub(super) fn connecting(error: Error, device: &str) -> Error {
    if !matches!(error, Error::Silent { .. }) {
        return error;
    }
    let reason = match lost::unanswered(device) {
        Some(lost::Unanswered::Refused) => "it refuses connections: no server listens there",
        Some(lost::Unanswered::Unreachable(why)) => &format!("it {why}"),
        // It accepts and does not answer, or answers now: the bound's error says so.
        Some(lost::Unanswered::Silent) | None => return error,
    };
    Error::Unreachable {
        device: device.to_string(),
        reason: reason.to_string(),
    }
}

/// The error for `device`, silent for the whole bound while ember was `doing` something.
pub fn silent(device: &str, doing: &str) -> Error {
    Error::Silent {
        device: device.to_string(),
        seconds: answer_within().as_secs_f64(),
        doing: doing.to_string(),
    }
}

/// Runs `call`, which waits on the remote device `device`, on a thread of its own, and gives
/// up after [`answer_within`]: the thread is left waiting on the silent server.
///
/// # Errors
/// [`Error::Silent`] when `call` did not return in time; [`Error::Thread`] when its thread
/// cannot start.
pub fn within<T: Send + 'static>(
    device: &str,
    doing: &str,
    call: impl FnOnce() -> T + Send + 'static,
) -> Result<T> {
    let (sent, answer) = mpsc::channel();
    std::thread::Builder::new()
        .name(WAITER.to_string())
        .spawn(move || {
            // burn's reads panic where the server went away: that is this call's error, with
            // burn's words, not a thread's death.
            let _ = sent.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)));
        })
        .map_err(|source| Error::Thread {
            what: format!("a wait on {device}"),
            source: std::sync::Arc::new(source),
        })?;
    match answer.recv_timeout(answer_within()) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(panic)) => Err(Error::Panic(format!(
            "{doing} on {device}: {}",
            crate::error::panic_text(&panic)
        ))),
        Err(RecvTimeoutError::Timeout) => Err(silent(device, doing)),
        Err(RecvTimeoutError::Disconnected) => {
            Err(Error::Panic(format!("{doing} on {device} panicked")))
        }
    }
}

/// The name of [`within`]'s threads, whose panics it reports as its error.
pub const WAITER: &str = "ember-remote-wait";

/// Runs `call`, which reads from `devices`, under [`within`]'s bound where one of them is a
/// remote device ember opened, and on this thread, unbounded, where none is: a local device's
/// long kernel is not a silent server.
///
/// # Errors
/// `call`'s own; [`Error::Silent`] naming the first remote device when `call` did not return
/// within [`answer_within`].
pub fn bounded<T: Send + 'static>(
    devices: &[Device],
    doing: &str,
    call: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    match devices.iter().find_map(name) {
        Some(device) => within(&device, doing, call)?,
        None => call(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_past_the_bound_is_an_error_naming_the_device_and_a_prompt_one_is_its_value() {
        let device = "remote:ws://127.0.0.1:1";
        assert_eq!(within(device, "adding", || 1 + 1).unwrap(), 2);
        let bound = answer_within();
        set_answer_within(Duration::from_millis(50)).unwrap();
        let start = std::time::Instant::now();
        let err = within(device, "reading a parameter back", || {
            std::thread::sleep(Duration::from_secs(5));
        })
        .unwrap_err();
        let waited = start.elapsed();
        set_answer_within(bound).unwrap();
        assert!(waited < Duration::from_secs(2), "{waited:?}");
        let text = err.to_string();
        assert!(
            text.contains(device) && text.contains("reading a parameter back"),
            "{text}"
        );
        assert!(set_answer_within(Duration::ZERO).is_err());
    }
}
