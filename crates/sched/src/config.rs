//! A machine's scheduling switches: spawn placement, balancing, the fair
//! band's switches and core scheduling. Chosen once per machine; every CPU
//! reads it. The wake placement policy is not here: it is a type the
//! scheduler is generic over (`policy`).

use schedlab_topology::Topology;

use crate::fair::FairConfig;
pub use crate::policy::SpawnPolicy;

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
    pub spawn: SpawnPolicy,
    pub balance: Balance,
    pub fair: FairConfig,
    /// Core scheduling (docs/ARCHITECTURE.md, core scheduling): SMT siblings run only tasks
    /// of one cookie at a time. Linux turns it on once any task has a
    /// cookie; hosts do the same.
    pub core_sched: bool,
}

impl Config {
    /// The defaults for a machine: `near` spawns, balancing on, Linux's fair defaults for its size.
    pub fn for_topology(topo: &Topology) -> Config {
        Config {
            spawn: SpawnPolicy::Near,
            balance: Balance::ON,
            fair: FairConfig::for_cpus(topo.num_cpus()),
            core_sched: false,
        }
    }
}
