//! `schedlab`: the command line.
//!
//! Exit codes (stable): 0 success; 1 a check the command makes failed;
//! 2 bad input or usage (a file that does not parse, an unknown preset or
//! scenario), with a message naming file, line and column where it applies.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod topo;

/// schedlab: a multi-core CPU scheduler and a deterministic simulator of
/// real machine shapes that measures it.
#[derive(Parser, Debug)]
#[command(name = "schedlab", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print a machine's topology: node -> LLC -> core -> CPUs.
    Topo(topo::TopoArgs),
}

/// A command's failure, and the exit code it maps to.
#[derive(Debug)]
pub enum Failure {
    /// Bad input or usage: exit 2.
    Input(String),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Topo(args) => topo::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Input(msg)) => {
            eprintln!("schedlab: {msg}");
            ExitCode::from(2)
        }
    }
}
