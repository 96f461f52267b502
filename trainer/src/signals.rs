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
//!
//! Where a remote device is open, its server may never answer the batches in flight: the
//! first signal then gives the run [`answer_within`](ember::device::remote::answer_within) (and
//! a tenth more) to stop by itself, and stops it at once after that, as a second signal would.

use std::fmt;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2};
use signal_hook::iterator::Signals;

/// The signal a run was asked to stop by, 0 for none.
static REQUESTED: AtomicI32 = AtomicI32::new(0);
/// How many runs are in progress and will stop by themselves.
static RUNS: AtomicUsize = AtomicUsize::new(0);
static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
/// The run's checkpoint directory, where it has one: a stop at once names what it keeps.
static CHECKPOINTS: Mutex<Option<PathBuf>> = Mutex::new(None);

/// The checkpoint directory of the run the signals stop, `None` for a run without: a stop at
/// once names the newest checkpoint there, as it stands when the signal comes.
pub fn checkpoints_in(dir: Option<PathBuf>) {
    *CHECKPOINTS.lock().unwrap_or_else(|p| p.into_inner()) = dir;
}

/// What a stop at once keeps, looked at when the signal comes: `; its last checkpoint is …`,
/// `; no checkpoint in … yet`, or nothing for a run without checkpoints.
fn kept() -> String {
    let dir = CHECKPOINTS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let Some(dir) = dir else {
        return String::new();
    };
    // By its name, not by verifying its files: a process that ends at once must say its line
    // before a launcher (mpirun) ends it, and a checkpoint's directory appears whole, by a
    // rename, with its `state.json` (a resume passes over one that was damaged since, saying
    // why).
    let newest = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let steps = crate::checkpoint::step_of(&entry.file_name().to_string_lossy())?;
            let path = entry.path();
            path.join("state.json").is_file().then_some((steps, path))
        });
    match newest.max_by_key(|(steps, _)| *steps) {
        Some((_, checkpoint)) => format!(
            "; its last checkpoint is {}: go on with --resume {}",
            checkpoint.display(),
            dir.display()
        ),
        None => format!("; no checkpoint in {} yet", dir.display()),
    }
}

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
    listen(|signal| {
        let first = REQUESTED
            .compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok();
        if first && RUNS.load(Ordering::SeqCst) > 0 {
            let remote = ember::device::remote::any_opened();
            // Never a panic here: with stderr full, the stop goes on quietly.
            let _ = writeln!(
                std::io::stderr(),
                "{}: finishing the batches in flight, then stopping (again to stop at once){}",
                Signal(signal),
                if remote {
                    format!(
                        "; a remote device has {} s to answer",
                        flags_seconds(ember::device::remote::answer_within())
                    )
                } else {
                    String::new()
                }
            );
            if remote {
                stop_unless_done(Signal(signal));
            }
        } else {
            stop_at_once(Signal(signal), "stopped at once");
        }
    })
}

/// In a job of ranks, whose ranks would each stop at the batch their own signal found and
/// then wait in different collectives: every signal ends the process at once, as [`install`]'s
/// second signal does, removing the temporaries of the writes in flight. `said` (rank 0's:
/// what the job keeps) is printed first; `None` prints nothing and ends two seconds later,
/// after rank 0 (the other ranks).
///
/// # Errors
/// [`ember::Error::Execution`] when the handlers cannot be registered.
pub fn install_at_once(said: Option<String>) -> ember::Result<()> {
    listen(move |signal| match &said {
        Some(said) => stop_at_once(Signal(signal), said),
        None => {
            ember::io::remove_temporaries();
            // Open MPI's launcher sends SIGTERM to every rank and SIGKILL to the rest as soon as
            // one of them has ended: a rank that ended first killed rank 0 before it said its
            // line (1 job in 8 on a loaded machine). The others wait for rank 0 to end first,
            // longer than the second the launcher gives before its SIGKILL.
            std::thread::sleep(RANK_ZERO_FIRST);
            ember::io::remove_temporaries();
            signal_hook::low_level::exit(i32::from(Signal(signal).exit_code()))
        }
    })
}

/// How long a rank other than 0 waits, after a signal, before it ends: rank 0 says what the
/// job keeps in that time, before the launcher kills the job (Open MPI's SIGKILL comes a
/// second after its SIGTERM, or at once when a rank has ended).
const RANK_ZERO_FIRST: std::time::Duration = std::time::Duration::from_secs(2);

/// Runs `handle` on a thread of its own for every signal of [`HANDLED`]; once per process.
fn listen(handle: impl Fn(i32) + Send + 'static) -> ember::Result<()> {
    INSTALLED
        .get_or_init(|| {
            // Every signal whose default action ends the process: each would otherwise leave
            // the temporaries of a write in flight behind.
            let mut signals = Signals::new(HANDLED).map_err(|e| e.to_string())?;
            std::thread::Builder::new()
                .name("ember-signals".to_string())
                .spawn(move || {
                    for signal in signals.forever() {
                        handle(signal);
                    }
                })
                .map(drop)
                .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(|e| ember::Error::Execution(format!("cannot handle SIGINT/SIGTERM: {e}")))
}

/// Removes the temporary files of the writes in flight and exits with 128 + the signal's
/// number, saying `why` first.
fn stop_at_once(signal: Signal, why: &str) -> ! {
    let _ = writeln!(
        std::io::stderr(),
        "{signal}: {why}; a file being written keeps its old content{}",
        kept()
    );
    ember::io::remove_temporaries();
    // `_exit`: no destructors or exit handlers run while other threads are inside oneDNN
    // (`process::exit` ran them, and a signal early in a run crashed the process with
    // SIGSEGV).
    signal_hook::low_level::exit(i32::from(signal.exit_code()))
}

/// Stops the process at once if the run is still in progress and its remote device has
/// completed nothing for the bound (and a tenth): a run that goes on finishing its batches, or
/// that has stopped and writes its files, is left to end by itself.
fn stop_unless_done(signal: Signal) {
    let bound = ember::device::remote::answer_within();
    let _ = std::thread::Builder::new()
        .name("ember-stop-bound".to_string())
        .spawn(move || {
            let asked = std::time::Instant::now();
            let limit = bound + bound / 10;
            loop {
                std::thread::sleep(std::time::Duration::from_millis(100));
                if RUNS.load(Ordering::SeqCst) == 0 {
                    return;
                }
                let quiet = ember::device::remote::since_progress()
                    .map_or(asked.elapsed(), |since| since.min(asked.elapsed()));
                if quiet > limit {
                    break;
                }
            }
            stop_at_once(
                signal,
                &format!(
                    "the run did not stop within {} s: {} gave no answer; stopped at once",
                    flags_seconds(bound),
                    ember::device::remote::names().join(", ")
                ),
            );
        });
}

/// Seconds as the user would write them.
fn flags_seconds(bound: std::time::Duration) -> String {
    format!("{}", bound.as_secs_f64())
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
