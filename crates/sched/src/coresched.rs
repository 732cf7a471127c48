//! Core scheduling: the SMT siblings of one core run tasks of one cookie at
//! a time, or idle (docs/ARCHITECTURE.md, core scheduling). The pick is core-wide, written
//! after Linux's `pick_next_task()` under CONFIG_SCHED_CORE
//! (kernel/sched/core.c), with `pick_task_fair()`, `update_curr()`,
//! `set_next_entity()`/`set_protect_slice()` (kernel/sched/fair.c) and
//! `__resched_curr()` (core.c) as the pieces it calls.
//!
//! ## What siblings share
//!
//! Under SCHED_CORE Linux's siblings share one run-queue lock, and the CPU
//! that picks reads each sibling's queue (and, through `update_curr()`,
//! writes its running entity). Here a CPU's queue stays its own: each CPU
//! publishes a copy of what the pick reads, an [`RqView`] (its running task
//! and its waiting tasks: id, cookie, band, EEVDF numbers), into its core's
//! [`CoreState`], the one lock the siblings share. The picking CPU runs the
//! same band pick ([`pick_eevdf`](crate::fair::pick_eevdf)) on those copies; what it writes is the
//! core-wide decision, the copies' `update_curr()`, and the siblings'
//! reschedule flags.
//!
//! ## The protocol (Linux's names in brackets)
//!
//! Three sequence numbers: `task_seq` (`core_task_seq`) moves on every
//! enqueue or dequeue on a sibling (`sched_core_enqueue/dequeue()`) and on
//! every selection; `pick_seq` (`core_pick_seq`) is the `task_seq` the last
//! selection was made on; each CPU's own `sched_seq` (`rq->core_sched_seq`)
//! is the `pick_seq` it last scheduled.
//!
//! 1. **Install.** `pick_seq == task_seq` (nothing changed since the
//!    selection), `pick_seq != sched_seq` (this CPU has not scheduled it)
//!    and the selection left this CPU a pick (`rq->core_pick`): run it.
//! 2. **No cookie in play** (`!need_sync`: the core's cookie is 0 and no
//!    sibling is forced idle): the local pick, run as is if it has no
//!    cookie.
//! 3. **Select.** `task_seq += 1`; on every sibling, this CPU first,
//!    `pick_task()` on its copy: the fair band's `update_curr()` on its
//!    running entity, which asks for a reschedule of that sibling when the
//!    deadline passed or protection ended (commit 0b9ca2dcabc3), then RT,
//!    then `pick_eevdf()`. The highest-priority pick (`prio_less()`, ties
//!    to this CPU) names the cookie; a sibling whose pick has another
//!    cookie gets its best task of that cookie (`sched_core_find()`) or
//!    idles, forced. `pick_seq = task_seq`. A sibling whose running task is
//!    not its new pick gets the pick and a reschedule; one whose running
//!    task *is* its pick gets no pick (`core_pick = NULL`), so if a
//!    reschedule reaches it anyway (from step 3's `update_curr()`) it
//!    selects again itself (step 3, not step 1).
//! 4. **Run the pick** (`put_prev_set_next_task()`): a task other than the
//!    running one is a fresh pick (`set_next_task(.., first = true)`, which
//!    arms slice protection); the running task picked again is a re-pick:
//!    Linux renews nothing, the seed-004 fix renews its protection
//!    ([`FairConfig::protect_on_repick`]).
//!
//! A remote reschedule (`__resched_curr()`) sets the sibling's flag and
//! sends an IPI only if the flag was clear; the sibling's pass clears it.
//!
//! ## The storm this reproduces (seed-004, docs/REFERENCES.md)
//!
//! Two spinners on each sibling of a cookied pair. Without the fix, an
//! entity whose protection ended while it stays the best pick is re-picked
//! with its expired `vprot`, so every `update_curr()` on it asks again.
//! When both siblings run such an entity, a selection on one (step 3) asks
//! for the other through `update_curr()` (an IPI) while leaving it no pick;
//! the other, rescheduled, selects itself, asks back, and so on, an IPI per
//! hop, until one of them picks another task afresh. With the fix the
//! first re-pick renews the protection and the exchange stops.
//!
//! ## Forced idle
//!
//! A CPU forced idle while work of another cookie waits pulls a task of the
//! core's cookie from another CPU (`queue_core_balance()` →
//! `try_steal_cookie()`), by a steal request that names the cookie; and a
//! CPU running alone beside a forced-idle sibling reschedules once it has
//! used half its slice (`task_tick_core()`, MIN_NR_TASKS_DURING_FORCEIDLE =
//! 2), so the idle sibling's work gets a turn.
//!
//! Fair picks of two siblings compare by vruntime normalized by a snapshot
//! of each queue's `V` (`min_vruntime_fi`), which every selection takes
//! except while a forced idle goes on (`task_vruntime_update()`), so the
//! task that ran through a forced idle yields to the one it kept out.
//!
//! Not modelled: core-wide accounting of forced-idle time, and the
//! `core_occupation` test of a cookie steal.

