//! What Linux's balancer keeps: per CPU behind its lock ([`LbCpu`]), for
//! the machine ([`LbShared`]), and what only its CPU reads ([`LbOwn`]); and
//! its messages ([`LbMsg`]).

use alloc::vec::Vec;

use schedlab_topology::{CpuId, Topology};

use super::super::cas::{CpuRuntime, ProcCache};
use super::super::fork::{domains, Domain};
use super::super::lb::{Attempt, Idle, Migration, SdParams};
use super::newidle::Newidle;
use crate::config::{Balance, CasTunables};
use crate::sync::{AtomicU64, Mutex, Ordering};

/// The estimated cost of a newly idle balance, per CPU of the domain (ns).
pub const NEWIDLE_NS_PER_CPU: u64 = 100;

/// One domain's balancing state (`sd->balance_interval`, `last_balance`,
/// `nr_balance_failed`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SdState {
    pub balance_interval_ms: u64,
    pub last_balance: u64,
    pub nr_balance_failed: u32,
}

/// A CPU's balancing state, behind its lock in [`LbShared`].
#[derive(Clone, Debug)]
pub struct LbCpu {
    pub doms: [Option<Domain>; 4],
    pub n: usize,
    pub sd: [SdState; 4],
    /// `rq->next_balance`, ns.
    pub next_balance: u64,
    /// Cache-aware: the CPU's recent runtime.
    pub cpu_rt: CpuRuntime,
    /// Cache-aware: the process of the task running here.
    pub curr_proc: Option<u32>,
    /// Cache-aware: tasks here preferring each LLC (`sd->llc_counts`).
    pub llc_counts: Vec<u16>,
    /// Cache-aware: tasks here in their preferred LLC.
    pub nr_pref_llc_running: u32,
    /// Idle with its tick stopped: in `nohz.idle_cpus_mask`, not counted in
    /// `nr_busy_cpus`.
    pub tick_stopped: bool,
}

impl LbCpu {
    pub fn new(topo: &Topology, cpu: CpuId, cas: bool) -> LbCpu {
        let (doms, n) = domains(topo, cpu);
        let mut sd = [SdState {
            balance_interval_ms: 1,
            last_balance: 0,
            nr_balance_failed: 0,
        }; 4];
        for (s, d) in sd.iter_mut().zip(doms.iter()) {
            if let Some(d) = d {
                s.balance_interval_ms = SdParams::of(d).min_interval_ms;
            }
        }
        let counts = if cas {
            alloc::vec![0; topo.llcs().len()]
        } else {
            Vec::new()
        };
        LbCpu {
            doms,
            n,
            sd,
            next_balance: 0,
            cpu_rt: CpuRuntime::default(),
            curr_proc: None,
            llc_counts: counts,
            nr_pref_llc_running: 0,
            tick_stopped: true,
        }
    }
}

/// What every CPU's Linux balancer shares: each CPU's domains' state (the
/// idle load balancer updates it on a CPU's behalf, as Linux's does),
/// `nohz.next_balance`, and, under cache-aware scheduling, each LLC's
/// recorded utilization and each process's occupancy.
#[derive(Debug)]
pub struct LbShared {
    pub(crate) lb: Vec<Mutex<LbCpu>>,
    /// `nohz.next_balance`, ns.
    pub(crate) nohz_next: AtomicU64,
    /// Cache-aware scheduling's tunables, when it is on.
    pub(crate) cas: Option<CasTunables>,
    /// Per LLC (ordinal), its utilization and capacity as periodic
    /// balancing last recorded them (`sd_llc_shared->util_avg`,
    /// `->capacity`): cache-aware scheduling only.
    pub(crate) llc_stats: Vec<(AtomicU64, AtomicU64)>,
    /// Per process id, its cache state (`mm->sc_stat`) behind its own lock:
    /// cache-aware scheduling only.
    pub(crate) procs: Vec<Mutex<Option<ProcCache>>>,
}

