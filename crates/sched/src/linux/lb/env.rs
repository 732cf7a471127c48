//! What a balance attempt sees: the domain's parameters, each CPU's and
//! group's statistics, the environment of one `sched_balance_rq()` call,
//! and the migration it decides on.

use schedlab_topology::{CpuId, CpuSet, Level};

use super::super::fork::Domain;
use crate::config::CasTunables;

/// `sysctl_sched_nr_migrate` (32 without `PREEMPT_RT`): the most tasks one
/// `detach_tasks()` looks at.
pub const SCHED_NR_MIGRATE: u32 = 32;
/// `sd->busy_factor`: a busy CPU balances 16 times less often.
pub const BUSY_FACTOR: u64 = 16;
/// `MAX_PINNED_INTERVAL`, ms.
pub const MAX_PINNED_INTERVAL_MS: u64 = 512;
/// One jiffy at `HZ` = 1000.
pub const JIFFY_NS: u64 = 1_000_000;

/// `enum cpu_idle_type` of the destination.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Idle {
    /// `__CPU_NOT_IDLE`: a busy CPU's periodic balance.
    NotIdle,
    /// `CPU_IDLE`: an idle CPU's (in this model, on its behalf by the idle
    /// load balancer).
    Idle,
    /// `CPU_NEWLY_IDLE`: about to go idle.
    NewlyIdle,
}

impl Idle {
    /// `env->idle` as C reads it: the destination is idle.
    pub fn any(self) -> bool {
        self != Idle::NotIdle
    }
}

/// `enum migration_type` (no `migrate_misfit`: no asymmetric capacity).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum MigrationType {
    Load,
    Util,
    Task,
    /// Cache-aware scheduling's: one task preferring the destination's LLC.
    LlcTask,
}

/// What to move: a type and an amount in its unit.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Migration {
    pub kind: MigrationType,
    pub imbalance: i64,
}

/// `enum group_type`, the ones this machine can see, in pulling priority.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum GroupType {
    HasSpare,
    FullyBusy,
    SmtBalance,
    LlcBalance,
    Overloaded,
}

/// What `sd_init()` makes of a domain.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SdParams {
    /// `min_interval` = `balance_interval` at start = the span's weight, ms.
    pub min_interval_ms: u64,
    /// `max_interval` = twice the weight, ms.
    pub max_interval_ms: u64,
    /// 0 for SMT, 1 for MC and PKG, 2 for NUMA.
    pub cache_nice_tries: u32,
    /// `SD_SHARE_CPUCAPACITY` (SMT): `task_hot()` says no.
    pub share_cpucapacity: bool,
    /// `SD_SHARE_LLC` (SMT and MC).
    pub share_llc: bool,
    /// The groups carry `SD_PREFER_SIBLING` (their child domain is not NUMA).
    pub prefer_sibling: bool,
    /// The groups are SMT cores (`SD_SHARE_CPUCAPACITY` on the child).
    pub smt_groups: bool,
}

impl SdParams {
    pub fn of(sd: &Domain) -> SdParams {
        let w = sd.span.weight() as u64;
        let smt = sd.level == Level::Smt;
        SdParams {
            min_interval_ms: w,
            max_interval_ms: 2 * w,
            cache_nice_tries: if smt {
                0
            } else if sd.numa {
                2
            } else {
                1
            },
            share_cpucapacity: smt,
            share_llc: sd.level <= Level::Llc,
            prefer_sibling: sd.child.is_some(),
            smt_groups: sd.child == Some(Level::Smt),
        }
    }
}

/// `get_sd_balance_interval()`, in ns: the domain's interval, times
/// `busy_factor` (less one jiffy) on a busy CPU, within one jiffy and
/// `max_load_balance_interval` (`HZ * nr_cpus / 10`).
pub fn balance_interval_ns(balance_interval_ms: u64, busy: bool, nr_cpus: usize) -> u64 {
    let mut jiffies = balance_interval_ms;
    if busy {
        jiffies = jiffies * BUSY_FACTOR - 1;
    }
    let max = (1000 * nr_cpus as u64 / 10).max(1);
    jiffies.clamp(1, max) * JIFFY_NS
}

/// What a balancing CPU reads of one CPU (its published values).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct CpuStat {
    /// `rq->nr_running`.
    pub nr_running: u32,
    /// `rq->cfs.h_nr_runnable`: fair tasks.
    pub h_nr_runnable: u32,
    /// `cpu_load()`: the fair queue's `load_avg`.
    pub load: u64,
    /// `util_avg`.
    pub util: u64,
    pub runnable: u64,
    /// `idle_cpu()`.
    pub idle: bool,
    /// Cache-aware: tasks here preferring the destination's LLC
    /// (`sd->llc_counts[dst_llc]`).
    pub pref_dst_llc: u32,
}

/// The balancing environment (`struct lb_env`), as far as decisions read it.
#[derive(Clone, Debug)]
pub struct LbEnv {
    pub sd: Domain,
    pub params: SdParams,
    pub dst: CpuId,
    pub idle: Idle,
    pub nr_balance_failed: u32,
    /// Cache-aware scheduling, when on.
    pub cas: Option<CasEnv>,
}

impl LbEnv {
    /// What the busiest CPU needs of this environment to detach tasks.
    pub fn attempt(&self) -> Attempt {
        Attempt {
            params: self.params,
            nr_balance_failed: self.nr_balance_failed,
            cas: self.cas.is_some(),
        }
    }
}

/// The part of the environment `detach_tasks()` reads, carried to the
/// busiest CPU in the pull request.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Attempt {
    pub params: SdParams,
    pub nr_balance_failed: u32,
    /// Cache-aware scheduling is on.
    pub cas: bool,
}

/// What cache-aware balancing reads: its tunables, SMT, and each LLC's
/// utilization and capacity as periodic balancing last recorded them
/// (`sd_llc_shared->util_avg`, `->capacity`), by LLC ordinal.
#[derive(Clone, Debug)]
pub struct CasEnv {
    pub tun: CasTunables,
    /// `cpu_smt_num_threads`.
    pub smt_threads: u64,
    pub dst_llc: u16,
    pub llc_stats: alloc::vec::Vec<(u64, u64)>,
}

/// `struct sg_lb_stats`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SgStats {
    pub span: CpuSet,
    pub avg_load: u64,
    pub load: u64,
    pub capacity: u64,
    pub util: u64,
    pub runnable: u64,
    pub sum_nr_running: u64,
    pub sum_h_nr_running: u64,
    pub idle_cpus: u64,
    pub weight: u64,
    /// `sg->cores`.
    pub cores: u64,
    pub group_type: GroupType,
    /// The group is an SMT core (`sg->flags & SD_SHARE_CPUCAPACITY`).
    pub smt: bool,
    pub nr_pref_dst_llc: u64,
}
