//! The kernel's migrations outside a wake held against the model's load
//! balancer ([`schedlab_sim::sched::linux::lb`], the decisions the
//! simulator's `balance = "linux"` makes), from the state the placement
//! shadow rebuilds ([`super::place`]).
//!
//! * **A kernel move** is a `sched_migrate_task` of a recorded thread that
//!   is runnable and has no `sched_waking` waiting for its `sched_wakeup`
//!   (a wake's move is placement's): the balancer's, or an exec's or an
//!   affinity change's, which the record does not tell apart. The model's
//!   balancer is asked, as the destination CPU, whether it would have moved
//!   that task then: each domain of the destination, bottom up, through
//!   [`lb::decide`] (`should_we_balance()`, the busiest group and CPU);
//!   the first level that pulls decides. It *would* when it pulls from
//!   the task's CPU and `can_migrate_task()` lets the task go (for a
//!   running task, moved by the kernel's active balance: when the model
//!   names its CPU the busiest, as its own active balance follows then once
//!   balancing there has failed enough).
//! * **The destination's kind** (`enum cpu_idle_type`): idle when nothing
//!   runs there (periodic or nohz balancing on an idle CPU); newly idle
//!   when the next `sched_switch` there puts out a thread that blocked
//!   (`sched_balance_newidle()` runs with that thread already dequeued, so
//!   the destination counts as empty); else busy.
//! * **A newly idle miss** is a CPU whose thread blocked and that went idle
//!   (the kernel pulled nothing), where the model's newly idle balance
//!   ([`LbOwn::newidle_walk`], with `avg_idle` learnt from the record's idle
//!   periods by [`LbOwn::idled`], `NI_RANDOM`'s dice as the model throws
//!   them) would have pulled a waiting recorded thread: `model_extra`; and
//!   `model_extra_every_domain`, the same walk trying every domain
//!   `avg_idle` allows (the balance decision without the dice, which the
//!   kernel's own throws cannot be matched to).
//!
//! Simplified, and said where it shows: `nr_balance_failed` is unknown
//! (0: a first attempt, so a cache-hot task stays), a delayed task's
//! refusal (`DELAY_DEQUEUE`) is not applied, which of the source's waiting
//! tasks would go is not compared, periodic balancing's intervals are not
//! checked (the kernel balanced then; the question is what the model
//! would have done), and every mask is the whole machine.

use std::collections::BTreeMap;

use schedlab_sim::sched::linux::balance::LbOwn;
use schedlab_sim::sched::linux::fork::domains;
use schedlab_sim::sched::linux::lb::{
    self, Attempt, CanMigrate, CpuStat, Idle, LbEnv, MigrationType, SdParams, TaskView, Verdict,
};
use schedlab_sim::PrevState;
use schedlab_topology::{CpuId, Topology};
use serde::Serialize;

use super::place::{self, Placement, State, Watch};
use super::Ev;

/// How the model's balancer compares with the kernel's migrations.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Balance {
    /// The kernel's migrations of recorded threads outside a wake.
    pub moves: u64,
    /// Of them, those the model's balancer would have made then.
    pub model_would: u64,
    /// Newly idle CPUs the kernel left idle where the model's newly idle
    /// balance would have pulled a recorded thread.
    pub model_extra: u64,
    /// The same, the model's newly idle balance trying every domain its
    /// `avg_idle` allows (no `NI_RANDOM` dice): the balance decision
    /// alone.
    pub model_extra_every_domain: u64,
    /// Newly idle moments seen (a CPU whose thread blocked going idle).
    pub newidle: u64,
    /// The kernel's moves by the destination's kind (`idle`, `newidle`,
    /// `busy`) and what the model said (`would`, `active` (a running task,
    /// the model naming its CPU the busiest), `hot` (can_migrate_task()
    /// refused a cache-hot task), `other-src` (it would pull from another
    /// CPU), `not-this-cpu` (should_we_balance() leaves it to another),
    /// `balanced`): where to look for the mechanism.
    pub by: BTreeMap<String, u64>,
}

/// The balancer's view the shadow keeps beside the placement's state.
pub(super) struct BalanceState {
    /// Each CPU's `avg_idle` and newly idle costs, as the model keeps them.
    own: Vec<LbOwn>,
    /// When each CPU went idle.
    idle_since: Vec<Option<u64>>,
    /// When each recorded thread last stopped running (`exec_start`).
    last_ran: BTreeMap<i32, u64>,
    migration_cost: u64,
    out: Balance,
}

