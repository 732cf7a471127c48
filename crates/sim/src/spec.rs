//! What a simulation is built from: the machine, the scheduler's
//! configuration, the tasks and their programs, and the policy every CPU
//! runs, as a [`PolicyRef`]: a named handle that starts an engine for a
//! spec. The handle's constructors, which name the engine, are in
//! [`crate::policy`], above the engine; this module sits below it, so the
//! engine and the policies it runs import each other in one direction.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use schedlab_sched::fair::FeatureSet;
use schedlab_sched::{BalanceKind, Config, SpawnPolicy, TaskSpec};
use schedlab_topology::{CpuId, CpuSet, Topology};

use crate::cost::CostModel;
use crate::outcome::Outcome;
use crate::program::Op;

/// A task the simulation starts with.
#[derive(Clone, Debug)]
pub struct TaskDef {
    pub name: String,
    pub spec: TaskSpec,
    /// Where it starts (it may move later if its mask allows).
    pub start_cpu: CpuId,
    pub program: Vec<Op>,
    /// Bytes it re-reads after a migration.
    pub working_set: u64,
    /// The process it belongs to (`""`: a process of its own, named after
    /// it); its shared data is `SimSpec::processes`'.
    pub process: String,
    /// It starts on a CPU of this set drawn from the run's seed, not on
    /// `start_cpu`: where earlier work left a benchmark's thread, a property
    /// of the boot.
    /// (Boxed: few tasks have one, and a set is 128 bytes.)
    pub start_in: Option<Box<CpuSet>>,
}

/// Everything a simulation is built from.
#[derive(Clone, Debug)]
pub struct SimSpec {
    pub topology: Topology,
    pub config: Config,
    /// The placement policy every CPU runs.
    pub policy: PolicyRef,
    pub cost: CostModel,
    /// The idle depth a CPU sleeps at.
    pub idle_depth: u8,
    /// Programs `spawn` may start, by name.
    pub programs: BTreeMap<String, Vec<Op>>,
    /// Each process's shared data, bytes (touched by all its threads; a
    /// process not listed has none).
    pub processes: BTreeMap<String, u64>,
    pub tasks: Vec<TaskDef>,
    /// The run stops here, or when every task has exited.
    pub run_ns: u64,
    /// The CPU whose interrupt completes disk requests.
    pub disk_irq_cpu: CpuId,
    pub pipe_capacity: u64,
    /// Check the scheduler's invariants after every event.
    pub check_invariants: bool,
    /// Keep every event as text, to find where two runs diverge.
    pub keep_log: bool,
    /// Keep the event log ([`Event`]) the trace outputs are made from.
    pub keep_events: bool,
    /// Count each task's parked wakes by waker ([`Outcome::wakes_by`]).
    pub count_wakers: bool,
    /// Ties among simultaneous events in insertion order, not by the RNG.
    pub fixed_order: bool,
    /// Room in the task table for this many tasks started by `spawn`
    /// over the run (beyond `tasks`); one more stops the run with a
    /// stall report.
    pub max_tasks: usize,
}

/// A simulation ready to run.
pub trait Run {
    fn run(self: Box<Self>) -> Outcome;
}

type Start = dyn Fn(&SimSpec, u64) -> Box<dyn Run> + Send + Sync;

/// A policy with its name, ready to start simulations.
#[derive(Clone)]
pub struct PolicyRef {
    pub(crate) name: String,
    pub(crate) spawn: Option<SpawnPolicy>,
    pub(crate) balance: Option<BalanceKind>,
    pub(crate) features: Option<FeatureSet>,
    pub(crate) start: Arc<Start>,
}

impl PolicyRef {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The same policy under `name`, bringing balancer `kind` as its own
    /// (a setup such as the seed's rule beside Linux's balancer).
    pub fn with_balance(mut self, name: impl Into<String>, kind: BalanceKind) -> PolicyRef {
        self.name = name.into();
        self.balance = Some(kind);
        self
    }

    /// The spawn rule the policy comes with ([`Policy::spawn_rule`]).
    pub fn spawn_rule(&self) -> Option<SpawnPolicy> {
        self.spawn
    }

    /// The load balancer the policy comes with ([`Policy::balance_rule`]).
    pub fn balance_rule(&self) -> Option<BalanceKind> {
        self.balance
    }

    /// The fair class the policy comes with ([`Policy::fair_features`]).
    pub fn fair_features(&self) -> Option<FeatureSet> {
        self.features
    }

    pub(crate) fn start(&self, spec: &SimSpec, seed: u64) -> Box<dyn Run> {
        (self.start)(spec, seed)
    }
}

impl fmt::Debug for PolicyRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PolicyRef({})", self.name)
    }
}

impl PartialEq for PolicyRef {
    fn eq(&self, o: &PolicyRef) -> bool {
        self.name == o.name
    }
}
