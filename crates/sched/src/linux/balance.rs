//! Linux's load balancer as a [`Balancer`] ([`LinuxLb`], `balance =
//! "linux"`; cache-aware scheduling adds to it in `linux::cache`): the
//! decisions are `linux::lb`'s and `linux::cas`'s; this is who makes them,
//! when, and how the tasks move.
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
//!   `max_idle_balance_cost`). With `NI_RANDOM` (6.19's default) each
//!   domain is tried only with a probability that follows its recent
//!   success rate ([`newidle`]).
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
//!   goes on ([`Balancer::keeps_idle_tick`]); else it stops and the CPU
//!   joins the idle CPUs the idle load balancer serves. The governor's own
//!   prediction (recent idle lengths, the next timer) is simplified to
//!   that average.

use alloc::sync::Arc;
use alloc::vec::Vec;

use schedlab_topology::{CpuId, Level, Topology};

use super::lb::{
    self, Attempt, CanMigrate, CasEnv, CpuStat, Idle, LbEnv, Migration, MigrationType, SdParams,
    TaskView, Verdict, JIFFY_NS, MAX_PINNED_INTERVAL_MS, SCHED_NR_MIGRATE,
};
use crate::balancer::{Balancer, Cx, Request, Requests};
use crate::config::{CasTunables, Config};
use crate::effects::PlaceReason;
use crate::policy::PolicyState;
use crate::shared::Shared;
use crate::sync::Ordering;
use crate::task::{Task, TaskId};

pub mod newidle;
mod state;
pub use state::{LbCpu, LbMsg, LbOwn, LbShared, Pull, SdState, NEWIDLE_NS_PER_CPU};

/// Linux's balancer on one CPU: its own state and the machine's shared
/// part.
#[derive(Clone, Debug)]
pub struct LinuxLb {
    pub(crate) sh: Arc<LbShared>,
    own: LbOwn,
}

impl LinuxLb {
    /// One per CPU, sharing one [`LbShared`].
    pub(crate) fn machine(
        topo: &Topology,
        config: &Config,
        cas: Option<CasTunables>,
        max_tasks: usize,
    ) -> Vec<LinuxLb> {
        let sh = Arc::new(LbShared::new(topo, cas, max_tasks));
        topo.cpu_ids()
            .map(|c| LinuxLb {
                sh: sh.clone(),
                own: LbOwn::new(topo, c, &config.balance),
            })
            .collect()
    }
}

impl Balancer for LinuxLb {
    type Msg = LbMsg;

    fn for_machine(topo: &Topology, config: &Config, max_tasks: usize) -> Vec<LinuxLb> {
        LinuxLb::machine(topo, config, None, max_tasks)
    }

    fn name(&self) -> &str {
        "linux"
    }

    /// The tick's part (`sched_balance_trigger()`): periodic balancing when
    /// due (`CPU_IDLE` on an idle CPU whose tick goes on), then, on a busy
    /// CPU, the idle balancer's kick.
    fn tick<S: PolicyState>(&mut self, cx: &mut Cx<'_, S>, now: u64) -> Requests<LbMsg> {
        let mut req = Requests::none();
        let idle = cx.rq.current.is_none() && cx.queued() == 0;
        let due = now >= self.sh.lb[cx.cpu.index()].lock().next_balance;
        if due {
            let mut planned = Planned::new();
            let kind = if idle { Idle::Idle } else { Idle::NotIdle };
            self.balance_domains(cx, cx.cpu, kind, now, &mut planned, &mut req);
        }
        if idle {
            return req; // `rq->idle_balance`: no kick from an idle CPU
        }
        self.nohz_balancer_kick(cx, now, &mut req);
        req
    }

    /// `sched_balance_newidle()`, from a pass with nothing to run.
    fn newly_idle<S: PolicyState>(&mut self, cx: &mut Cx<'_, S>, now: u64) -> Requests<LbMsg> {
        let mut req = Requests::none();
        self.own.idle_stamp = Some(now);
        let mut planned = Planned::new();
        let mut own = self.own;
        own.newidle_walk(cx.sh.overloaded(), |i| {
            let before = cx.counters.lb_pulls;
            self.balance_rq(cx, cx.cpu, i, Idle::NewlyIdle, &mut planned, &mut req);
            cx.counters.lb_pulls > before
        });
        self.own = own;
        req
    }

    /// The pass picked a task after idling: `avg_idle` learns how long the
    /// idle lasted (capped at twice the balance cost).
    fn idle_ended<S: PolicyState>(&mut self, _cx: &mut Cx<'_, S>, now: u64) {
        let Some(stamp) = self.own.idle_stamp.take() else {
            return;
        };
        self.own.idled(now.saturating_sub(stamp));
    }