/// The model's wake placement beside the kernel's ([`place::compare`]) and
/// its balancer beside the kernel's other migrations, over `evs` in one
/// walk of the rebuilt state.
pub fn compare(
    evs: &[Ev],
    ours: &dyn Fn(i32) -> bool,
    topo: &Topology,
    on_queue: &[bool],
) -> (Placement, Balance) {
    let balance = schedlab_sim::sched::Config::for_topology(topo).balance;
    let mut b = BalanceState::new(topo, &balance);
    let p = place::walk(evs, ours, topo, on_queue, &mut b);
    (p, b.out)
}

impl BalanceState {
    fn new(topo: &Topology, balance: &schedlab_sim::sched::Balance) -> BalanceState {
        let migration_cost = balance.migration_cost_ns;
        BalanceState {
            own: topo
                .cpu_ids()
                .map(|c| LbOwn::new(topo, c, balance))
                .collect(),
            idle_since: vec![None; topo.num_cpus()],
            last_ran: BTreeMap::new(),
            migration_cost,
            out: Balance::default(),
        }
    }

    /// `can_migrate_task()` for recorded thread `task` waiting on a CPU,
    /// toward another, at `now`.
    fn may_go(
        &self,
        s: &State,
        now: u64,
        task: i32,
        kind: MigrationType,
        attempt: &Attempt,
    ) -> CanMigrate {
        let hot = self
            .last_ran
            .get(&task)
            .is_some_and(|&t| lb::task_hot(now, t, self.migration_cost));
        let avg = s.task_avg.get(&task);
        let view = TaskView {
            allowed_on_dst: true,
            hot,
            load: avg.map_or(0, |a| a.load_avg),
            util: avg.map_or(0, |a| a.util_avg),
            degrades_llc: false,
            prefers_dst_llc: false,
        };
        lb::can_migrate_task(attempt, kind, &view)
    }
}

/// The hooks: each kernel move asked of the model's balancer, each newly
/// idle CPU of the model's newly idle balance.
impl Watch for BalanceState {
    /// `evs[i]`, the kernel moving `task` from `from` to `to` at `at`,
    /// before the state takes it in: a balance move when the thread is
    /// runnable and not being woken.
    fn migrate(&mut self, s: &mut State, evs: &[Ev], i: usize, mv: (u64, i32, usize, usize)) {
        let (at, task, from, to) = mv;
        let queued = s.runnable.get(&task) == Some(&from);
        if !(s.ours)(task) || !queued || s.waking.contains_key(&task) || to >= s.running.len() {
            return;
        }
        s.show_pelt(at, task);
        let idle = dst_kind(evs, i, to, s.running[to]);
        let said = match s.model_pull(to, idle, 0..4) {
            Ok((src, _, _)) if src.index() != from => "other-src",
            Ok(_) if s.running[from] == task => "active",
            Ok((_, kind, attempt)) => match self.may_go(s, at, task, kind, &attempt) {
                CanMigrate::Yes => "would",
                _ => "hot",
            },
            Err(why) => why,
        };
        let kind = match idle {
            Idle::Idle => "idle",
            Idle::NewlyIdle => "newidle",
            Idle::NotIdle => "busy",
        };
        let b = &mut self.out;
        b.moves += 1;
        b.model_would += u64::from(matches!(said, "would" | "active"));
        *b.by.entry(format!("{kind} {said}")).or_default() += 1;
    }

