//! Where Linux's load balancer runs in this model (`balance = "linux"` and
//! `"linux-cas"`): the decisions are `linux::lb`'s and `linux::cas`'s; this
//! is who makes them, when, and how the tasks move.
//!
//! * **Periodic** (`sched_balance_domains()` from the tick, when
//!   `rq->next_balance` is due): each domain, bottom up, whose interval
//!   ([`lb::balance_interval_ns`]: `balance_interval` ms, times
//!   `busy_factor` 16 less a jiffy on a busy CPU) has passed; stops going up
//!   where [`lb::should_we_balance`] says another CPU of the group balances.
//!   An idle CPU whose tick goes on (see the idle tick below) balances so
//!   too, with `CPU_IDLE`; one whose tick stopped is served by:
//! * **Idle balancing on behalf of tickless CPUs** (`nohz_balancer_kick()`,
//!   `kick_ilb()`, `_nohz_idle_balance()`): a busy CPU's tick, once a jiffy
//!   at most (`nohz.next_balance`), when it runs two tasks or its LLC has
//!   more than one CPU not idle with its tick stopped (`nr_busy_cpus`),
//!   posts a kick to the first tick-stopped idle CPU; that CPU balances,
//!   with `CPU_IDLE`, every tick-stopped idle CPU whose `next_balance` is
//!   due (from the one after it, itself last), stopping when it gets work.
//! * **Newly idle** (`sched_balance_newidle()`, from the pass that finds
//!   nothing to run): skipped when no CPU has a task waiting
//!   (`rd->overloaded`) or `avg_idle` is under the lowest domain's
//!   `max_newidle_lb_cost` (the gate was the 500 µs migration cost before
//!   Linux 5.16; 6.19 compares with the domain's cost, and so does this);
//!   else each domain, bottom up, while `avg_idle` covers the cost spent so
//!   far plus the domain's; the first pull ends it. `avg_idle` learns each
//!   idle period (`update_avg()`, an eighth at a time, capped at twice
//!   `max_idle_balance_cost`). 7.x's `NI_RANDOM` (skipping by the
//!   domain's recent success rate) is not modelled.
//!
//! A balance pass decides from what the other CPUs published, then posts a
//! [`Pull`] to the busiest CPU (a message and a kick: the model's stand-in
//! for Linux locking the remote run queue), which detaches from its own
//! queue (`detach_tasks()`) and sends each task to the destination. The
//! busiest CPU then does the bookkeeping Linux does after `detach_tasks()`
//! returns: `nr_balance_failed` of the destination's domain (under that
//! CPU's [`LbCpu`] lock, as Linux writes the domain), and when nothing
//! moved and [`lb::need_active_balance`] says so, it pushes its running
//! task (the stopper's `active_load_balance_cpu_stop()`).
//!
//! ## Simplified, and why
//!
//! * The outcome of a pull is not known to the pass that asked: a pass
//!   goes on to the next domain at once (periodic), or stops at the first
//!   pull asked (newly idle), whether or not a task moves. Pulls a pass
//!   plans are counted against the CPUs' published counts (one task each)
//!   so the idle balancer's later CPUs see them.
//! * `max_newidle_lb_cost` is not measured (the model charges no time for
//!   a balance pass): it is [`NEWIDLE_NS_PER_CPU`] per CPU of the domain,
//!   an estimate of reading one run queue's statistics.
//! * SIS_UTIL's scan depth is not refreshed here: the `linux` wake path
//!   computes it at each wake (see `linux`).
//! * **The idle tick.** Linux stops an idle CPU's tick only when the idle
//!   governor predicts an idle longer than a tick (menu's `stop_tick`);
//!   until then the CPU ticks, balances itself from its tick with
//!   `CPU_IDLE` and counts as busy in `nr_busy_cpus`. Here the prediction
//!   is the CPU's `avg_idle` against the tick: under one tick, the tick
//!   goes on ([`CpuSched::keeps_idle_tick`]); else it stops and the CPU
//!   joins the idle CPUs the idle load balancer serves. The governor's own
//!   prediction (recent idle lengths, the next timer) is simplified to
//!   that average.

use alloc::vec::Vec;

use schedlab_topology::{CpuId, Level, Topology};

