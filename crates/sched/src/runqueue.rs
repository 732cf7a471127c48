//! One CPU's run queue: the running task, the fair tasks waiting (EEVDF,
//! with the delayed ones: [`crate::fair::queue`]), the RT tasks waiting
//! (fixed priority, FIFO within one).
//!
//! It knows nothing of other CPUs, mailboxes or the park word: it queues,
//! picks, puts back and charges. A change that asks for a reschedule is
//! returned as a `#[must_use]` [`Resched`] for the CPU to act on; the queue
//! never sets a flag or sends a kick itself.
//!
//! A delayed task (`DELAY_DEQUEUE`: it blocked while not eligible) is held
//! here and not runnable: it counts in `V`, the pick and the queue's load
//! weight, not in [`RunQueue::queued`], which is what the CPU publishes,
//! the balancer moves and placement reads. Its park word says `Delayed`
//! (the `park` module); the CPU finishes it when a pick lands on it, and a
//! wake puts it back among the runnable where it is.

use alloc::vec::Vec;

use crate::fair::queue::{
    remove_at, update_curr, update_curr_off_tick, Choice, FairQueue, Queued, WakeFlags,
};
use crate::fair::{Entity, FairConfig, Features};
use crate::pelt::SchedAvg;
use crate::policy::PolicyState;
use crate::task::{Task, TaskId};

/// The running task should give way (to `task`, or because of `task`).
#[must_use = "a reschedule request must reach the CPU's flag"]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Resched(pub TaskId);

impl<S> Queued for Task<S> {
    #[inline]
    fn key(&self) -> u32 {
        self.id.0
    }
    #[inline]
    fn entity(&self) -> &Entity {
        &self.fair
    }
    #[inline]
    fn entity_mut(&mut self) -> &mut Entity {
        &mut self.fair
    }
}

pub(crate) struct RunQueue<S> {
    pub(crate) current: Option<Task<S>>,
    /// Fair tasks waiting to run (the running one is not here), and the
    /// delayed ones.
    pub(crate) fair: FairQueue<Task<S>>,
    /// RT tasks waiting, highest priority first, FIFO within one.
    pub(crate) rt: Vec<Task<S>>,
    seq: u64,
    pub(crate) cfg: FairConfig,
    /// The runnable set changed since the core was last told (Linux bumps
    /// `core_task_seq` in `sched_core_enqueue/dequeue()`).
    pub(crate) dirty: bool,
    /// The latest `now` an entry point brought (`rq->clock`).
    pub(crate) clock: u64,
    /// The fair queue's PELT signal (`cfs_rq->avg`).
    pub(crate) avg: SchedAvg,
}

impl<S: PolicyState> RunQueue<S> {
    pub(crate) fn new(cfg: FairConfig) -> RunQueue<S> {
        RunQueue {
            current: None,
            fair: FairQueue::default(),
            rt: Vec::new(),
            seq: 0,
            cfg,
            dirty: false,
            clock: 0,
            avg: SchedAvg::default(),
        }
    }

    /// `update_rq_clock()`: time only moves on.
    pub(crate) fn clock_to(&mut self, now: u64) {
        self.clock = self.clock.max(now);
    }

    /// The running task's entity, when it is fair.
    #[inline]
    pub(crate) fn curr_fair(&self) -> Option<&Entity> {
        self.current
            .as_ref()
            .filter(|c| !c.is_rt())
            .map(|c| &c.fair)
    }

    /// The load weight of the fair tasks here (the running one and the
    /// delayed ones included, plus `extra`, a task just taken out of
    /// `current`) and how many of them are runnable.
    fn fair_load(&self, extra: Option<&Entity>) -> (u64, u64) {
        // A sum per part, not a chained iterator: this runs at every
        // enqueue, pick and block.
        let sum = |ts: &[Task<S>]| ts.iter().map(|t| t.fair.weight as u64).sum::<u64>();
        let one = |e: Option<&Entity>| e.map_or(0, |e| e.weight as u64);
        let curr = self.curr_fair();
        let w = sum(&self.fair.queued) + sum(&self.fair.delayed) + one(curr) + one(extra);
        let n = self.fair.queued.len() + curr.is_some() as usize + extra.is_some() as usize;
        (w, n as u64)
    }

