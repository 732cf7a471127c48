//! One CPU's run queue: the running task, the fair tasks waiting (EEVDF),
//! the RT tasks waiting (fixed priority, FIFO within one).
//!
//! It knows nothing of other CPUs, mailboxes or the park word: it queues,
//! picks, puts back and charges. A change that asks for a reschedule is
//! returned as a `#[must_use]` [`Resched`] for the CPU to act on; the queue
//! never sets a flag or sends a kick itself.

use alloc::vec::Vec;

use crate::fair::{calc_delta_fair, pick_eevdf, place_entity, Avg, Entity, FairConfig, Pick};
use crate::pelt::SchedAvg;
use crate::policy::PolicyState;
use crate::task::{Task, TaskId};

/// The running task should give way (to `task`, or because of `task`).
#[must_use = "a reschedule request must reach the CPU's flag"]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Resched(pub TaskId);

pub(crate) struct RunQueue<S> {
    pub(crate) current: Option<Task<S>>,
    /// Fair tasks waiting to run (the running one is not here).
    pub(crate) fair: Vec<Task<S>>,
    /// RT tasks waiting, highest priority first, FIFO within one.
    pub(crate) rt: Vec<Task<S>>,
    /// `V` when the queue last had weight: where an empty queue places.
    pub(crate) zero_v: i64,
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
            fair: Vec::new(),
            rt: Vec::new(),
            zero_v: 0,
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