    /// A `sched_switch` on `cpu` at `at`, before the state takes it in:
    /// a newly idle miss is counted, `avg_idle` learns an idle that ended,
    /// and `exec_start` of the thread put out is kept.
    fn switch(&mut self, s: &mut State, sw: (u64, usize, i32, PrevState, i32)) {
        let (at, cpu, prev, st, next) = sw;
        if cpu >= s.running.len() {
            return;
        }
        if prev != 0 {
            self.last_ran.insert(prev, at);
        }
        if prev == 0 {
            if let Some(since) = self.idle_since[cpu].take() {
                self.own[cpu].idled(at.saturating_sub(since));
            }
        }
        if next == 0 && prev != 0 && st != PrevState::Runnable {
            self.out.newidle += 1;
            s.show_pelt(at, prev);
            let overloaded = (0..s.running.len()).any(|c| s.nr_running(c) > 1);
            let pull_at = |level: usize| {
                let Ok((src, kind, attempt)) = s.model_pull(cpu, Idle::NewlyIdle, level..level + 1)
                else {
                    return false;
                };
                s.waiting_on(src.index())
                    .any(|t| self.may_go(s, at, t, kind, &attempt) == CanMigrate::Yes)
            };
            // The model as it runs (NI_RANDOM's dice, kept), and the same
            // walk trying every domain (a copy, not kept).
            let mut own = self.own[cpu];
            let pulls = own.newidle_walk(overloaded, pull_at);
            let mut every = self.own[cpu];
            every.newidle.ni_random = false;
            let would = every.newidle_walk(overloaded, pull_at);
            self.own[cpu] = own;
            self.out.model_extra += u64::from(pulls);
            self.out.model_extra_every_domain += u64::from(would);
        }
        if next == 0 {
            self.idle_since[cpu] = Some(at);
        }
    }
}

/// The kind of a balance toward `to` at `evs[i]`: its running thread
/// (0: idle), and whether the next `sched_switch` there puts it out
/// blocked.
fn dst_kind(evs: &[Ev], i: usize, to: usize, running: i32) -> Idle {
    if running == 0 {
        return Idle::Idle;
    }
    for ev in &evs[i + 1..] {
        if let Ev::Switch {
            cpu,
            prev,
            prev_state,
            ..
        } = *ev
        {
            if cpu == to {
                let blocked = prev == running && prev_state != PrevState::Runnable;
                return if blocked {
                    Idle::NewlyIdle
                } else {
                    Idle::NotIdle
                };
            }
        }
    }
    Idle::NotIdle
}

impl State<'_> {
    /// What a balancing CPU reads of `c` at the last `show_pelt()`;
    /// `empty`: a newly idle destination, its blocking thread dequeued.
    fn cpu_stat(&self, c: usize, empty: Option<usize>) -> CpuStat {
        let nr = if empty == Some(c) {
            0
        } else {
            self.nr_running(c)
        };
        let avg = &self.cpu_avg[c];
        CpuStat {
            nr_running: nr,
            h_nr_runnable: nr,
            load: avg.load_avg,
            util: avg.util_avg,
            runnable: avg.runnable_avg,
            idle: nr == 0 && (empty == Some(c) || self.running[c] == 0),
            pref_dst_llc: 0,
        }
    }

    /// The model's balancer's first pull toward `dst` of kind `idle`,
    /// domain by domain, bottom up (`levels`: the domains it tries, by
    /// index), or why none.
    fn model_pull(
        &self,
        dst: usize,
        idle: Idle,
        levels: std::ops::Range<usize>,
    ) -> Result<(CpuId, MigrationType, Attempt), &'static str> {
        let (doms, n) = domains(self.topo, CpuId::new(dst));
        let empty = (idle == Idle::NewlyIdle).then_some(dst);
        let stat = |c: CpuId| self.cpu_stat(c.index(), empty);
        for sd in doms.iter().take(n).skip(levels.start).take(levels.len()) {
            let Some(sd) = *sd else { continue };
            let env = LbEnv {
                sd,
                params: SdParams::of(&sd),
                dst: CpuId::new(dst),
                idle,
                nr_balance_failed: 0,
                cas: None,
            };
            match lb::decide(&env, self.topo, &stat) {
                Verdict::Pull { src, mig, .. } => return Ok((src, mig.kind, env.attempt())),
                Verdict::NotThisCpu if idle != Idle::NewlyIdle => return Err("not-this-cpu"),
                _ => {}
            }
        }
        Err("balanced")
    }

    /// The recorded threads waiting (runnable, not running) on `cpu`.
    fn waiting_on(&self, cpu: usize) -> impl Iterator<Item = i32> + '_ {
        self.runnable
            .iter()
            .filter(move |&(&t, &c)| c == cpu && self.running[cpu] != t)
            .map(|(&t, _)| t)
    }
}

#[cfg(test)]
mod tests {
    use super::super::place::tests::{sw, two};
    use super::*;

    fn ours(t: i32) -> bool {
        (10..=12).contains(&t)
    }

