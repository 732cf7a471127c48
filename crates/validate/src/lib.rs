//! Calibration and validation, as a library: what `schedlab calibrate`
//! and `schedlab validate` do, callable without the binary.
//!
//! * [`calibrate`]: this machine's bare microbenchmarks run for real
//!   (`schedlab_real::bare`, perf's and cyclictest's figures beside them),
//!   and the simulator's cost model fitted to them; the result is a
//!   [`CostsFile`].
//! * [`costs`]: cost files, read with their errors and refused on a
//!   machine of another shape.
//! * [`compare`]: a fixed list of workloads run for real and simulated,
//!   figure by figure, each with a [`Verdict`]; beside them the real
//!   tools nobody here wrote ([`clients`]: rt-tests' `hackbench` and
//!   `cyclictest`, perf's `sched pipe` and `sched messaging`, rt-app).
//! * [`verdict`]: the rule that says whether a simulated figure is within
//!   tolerance of the real runs, fixed before any measurement.
//!
//! Nothing here prints: each entry point returns its figures, and the CLI
//! lays them out. Long work reports its steps through [`Progress`].

pub mod calibrate;
pub mod clients;
pub mod compare;
pub mod costs;
pub mod verdict;
pub mod workloads;

pub use calibrate::{calibrate, Calibration};
pub use compare::{validate, Report, Request, Row};
pub use costs::CostsFile;
pub use verdict::{quantile, verdict, Verdict, TOLERANCE};

/// Why calibration or validation could not be carried out.
#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// Bad input: a cost file, a pattern, a scenario that does not load.
    Input(String),
    /// A real run could not be carried out (the kernel refused a call).
    Real(String),
    /// Ctrl-C during a real run (processes ended, tracefs restored).
    Interrupted,
}

impl From<schedlab_real::Error> for Error {
    fn from(e: schedlab_real::Error) -> Error {
        match e {
            schedlab_real::Error::Input(m) => Error::Input(m),
            schedlab_real::Error::Fault(m) => Error::Real(m),
            schedlab_real::Error::Interrupted => Error::Interrupted,
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Input(m) | Error::Real(m) => f.write_str(m),
            Error::Interrupted => f.write_str("interrupted"),
        }
    }
}

impl std::error::Error for Error {}

/// Steps of long work, for a progress bar: `begin` names a stage of `len`
/// steps, `tick` ends one (from any thread), `end` closes the stage. The
/// unit type reports nothing.
pub trait Progress: Sync {
    fn begin(&self, _what: &str, _len: usize) {}
    fn tick(&self) {}
    fn end(&self) {}
}

impl Progress for () {}