    /// `update_load_avg()` for the queue and its running entity, up to the
    /// clock, before the queue changes: the queue's load is the weight of
    /// its fair tasks, the running one included (PELT tracks the fair
    /// class only; RT time shows as a gap, as `cfs_rq->avg` sees it).
    pub(crate) fn sync_pelt(&mut self) {
        let (weight, nr) = self.fair_load(None);
        let running = self.current.as_ref().is_some_and(|c| !c.is_rt());
        self.avg.update_cfs_rq(self.clock, weight, nr, running);
        if let Some(c) = self.current.as_mut() {
            sync_task_at(self.clock, c, true, true);
        }
    }

    /// A fair task's own signal up to the clock (`update_load_avg(se)`):
    /// queued here or not, running or not.
    pub(crate) fn sync_task(&self, t: &mut Task<S>, on_rq: bool, running: bool) {
        sync_task_at(self.clock, t, on_rq, running);
    }

    /// Runnable tasks waiting (not the running one, not the delayed ones).
    #[inline]
    pub(crate) fn queued(&self) -> usize {
        self.fair.queued.len() + self.rt.len()
    }

    pub(crate) fn current_id(&self) -> Option<TaskId> {
        self.current.as_ref().map(|t| t.id)
    }

    /// The running task and the waiting ones.
    pub(crate) fn runnable(&self) -> impl Iterator<Item = &Task<S>> {
        self.current
            .iter()
            .chain(self.fair.queued.iter())
            .chain(self.rt.iter())
    }

    pub(crate) fn runnable_mut(&mut self, task: TaskId) -> Option<&mut Task<S>> {
        self.current
            .iter_mut()
            .chain(self.fair.queued.iter_mut())
            .chain(self.rt.iter_mut())
            .find(|t| t.id == task)
    }

    /// Whether `task` waits here (runnable).
    pub(crate) fn waits(&self, task: TaskId) -> bool {
        self.fair
            .queued
            .iter()
            .chain(self.rt.iter())
            .any(|t| t.id == task)
    }

    /// The delayed task `task`, if it is delayed here.
    pub(crate) fn delayed_mut(&mut self, task: TaskId) -> Option<&mut Task<S>> {
        self.fair.delayed.iter_mut().find(|t| t.id == task)
    }

    /// `update_curr()` of the running fair task off the tick, and whether
    /// it asks for a reschedule ([`update_curr_off_tick`]).
    fn charge_asks(&mut self, now: u64) -> bool {
        let others = self.fair.others();
        let cfg = self.cfg;
        self.current
            .as_mut()
            .filter(|c| !c.is_rt())
            .is_some_and(|c| update_curr_off_tick(&mut c.fair, now, others, &cfg))
    }

    /// Queues a task: placed by its lag (fair) or by priority (RT), then
    /// the wake-up preemption check (`w`: what kind of wake; `w.fork`, a new
    /// task's first enqueue, `ENQUEUE_INITIAL`).
    pub(crate) fn enqueue(&mut self, mut task: Task<S>, now: u64, w: WakeFlags) -> Option<Resched> {
        let initial = w.fork;
        let id = task.id;
        self.dirty = true;
        self.sync_pelt();
        // Its sleep (or its time in flight) decays its signal.
        self.sync_task(&mut task, false, false);
        if task.is_rt() {
            self.seq += 1;
            task.seq = self.seq;
            let prio = task.rt_prio();
            self.insert_rt(task);
            let preempt = match &self.current {
                Some(c) if c.is_rt() => prio > c.rt_prio(),
                Some(_) => true,
                None => false,
            };
            return preempt.then_some(Resched(id));
        }
        // `enqueue_entity()` charges the running entity first.
        let asks = self.charge_asks(now);
        let cfg = self.cfg;
        let curr = self
            .current
            .as_ref()
            .filter(|c| !c.is_rt())
            .map(|c| &c.fair);
        self.fair.enqueue(task, curr, &cfg, initial);
        let at = self.fair.queued.len() - 1;
        let w = WakeFlags {
            resched_set: w.resched_set || asks,
            ..w
        };
        self.preempt(at, now, w, asks)
    }