use super::cas::{self, CpuRuntime, LlcMig, ProcCache};
use super::fork::{domains, Domain};
use super::lb::{
    self, Attempt, CanMigrate, CasEnv, CpuStat, Idle, LbEnv, Migration, MigrationType, SdParams,
    TaskView, JIFFY_NS, MAX_PINNED_INTERVAL_MS, SCHED_NR_MIGRATE,
};
use crate::config::{CasTunables, Config};
use crate::effects::{Effects, PlaceReason};
use crate::park::TaskState;
use crate::policy::Policy;
use crate::runqueue::Resched;
use crate::shared::{Msg, Shared};
use crate::sync::Ordering;
use crate::task::{Task, TaskId};
use crate::CpuSched;

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

/// A CPU's balancing state, behind its lock in [`Shared`].
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
    pub fn new(topo: &Topology, cpu: CpuId, config: &Config) -> LbCpu {
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
        let counts = if config.balance.kind.cas().is_some() {
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

/// A CPU's own balancing state that no other CPU reads.
#[derive(Clone, Copy, Debug, Default)]
pub struct LbOwn {
    /// `rq->avg_idle`, ns.
    pub avg_idle: u64,
    /// `rq->idle_stamp`.
    pub idle_stamp: Option<u64>,
    /// The running task to push to a CPU at the next pick (the stopper).
    pub active_push: Option<(TaskId, CpuId)>,
    /// Each domain's `max_newidle_lb_cost`, estimated ([`NEWIDLE_NS_PER_CPU`]
    /// per CPU of its span), lowest first; fixed with the topology.
    pub newidle_cost: [u64; 4],
    /// How many domains the CPU has.
    pub domains: usize,
}

impl LbOwn {
    pub fn new(topo: &Topology, cpu: CpuId, migration_cost: u64) -> LbOwn {
        let (doms, n) = domains(topo, cpu);
        let mut newidle_cost = [0; 4];
        for (c, d) in newidle_cost.iter_mut().zip(doms.iter().flatten()) {
            *c = d.span.weight() as u64 * NEWIDLE_NS_PER_CPU;
        }
        LbOwn {
            avg_idle: 2 * migration_cost,
            newidle_cost,
            domains: n,
            ..LbOwn::default()
        }
    }

    /// `rq->max_idle_balance_cost`: the domains' costs, at least the
    /// migration cost.
    fn max_idle_balance_cost(&self, migration_cost: u64) -> u64 {
        self.newidle_cost.iter().sum::<u64>().max(migration_cost)
    }
}

/// Tasks a balance pass expects to move, counted against the published
/// loads: `(cpu, change)`.
type Planned = Vec<(CpuId, i32)>;

/// What a balancing CPU reads of `c`, with the pulls planned so far.
fn cpu_stat<S: crate::policy::PolicyState>(
    sh: &Shared<S>,
    c: CpuId,
    me: CpuId,
    dst_llc: Option<u16>,
    planned: &[(CpuId, i32)],
) -> CpuStat {
    let d: i32 = planned
        .iter()
        .filter(|(x, _)| *x == c)
        .map(|(_, n)| n)
        .sum();
    let nr = (sh.load(c) as i32 + d).max(0) as u32;
    let h_nr = (sh.fair_nr(c) as i32 + d).max(0) as u32;
    let m = sh.machine(me, 0);
    let asleep = if c == me {
        sh.load(c) == 0
    } else {
        m.sleeping_unrung(c)
    };
    CpuStat {
        nr_running: nr,
        h_nr_runnable: h_nr,
        load: m.load_avg(c) as u64,
        util: m.util(c) as u64,
        runnable: m.runnable_avg(c) as u64,
        idle: asleep && nr == 0 && d <= 0,
        pref_dst_llc: dst_llc.map_or(0, |l| {
            sh.lb[c.index()]
                .lock()
                .llc_counts
                .get(l as usize)
                .copied()
                .unwrap_or(0) as u32
        }),
    }
}

/// The cache-aware environment for a balance toward `dst`.
fn cas_env<S: crate::policy::PolicyState>(sh: &Shared<S>, tun: CasTunables, dst: CpuId) -> CasEnv {
    let topo = sh.topology();
    CasEnv {
        tun,
        smt_threads: topo.max_threads_per_core() as u64,
        dst_llc: topo.llc_ordinal(dst) as u16,
        llc_stats: sh
            .llc_stats
            .iter()
            .map(|(u, c)| (u.load(Ordering::Relaxed), c.load(Ordering::Relaxed)))
            .collect(),
    }
}

impl<P: Policy> CpuSched<P> {
    /// The tick's part (`sched_balance_trigger()`): periodic balancing when
    /// due (`CPU_IDLE` on an idle CPU whose tick goes on), then, on a busy
    /// CPU, the idle balancer's kick.
    pub(crate) fn linux_tick(&mut self, sh: &Shared<P::TaskState>, now: u64, fx: &mut Effects) {
        let idle = self.rq.current.is_none() && self.queued() == 0;
        let due = now >= sh.lb[self.id.index()].lock().next_balance;
        if due {
            let mut planned = Planned::new();
            let kind = if idle { Idle::Idle } else { Idle::NotIdle };
            self.balance_domains(sh, self.id, kind, now, &mut planned, fx);
        }
        if idle {
            return; // `rq->idle_balance`: no kick from an idle CPU
        }
        self.nohz_balancer_kick(sh, now, fx);
        if let Some(tun) = sh.config().balance.kind.cas() {
            self.task_tick_cache(sh, tun, now);
        }
    }

    /// Whether this CPU, idle, keeps its tick: its recent idles
    /// (`avg_idle`) are shorter than a tick, so the idle governor would
    /// not stop it. Linux's balancer only; the seed's CPUs stop at once.
    pub fn keeps_idle_tick(&self, sh: &Shared<P::TaskState>) -> bool {
        sh.config().balance.kind.is_linux()
            && sh.config().balance.periodic
            && self.lb_own.avg_idle < sh.config().fair.tick_ns
    }

    /// `sched_balance_domains()` for `cpu` (this CPU, or an idle one the
    /// idle balancer stands in for).
    fn balance_domains(
        &mut self,
        sh: &Shared<P::TaskState>,
        cpu: CpuId,
        idle: Idle,
        now: u64,
        planned: &mut Planned,
        fx: &mut Effects,
    ) {
        let ncpus = sh.topology().num_cpus();
        let n = sh.lb[cpu.index()].lock().n;
        let busy = idle == Idle::NotIdle;
        let mut next = u64::MAX;
        for i in 0..n {
            let st = sh.lb[cpu.index()].lock().sd[i];
            let mut interval = lb::balance_interval_ns(st.balance_interval_ms, busy, ncpus);
            let mut last = st.last_balance;
            if now >= st.last_balance + interval {
                let go_on = self.balance_rq(sh, cpu, i, idle, planned, fx);
                last = now;
                let mut l = sh.lb[cpu.index()].lock();
                l.sd[i].last_balance = now;
                interval = lb::balance_interval_ns(l.sd[i].balance_interval_ms, busy, ncpus);
                if !go_on {
                    next = next.min(last + interval);
                    break;
                }
            }
            next = next.min(last + interval);
        }
        if next != u64::MAX {
            sh.lb[cpu.index()].lock().next_balance = next;
        }
    }

    /// `sched_balance_rq()` at `cpu`'s domain `i`, up to the pull request.
    /// Returns `continue_balancing`.
    #[allow(clippy::too_many_arguments)]
    fn balance_rq(
        &mut self,
        sh: &Shared<P::TaskState>,
        cpu: CpuId,
        i: usize,
        idle: Idle,
        planned: &mut Planned,
        fx: &mut Effects,
    ) -> bool {
        let topo = sh.topology();
        let (sd, st) = {
            let l = sh.lb[cpu.index()].lock();
            (l.doms[i].expect("a domain below the count"), l.sd[i])
        };
        let cas = sh.config().balance.kind.cas().map(|t| cas_env(sh, t, cpu));
        let dst_llc = cas.as_ref().map(|c| c.dst_llc);
        let env = LbEnv {
            sd,
            params: SdParams::of(&sd),
            dst: cpu,
            idle,
            nr_balance_failed: st.nr_balance_failed,
            cas,
        };
        let me = if idle == Idle::NotIdle { self.id } else { cpu };
        let stat = |c: CpuId| cpu_stat(sh, c, me, dst_llc, planned);
        let local = lb::groups(topo, &sd, cpu)[0];
        if !lb::should_we_balance(&env, topo, &local, &stat) {
            self.balanced(sh, cpu, i, idle, &env);
            return false;
        }
        let sds = lb::update_sd_lb_stats(&env, topo, &stat);
        if idle != Idle::NewlyIdle && sd.child == Some(Level::Llc) && env.cas.is_some() {
            // `record_sg_llc_stats()`: each LLC's utilization for the guard.
            for g in &sds.groups {
                if let Some(first) = g.span.first() {
                    let (u, c) = &sh.llc_stats[topo.llc_ordinal(first)];
                    u.store(g.util, Ordering::Relaxed);
                    c.store(g.capacity, Ordering::Relaxed);
                }
            }
        }
        let found = lb::find_src_group(&env, &sds)
            .and_then(|(g, mig)| lb::find_src_rq(&env, &g.span, mig, &stat).map(|c| (c, mig)));
        let Some((busiest, mig)) = found else {
            self.balanced(sh, cpu, i, idle, &env);
            return true;
        };
        {
            let mut l = sh.lb[cpu.index()].lock();
            l.sd[i].balance_interval_ms = env.params.min_interval_ms;
        }
        planned.push((busiest, -1));
        planned.push((cpu, 1));
        self.counters.lb_pulls += 1;
        let pull = Pull {
            dst: cpu,
            level: i,
            mig,
            idle,
            attempt: env.attempt(),
        };
        let pull = alloc::boxed::Box::new(pull);
        let k = sh.post(Some(self.id), busiest, Msg::Pull { pull });
        self.kick(k, fx);
        true
    }

    /// `out_balanced`: no failure to count; back off the interval, except
    /// newly idle.
    fn balanced(&self, sh: &Shared<P::TaskState>, cpu: CpuId, i: usize, idle: Idle, env: &LbEnv) {
        let mut l = sh.lb[cpu.index()].lock();
        let s = &mut l.sd[i];
        s.nr_balance_failed = 0;
        if idle != Idle::NewlyIdle && s.balance_interval_ms < env.params.max_interval_ms {
            s.balance_interval_ms *= 2;
        }
    }

    /// `sched_balance_newidle()`, from a pass with nothing to run.
    pub(crate) fn linux_newidle(&mut self, sh: &Shared<P::TaskState>, now: u64, fx: &mut Effects) {
        self.lb_own.idle_stamp = Some(now);
        let (n, costs) = (self.lb_own.domains, self.lb_own.newidle_cost);
        if self.steal_pending || n == 0 || self.lb_own.avg_idle < costs[0] || !sh.overloaded() {
            return;
        }
        let mut planned = Planned::new();
        let mut curr_cost = 0;
        for (i, &cost) in costs.iter().enumerate().take(n) {
            if self.lb_own.avg_idle < curr_cost + cost {
                break;
            }
            let before = self.counters.lb_pulls;
            self.balance_rq(sh, self.id, i, Idle::NewlyIdle, &mut planned, fx);
            curr_cost += cost;
            if self.counters.lb_pulls > before {
                self.steal_pending = true;
                break;
            }
        }
    }

    /// The pass picked a task after idling: `avg_idle` learns how long the
    /// idle lasted (capped at twice the balance cost).
    pub(crate) fn linux_idle_ended(&mut self, sh: &Shared<P::TaskState>, now: u64) {
        let Some(stamp) = self.lb_own.idle_stamp.take() else {
            return;
        };
        let max = 2 * self
            .lb_own
            .max_idle_balance_cost(sh.config().balance.migration_cost_ns);
        let delta = now.saturating_sub(stamp) as i64;
        let a = &mut self.lb_own.avg_idle;
        *a = (*a as i64 + (delta - *a as i64) / 8).max(0) as u64;
        *a = (*a).min(max);
    }

    /// `nohz_balancer_kick()` from a busy CPU's tick.
    fn nohz_balancer_kick(&mut self, sh: &Shared<P::TaskState>, now: u64, fx: &mut Effects) {
        if now < sh.nohz_next.load(Ordering::Relaxed) {
            return;
        }
        let topo = sh.topology();
        let m = sh.machine(self.id, now);
        let stopped = |c: CpuId| sh.lb[c.index()].lock().tick_stopped;
        let idle = |c: CpuId| c != self.id && m.sleeping_unrung(c) && sh.load(c) == 0;
        let Some(ilb) = topo.cpu_ids().find(|&c| idle(c) && stopped(c)) else {
            return;
        };
        // `nr_busy_cpus`: the LLC's CPUs not idle with their tick stopped.
        let busy_in_llc = topo
            .llc_cpus(self.id)
            .iter()
            .filter(|&c| !(m.doorbell(c).asleep() && stopped(c)))
            .count();
        if sh.load(self.id) < 2 && busy_in_llc <= 1 {
            return;
        }
        sh.nohz_next.store(now + JIFFY_NS, Ordering::Relaxed);
        self.counters.lb_nohz_kicks += 1;
        let k = sh.post(Some(self.id), ilb, Msg::NohzKick);
        self.kick(k, fx);
    }

    /// `_nohz_idle_balance()` on the kicked CPU: each idle CPU due for a
    /// balance, from the one after this on, this one last.
    pub(crate) fn nohz_idle_balance(
        &mut self,
        sh: &Shared<P::TaskState>,
        now: u64,
        fx: &mut Effects,
    ) {
        let topo = sh.topology();
        let mut planned = Planned::new();
        let mut next = now + 60_000 * JIFFY_NS;
        let after = CpuId::new((self.id.index() + 1) % topo.num_cpus());
        let order: Vec<CpuId> = topo.cpus().iter_from(after).collect();
        for c in order {
            if self.current().is_some() || self.queued() > 0 || sh.has_mail(self.id) {
                break; // this CPU got work: stop balancing for the others
            }
            let s = cpu_stat(sh, c, self.id, None, &planned);
            // `nohz.idle_cpus_mask`: idle with the tick stopped (a CPU
            // whose tick goes on balances itself).
            if !s.idle || (c != self.id && !sh.lb[c.index()].lock().tick_stopped) {
                continue;
            }
            if now >= sh.lb[c.index()].lock().next_balance {
                self.balance_domains(sh, c, Idle::Idle, now, &mut planned, fx);
            }
            next = next.min(sh.lb[c.index()].lock().next_balance);
        }
        sh.nohz_next.store(next, Ordering::Relaxed);
    }

    /// On the busiest CPU: `detach_tasks()` for a pull, the tasks sent to
    /// its destination, then the bookkeeping and maybe an active balance.
    pub(crate) fn handle_pull(
        &mut self,
        sh: &Shared<P::TaskState>,
        pull: Pull,
        now: u64,
        fx: &mut Effects,
    ) {
        let topo = sh.topology();
        let cas = sh.config().balance.kind.cas();
        let (src_llc, dst_llc) = (
            topo.llc_ordinal(self.id) as u16,
            topo.llc_ordinal(pull.dst) as u16,
        );
        let cost = sh.config().balance.migration_cost_ns;
        let mut nr_running = sh.load(self.id);
        let mut flags = Flags::default();
        let mut moved = 0;
        let mut imbalance = pull.mig.imbalance;
        if nr_running > 1 && imbalance > 0 {
            flags.all_pinned = true;
            let cands = self.candidates(cas.is_some() && src_llc != dst_llc, src_llc, dst_llc);
            let loop_max = SCHED_NR_MIGRATE.min(nr_running);
            for (n, id) in cands.into_iter().enumerate() {
                if (pull.idle.any() && nr_running <= 1) || n as u32 >= loop_max {
                    break;
                }
                let Some(t) = self.rq.fair.iter().find(|t| t.id == id) else {
                    continue;
                };
                let view = self.task_view(sh, t, pull.dst, now, cost, cas);
                match lb::can_migrate_task(&pull.attempt, pull.mig.kind, &view) {
                    CanMigrate::Pinned => continue,
                    CanMigrate::LlcPinned => {
                        self.counters.cas_llc_pinned += 1;
                        flags.all_pinned = false;
                        flags.llc_pinned |= pull.mig.kind != MigrationType::LlcTask;
                        continue;
                    }
                    CanMigrate::Hot => {
                        flags.all_pinned = false;
                        continue;
                    }
                    CanMigrate::Yes => flags.all_pinned = false,
                }
                let mig = Migration {
                    imbalance,
                    ..pull.mig
                };
                let Some(rest) = lb::detach_amount(&pull.attempt, mig, &view) else {
                    continue;
                };
                if cas.is_some() && view.prefers_dst_llc && src_llc != dst_llc {
                    self.counters.cas_to_pref += 1;
                }
                let t = self.rq.take_queued(id).expect("a queued task");
                self.send(sh, t, pull.dst, PlaceReason::Balance, TaskState::Queued, fx);
                moved += 1;
                nr_running -= 1;
                imbalance = rest;
                if pull.idle == Idle::NewlyIdle || imbalance <= 0 {
                    break;
                }
            }
        }
        if moved > 0 {
            self.publish(sh);
        }
        self.after_detach(sh, pull, moved, flags, fx);
    }

    /// The waiting fair tasks in `detach_tasks()` order: the tail of
    /// `cfs_tasks` first (least recently run), cache-aware by LLC
    /// preference first.
    fn candidates(&self, by_llc: bool, src_llc: u16, dst_llc: u16) -> Vec<TaskId> {
        let mut v: Vec<(u8, u64, TaskId)> = self
            .rq
            .fair
            .iter()
            .filter(|t| !t.killed && !t.stopped)
            .map(|t| {
                let rank = if by_llc {
                    lb::llc_order(t.pref_llc, src_llc, dst_llc)
                } else {
                    0
                };
                (rank, t.last_ran, t.id)
            })
            .collect();
        v.sort();
        v.into_iter().map(|(_, _, id)| id).collect()
    }

    fn task_view(
        &self,
        sh: &Shared<P::TaskState>,
        t: &Task<P::TaskState>,
        dst: CpuId,
        now: u64,
        cost: u64,
        cas: Option<CasTunables>,
    ) -> TaskView {
        let topo = sh.topology();
        let dst_llc = topo.llc_ordinal(dst) as u16;
        let degrades = cas.is_some_and(|tun| {
            self.can_migrate_llc_task(sh, tun, t, self.id, dst) == LlcMig::Forbid
        });
        TaskView {
            allowed_on_dst: t.mask.contains(dst),
            hot: cost > 0 && now.saturating_sub(t.last_ran) < cost,
            load: t.avg.load_avg,
            util: t.avg.util_avg,
            degrades_llc: degrades,
            prefers_dst_llc: t.pref_llc == Some(dst_llc),
        }
    }

    /// `can_migrate_llc_task()`.
    fn can_migrate_llc_task(
        &self,
        sh: &Shared<P::TaskState>,
        tun: CasTunables,
        t: &Task<P::TaskState>,
        src: CpuId,
        dst: CpuId,
    ) -> LlcMig {
        let topo = sh.topology();
        let Some(proc) = t.process else {
            return LlcMig::Unrestricted;
        };
        let (src_l, dst_l) = (topo.llc_ordinal(src), topo.llc_ordinal(dst));
        let pref = {
            let mut g = sh.procs[proc as usize].lock();
            let Some(pc) = g.as_mut() else {
                return LlcMig::Unrestricted;
            };
            let Some(pcpu) = pc.cpu else {
                return LlcMig::Unrestricted;
            };
            if src_l == dst_l {
                return LlcMig::Unrestricted;
            }
            let smt = topo.max_threads_per_core() as u64;
            let llc = topo.llc_cpus(dst).weight() as u64;
            if cas::invalid_llc_nr(&tun, pc.nr_threads, pc.nr_running_avg, smt, llc) {
                pc.cpu = None;
                return LlcMig::Unrestricted;
            }
            topo.llc_ordinal(CpuId::new(pcpu as usize))
        };
        let to_pref = if dst_l == pref {
            true
        } else if src_l == pref {
            false
        } else {
            return LlcMig::Unrestricted;
        };
        let stat = |l: usize| {
            let (u, c) = &sh.llc_stats[l];
            (u.load(Ordering::Relaxed), c.load(Ordering::Relaxed))
        };
        let smt = topo.max_threads_per_core() as u64;
        cas::can_migrate_llc(&tun, smt, stat(src_l), stat(dst_l), t.avg.util_avg, to_pref)
    }

    /// After `detach_tasks()`: `nr_balance_failed` of the destination's
    /// domain, and an active balance when nothing moved and it is needed.
    fn after_detach(
        &mut self,
        sh: &Shared<P::TaskState>,
        pull: Pull,
        moved: u32,
        flags: Flags,
        fx: &mut Effects,
    ) {
        let failed = {
            let mut l = sh.lb[pull.dst.index()].lock();
            let s = &mut l.sd[pull.level];
            if flags.all_pinned {
                // `out_all_pinned`: no failure; back off further.
                s.nr_balance_failed = 0;
                if pull.idle != Idle::NewlyIdle && s.balance_interval_ms < MAX_PINNED_INTERVAL_MS {
                    s.balance_interval_ms *= 2;
                }
                return;
            }
            if moved > 0 {
                s.nr_balance_failed = 0;
                return;
            }
            if pull.idle != Idle::NewlyIdle && !flags.llc_pinned {
                s.nr_balance_failed += 1;
            }
            s.nr_balance_failed
        };
        let attempt = Attempt {
            nr_balance_failed: failed,
            ..pull.attempt
        };
        let stays = self.alb_break_llc(sh, pull.dst);
        if !lb::need_active_balance(&attempt, pull.mig.kind, stays) {
            return;
        }
        let Some(cur) = self.rq.current.as_ref() else {
            return;
        };
        if cur.is_rt() || !cur.mask.contains(pull.dst) || self.lb_own.active_push.is_some() {
            return;
        }
        self.lb_own.active_push = Some((cur.id, pull.dst));
        self.counters.lb_active += 1;
        let r = Resched(cur.id);
        self.resched(r, fx);
    }

    /// `alb_break_llc()`: every task here is in its preferred LLC, and
    /// either it runs alone or moving it out is forbidden.
    fn alb_break_llc(&self, sh: &Shared<P::TaskState>, dst: CpuId) -> bool {
        let Some(tun) = sh.config().balance.kind.cas() else {
            return false;
        };
        let topo = sh.topology();
        if topo.llc_ordinal(self.id) == topo.llc_ordinal(dst) {
            return false;
        }
        let pref = sh.lb[self.id.index()].lock().nr_pref_llc_running;
        let h_nr = sh.fair_nr(self.id);
        if pref == 0 || pref != h_nr {
            return false;
        }
        if sh.load(self.id) <= 1 {
            return true;
        }
        let util = self
            .rq
            .current
            .as_ref()
            .filter(|t| !t.is_rt())
            .map_or(0, |t| t.avg.util_avg);
        let stat = |c: CpuId| {
            let (u, k) = &sh.llc_stats[topo.llc_ordinal(c)];
            (u.load(Ordering::Relaxed), k.load(Ordering::Relaxed))
        };
        let smt = topo.max_threads_per_core() as u64;
        cas::can_migrate_llc(&tun, smt, stat(self.id), stat(dst), util, false) == LlcMig::Forbid
    }

    /// Publishes what the cache-aware balancer reads of this CPU: tasks
    /// preferring each LLC, those in their preferred LLC, the running
    /// task's process.
    pub(crate) fn publish_cas(&self, sh: &Shared<P::TaskState>) {
        let own = sh.topology().llc_ordinal(self.id) as u16;
        let mut l = sh.lb[self.id.index()].lock();
        l.llc_counts.iter_mut().for_each(|c| *c = 0);
        let mut in_pref = 0;
        for t in self.rq.runnable().filter(|t| !t.is_rt()) {
            if let Some(p) = t.pref_llc {
                l.llc_counts[p as usize] += 1;
                in_pref += (p == own) as u32;
            }
        }
        l.nr_pref_llc_running = in_pref;
        l.curr_proc = self.rq.current.as_ref().and_then(|t| t.process);
    }

    /// `account_mm_sched()`: `t`'s time since it was last charged goes to
    /// its process's occupancy here, and its preferred LLC is refreshed.
    pub(crate) fn account_cache(
        &self,
        sh: &Shared<P::TaskState>,
        t: &mut Task<P::TaskState>,
        now: u64,
    ) {
        let Some(tun) = sh.config().balance.kind.cas() else {
            return;
        };
        let Some(proc) = t.process.filter(|_| !t.is_rt()) else {
            return;
        };
        let delta = t.fair.sum_exec.saturating_sub(t.cache_acct);
        t.cache_acct = t.fair.sum_exec;
        let topo = sh.topology();
        let epoch = now / tun.epoch_ns;
        {
            let mut l = sh.lb[self.id.index()].lock();
            l.cpu_rt.bring_to(epoch);
            l.cpu_rt.runtime += delta;
        }
        let mut g = sh.procs[proc as usize].lock();
        let pc = g.get_or_insert_with(|| ProcCache {
            epoch,
            ..ProcCache::new(topo.num_cpus())
        });
        pc.account(self.id.index(), epoch, delta);
        let smt = topo.max_threads_per_core() as u64;
        let llc = topo.llc_cpus(self.id).weight() as u64;
        if epoch.saturating_sub(pc.epoch) > tun.affinity_timeout
            || cas::invalid_llc_nr(&tun, pc.nr_threads, pc.nr_running_avg, smt, llc)
        {
            pc.cpu = None;
        }
        t.pref_llc = pc
            .cpu
            .map(|c| topo.llc_ordinal(CpuId::new(c as usize)) as u16);
        t.pref_cpu = pc.cpu;
    }

    /// `task_tick_cache()` then `task_cache_work()` for the running task.
    fn task_tick_cache(&mut self, sh: &Shared<P::TaskState>, tun: CasTunables, now: u64) {
        let Some(mut t) = self.rq.current.take() else {
            return;
        };
        self.account_cache(sh, &mut t, now);
        let proc = t.process.filter(|_| !t.is_rt());
        self.rq.current = Some(t);
        let Some(proc) = proc else { return };
        let epoch = now / tun.epoch_ns;
        {
            let mut g = sh.procs[proc as usize].lock();
            let Some(pc) = g.as_mut() else { return };
            if pc.epoch >= epoch {
                return;
            }
            pc.epoch = epoch;
        }
        match self.task_cache_work(sh, tun, proc, now) {
            Some(true) => self.counters.cas_scans += 1,
            Some(false) => self.counters.cas_invalid += 1,
            None => {}
        }
    }

    /// `task_cache_work()`: the process's occupancy per LLC; the preferred
    /// CPU moves only to an LLC with more than twice the current one's.
    /// Whether it scanned: `Some(false)` when the process was found too
    /// wide for an LLC (no preference), `None` when it was not due.
    fn task_cache_work(
        &self,
        sh: &Shared<P::TaskState>,
        tun: CasTunables,
        proc: u32,
        now: u64,
    ) -> Option<bool> {
        let topo = sh.topology();
        let epoch = now / tun.epoch_ns;
        let smt = topo.max_threads_per_core() as u64;
        let llc_size = topo.llc_cpus(self.id).weight() as u64;
        let snapshot = {
            let mut g = sh.procs[proc as usize].lock();
            let pc = g.as_mut()?;
            if now < pc.next_scan {
                return None;
            }
            pc.next_scan = now + tun.epoch_ns;
            if cas::invalid_llc_nr(&tun, pc.nr_threads, pc.nr_running_avg, smt, llc_size) {
                pc.cpu = None;
                return Some(false);
            }
            pc.clone()
        };
        let mut llcs = Vec::with_capacity(topo.llcs().len());
        let mut nr_running = 0;
        for llc in topo.llcs() {
            let (mut a_occ, mut m_occ, mut m_cpu) = (0, 0, None);
            for c in llc.cpus.iter() {
                let (rt, curr) = {
                    let mut l = sh.lb[c.index()].lock();
                    l.cpu_rt.bring_to(epoch);
                    (l.cpu_rt.runtime, l.curr_proc)
                };
                let occ = cas::fraction(snapshot.runtime_at(c.index(), epoch), rt);
                a_occ += occ;
                if occ > m_occ {
                    m_occ = occ;
                    m_cpu = Some(c.index() as u32);
                }
                nr_running += (curr == Some(proc)) as u64;
            }
            let first = llc.cpus.first().expect("an LLC has CPUs");
            llcs.push((topo.llc_ordinal(first) as u16, a_occ, m_cpu));
        }
        let cur_llc = snapshot
            .cpu
            .map(|c| topo.llc_ordinal(CpuId::new(c as usize)) as u16);
        let new = cas::choose_preferred(&llcs, cur_llc, snapshot.cpu);
        let mut g = sh.procs[proc as usize].lock();
        if let Some(pc) = g.as_mut() {
            pc.cpu = new;
            cas::update_avg_scale(&mut pc.nr_running_avg, nr_running, llc_size);
        }
        Some(true)
    }

    /// A task of `proc` starts or ends (`get_nr_threads()`).
    pub(crate) fn count_thread(&self, sh: &Shared<P::TaskState>, proc: Option<u32>, delta: i32) {
        let Some(p) = proc else { return };
        let Some(slot) = sh.procs.get(p as usize) else {
            return;
        };
        let mut g = slot.lock();
        let pc = g.get_or_insert_with(|| ProcCache::new(sh.topology().num_cpus()));
        pc.nr_threads = (pc.nr_threads as i32 + delta).max(0) as u32;
    }
}

/// `detach_tasks()`' flags (`LBF_ALL_PINNED`, `LBF_LLC_PINNED`).
#[derive(Clone, Copy, Debug, Default)]
struct Flags {
    all_pinned: bool,
    llc_pinned: bool,
}
