//! A machine's scheduling switches: spawn placement, balancing, the fair
//! band's switches and core scheduling. Chosen once per machine; every CPU
//! reads it. The wake placement policy is not here: it is a type the
//! scheduler is generic over (`policy`).

use core::fmt;
use core::str::FromStr;

use alloc::string::String;

use schedlab_topology::Topology;

use crate::fair::FairConfig;

/// Which load balancer runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum BalanceKind {
    /// The seed's: a newly idle CPU asks the busiest CPU for a queued task,
    /// a busy CPU's tick pushes one to a sleeping CPU (`balance` module).
    #[default]
    Seed,
    /// Linux 6.19's (`linux::lb`): sched domains, periodic balancing per
    /// level, newly idle balancing gated by `avg_idle`, idle balancing on
    /// behalf of tickless CPUs.
    Linux,
    /// Linux's with 7.2's cache-aware scheduling (`linux::cas`).
    LinuxCas(CasTunables),
    /// The balancer a policy brings as a type of its own: the host runs
    /// `CpuSched<P, B>` with that `B`, not a built-in.
    Own,
}

impl BalanceKind {
    /// The name a user writes (`balance = "linux"`).
    pub fn name(self) -> &'static str {
        match self {
            BalanceKind::Seed => "seed",
            BalanceKind::Linux => "linux",
            BalanceKind::LinuxCas(_) => "linux-cas",
            BalanceKind::Own => "own",
        }
    }

    /// The cache-aware tunables, when cache-aware scheduling is on.
    pub fn cas(self) -> Option<CasTunables> {
        match self {
            BalanceKind::LinuxCas(t) => Some(t),
            _ => None,
        }
    }
}

/// Cache-aware scheduling's tunables (debugfs `sched/llc_*` upstream), with
/// the defaults of the series as applied for 7.2 (`kernel/sched/fair.c`,
/// `CONFIG_SCHED_CACHE`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct CasTunables {
    /// `llc_overaggr_pct`: an LLC above this share of its capacity is busy
    /// (`fits_llc_capacity()`; raised by half without SMT). 50.
    pub overaggr_pct: u32,
    /// `llc_imb_pct`: how much busier than the other LLC the preferred one
    /// may get (`util_greater()`). 20.
    pub imb_pct: u32,
    /// `llc_aggr_tolerance`: 0 off, 1 strict, 100 ignore the thread count. 1.
    pub aggr_tolerance: u32,
    /// `llc_epoch_period`, ns (10 ms: `EPOCH_PERIOD` = HZ/100).
    pub epoch_ns: u64,
    /// `llc_epoch_affinity_timeout`, epochs (5).
    pub affinity_timeout: u64,
}

impl Default for CasTunables {
    fn default() -> CasTunables {
        CasTunables {
            overaggr_pct: 50,
            imb_pct: 20,
            aggr_tolerance: 1,
            epoch_ns: 10_000_000,
            affinity_timeout: 5,
        }
    }
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
    /// Whose balancer: the seed's or Linux's.
    pub kind: BalanceKind,
    /// Linux's `NI_RANDOM` (6.19's default, in 6.18's stable series from
    /// 6.18.5): a newly idle balance tries each domain with a probability
    /// that follows its recent success rate (`linux::balance::newidle`).
    pub ni_random: bool,
    /// The root of the balancer's random draws (`NI_RANDOM`'s dice), one
    /// stream per CPU; a host sets it from its run's seed.
    pub seed: u64,
}

impl Balance {
    pub const ON: Balance = Balance {
        newidle: true,
        periodic: true,
        interval_ns: 4_000_000,
        migration_cost_ns: 500_000,
        kind: BalanceKind::Seed,
        ni_random: true,
        seed: 0,
    };
    pub const OFF: Balance = Balance {
        newidle: false,
        periodic: false,
        ..Balance::ON
    };

    /// On, with `kind`'s balancer.
    pub const fn with(kind: BalanceKind) -> Balance {
        Balance {
            kind,
            ..Balance::ON
        }
    }

    pub fn is_on(&self) -> bool {
        self.newidle || self.periodic
    }
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
    /// The defaults for a machine: `near` spawns, balancing on, Linux's
    /// fair defaults for its size, ticking at its kernel's `CONFIG_HZ`.
    pub fn for_topology(topo: &Topology) -> Config {
        Config {
            spawn: SpawnPolicy::Near,
            balance: Balance::ON,
            fair: FairConfig::for_cpus(topo.num_cpus()).with_hz(topo.hz()),
            core_sched: false,
        }
    }
}

/// The built-in spawn rules' names: `near` and `rotate`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SpawnPolicy {
    /// The seed's base: the shallowest of the equal free-core sleepers, in a
    /// rotation over all CPUs that ignores LLCs.
    Rotate,
    /// A free core in the spawner's LLC, then its node, then anywhere; then
    /// any sleeping CPU in that order; else the spawner's CPU.
    Near,
    /// Linux's fork placement, `sched_balance_find_dst_cpu()`
    /// ([`crate::linux::fork`]).
    Linux,
}

impl fmt::Display for SpawnPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SpawnPolicy::Rotate => "rotate",
            SpawnPolicy::Near => "near",
            SpawnPolicy::Linux => "linux",
        })
    }
}

impl FromStr for SpawnPolicy {
    type Err = PolicyNameError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "near" => Ok(SpawnPolicy::Near),
            "rotate" => Ok(SpawnPolicy::Rotate),
            "linux" => Ok(SpawnPolicy::Linux),
            o => Err(PolicyNameError(alloc::format!(
                "spawn {o:?}: expected near, rotate or linux"
            ))),
        }
    }
}

/// Why a policy name did not parse.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct PolicyNameError(pub String);

impl fmt::Display for PolicyNameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