    /// `check_preempt_wakeup_fair()` for queued `at`, and the reschedule
    /// `update_curr()` already asked for.
    fn preempt(&mut self, at: usize, now: u64, w: WakeFlags, asks: bool) -> Option<Resched> {
        let cfg = self.cfg;
        let cur = self.current.as_mut().filter(|c| !c.is_rt())?;
        let preempt = self.fair.wakeup_preempt(at, &mut cur.fair, &cfg, now, w);
        (preempt || asks).then_some(Resched(cur.id))
    }

    /// A wake of a task delayed here (`ttwu_runnable()` with
    /// `ENQUEUE_DELAYED`): back among the runnable where it is, then the
    /// wake-up check, which charges the running task
    /// (`check_preempt_wakeup_fair()` calls `update_curr()`).
    pub(crate) fn requeue_delayed(&mut self, i: usize, now: u64, w: WakeFlags) -> Option<Resched> {
        self.dirty = true;
        self.sync_pelt();
        let cfg = self.cfg;
        let curr = self
            .current
            .as_ref()
            .filter(|c| !c.is_rt())
            .map(|c| &c.fair);
        let at = self.fair.requeue_delayed(i, curr, &cfg);
        let clock = self.clock;
        sync_delayed_at(clock, &mut self.fair.queued[at]);
        let asks = self.charge_asks(now);
        let w = WakeFlags {
            resched_set: w.resched_set || asks,
            ..w
        };
        self.preempt(at, now, w, asks)
    }

    /// Finishes delayed `i`, which a pick landed on: it leaves with its lag
    /// (`DELAY_ZERO`), blocked for good.
    pub(crate) fn finish_delayed(&mut self, i: usize) -> Task<S> {
        self.dirty = true;
        self.sync_pelt();
        let cfg = self.cfg;
        let curr = self
            .current
            .as_ref()
            .filter(|c| !c.is_rt())
            .map(|c| &c.fair);
        let mut t = self.fair.finish_delayed(i, curr, &cfg);
        sync_delayed_at(self.clock, &mut t);
        t
    }

    /// The pick among the fair tasks (RT is the caller's): the running one
    /// when `curr` may go on, the queued and the delayed.
    pub(crate) fn pick_fair(&self, curr: Option<&Entity>) -> Choice {
        self.fair.pick(curr, &self.cfg)
    }

    pub(crate) fn insert_rt(&mut self, task: Task<S>) {
        let at = self
            .rt
            .iter()
            .position(|t| {
                (t.rt_prio(), core::cmp::Reverse(t.seq))
                    < (task.rt_prio(), core::cmp::Reverse(task.seq))
            })
            .unwrap_or(self.rt.len());
        self.rt.insert(at, task);
    }

    /// A yielding RT task goes to the back of its priority.
    pub(crate) fn requeue_rt(&mut self, mut t: Task<S>, now: u64) {
        self.seq += 1;
        t.seq = self.seq;
        t.last_ran = now;
        self.insert_rt(t);
    }

    /// Charges the running task and records what it leaves as it stops
    /// running here; a fair one is charged on a queue that still held it.
    pub(crate) fn leaving(&mut self, task: &mut Task<S>, now: u64) {
        task.last_ran = now;
        self.dirty = true;
        if !task.is_rt() {
            let (w, nr) = self.fair_load(Some(&task.fair));
            self.avg.update_cfs_rq(self.clock, w, nr, true);
            self.sync_task(task, true, true);
            task.fair.update_curr(now);
        }
    }

    /// The running task exits: charged, and its lag recorded.
    pub(crate) fn dequeue_running(&mut self, task: &mut Task<S>, now: u64) {
        self.leaving(task, now);
        if !task.is_rt() {
            let cfg = self.cfg;
            self.fair.leave(task, &cfg, false);
        }
    }

    /// Whether the running task, blocking at `now`, stays here delayed
    /// (`DELAY_DEQUEUE`): its time is charged first, as `dequeue_entity()`
    /// charges it. Decided before the park word says where it is.
    pub(crate) fn would_delay(&self, task: &mut Task<S>, now: u64) -> bool {
        if task.is_rt() || !self.cfg.has(Features::DELAY_DEQUEUE) {
            return false;
        }
        task.fair.update_curr(now);
        self.fair.would_delay(&task.fair, &self.cfg)
    }

