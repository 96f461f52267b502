//! Raw arguments (clap) are turned into checked values here, then library code runs.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ember_trainer::run::clash::PrintsIntoInput;
use ember_trainer::run::{Interrupted, Note, Notes};

/// `println!` for the CLI's output, which never panics. A closed stdout (`ember train | head
/// -1`) stops the printing, not the work: the run goes on and writes `--save`, `--metrics` and
/// its checkpoints, and the exit status says whether they were written. Any other failure to
/// print (`> /dev/full`) stops the printing too, and makes the exit status non-zero at the end.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::cli::say(format_args!($($arg)*))
    };
}

/// `eprintln!` that never panics: a failure to write to stderr (`2> /dev/full`) is remembered
/// for the exit status, and the work goes on.
macro_rules! say_err {
    ($($arg:tt)*) => {
        $crate::cli::say_err(format_args!($($arg)*))
    };
}

/// Set once stdout cannot be written: nothing is printed after that.
static STDOUT_GONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// The first failure to print, other than a closed pipe on stdout, for the exit status.
static PRINT_FAILED: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Set when stderr is one of the command's inputs (`2>> data.csv`): errors go to stdout.
static STDERR_IS_INPUT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Prints nothing more on stdout: a job's ranks other than 0, so that one rank's lines describe
/// the job; and a command whose stdout is one of its inputs.
pub(crate) fn quiet() {
    STDOUT_GONE.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Prints nothing more on stderr, whose file is one of the command's inputs: errors go to
/// stdout, or nowhere where it is one too, rather than into the input.
pub(crate) fn stderr_is_input() {
    STDERR_IS_INPUT.store(true, std::sync::atomic::Ordering::Relaxed);
}

pub(crate) fn say(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    use std::sync::atomic::Ordering;
    if STDOUT_GONE.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    let written = out
        .write_fmt(line)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    if let Err(e) = written {
        STDOUT_GONE.store(true, Ordering::Relaxed);
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            let _ = PRINT_FAILED.set(format!("standard output could not be written: {e}"));
        }
    }
}

/// Set in a job's ranks other than 0: what their lines on stderr begin with (`rank 1: `).
static RANK: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Marks this process's stderr lines as rank `rank`'s, where a job's ranks share one terminal.
pub(crate) fn rank_lines(rank: usize) {
    let _ = RANK.set(format!("rank {rank}: "));
}

pub(crate) fn say_err(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let line = format!("{}{line}\n", RANK.get().map_or("", String::as_str));
    if STDERR_IS_INPUT.load(std::sync::atomic::Ordering::Relaxed) {
        return say(format_args!("{}", line.trim_end()));
    }
    // One write: the ranks of a job share the terminal, and stderr is unbuffered, so a line
    // written piece by piece came out interleaved with another rank's.
    let written = std::io::stderr().lock().write_all(line.as_bytes());
    if let Err(e) = written {
        let _ = PRINT_FAILED.set(format!("standard error could not be written: {e}"));
    }
}

/// The run's lines ([`ember_trainer::run::Notes`]) as the CLI prints them: lines on stdout,
/// warnings on stderr, each through [`say`] and [`say_err`].
pub(crate) fn notes() -> Notes {
    Notes::new(|note| match note {
        Note::Line(line) => say!("{line}"),
        Note::Warning(line) => say_err!("{line}"),
    })
}

mod bench;
mod child;
mod compare;
mod compare_outputs;
mod devices;
mod distributed;
mod export;
mod html;
mod lr_find;
mod recipe;
mod rounds;
mod serve;
mod summary;
mod train;
mod workload;

/// ember: see, measure and control what asynchronous execution does to a training loop.
#[derive(Debug, Parser)]
#[command(name = "ember", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// The kernels of ember's layers on the CPU (flex devices): `onednn` (the default, where
    /// the library is installed) or `flex` (burn-flex's own). Overrides EMBER_CPU_KERNELS.
    #[arg(long, global = true, value_name = "onednn|flex")]
    cpu_kernels: Option<ember::kernels::Kernels>,
    /// How long a remote device (`remote:ws://HOST:PORT`) may leave ember waiting for an
    /// answer before the run fails naming it: a server that was stopped or hangs keeps its
    /// connection open. A signal during such a wait ends the run within this bound too.
    #[arg(
        long,
        global = true,
        value_name = "SECONDS",
        default_value = "60",
        allow_negative_numbers = true
    )]
    remote_timeout: f64,
}