    /// The weight and number of the fair tasks here, the running one
    /// included, plus `extra` (a task just taken out of `current`).
    fn fair_load(&self, extra: Option<&Entity>) -> (u64, u64) {
        self.fair_entities()
            .chain(extra)
            .fold((0, 0), |(w, n), e| (w + e.weight as u64, n + 1))
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

    /// Runnable tasks waiting (not the running one).
    pub(crate) fn queued(&self) -> usize {
        self.fair.len() + self.rt.len()
    }

    pub(crate) fn current_id(&self) -> Option<TaskId> {
        self.current.as_ref().map(|t| t.id)
    }

    /// The running task and the waiting ones.
    pub(crate) fn runnable(&self) -> impl Iterator<Item = &Task<S>> {
        self.current
            .iter()
            .chain(self.fair.iter())
            .chain(self.rt.iter())
    }

    pub(crate) fn runnable_mut(&mut self, task: TaskId) -> Option<&mut Task<S>> {
        self.current
            .iter_mut()
            .chain(self.fair.iter_mut())
            .chain(self.rt.iter_mut())
            .find(|t| t.id == task)
    }

    /// Whether `task` waits here.
    pub(crate) fn waits(&self, task: TaskId) -> bool {
        self.fair.iter().chain(self.rt.iter()).any(|t| t.id == task)
    }

    /// Queues a task: placed by its lag (fair) or by priority (RT), then
    /// the wake-up preemption check.
    pub(crate) fn enqueue(
        &mut self,
        mut task: Task<S>,
        now: u64,
        initial: bool,
    ) -> Option<Resched> {
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
            preempt.then_some(Resched(id))
        } else {
            if let Some(c) = self.current.as_mut().filter(|c| !c.is_rt()) {
                c.fair.update_curr(now);
            }
            place_entity(&mut task.fair, self.fair_entities(), self.zero_v, initial);
            self.fair.push(task);
            self.wakeup_preempt(id)
        }
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

    /// `wakeup_preempt_fair()`: reschedule when the pick would now be the
    /// woken task (the running one being protected holds it off).
    fn wakeup_preempt(&mut self, woken: TaskId) -> Option<Resched> {
        let cur = self.current.as_ref()?;
        if cur.is_rt() {
            return None;
        }
        let queue = self.fair.iter().map(|t| &t.fair);
        if let Pick::Queued(i) = pick_eevdf(queue, Some(&cur.fair), &self.cfg, self.zero_v) {
            if self.fair[i].id == woken {
                return Some(Resched(cur.id));
            }
        }
        // Not preempting: the protection may last at most the smallest
        // queued slice (`update_protect_slice()`).
        let min = self.min_slice();
        let cur = &mut self.current.as_mut().expect("checked").fair;
        cur.vprot = cur
            .vprot
            .min(cur.vruntime + calc_delta_fair(min, cur.weight));
        None
    }

    /// The fair entities competing here: the queue and a fair running task.
    pub(crate) fn fair_entities(&self) -> impl Iterator<Item = &Entity> + Clone {
        self.fair
            .iter()
            .map(|t| &t.fair)
            .chain(self.current.iter().filter(|c| !c.is_rt()).map(|c| &c.fair))
    }

    /// `V` of the queue plus `extra` (a leaving entity).
    fn avg_with(&self, extra: Option<&Entity>) -> i64 {
        Avg::of(self.fair.iter().map(|t| &t.fair).chain(extra), self.zero_v).v()
    }

    pub(crate) fn min_slice(&self) -> u64 {
        self.fair_entities()
            .map(|e| e.slice)
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Charges the running task and records its lag as it leaves the CPU.
    pub(crate) fn dequeue_running(&mut self, task: &mut Task<S>, now: u64) {
        task.last_ran = now;
        self.dirty = true;
        // `task` was taken out of `current` just now: its time up to here
        // was running time, on a queue that still held it.
        if !task.is_rt() {
            let (w, nr) = self.fair_load(Some(&task.fair));
            self.avg.update_cfs_rq(self.clock, w, nr, true);
            self.sync_task(task, true, true);
        }
        if task.is_rt() {
            return;
        }
        task.fair.update_curr(now);
        let v = self.avg_with(Some(&task.fair));
        task.fair.update_lag(v, self.cfg.tick_ns);
        self.zero_v = v;
    }

    /// Records the lag of a task leaving this queue.
    pub(crate) fn dequeue_lag(&mut self, t: &mut Task<S>) {
        if !t.is_rt() {
            let v = self.avg_with(Some(&t.fair));
            t.fair.update_lag(v, self.cfg.tick_ns);
        }
    }

    /// Removes a queued task, recording its lag (it is leaving this queue).
    pub(crate) fn take_queued(&mut self, task: TaskId) -> Option<Task<S>> {
        self.dirty = true;
        self.sync_pelt();
        if let Some(i) = self.fair.iter().position(|t| t.id == task) {
            let mut t = remove_at(&mut self.fair, i);
            self.dequeue_lag(&mut t);
            self.sync_task(&mut t, true, false);
            return Some(t);
        }
        let i = self.rt.iter().position(|t| t.id == task)?;
        Some(self.rt.remove(i))
    }

    /// Removes a waiting task to run it (no lag: it stays on this queue).
    pub(crate) fn take_waiting(&mut self, id: TaskId) -> Task<S> {
        if let Some(i) = self.fair.iter().position(|t| t.id == id) {
            return remove_at(&mut self.fair, i);
        }
        let i = self
            .rt
            .iter()
            .position(|t| t.id == id)
            .expect("the pick names a task waiting here");
        self.rt.remove(i)
    }

    /// A preempted task goes back to its queue with its numbers unchanged.
    pub(crate) fn put_back(&mut self, t: Task<S>) {
        if t.is_rt() {
            self.insert_rt(t);
        } else {
            self.fair.push(t);
        }
    }

    /// Charges the running fair task up to `now`.
    pub(crate) fn update_curr(&mut self, now: u64) {
        if let Some(cur) = self.current.as_mut().filter(|c| !c.is_rt()) {
            cur.fair.update_curr(now);
        }
    }

    /// A fresh pick arms protection (`set_next_entity(.., first = true)`
    /// calls `set_protect_slice()`): the smallest slice among the queue and
    /// `next`.
    pub(crate) fn arm_protection(&self, next: &mut Task<S>) {
        if !next.is_rt() {
            let min = self
                .fair_entities()
                .map(|e| e.slice)
                .chain([next.fair.slice])
                .min()
                .unwrap_or(next.fair.slice);
            next.fair.set_protect(min);
        }
    }

    /// A re-pick of the running fair task renews its protection (the
    /// seed-004 fix, `protect_on_repick`).
    pub(crate) fn renew_protection(&mut self) {
        if self.current.as_ref().is_some_and(|c| !c.is_rt()) {
            let min = self.min_slice();
            self.current
                .as_mut()
                .expect("checked")
                .fair
                .set_protect(min);
        }
    }
}

/// `v.remove(i)`, without a call to move nothing when `i` is the last
/// (the usual case of a short queue). The order of the rest is kept: ties
/// in the pick go to the earlier.
#[inline]
fn remove_at<T>(v: &mut Vec<T>, i: usize) -> T {
    if i + 1 == v.len() {
        v.pop().expect("i is in bounds")
    } else {
        v.remove(i)
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