    /// The running task blocks (`dequeue_entity()`, `DEQUEUE_SLEEP`), its
    /// time charged ([`RunQueue::leaving`]), kept here delayed when `delay`
    /// ([`RunQueue::would_delay`]): `None`; else the task, its lag
    /// recorded.
    pub(crate) fn block_charged(&mut self, task: Task<S>, delay: bool) -> Option<Task<S>> {
        if task.is_rt() {
            return Some(task);
        }
        let cfg = self.cfg;
        self.fair.block_as(task, &cfg, delay)
    }

    /// Records the lag of the running task leaving for another CPU (a
    /// push, a mask change): not a sleep, so its deadline stays relative.
    pub(crate) fn dequeue_lag(&mut self, t: &mut Task<S>) {
        if !t.is_rt() {
            let cfg = self.cfg;
            self.fair.leave(t, &cfg, true);
        }
    }

    /// Removes a queued task, recording its lag; `migrating`: it leaves for
    /// another CPU (its deadline kept relative, `PLACE_REL_DEADLINE`).
    pub(crate) fn take_queued(&mut self, task: TaskId, migrating: bool) -> Option<Task<S>> {
        self.dirty = true;
        self.sync_pelt();
        let cfg = self.cfg;
        let curr = self
            .current
            .as_ref()
            .filter(|c| !c.is_rt())
            .map(|c| &c.fair);
        if let Some(mut t) = self.fair.dequeue(task.0, curr, &cfg, migrating) {
            self.sync_task(&mut t, true, false);
            return Some(t);
        }
        let i = self.rt.iter().position(|t| t.id == task)?;
        Some(self.rt.remove(i))
    }

    /// Removes a waiting task to run it (no lag: it stays on this queue).
    pub(crate) fn take_waiting(&mut self, id: TaskId) -> Task<S> {
        if let Some(i) = self.fair.queued.iter().position(|t| t.id == id) {
            return self.fair.take(i);
        }
        let i = self
            .rt
            .iter()
            .position(|t| t.id == id)
            .expect("the pick names a task waiting here");
        remove_at(&mut self.rt, i)
    }

    /// A preempted task goes back to its queue with its numbers unchanged.
    pub(crate) fn put_back(&mut self, t: Task<S>) {
        if t.is_rt() {
            self.insert_rt(t);
        } else {
            self.fair.queued.push(t);
        }
    }

    /// Charges the running fair task up to `now`.
    pub(crate) fn update_curr(&mut self, now: u64) {
        if let Some(cur) = self.current.as_mut().filter(|c| !c.is_rt()) {
            cur.fair.update_curr(now);
        }
    }

    /// The tick's `update_curr()`, and whether it asks for a reschedule
    /// (the deadline renewed, or the protection ended, with others here).
    pub(crate) fn tick_asks(&mut self, now: u64) -> bool {
        let others = self.fair.others();
        let cfg = self.cfg;
        self.current
            .as_mut()
            .filter(|t| !t.is_rt())
            .is_some_and(|t| update_curr(&mut t.fair, now, others, &cfg))
    }

    /// A fresh pick arms protection (`set_next_entity(.., first = true)`
    /// calls `set_protect_slice()`).
    pub(crate) fn arm_protection(&self, next: &mut Task<S>) {
        if !next.is_rt() {
            self.fair.arm_protection(&mut next.fair, &self.cfg);
        }
    }

    /// A re-pick of the running fair task renews its protection (the
    /// seed-004 fix, `protect_on_repick`).
    pub(crate) fn renew_protection(&mut self) {
        let cfg = self.cfg;
        if let Some(c) = self.current.as_mut().filter(|c| !c.is_rt()) {
            self.fair.arm_protection(&mut c.fair, &cfg);
        }
    }
}

/// `update_load_avg(se)` for a fair task at `now` (RT tasks carry no PELT
/// signal here).
fn sync_task_at<S: PolicyState>(now: u64, t: &mut Task<S>, on_rq: bool, running: bool) {
    if !t.is_rt() {
        let weight = t.fair.weight as u64;
        t.avg.update_se(now, weight, on_rq, running);
    }
}

/// A delayed task's own signal up to `now`: its load stays on the queue,
/// it is not runnable ("sched/eevdf: Fixup PELT vs DELAYED_DEQUEUE").
fn sync_delayed_at<S: PolicyState>(now: u64, t: &mut Task<S>) {
    let weight = t.fair.weight as u64;
    t.avg.update_delayed_se(now, weight);
}