// Parsed once a process: the size of `train`'s flags costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// List the devices usable on this machine, what `auto` picks, and which kernels run
    /// ember's layers on the CPU.
    Devices,
    /// Train the chapter's MLP (or a model of --model on other data) under a sync policy, and
    /// print the book's lines.
    Train(train::TrainArgs),
    /// Write a trained network (--load) as an ONNX model (--out) that ONNX Runtime, and other
    /// runtimes that read ONNX, run without ember.
    Export(export::ExportArgs),
    /// Find a learning rate (PyTorch Lightning's lr_find): train a copy of the network one batch
    /// at each rate from --min-lr to --max-lr, rising exponentially, until the loss blows up;
    /// print the curve and the rate where the smoothed loss falls fastest, as `suggested --lr
    /// X`. Takes `train`'s workload flags (--lr plays no part). It runs under a barrier, so
    /// that a blow-up stops it at once.
    LrFind(lr_find::LrFindArgs),
    /// Print a network's layers with their output shapes and parameters (Gluon's
    /// `net.summary(x)`).
    Summary(summary::SummaryArgs),
    /// Run an experiment side by side and print medians and ratios.
    Bench(bench::BenchArgs),
    /// Run the same workload under several policies and plot how they compare.
    Compare(compare::CompareArgs),
    /// Serve a device to other ember processes (`--devices remote:ws://HOST:PORT`), through
    /// burn-remote (in the default build: the `remote` cargo feature).
    Serve(serve::ServeArgs),
}

/// Parses the arguments, runs the command, prints the error chain on failure.
pub fn run() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help, --version and a usage error: clap's own exit ignores a failed write.
        Err(parsed) => {
            // A closed pipe (`ember --help | head -1`) is a reader that had enough.
            if let Err(e) = parsed.print()
                && e.kind() != std::io::ErrorKind::BrokenPipe
            {
                let stream = match parsed.use_stderr() {
                    true => "standard error",
                    false => "standard output",
                };
                say_err!("error: {stream} could not be written: {e}");
                return ExitCode::FAILURE;
            }
            return ExitCode::from(u8::try_from(parsed.exit_code()).unwrap_or(2));
        }
    };
    match cli.cpu_kernels {
        Some(kernels) => ember::kernels::set_kernels(kernels),
        None => {
            if let Err(err) = ember::kernels::chosen() {
                say_err!("error: {err}");
                return ExitCode::FAILURE;
            }
        }
    }
    // The range on the value as given: 1e30 was "not a number of seconds", and 1e-40 was
    // named as 0 (hostile pass).
    let bound = match cli.remote_timeout {
        seconds if (0.001..=86_400.0).contains(&seconds) => {
            ember::device::remote::set_answer_within(std::time::Duration::from_secs_f64(seconds))
        }
        seconds => Err(ember::Error::InvalidValue {
            name: "--remote-timeout",
            value: ember_trainer::run::flags::number(seconds),
            reason: "a remote device's bound is 0.001 s to 86400 s (a day)".to_string(),
        }),
    };
    if let Err(err) = bound {
        say_err!("error: {err}");
        return ExitCode::FAILURE;
    }
    let result = match cli.command {
        Command::Devices => devices::run(),
        Command::Train(args) => train::run(args),
        Command::Export(args) => export::run(args),
        Command::Summary(args) => summary::run(args),
        Command::LrFind(args) => lr_find::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Compare(args) => compare::run(args),
    };
    let status = exit_status(result);
    // Everything is written by now: a failure to print changes only the exit status.
    match PRINT_FAILED.get() {
        Some(failed) if status == ExitCode::SUCCESS => {
            say_err!("error: {failed}");
            ExitCode::FAILURE
        }
        _ => status,
    }
}

/// The exit status of a command's result, with its error printed.
fn exit_status(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) if err.downcast_ref::<Interrupted>().is_some() => {
            let Some(Interrupted(signal)) = err.downcast_ref::<Interrupted>() else {
                unreachable!("matched above")
            };
            ExitCode::from(signal.exit_code())
        }
        Err(err) => {
            // What the command prints would go into its own input: nothing more is printed
            // there, not even this error.
            if let Some(into) = err
                .chain()
                .find_map(|cause| cause.downcast_ref::<PrintsIntoInput>())
            {
                if into.stdout {
                    quiet();
                }
                if into.stderr {
                    stderr_is_input();
                }
            }
            say_err!("error: {err}");
            // An error that repeats its cause's message (an OS error, `{source}` in both) is
            // printed once.
            let mut shown = err.to_string();
            for cause in err.chain().skip(1) {
                let text = cause.to_string();
                if !shown.contains(&text) {
                    say_err!("  caused by: {text}");
                }
                shown = text;
            }
            if let Some(advice) = err
                .chain()
                .find_map(|cause| cause.downcast_ref::<ember::Error>())
                .and_then(devices::advice)
            {
                say_err!("  advice: {advice}");
            }
            ExitCode::FAILURE
        }
    }
}
