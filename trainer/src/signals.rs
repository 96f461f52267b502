//! SIGINT and SIGTERM (and SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2): a run in [`fit`](crate::fit)
//! finishes the batches in flight (with gradient accumulation, the update's group, or the
//! epoch, whichever ends first), writes a checkpoint when it keeps them, and returns
//! [`FitRun::stopped`](crate::fit::FitRun); the `ember` binary then exits with 128 + the
//! signal's number (130 for SIGINT, 143 for SIGTERM).
//!
//! [`install`] starts a thread that receives the signals (signal-hook). While a run is in
//! progress, the first signal only asks it to stop; a second one, or a signal outside a run,
//! removes the temporary files of the writes in flight ([`ember::io::remove_temporaries`])
//! and exits at once with 128 + the signal's number. Without `install`, signals keep their
//! default action and `fit` never sees a request.

use std::fmt;
use std::io::Write;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2};
use signal_hook::iterator::Signals;

/// The signal a run was asked to stop by, 0 for none.
static REQUESTED: AtomicI32 = AtomicI32::new(0);
/// How many runs are in progress and will stop by themselves.
static RUNS: AtomicUsize = AtomicUsize::new(0);
static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();

/// The signals received: SIGINT and SIGTERM, and the others whose default action ends the
/// process (a hang-up, SIGQUIT, the user signals).
const HANDLED: [i32; 6] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2];

/// A signal that asked the run to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signal(pub i32);

impl Signal {
    /// The shell's exit status for a process ended by this signal: 128 + its number (130 for
    /// SIGINT, 143 for SIGTERM).
    pub fn exit_code(self) -> u8 {
        (128 + self.0).clamp(0, 255) as u8
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            SIGINT => write!(f, "SIGINT"),
            SIGTERM => write!(f, "SIGTERM"),
            SIGHUP => write!(f, "SIGHUP"),
            SIGQUIT => write!(f, "SIGQUIT"),
            SIGUSR1 => write!(f, "SIGUSR1"),
            SIGUSR2 => write!(f, "SIGUSR2"),
            n => write!(f, "signal {n}"),
        }
    }
}

/// Receives SIGINT and SIGTERM on a thread of their own from now on. Calling it again does
/// nothing.
///
/// # Errors
/// [`ember::Error::Execution`] when the handlers cannot be registered.
pub fn install() -> ember::Result<()> {
    INSTALLED
        .get_or_init(|| {
            // Every signal whose default action ends the process: each would otherwise leave
            // the temporaries of a write in flight behind.
            let mut signals = Signals::new(HANDLED).map_err(|e| e.to_string())?;
            std::thread::Builder::new()
                .name("ember-signals".to_string())
                .spawn(move || {
                    for signal in signals.forever() {
                        let first = REQUESTED
                            .compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst)
                            .is_ok();
                        if first && RUNS.load(Ordering::SeqCst) > 0 {
                            // Never a panic here: with stderr full, the stop goes on quietly.
                            let _ = writeln!(
                                std::io::stderr(),
                                "{}: finishing the batches in flight, then stopping (again to \
                                 stop at once)",
                                Signal(signal)
                            );
                        } else {
                            let _ = writeln!(
                                std::io::stderr(),
                                "{}: stopped at once; a file being written keeps its old content",
                                Signal(signal)
                            );
                            ember::io::remove_temporaries();
                            // `_exit`: no destructors or exit handlers run while other
                            // threads are inside oneDNN (`process::exit` ran them, and a
                            // signal early in a run crashed the process with SIGSEGV).
                            signal_hook::low_level::exit(i32::from(Signal(signal).exit_code()));
                        }
                    }
                })
                .map(drop)
                .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(|e| ember::Error::Execution(format!("cannot handle SIGINT/SIGTERM: {e}")))
}

/// The signal that asked the runs to stop, if one did.
pub fn requested() -> Option<Signal> {
    match REQUESTED.load(Ordering::SeqCst) {
        0 => None,
        n => Some(Signal(n)),
    }
}

/// Held by a run that stops by itself when [`requested`] says so.
pub(crate) struct RunInProgress;

impl RunInProgress {
    pub(crate) fn start() -> Self {
        RUNS.fetch_add(1, Ordering::SeqCst);
        RunInProgress
    }
}

impl Drop for RunInProgress {
    fn drop(&mut self) {
        RUNS.fetch_sub(1, Ordering::SeqCst);
    }
}