use alloc::vec::Vec;

use schedlab_topology::CpuId;

use crate::fair::{Avg, Entity, FairConfig};
use crate::task::{pick_task, Pickable, TaskId};

/// What the pick sees of one task.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct View {
    pub(crate) id: TaskId,
    pub(crate) cookie: u64,
    /// The band as a priority: 0 fair, `1 + prio` RT.
    pub(crate) class: u16,
    pub(crate) fair: Entity,
}

impl Pickable for View {
    fn class(&self) -> u16 {
        self.class
    }

    fn entity(&self) -> &Entity {
        &self.fair
    }
}

/// A CPU's run queue as the core-wide pick reads it.
#[derive(Clone, Debug, Default)]
pub(crate) struct RqView {
    /// The task the CPU runs, if any (runnable or not).
    pub(crate) curr: Option<TaskId>,
    /// It, when it may go on running (not stopped, in its mask).
    pub(crate) running: Option<View>,
    /// The tasks waiting: fair ones, then RT ones highest first, FIFO
    /// within a priority.
    pub(crate) waiting: Vec<View>,
    /// `V` of an empty fair queue.
    pub(crate) zero_v: i64,
}

impl RqView {
    fn fair(&self) -> impl Iterator<Item = &View> + Clone {
        self.waiting.iter().filter(|v| v.class == 0)
    }

    /// Whether the CPU has work: it idles forced if it is denied it.
    fn has_work(&self) -> bool {
        self.running.is_some() || !self.waiting.is_empty()
    }

    /// `V` over the fair tasks, the running one included.
    fn v(&self) -> i64 {
        let run = self.running.iter().filter(|r| r.class == 0);
        Avg::of(self.fair().chain(run).map(|v| &v.fair), self.zero_v).v()
    }

    /// `update_curr()` on the running copy at `now`, then whether it asks
    /// for a reschedule: time passed, and the deadline was renewed or the
    /// protection has ended, with another fair task waiting.
    fn update_curr(&mut self, now: u64) -> bool {
        let others = self.fair().next().is_some();
        self.running
            .as_mut()
            .filter(|r| r.class == 0)
            .is_some_and(|r| r.fair.update_curr_asks(now, others))
    }

    /// `pick_task()` on the copy.
    fn pick(&self, cfg: &FairConfig) -> Option<View> {
        let rt = self.waiting.iter().find(|v| v.class > 0);
        pick_task(self.running.as_ref(), self.fair(), rt, cfg, self.zero_v).copied()
    }

    /// `sched_core_find()`: the best task of `cookie`, the running one
    /// included: the highest band, then the smallest vruntime.
    fn find(&self, cookie: u64) -> Option<View> {
        self.running
            .iter()
            .chain(self.waiting.iter())
            .filter(|v| v.cookie == cookie)
            .fold(None, |best: Option<&View>, v| match best {
                Some(b) if (b.class, -b.fair.vruntime) >= (v.class, -v.fair.vruntime) => Some(b),
                _ => Some(v),
            })
            .copied()
    }
}

/// What a selection left a sibling to run (`rq->core_pick`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum CorePick {
    Task(TaskId),
    /// Forced idle, or nothing to run.
    Idle,
}

impl CorePick {
    fn of(v: Option<View>) -> CorePick {
        v.map_or(CorePick::Idle, |v| CorePick::Task(v.id))
    }
}

/// One sibling's place in the core state.
#[derive(Clone, Debug)]
pub(crate) struct Sibling {
    pub(crate) cpu: CpuId,
    pub(crate) view: RqView,
    /// The last selection's pick for it, until it runs it.
    pub(crate) pick: Option<CorePick>,
    /// Its queue's `V` when a selection last snapshotted it
    /// (`cfs_rq->min_vruntime_fi`): frozen while a forced idle lasts, so a
    /// task that keeps running beside a forced-idle sibling falls behind it
    /// in rank.
    pub(crate) v_fi: i64,
}

