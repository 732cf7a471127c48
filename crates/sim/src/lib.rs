//! The schedlab simulator: a machine of the shape a `Topology` names, with
//! the cost model's latencies, running `schedlab-sched` unchanged on every
//! CPU, and task programs that block and wake only through it.
//!
//! * [`engine`]: the event queue, the CPUs, the program interpreter,
//!   devices, the trace hash and the invariant checks;
//! * [`cost`]: the cost model and its sources;
//! * [`policy`]: policies by name (the registry) and how a simulation
//!   starts one;
//! * [`spec`]: what a simulation is built from, and the handle of the
//!   policy it runs;
//! * [`program`]: the ops a task runs;
//! * [`figures`]: what a run reports;
//! * [`events`]: the event log the trace outputs are made from.
//!
//! The simulator knows no scenario by name: a scenario is a [`SimSpec`] and
//! a list of [`Figure`]s, built by `schedlab-scenarios`.

#![forbid(unsafe_code)]

pub mod cost;
pub mod engine;
pub mod events;
pub mod figures;
pub mod objects;
pub mod outcome;
pub mod policy;
pub mod program;
pub mod spec;

pub use cost::{ByLevel, CostModel, Lateness};
pub use engine::Engine;
pub use events::{Event, EventKind, PrevState};
pub use figures::{Figure, MoveReason, Within};
pub use outcome::{find_cycle, LlcOutcome, LostWake, Stall, StallCause, Wait};
pub use outcome::{Outcome, TaskOutcome};
pub use policy::Registry;
pub use program::Op;
pub use schedlab_sched as sched;
pub use spec::{PolicyRef, SimSpec, TaskDef};

/// One simulation of `spec`, running the policy it names.
pub struct Sim(Box<dyn spec::Run>);

impl Sim {
    /// Builds a simulation; its RNG tree is rooted at `seed`.
    pub fn new(spec: &SimSpec, seed: u64) -> Sim {
        Sim(spec.policy.start(spec, seed))
    }

    /// Runs to the end; returns what it measured.
    pub fn run(self) -> Outcome {
        self.0.run()
    }
}

/// Runs `spec` twice with `seed` and names the first event where the runs
/// differ, or `None` when they agree event for event.
pub fn first_divergence(spec: &SimSpec, seed: u64) -> Option<(usize, String, String)> {
    let mut spec = spec.clone();
    spec.keep_log = true;
    let a = Sim::new(&spec, seed).run();
    let b = Sim::new(&spec, seed).run();
    let n = a.log.len().max(b.log.len());
    (0..n).find_map(|i| {
        let (x, y) = (a.log.get(i), b.log.get(i));
        (x != y).then(|| {
            (
                i,
                x.cloned().unwrap_or_else(|| "<end>".into()),
                y.cloned().unwrap_or_else(|| "<end>".into()),
            )
        })
    })
}
