//! Raw arguments (clap) are turned into checked values here, then library code runs.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ember_trainer::signals::Signal;

/// `println!` for the CLI's output. A closed stdout (`ember train | head -1`) stops the
/// printing, not the work: the run goes on and writes `--save`, `--metrics` and its
/// checkpoints, and the exit status says whether they were written.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::cli::say(format_args!($($arg)*))
    };
}

/// Set once stdout is a broken pipe: nothing is printed after that.
static STDOUT_GONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

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
    if written.is_err_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) {
        STDOUT_GONE.store(true, Ordering::Relaxed);
    }
}

/// A run stopped by SIGINT or SIGTERM: `ember` exits with 128 + the signal's number.
#[derive(Debug)]
pub(crate) struct Interrupted(pub Signal);

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stopped by {}", self.0)
    }
}

impl std::error::Error for Interrupted {}

mod baseline;
mod bench;
mod book_lines;
mod chapter;
mod child;
mod compare;
mod devices;
mod export;
mod flags;
mod list;
mod model;
mod output_paths;
mod serve;
mod task;
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
}

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
    /// Run an experiment side by side and print medians and ratios.
    Bench(bench::BenchArgs),
    /// Run the same workload under several policies and plot how they compare.
    Compare(compare::CompareArgs),
    /// Serve a device to other ember processes (`--devices remote:ws://HOST:PORT`), through
    /// burn-remote; needs the `remote` cargo feature.
    Serve(serve::ServeArgs),
}

/// Parses the arguments, runs the command, prints the error chain on failure.
pub fn run() -> ExitCode {
    let cli = Cli::parse();
    match cli.cpu_kernels {
        Some(kernels) => ember::kernels::set_kernels(kernels),
        None => {
            if let Err(err) = ember::kernels::chosen() {
                eprintln!("error: {err}");
                return ExitCode::FAILURE;
            }
        }
    }
    let result = match cli.command {
        Command::Devices => devices::run(),
        Command::Train(args) => train::run(args),
        Command::Export(args) => export::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Compare(args) => compare::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) if err.downcast_ref::<Interrupted>().is_some() => {
            let Some(Interrupted(signal)) = err.downcast_ref::<Interrupted>() else {
                unreachable!("matched above")
            };
            ExitCode::from(signal.exit_code())
        }
        Err(err) => {
            eprintln!("error: {err}");
            for cause in err.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            if let Some(advice) = err
                .chain()
                .find_map(|cause| cause.downcast_ref::<ember::Error>())
                .and_then(devices::advice)
            {
                eprintln!("  advice: {advice}");
            }
            ExitCode::FAILURE
        }
    }
}
