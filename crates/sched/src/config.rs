//! A machine's scheduling policy: placement, spawn placement, balancing and
//! the fair band's switches. Chosen once per machine; every CPU reads it.

use schedlab_topology::Topology;

use crate::fair::FairConfig;
use crate::streak::WAKER_RUN;

/// Where a parked task's wake places it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Placement {
    /// The seed's base: back to the CPU it parked on, or a wake forward to a
    /// sleeping CPU near home when home is busy. No rule.
    Home,
    /// `Home`, plus the waker-streak rule with a run of `waker_run`.
    WakerStreak { waker_run: u8 },
}

impl Placement {
    pub fn name(&self) -> &'static str {
        match self {
            Placement::Home => "home",
            Placement::WakerStreak { .. } => "waker-streak",
        }
    }

    /// The rule with the seed's run, [`WAKER_RUN`].
    pub const fn waker_streak() -> Placement {
        Placement::WakerStreak {
            waker_run: WAKER_RUN,
        }
    }
}

/// Where a new task starts.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SpawnPolicy {
    /// The seed's base: the shallowest of the equal free-core sleepers, in a
    /// rotation over all CPUs that ignores LLCs.
    Rotate,
    /// A free core in the spawner's LLC, then its node, then anywhere; then
    /// any sleeping CPU in that order; else the spawner's CPU.
    Near,
}

/// Load balancing.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Balance {
    /// A CPU about to idle asks the busiest CPU (own LLC, then node, then
    /// machine) for a queued task.
    pub newidle: bool,
    /// A busy CPU's tick pushes a queued task to a sleeping CPU every
    /// `interval_ns`.
    pub periodic: bool,
    pub interval_ns: u64,
    /// A task that ran this recently is cache-hot and is not taken
    /// (Linux's `sysctl_sched_migration_cost`, 500 µs).
    pub migration_cost_ns: u64,
}

impl Balance {
    pub const ON: Balance = Balance {
        newidle: true,
        periodic: true,
        interval_ns: 4_000_000,
        migration_cost_ns: 500_000,
    };
    pub const OFF: Balance = Balance {
        newidle: false,
        periodic: false,
        ..Balance::ON
    };
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Config {
    pub placement: Placement,
    pub spawn: SpawnPolicy,
    pub balance: Balance,
    pub fair: FairConfig,
    /// Core scheduling (DESIGN.md section 7): SMT siblings run only tasks
    /// of one cookie at a time. Linux turns it on once any task has a
    /// cookie; hosts do the same.
    pub core_sched: bool,
}

impl Config {
    /// The defaults for a machine: the waker-streak rule at [`WAKER_RUN`],
    /// `near` spawns, balancing on, Linux's fair defaults for its size.
    pub fn for_topology(topo: &Topology) -> Config {
        Config {
            placement: Placement::waker_streak(),
            spawn: SpawnPolicy::Near,
            balance: Balance::ON,
            fair: FairConfig::for_cpus(topo.num_cpus()),
            core_sched: false,
        }
    }
}
