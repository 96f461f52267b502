//! Raw arguments (clap) are turned into checked values here, then library code runs.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod chapter;
mod compare;
mod devices;
mod model;
mod train;
mod workload;

/// ember: see, measure and control what asynchronous execution does to a training loop.
#[derive(Debug, Parser)]
#[command(name = "ember", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List the devices usable on this machine (wgpu, flex, ndarray) and what `auto` picks.
    Devices,
    /// Train the chapter's MLP (or a model of --model on other data) under a sync policy, and
    /// print the book's lines.
    Train(train::TrainArgs),
    /// Run an experiment side by side and print medians and ratios.
    Bench(bench::BenchArgs),
    /// Run the same workload under several policies and plot how they compare.
    Compare(compare::CompareArgs),
}

/// Parses the arguments, runs the command, prints the error chain on failure.
pub fn run() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Devices => devices::run(),
        Command::Train(args) => train::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Compare(args) => compare::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            for cause in err.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            ExitCode::FAILURE
        }
    }
}
