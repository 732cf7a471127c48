//! `schedlab`: the command line, as a library over a registry of named
//! policies.
//!
//! The `schedlab` binary is [`main`]: the built-in policies. A binary of
//! your own that registers a policy gets every command with it:
//!
//! ```no_run
//! use schedlab::{main_with, Registry};
//! use schedlab::sched::Home;
//!
//! fn main() -> std::process::ExitCode {
//!     let mut r = Registry::builtin();
//!     r.add_policy("mine", "what it does, in a line", Home);
//!     main_with(r)
//! }
//! ```
//!
//! (`examples/custom-policy` in the repository is a whole one.)
//!
//! Exit codes (stable): 0 success; 1 a check the command makes failed;
//! 2 bad input or usage (a file that does not parse, an unknown preset,
//! scenario or policy), with a message naming file, line and column where
//! it applies.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use schedlab_sched as sched;
pub use schedlab_sim::{PolicyRef, Registry};

/// `println!` that stops quietly when the reader has gone (`| head`): a
/// closed pipe is not an error of ours, and must never be a panic.
macro_rules! say {
    ($($t:tt)*) => { $crate::emit(&format!($($t)*), true) };
}

/// `print!`, with the same care.
macro_rules! say_part {
    ($($t:tt)*) => { $crate::emit(&format!($($t)*), false) };
}

pub(crate) fn emit(text: &str, newline: bool) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let r = out.write_all(text.as_bytes()).and_then(|_| {
        if newline {
            out.write_all(b"\n")
        } else {
            Ok(())
        }
    });
    if let Err(e) = r {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("schedlab: cannot write the output: {e}");
        std::process::exit(1);
    }
}

mod calibrate;
mod features;
mod import;
mod plot;
mod pool;
mod print;
mod real;
mod record;
mod rtapp_log;
mod run;
mod scenario;
mod suite;
mod topo;
mod trace;
mod validate;

/// schedlab: a multi-core CPU scheduler and a deterministic simulator of
/// real machine shapes that measures it.
#[derive(Parser, Debug)]
#[command(
    name = "schedlab",
    version,
    about,
    long_about = None,
    after_help = "Exit codes: 0 done; 1 a check the command makes failed (--check-determinism); \
2 bad input or usage (the message names the file, line and column); \
3 a run stalled: tasks blocked for ever, a program spinning without spending time, \
or a full task table (`run` prints what waits on what; --allow-stall exits 0); \
4 a real run (--real) could not be carried out (the kernel refused a call, a task's op failed); \
130 a real run interrupted (Ctrl-C), its processes ended and tracefs restored."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print a machine's topology: node -> LLC -> core -> CPUs.
    Topo(topo::TopoArgs),
    /// Run a scenario (built-in or .toml) over one or more seeds.
    Run(run::RunArgs),
    /// Run a scenario for each value of one parameter, over seeds.
    Sweep(run::SweepArgs),
    /// Join the shard files of one sweep into its table.
    Merge(run::MergeArgs),
    /// The seed's benchmark rows on a base and a head policy (the main job).
    Suite(suite::SuiteArgs),
    /// Write one run as a Perfetto trace (or JSON lines).
    Trace(trace::TraceArgs),
    /// Measure this machine for real and fit the cost model to it.
    Calibrate(calibrate::CalibrateArgs),
    /// Run a fixed list of workloads real and simulated; a verdict per figure.
    Validate(validate::ValidateArgs),
    /// Record a command's real schedule; write it as a trace, a summary and
    /// a scenario that replays it (root).
    Record(record::RecordArgs),
    /// Make a trace you already have (trace-cmd's trace.dat, perf.data,
    /// Perfetto) into record's files: a trace, a summary, a replay.
    Import(import::ImportArgs),
    /// List the placement policies this binary knows.
    Policies,
    /// List the fair class's features by Linux's names, with each kernel
    /// release's defaults.
    Features(features::FeaturesArgs),
}

/// A command's failure, and the exit code it maps to.
#[derive(Debug)]
pub enum Failure {
    /// Bad input or usage: exit 2.
    Input(String),
    /// A check the command makes failed: exit 1.
    Check(String),
    /// A run stalled (tasks blocked for ever, the watchdog, a full task
    /// table): exit 3.
    Stall(String),
    /// A real run could not be carried out (the kernel refused a call, a
    /// task's op failed).
    Real(String),
    /// Ctrl-C during a real run (processes ended, tracefs restored).
    Interrupted,
    /// Exit with this code, having said what there was to say (`record`
    /// passes on its command's).
    Exit(u8),
}

impl From<schedlab_real::Error> for Failure {
    fn from(e: schedlab_real::Error) -> Failure {
        match e {
            schedlab_real::Error::Input(m) => Failure::Input(m),
            schedlab_real::Error::Fault(m) => Failure::Real(m),
            schedlab_real::Error::Interrupted => Failure::Interrupted,
        }
    }
}

impl From<schedlab_validate::Error> for Failure {
    fn from(e: schedlab_validate::Error) -> Failure {
        match e {
            schedlab_validate::Error::Input(m) => Failure::Input(m),
            schedlab_validate::Error::Real(m) => Failure::Real(m),
            schedlab_validate::Error::Interrupted => Failure::Interrupted,
        }
    }
}

/// The `schedlab` command with the built-in policies.
pub fn main() -> ExitCode {
    main_with(Registry::builtin())
}

/// The `schedlab` command with the policies of `registry`: every command
/// that takes a policy name looks it up there.
pub fn main_with(registry: Registry) -> ExitCode {
    let cli = Cli::parse();
    let r = &registry;
    let result = match cli.command {
        Command::Topo(args) => topo::run(&args),
        Command::Run(args) => run::run(&args, r),
        Command::Sweep(args) => run::sweep(&args, r),
        Command::Merge(args) => run::merge(&args),
        Command::Suite(args) => suite::run(&args, r),
        Command::Trace(args) => trace::run(&args, r),
        Command::Calibrate(args) => calibrate::run(&args, r),
        Command::Validate(args) => validate::run(&args, r),
        Command::Record(args) => record::run(&args),
        Command::Import(args) => import::run(&args),
        Command::Features(args) => features::run(&args),
        Command::Policies => {
            for (name, about) in r.families() {
                say!("{name:<16} {about}");
            }
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Input(msg)) => {
            eprintln!("schedlab: {msg}");
            ExitCode::from(2)
        }
        Err(Failure::Check(msg)) => {
            eprintln!("schedlab: {msg}");
            ExitCode::from(1)
        }
        Err(Failure::Stall(msg)) => {
            eprintln!("schedlab: {msg}");
            ExitCode::from(3)
        }
        Err(Failure::Real(msg)) => {
            eprintln!("schedlab: a real run failed: {msg}");
            ExitCode::from(4)
        }
        Err(Failure::Exit(code)) => ExitCode::from(code),
        Err(Failure::Interrupted) => {
            eprintln!("schedlab: interrupted: every process of the run ended, tracefs restored");
            ExitCode::from(130)
        }
    }
}