    /// cpu0 runs thread 10 with 11 waiting behind it (it ran first and was
    /// preempted at 1.1 µs); cpu1 runs 12.
    fn start() -> Vec<Ev> {
        vec![
            sw(1_000, 0, 0, PrevState::Runnable, 11),
            sw(1_050, 1, 0, PrevState::Runnable, 12),
            sw(1_100, 0, 11, PrevState::Runnable, 10),
        ]
    }

    /// At `at`, the kernel's newly idle balance on cpu1 (12 blocking) pulls
    /// 11 from cpu0 and runs it.
    fn newidle_pull(at: u64) -> Vec<Ev> {
        let mut evs = start();
        evs.push(Ev::Migrate {
            at,
            task: 11,
            from: 0,
            to: 1,
        });
        evs.push(sw(at + 1, 1, 12, PrevState::Blocked, 11));
        evs
    }

    /// Worked from `sched_balance_rq()` at the one domain (an LLC of two
    /// single-CPU groups, so no `prefer_sibling`): cpu1 newly idle, so
    /// empty; cpu0 runs two, of little utilization: group_has_spare both.
    /// find_src_group: not overloaded but the destination is idle, the
    /// busiest group is one CPU and runs two: on to calculate_imbalance,
    /// sibling_imbalance (one core each) 2 - 0 = 2, halved: one task;
    /// find_src_rq: cpu0. can_migrate_task(): 11 last ran 1.1 µs in, so at
    /// 2 µs it is cache-hot (under the 500 µs migration cost) and stays on
    /// a first attempt; at 1 ms it goes.
    #[test]
    fn a_newly_idle_pull_is_one_the_model_makes_unless_the_task_is_cache_hot() {
        let (_, b) = compare(&newidle_pull(1_000_000), &ours, &two(), &[]);
        assert_eq!(
            (b.moves, b.model_would),
            (1, 1),
            "a pull of a task that last ran 1 ms ago: {b:?}"
        );
        assert_eq!(b.by, [("newidle would".to_string(), 1)].into());
        let (_, b) = compare(&newidle_pull(2_000), &ours, &two(), &[]);
        assert_eq!((b.moves, b.model_would), (1, 0), "{b:?}");
        assert_eq!(
            b.by,
            [("newidle hot".to_string(), 1)].into(),
            "900 ns after it ran, 11 is cache-hot"
        );
    }

    /// The same state, but cpu1 goes idle and the kernel pulls nothing:
    /// the model's newly idle walk (avg_idle starts at twice the migration
    /// cost, 1 ms, over the LLC domain's estimated cost of 200 ns; some
    /// CPU runs two) would have pulled 11, unless it is cache-hot.
    #[test]
    fn a_cpu_left_idle_where_the_model_would_pull_is_counted() {
        let mut evs = start();
        evs.push(sw(1_000_000, 1, 12, PrevState::Blocked, 0));
        let (_, b) = compare(&evs, &ours, &two(), &[]);
        assert_eq!(
            (b.newidle, b.model_extra_every_domain, b.moves),
            (1, 1, 0),
            "one newly idle CPU the model would have fed: {b:?}"
        );
        let mut evs = start();
        evs.push(sw(2_000, 1, 12, PrevState::Blocked, 0));
        let (_, b) = compare(&evs, &ours, &two(), &[]);
        assert_eq!(
            (b.newidle, b.model_extra_every_domain, b.model_extra),
            (1, 0, 0),
            "11 is cache-hot: {b:?}"
        );
    }

    /// A move between `sched_waking` and `sched_wakeup` is the wake's
    /// (placement's), not the balancer's.
    #[test]
    fn a_move_inside_a_wake_is_not_a_balance_move() {
        let mut evs = vec![
            sw(1_000, 0, 0, PrevState::Runnable, 11),
            sw(2_000, 0, 11, PrevState::Blocked, 10),
        ];
        evs.push(Ev::Waking {
            at: 3_000,
            cpu: 0,
            task: 11,
            waker: 10,
            prev: 0,
        });
        evs.push(Ev::Migrate {
            at: 3_001,
            task: 11,
            from: 0,
            to: 1,
        });
        let (_, b) = compare(&evs, &ours, &two(), &[]);
        assert_eq!(b.moves, 0, "{b:?}");
    }
}