    fn handle<S: PolicyState>(
        &mut self,
        cx: &mut Cx<'_, S>,
        msg: LbMsg,
        now: u64,
    ) -> Requests<LbMsg> {
        let mut req = Requests::none();
        match msg {
            LbMsg::Pull(pull) => self.handle_pull(cx, pull, now, &mut req),
            LbMsg::NohzKick => self.nohz_idle_balance(cx, now, &mut req),
        }
        req
    }

    /// Whether this CPU, idle, keeps its tick: its recent idles
    /// (`avg_idle`) are shorter than a tick, so the idle governor would
    /// not stop it.
    fn keeps_idle_tick(&self, config: &Config) -> bool {
        config.balance.periodic && self.own.avg_idle < config.fair.tick_ns
    }
}

/// Tasks a balance pass expects to move, counted against the published
/// loads: `(cpu, change)`.
type Planned = Vec<(CpuId, i32)>;

impl LinuxLb {
    /// What a balancing CPU reads of `c`, with the pulls planned so far.
    fn cpu_stat<S: PolicyState>(
        &self,
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
                self.sh.lb[c.index()]
                    .lock()
                    .llc_counts
                    .get(l as usize)
                    .copied()
                    .unwrap_or(0) as u32
            }),
        }
    }

    /// The cache-aware environment for a balance toward `dst`.
    fn cas_env(&self, topo: &Topology, tun: CasTunables, dst: CpuId) -> CasEnv {
        CasEnv {
            tun,
            smt_threads: topo.max_threads_per_core() as u64,
            dst_llc: topo.llc_ordinal(dst) as u16,
            llc_stats: (0..self.sh.llc_stats.len())
                .map(|l| self.sh.llc_stat(l))
                .collect(),
        }
    }

    /// `sched_balance_domains()` for `cpu` (this CPU, or an idle one the
    /// idle balancer stands in for).
    fn balance_domains<S: PolicyState>(
        &mut self,
        cx: &mut Cx<'_, S>,
        cpu: CpuId,
        idle: Idle,
        now: u64,
        planned: &mut Planned,
        req: &mut Requests<LbMsg>,
    ) {
        let ncpus = cx.sh.topology().num_cpus();
        let n = self.sh.lb[cpu.index()].lock().n;
        let busy = idle == Idle::NotIdle;
        let mut next = u64::MAX;
        for i in 0..n {
            let st = self.sh.lb[cpu.index()].lock().sd[i];
            let mut interval = lb::balance_interval_ns(st.balance_interval_ms, busy, ncpus);
            let mut last = st.last_balance;
            if now >= st.last_balance + interval {
                let go_on = self.balance_rq(cx, cpu, i, idle, planned, req);
                last = now;
                let mut l = self.sh.lb[cpu.index()].lock();
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
            self.sh.lb[cpu.index()].lock().next_balance = next;
        }
    }

    /// `sched_balance_rq()` at `cpu`'s domain `i`, up to the pull request.
    /// Returns `continue_balancing`.
    fn balance_rq<S: PolicyState>(
        &mut self,
        cx: &mut Cx<'_, S>,
        cpu: CpuId,
        i: usize,
        idle: Idle,
        planned: &mut Planned,
        req: &mut Requests<LbMsg>,
    ) -> bool {
        let topo = cx.sh.topology();
        let (sd, st) = {
            let l = self.sh.lb[cpu.index()].lock();
            (l.doms[i].expect("a domain below the count"), l.sd[i])
        };
        let cas = self.sh.cas.map(|t| self.cas_env(topo, t, cpu));
        let dst_llc = cas.as_ref().map(|c| c.dst_llc);
        let env = LbEnv {
            sd,
            params: SdParams::of(&sd),
            dst: cpu,
            idle,
            nr_balance_failed: st.nr_balance_failed,
            cas,
        };
        let me = if idle == Idle::NotIdle { cx.cpu } else { cpu };
        let sh = cx.sh;
        let stat = |c: CpuId| self.cpu_stat(sh, c, me, dst_llc, planned);
        let (busiest, mig, sds) = match lb::decide(&env, topo, &stat) {
            Verdict::NotThisCpu => {
                self.balanced(cpu, i, idle, &env);
                return false;
            }
            Verdict::Balanced(sds) => {
                self.record_llc_stats(topo, &env, &sds);
                self.balanced(cpu, i, idle, &env);
                return true;
            }
            Verdict::Pull { src, mig, sds } => (src, mig, sds),
        };
        self.record_llc_stats(topo, &env, &sds);
        {
            let mut l = self.sh.lb[cpu.index()].lock();
            l.sd[i].balance_interval_ms = env.params.min_interval_ms;
        }
        planned.push((busiest, -1));
        planned.push((cpu, 1));
        cx.counters.lb_pulls += 1;
        let pull = Pull {
            dst: cpu,
            level: i,
            mig,
            idle,
            attempt: env.attempt(),
        };
        req.push(Request::Post {
            to: busiest,
            msg: LbMsg::Pull(pull),
        });
        true
    }

    /// `record_sg_llc_stats()`: each LLC's utilization for cache-aware
    /// scheduling's guard, from a periodic balance of the level above the
    /// LLCs.
    fn record_llc_stats(&self, topo: &Topology, env: &LbEnv, sds: &lb::SdStats) {
        if env.idle == Idle::NewlyIdle || env.sd.child != Some(Level::Llc) || env.cas.is_none() {
            return;
        }
        for g in &sds.groups {
            if let Some(first) = g.span.first() {
                let (u, c) = &self.sh.llc_stats[topo.llc_ordinal(first)];
                u.store(g.util, Ordering::Relaxed);
                c.store(g.capacity, Ordering::Relaxed);
            }
        }
    }

    /// `out_balanced`: no failure to count; back off the interval, except
    /// newly idle.
    fn balanced(&self, cpu: CpuId, i: usize, idle: Idle, env: &LbEnv) {
        let mut l = self.sh.lb[cpu.index()].lock();
        let s = &mut l.sd[i];
        s.nr_balance_failed = 0;
        if idle != Idle::NewlyIdle && s.balance_interval_ms < env.params.max_interval_ms {
            s.balance_interval_ms *= 2;
        }
    }

    /// `nohz_balancer_kick()` from a busy CPU's tick.
    fn nohz_balancer_kick<S: PolicyState>(
        &mut self,
        cx: &mut Cx<'_, S>,
        now: u64,
        req: &mut Requests<LbMsg>,
    ) {
        if now < self.sh.nohz_next.load(Ordering::Relaxed) {
            return;
        }
        let (sh, me) = (cx.sh, cx.cpu);
        let topo = sh.topology();
        let m = sh.machine(me, now);
        let stopped = |c: CpuId| self.sh.lb[c.index()].lock().tick_stopped;
        let idle = |c: CpuId| c != me && m.sleeping_unrung(c) && sh.load(c) == 0;
        let Some(ilb) = topo.cpu_ids().find(|&c| idle(c) && stopped(c)) else {
            return;
        };
        // `nr_busy_cpus`: the LLC's CPUs not idle with their tick stopped.
        let busy_in_llc = topo
            .llc_cpus(me)
            .iter()
            .filter(|&c| !(m.doorbell(c).asleep() && stopped(c)))
            .count();
        if sh.load(me) < 2 && busy_in_llc <= 1 {
            return;
        }
        self.sh.nohz_next.store(now + JIFFY_NS, Ordering::Relaxed);
        cx.counters.lb_nohz_kicks += 1;
        req.push(Request::Post {
            to: ilb,
            msg: LbMsg::NohzKick,
        });
    }

    /// `_nohz_idle_balance()` on the kicked CPU: each idle CPU due for a
    /// balance, from the one after this on, this one last.
    fn nohz_idle_balance<S: PolicyState>(
        &mut self,
        cx: &mut Cx<'_, S>,
        now: u64,
        req: &mut Requests<LbMsg>,
    ) {
        let (sh, me) = (cx.sh, cx.cpu);
        let topo = sh.topology();
        let mut planned = Planned::new();
        let mut next = now + 60_000 * JIFFY_NS;
        let after = CpuId::new((me.index() + 1) % topo.num_cpus());
        for c in topo.cpus().iter_from(after) {
            if cx.rq.current.is_some() || cx.queued() > 0 || sh.has_mail(me) {
                break; // this CPU got work: stop balancing for the others
            }
            let s = self.cpu_stat(sh, c, me, None, &planned);
            // `nohz.idle_cpus_mask`: idle with the tick stopped (a CPU
            // whose tick goes on balances itself).
            if !s.idle || (c != me && !self.sh.lb[c.index()].lock().tick_stopped) {
                continue;
            }
            if now >= self.sh.lb[c.index()].lock().next_balance {
                self.balance_domains(cx, c, Idle::Idle, now, &mut planned, req);
            }
            next = next.min(self.sh.lb[c.index()].lock().next_balance);
        }
        self.sh.nohz_next.store(next, Ordering::Relaxed);
    }

    /// On the busiest CPU: `detach_tasks()` for a pull (the tasks it sends
    /// to the destination are requests), then the bookkeeping and maybe an
    /// active balance.
    fn handle_pull<S: PolicyState>(
        &mut self,
        cx: &mut Cx<'_, S>,
        pull: Pull,
        now: u64,
        req: &mut Requests<LbMsg>,
    ) {
        let topo = cx.sh.topology();
        let cas = self.sh.cas;
        let (src_llc, dst_llc) = (
            topo.llc_ordinal(cx.cpu) as u16,
            topo.llc_ordinal(pull.dst) as u16,
        );
        let cost = cx.sh.config().balance.migration_cost_ns;
        let mut nr_running = cx.sh.load(cx.cpu);
        let mut flags = Flags::default();
        let mut moved = 0;
        let mut imbalance = pull.mig.imbalance;
        if nr_running > 1 && imbalance > 0 {
            flags.all_pinned = true;
            let cands = candidates(cx, cas.is_some() && src_llc != dst_llc, src_llc, dst_llc);
            let loop_max = SCHED_NR_MIGRATE.min(nr_running);
            for (n, id) in cands.into_iter().enumerate() {
                if (pull.idle.any() && nr_running <= 1) || n as u32 >= loop_max {
                    break;
                }
                let Some(t) = cx.queued_fair().find(|t| t.id == id) else {
                    continue;
                };
                let view = self.task_view(cx, t, pull.dst, now, cost);
                match lb::can_migrate_task(&pull.attempt, pull.mig.kind, &view) {
                    CanMigrate::Pinned => continue,
                    CanMigrate::LlcPinned => {
                        cx.counters.cas_llc_pinned += 1;
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
                    cx.counters.cas_to_pref += 1;
                }
                req.push(Request::Send {
                    task: id,
                    to: pull.dst,
                    reason: PlaceReason::Balance,
                });
                moved += 1;
                nr_running -= 1;
                imbalance = rest;
                if pull.idle == Idle::NewlyIdle || imbalance <= 0 {
                    break;
                }
            }
        }
        self.after_detach(cx, pull, moved, flags, req);
    }

    fn task_view<S: PolicyState>(
        &self,
        cx: &Cx<'_, S>,
        t: &Task<S>,
        dst: CpuId,
        now: u64,
        cost: u64,
    ) -> TaskView {
        let dst_llc = cx.sh.topology().llc_ordinal(dst) as u16;
        let degrades = self.sh.cas.is_some_and(|tun| {
            self.sh
                .can_migrate_llc_task(cx.sh.topology(), tun, t, cx.cpu, dst)
                == super::cas::LlcMig::Forbid
        });
        TaskView {
            allowed_on_dst: t.mask.contains(dst),
            hot: lb::task_hot(now, t.last_ran, cost),
            load: t.avg.load_avg,
            util: t.avg.util_avg,
            degrades_llc: degrades,
            prefers_dst_llc: t.pref_llc == Some(dst_llc),
        }
    }

    /// After `detach_tasks()`: `nr_balance_failed` of the destination's
    /// domain, and an active balance when nothing moved and it is needed.
    /// (When a task moved, only the failure count is written, so this may
    /// run before the core carries the sends out; when none moved, the
    /// loads it reads are as they were.)
    fn after_detach<S: PolicyState>(
        &mut self,
        cx: &mut Cx<'_, S>,
        pull: Pull,
        moved: u32,
        flags: Flags,
        req: &mut Requests<LbMsg>,
    ) {
        let failed = {
            let mut l = self.sh.lb[pull.dst.index()].lock();
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
        let stays = self.sh.alb_break_llc(cx, pull.dst);
        if !lb::need_active_balance(&attempt, pull.mig.kind, stays) {
            return;
        }
        let Some(cur) = cx.current() else {
            return;
        };
        if cur.is_rt() || !cur.mask.contains(pull.dst) || cx.pushing().is_some() {
            return;
        }
        cx.counters.lb_active += 1;
        req.push(Request::PushRunning {
            task: cur.id,
            to: pull.dst,
        });
    }
}

/// The waiting fair tasks in `detach_tasks()` order: the tail of
/// `cfs_tasks` first (least recently run), cache-aware by LLC preference
/// first.
fn candidates<S: PolicyState>(
    cx: &Cx<'_, S>,
    by_llc: bool,
    src_llc: u16,
    dst_llc: u16,
) -> Vec<TaskId> {
    let mut v: Vec<(u8, u64, TaskId)> = cx
        .queued_fair()
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

/// `detach_tasks()`' flags (`LBF_ALL_PINNED`, `LBF_LLC_PINNED`).
#[derive(Clone, Copy, Debug, Default)]
struct Flags {
    all_pinned: bool,
    llc_pinned: bool,
}