impl LbShared {
    pub(crate) fn new(topo: &Topology, cas: Option<CasTunables>, max_tasks: usize) -> LbShared {
        LbShared {
            lb: topo
                .cpu_ids()
                .map(|c| Mutex::new(LbCpu::new(topo, c, cas.is_some())))
                .collect(),
            nohz_next: AtomicU64::new(0),
            cas,
            llc_stats: match cas {
                Some(_) => topo
                    .llcs()
                    .iter()
                    .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
                    .collect(),
                None => Vec::new(),
            },
            procs: match cas {
                Some(_) => (0..max_tasks).map(|_| Mutex::new(None)).collect(),
                None => Vec::new(),
            },
        }
    }

    /// LLC `l`'s recorded (utilization, capacity).
    pub(crate) fn llc_stat(&self, l: usize) -> (u64, u64) {
        let (u, c) = &self.llc_stats[l];
        (u.load(Ordering::Relaxed), c.load(Ordering::Relaxed))
    }
}

/// A pull request to the busiest CPU.
#[derive(Clone, Copy, Debug)]
pub struct Pull {
    pub dst: CpuId,
    /// The destination's domain (index, lowest first).
    pub level: usize,
    pub mig: Migration,
    pub idle: Idle,
    pub attempt: Attempt,
}

/// Linux's balancer's messages.
#[derive(Clone, Copy, Debug)]
pub enum LbMsg {
    /// The busiest CPU found by a balance pass is asked to detach tasks for
    /// `dst` (`detach_tasks()` on its own queue).
    Pull(Pull),
    /// `kick_ilb()`: balance on behalf of the tickless idle CPUs.
    NohzKick,
}

/// A CPU's own balancing state that no other CPU reads.
#[derive(Clone, Copy, Debug)]
pub struct LbOwn {
    /// `rq->avg_idle`, ns.
    pub avg_idle: u64,
    /// `rq->idle_stamp`.
    pub idle_stamp: Option<u64>,
    /// Each domain's `max_newidle_lb_cost`, estimated ([`NEWIDLE_NS_PER_CPU`]
    /// per CPU of its span), lowest first; fixed with the topology.
    pub newidle_cost: [u64; 4],
    /// How many domains the CPU has.
    pub domains: usize,
    /// `rq->max_idle_balance_cost`: the domains' costs, at least the
    /// migration cost; fixed with the topology.
    pub max_idle_balance_cost: u64,
    /// `NI_RANDOM`'s state ([`Newidle`]).
    pub newidle: Newidle,
}

impl LbOwn {
    /// `cpu`'s, with the balance settings `b` (the migration cost,
    /// `NI_RANDOM` and the seed of its dice).
    pub fn new(topo: &Topology, cpu: CpuId, b: &Balance) -> LbOwn {
        let (doms, n) = domains(topo, cpu);
        let mut newidle_cost = [0; 4];
        for (c, d) in newidle_cost.iter_mut().zip(doms.iter().flatten()) {
            *c = d.span.weight() as u64 * NEWIDLE_NS_PER_CPU;
        }
        LbOwn {
            avg_idle: 2 * b.migration_cost_ns,
            idle_stamp: None,
            newidle_cost,
            domains: n,
            max_idle_balance_cost: newidle_cost.iter().sum::<u64>().max(b.migration_cost_ns),
            newidle: Newidle::new(b.ni_random, b.seed, cpu.index() as u64),
        }
    }

    /// `sched_balance_newidle()`'s walk ([`Newidle::walk`]) with this
    /// CPU's `avg_idle` and domain costs.
    pub fn newidle_walk(&mut self, overloaded: bool, try_level: impl FnMut(usize) -> bool) -> bool {
        let at = (self.avg_idle, &self.newidle_cost, self.domains);
        self.newidle.walk(at, overloaded, try_level)
    }

    /// An idle of `delta` ns ended: `avg_idle` learns it (`update_avg()`,
    /// an eighth at a time), capped at twice `max_idle_balance_cost`.
    pub fn idled(&mut self, delta: u64) {
        let max = 2 * self.max_idle_balance_cost;
        let a = self.avg_idle as i64;
        self.avg_idle = ((a + (delta as i64 - a) / 8).max(0) as u64).min(max);
    }
}