impl Sibling {
    /// A task's rank across siblings, higher first (`prio_less()`): RT
    /// above fair, higher RT priority first; a fair task by its vruntime
    /// normalized by its queue's snapshot, smaller first (`cfs_prio_less()`).
    fn rank(&self, t: &View) -> (u16, i64) {
        let behind = if t.class == 0 {
            self.v_fi - t.fair.vruntime
        } else {
            0
        };
        (t.class, behind)
    }
}

/// The one state SMT siblings share, behind one lock.
#[derive(Clone, Debug, Default)]
pub(crate) struct CoreState {
    pub(crate) task_seq: u64,
    pub(crate) pick_seq: u64,
    /// The cookie the last selection chose (`core_cookie`).
    pub(crate) cookie: u64,
    /// Siblings the last selection forced idle while they had work
    /// (`core_forceidle_count`).
    pub(crate) forceidle: u32,
    /// In the core's CPU order.
    pub(crate) sibs: Vec<Sibling>,
}

/// A selection's result for the CPU that made it.
#[derive(Debug)]
pub(crate) struct Selected {
    pub(crate) mine: CorePick,
    /// Siblings to reschedule, each once.
    pub(crate) resched: Vec<CpuId>,
}

impl CoreState {
    pub(crate) fn new(cpus: impl Iterator<Item = CpuId>) -> CoreState {
        CoreState {
            sibs: cpus
                .map(|cpu| Sibling {
                    cpu,
                    view: RqView::default(),
                    pick: None,
                    v_fi: 0,
                })
                .collect(),
            ..CoreState::default()
        }
    }

    pub(crate) fn sib(&mut self, cpu: CpuId) -> &mut Sibling {
        self.sibs
            .iter_mut()
            .find(|s| s.cpu == cpu)
            .expect("a CPU of this core")
    }

    /// Step 1: the pick a previous selection left `cpu`, if it still holds.
    pub(crate) fn take_pick(&mut self, cpu: CpuId, sched_seq: &mut u64) -> Option<CorePick> {
        if self.pick_seq != self.task_seq || self.pick_seq == *sched_seq {
            return None;
        }
        let pick = self.sib(cpu).pick.take()?;
        *sched_seq = self.pick_seq;
        Some(pick)
    }

    /// Step 2's test: no cookie runs and no sibling is forced idle.
    pub(crate) fn need_sync(&self) -> bool {
        self.cookie != 0 || self.forceidle > 0
    }

    /// Step 2: `cpu`'s own pick, when it has no cookie.
    pub(crate) fn local_pick(&mut self, cpu: CpuId, cfg: &FairConfig) -> Option<CorePick> {
        self.task_seq += 1;
        let p = self.sib(cpu).view.pick(cfg);
        match p {
            Some(v) if v.cookie != 0 => None,
            _ => {
                self.sib(cpu).pick = None;
                Some(CorePick::of(p))
            }
        }
    }

    /// Step 3: the core-wide selection, made by `me` at `now`.
    pub(crate) fn select(
        &mut self,
        me: CpuId,
        now: u64,
        cfg: &FairConfig,
        sched_seq: &mut u64,
    ) -> Selected {
        self.task_seq += 1;
        let fi_before = self.forceidle > 0;
        let n = self.sibs.len();
        let start = self.sibs.iter().position(|s| s.cpu == me).expect("mine");
        let mut resched = Vec::new();
        let mut picks: Vec<Option<View>> = Vec::with_capacity(n);
        // The highest-priority pick: (its rank, its cookie).
        let mut max: Option<((u16, i64), u64)> = None;
        for k in 0..n {
            let s = &mut self.sibs[(start + k) % n];
            if s.view.update_curr(now) && s.cpu != me {
                resched.push(s.cpu);
            }
            let p = s.view.pick(cfg);
            if let Some(v) = p {
                let rank = s.rank(&v);
                // `prio_less(max, p)`: strictly above, so ties stay with
                // this CPU, which comes first.
                if max.is_none_or(|(m, _)| m < rank) {
                    max = Some((rank, v.cookie));
                }
            }
            picks.push(p);
        }
        // `picks` is in wrap order from `me`; back to core order.
        picks.rotate_right(start);
        let cookie = max.map_or(0, |(_, c)| c);
        self.cookie = cookie;
        self.forceidle = 0;
        for (s, p) in self.sibs.iter().zip(picks.iter_mut()) {
            if p.is_some_and(|v| v.cookie != cookie) {
                *p = if cookie != 0 {
                    s.view.find(cookie)
                } else {
                    None
                };
            }
            if p.is_none() && s.view.has_work() {
                self.forceidle += 1;
            }
        }
        // `task_vruntime_update()`: snapshot every queue unless a forced
        // idle goes on, which keeps the snapshots it began with.
        if !(fi_before && self.forceidle > 0) {
            for s in self.sibs.iter_mut() {
                s.v_fi = s.view.v();
            }
        }
        self.pick_seq = self.task_seq;
        *sched_seq = self.pick_seq;
        let mut mine = CorePick::Idle;
        for (s, p) in self.sibs.iter_mut().zip(picks) {
            let pick = CorePick::of(p);
            if s.cpu == me {
                mine = pick;
                s.pick = None;
                continue;
            }
            let same = match pick {
                CorePick::Task(t) => s.view.running.is_some_and(|r| r.id == t),
                CorePick::Idle => s.view.curr.is_none(),
            };
            if same {
                s.pick = None;
            } else {
                s.pick = Some(pick);
                if !resched.contains(&s.cpu) {
                    resched.push(s.cpu);
                }
            }
        }
        Selected { mine, resched }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(id: u32, cookie: u64, v: i64, d: i64) -> View {
        let mut e = Entity::new(0, 2_800_000);
        e.vruntime = v;
        e.deadline = d;
        View {
            id: TaskId(id),
            cookie,
            class: 0,
            fair: e,
        }
    }

    fn core(views: [RqView; 2]) -> CoreState {
        let mut c = CoreState::new([CpuId::new(0), CpuId::new(1)].into_iter());
        for (s, v) in c.sibs.iter_mut().zip(views) {
            s.view = v;
        }
        c
    }

    #[test]
    fn a_sibling_whose_pick_is_its_running_task_gets_no_pick() {
        let cfg = FairConfig::for_cpus(4);
        let mut r = view(1, 7, 0, 2_800_000);
        r.fair.vprot = r.fair.deadline; // protected: it stays the pick
        let a = RqView {
            curr: Some(TaskId(0)),
            running: Some(view(0, 7, 0, 2_800_000)),
            ..RqView::default()
        };
        let b = RqView {
            curr: Some(TaskId(1)),
            running: Some(r),
            waiting: alloc::vec![view(2, 7, 0, 100)],
            zero_v: 0,
        };
        let mut c = core([a, b]);
        let mut seq = 0;
        let s = c.select(CpuId::new(0), 0, &cfg, &mut seq);
        assert_eq!(s.mine, CorePick::Task(TaskId(0)));
        assert!(
            c.sibs[1].pick.is_none(),
            "cpu1 runs its own pick: the selection must leave it none, as Linux leaves core_pick NULL"
        );
        assert!(
            s.resched.is_empty(),
            "nothing to tell cpu1: {:?}",
            s.resched
        );
        let mut seq1 = 0;
        assert_eq!(
            c.take_pick(CpuId::new(1), &mut seq1),
            None,
            "with no pick left, cpu1 must select itself"
        );
    }

    #[test]
    fn a_sibling_running_another_cookie_is_given_a_task_of_the_core_cookie_or_idles() {
        let cfg = FairConfig::for_cpus(4);
        // cpu0's RT task (cookie 5) wins; cpu1 runs cookie 9 and has a
        // cookie-5 task waiting: it gets that one.
        let mut rt = view(0, 5, 0, 0);
        rt.class = 11;
        let a = RqView {
            curr: Some(TaskId(0)),
            running: Some(rt),
            ..RqView::default()
        };
        let b = RqView {
            curr: Some(TaskId(1)),
            running: Some(view(1, 9, 0, 10)),
            waiting: alloc::vec![view(2, 5, 50, 60)],
            zero_v: 0,
        };
        let mut c = core([a, b.clone()]);
        let mut seq = 0;
        let s = c.select(CpuId::new(0), 0, &cfg, &mut seq);
        assert_eq!(c.cookie, 5, "the RT task's cookie is the core's");
        assert_eq!(c.sibs[1].pick, Some(CorePick::Task(TaskId(2))));
        assert_eq!(s.resched, alloc::vec![CpuId::new(1)]);
        // Without a cookie-5 task, cpu1 is forced idle.
        let b2 = RqView {
            waiting: alloc::vec![],
            ..b
        };
        let mut c = core([c.sibs[0].view.clone(), b2]);
        let _ = c.select(CpuId::new(0), 0, &cfg, &mut seq);
        assert_eq!(c.sibs[1].pick, Some(CorePick::Idle));
        assert_eq!(c.forceidle, 1, "cpu1 idles with work: forced idle");
    }

    #[test]
    fn a_pick_is_installed_once_and_only_while_nothing_changed() {
        let cfg = FairConfig::for_cpus(4);
        let a = RqView {
            curr: Some(TaskId(0)),
            running: Some(view(0, 1, 0, 10)),
            ..RqView::default()
        };
        let b = RqView {
            curr: None,
            running: None,
            waiting: alloc::vec![view(1, 1, 0, 10)],
            zero_v: 0,
        };
        let mut c = core([a, b]);
        let (mut s0, mut s1) = (0, 0);
        let _ = c.select(CpuId::new(0), 0, &cfg, &mut s0);
        let mut c2 = c.clone();
        assert_eq!(
            c.take_pick(CpuId::new(1), &mut s1),
            Some(CorePick::Task(TaskId(1)))
        );
        assert_eq!(c.take_pick(CpuId::new(1), &mut s1), None, "installed once");
        c2.task_seq += 1; // an enqueue on a sibling since the selection
        let mut s1 = 0;
        assert_eq!(
            c2.take_pick(CpuId::new(1), &mut s1),
            None,
            "a changed core selects again"
        );
    }

    /// Both siblings run an entity whose protection has ended but which
    /// stays its CPU's pick (its queue-mate is ahead in vruntime, so not
    /// eligible): a re-pick with an expired `vprot`.
    fn expired_repick(run: u32, mate: u32, vprot: i64) -> RqView {
        let mut r = view(run, 1, 1_000_000, 3_000_000);
        r.fair.vprot = vprot;
        RqView {
            curr: Some(TaskId(run)),
            running: Some(r),
            waiting: alloc::vec![view(mate, 1, 1_500_000, 2_900_000)],
            zero_v: 0,
        }
    }

    #[test]
    fn two_expired_repicks_trade_reschedules_each_selection_asking_the_other() {
        let cfg = FairConfig::for_cpus(4);
        let (cpu0, cpu1) = (CpuId::new(0), CpuId::new(1));
        let mut c = core([expired_repick(0, 1, 500_000), expired_repick(2, 3, 500_000)]);
        let (mut s0, mut s1) = (0, 0);
        // Hop 1: cpu0 selects; `update_curr()` on cpu1's copy asks for it.
        let s = c.select(cpu0, 1_000, &cfg, &mut s0);
        assert_eq!(s.mine, CorePick::Task(TaskId(0)), "cpu0 re-picks its task");
        assert_eq!(
            s.resched,
            alloc::vec![cpu1],
            "an IPI to cpu1, from update_curr()"
        );
        assert_eq!(
            c.sibs[1].pick, None,
            "cpu1's pick is its running task: no pick left"
        );
        // Hop 2: cpu1, rescheduled, finds no pick and selects itself,
        // which asks for cpu0 in turn.
        assert_eq!(c.take_pick(cpu1, &mut s1), None);
        let s = c.select(cpu1, 2_000, &cfg, &mut s1);
        assert_eq!(s.mine, CorePick::Task(TaskId(2)));
        assert_eq!(s.resched, alloc::vec![cpu0], "and an IPI back to cpu0");
        assert_eq!(c.sibs[0].pick, None);
    }

    #[test]
    fn a_renewed_protection_ends_the_exchange() {
        // The seed-004 fix: each re-pick renewed vprot (to the deadline).
        let cfg = FairConfig::for_cpus(4);
        let mut c = core([
            expired_repick(0, 1, 3_000_000),
            expired_repick(2, 3, 3_000_000),
        ]);
        let mut s0 = 0;
        let s = c.select(CpuId::new(0), 1_000, &cfg, &mut s0);
        assert!(
            s.resched.is_empty(),
            "a protected sibling is not asked to reschedule: {:?}",
            s.resched
        );
    }
}
