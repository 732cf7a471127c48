//! One CPU's EEVDF queue as Linux's `cfs_rq` keeps it: the entities waiting
//! to run, the delayed ones (`DELAY_DEQUEUE`), the next buddy, and `V` for
//! an empty queue. The scheduler's run queue holds one of tasks, and the
//! record's shadow one of the kernel's threads: one copy of every rule.
//!
//! The running entity is not in the queue: each call that needs it is
//! passed `curr` (`None` when the CPU runs no fair task), as Linux keeps
//! `cfs_rq->curr` out of its tree and adds it into `V` and the pick.
//!
//! ## What each call follows (`kernel/sched/fair.c`)
//!
//! * [`FairQueue::enqueue`]: `place_entity()` then `__enqueue_entity()`.
//! * [`FairQueue::block`]: `dequeue_entity()` with `DEQUEUE_SLEEP` of the
//!   running entity: with `DELAY_DEQUEUE`, one that is not eligible is kept
//!   (`set_delayed()`), still counted in `V`, the pick and the smallest
//!   slice, but not runnable; else it leaves with its lag
//!   (`update_entity_lag()`).
//! * [`FairQueue::dequeue`]: a dequeue that is not a sleep (a migration, a
//!   mask change): its lag, and with `PLACE_REL_DEADLINE` its deadline
//!   kept relative.
//! * [`FairQueue::pick`]: `pick_eevdf()` over the queued and the delayed
//!   entities and `curr`, after `PICK_BUDDY`'s eligible next buddy; a
//!   delayed pick is the caller's to finish ([`FairQueue::finish_delayed`],
//!   `dequeue_entities(.., DEQUEUE_SLEEP | DEQUEUE_DELAYED)` and
//!   `finish_delayed_dequeue_entity()`: its lag, clipped to 0 with
//!   `DELAY_ZERO`) and pick again, as `pick_task_fair()` does.
//! * [`FairQueue::requeue_delayed`]: a wake of a delayed entity
//!   (`ENQUEUE_DELAYED`, `requeue_delayed_entity()`): it stays where it is;
//!   with `DELAY_ZERO`, a lag that became positive is dropped and it is
//!   placed again at `V`.
//! * [`FairQueue::wakeup_preempt`]: `check_preempt_wakeup_fair()` (named
//!   `wakeup_preempt_fair()` later) of the release (see [`super::features`]).
//! * [`update_curr`]: the reschedule `update_curr()` asks for.
//!
//! The smallest slice (`cfs_rq_min_slice()`) is over every entity in the
//! tree, delayed ones included, and `curr`; the weight of a delayed entity
//! stays in the queue's load, its count leaves the runnable ones
//! (`h_nr_runnable`), which is what the balancer and placement read.

use alloc::vec::Vec;

use super::eevdf::{calc_delta_fair, pick_eevdf, place_entity, Avg, Entity, FairConfig, Pick};
use super::features::Features;

/// What a queue holds: an entity with a name.
pub trait Queued {
    /// A name, unique in its queue (a task id, a thread id).
    fn key(&self) -> u32;
    fn entity(&self) -> &Entity;
    fn entity_mut(&mut self) -> &mut Entity;
}

/// One CPU's fair queue (see the module doc).
#[derive(Clone, Debug)]
pub struct FairQueue<T> {
    /// Runnable and waiting (the running entity is not here), in the order
    /// they came: ties in the pick go to the earlier.
    pub queued: Vec<T>,
    /// Blocked while ineligible, kept competing (`se->sched_delayed`).
    pub delayed: Vec<T>,
    /// `V` when the queue last had weight: where an empty queue places.
    pub zero_v: i64,
    /// The next buddy (`cfs_rq->next`): a queued entity's key.
    pub next: Option<u32>,
}

impl<T> Default for FairQueue<T> {
    fn default() -> Self {
        FairQueue {
            queued: Vec::new(),
            delayed: Vec::new(),
            zero_v: 0,
            next: None,
        }
    }
}

/// What [`FairQueue::pick`] chose.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Choice {
    /// The running entity, again.
    Current,
    /// The queued entity at this index.
    Queued(usize),
    /// The delayed entity at this index: to be finished, then pick again.
    Delayed(usize),
    Nothing,
}

/// What a wake is, for [`FairQueue::wakeup_preempt`] (`wake_flags` and the
/// context).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct WakeFlags {
    /// `WF_SYNC`: the waker means to block soon (a pipe or socket write).
    pub sync: bool,
    /// `WF_FORK`: a new task's first enqueue.
    pub fork: bool,
    /// `WF_RQ_SELECTED`: placement chose the CPU (the task may run on more
    /// than one), which lowers `preempt_sync()`'s threshold to a quarter.
    pub selected: bool,
    /// Posted by the running task of this CPU (`in_task()`, not an
    /// interrupt or a queued remote wake).
    pub in_task: bool,
    /// The running task is already asked to reschedule
    /// (`test_tsk_need_resched()`): the check stops there.
    pub resched_set: bool,
}

/// `update_curr()` of the running entity `curr` up to `now`, and whether it
/// asks for a reschedule: another entity is in the tree (`nr_queued > 1`)
/// and the deadline was renewed, or (since 6.17, commit 0b9ca2dcabc3) the
/// protection has ended.
pub fn update_curr(curr: &mut Entity, now: u64, others: bool, cfg: &FairConfig) -> bool {
    let Some(renewed) = curr.update_curr(now) else {
        return false;
    };
    let unprotected = cfg.features.kernel.protects_to_min_slice() && !curr.protected();
    others && (renewed || unprotected)
}

/// [`update_curr`] anywhere but the tick (an enqueue, the wake-up check):
/// Linux asks there too; the model's base asked at the tick only.
pub fn update_curr_off_tick(curr: &mut Entity, now: u64, others: bool, cfg: &FairConfig) -> bool {
    let asks = update_curr(curr, now, others, cfg);
    asks && cfg.features.kernel.resched_at_every_update()
}

impl<T: Queued> FairQueue<T> {
    /// The entities in the tree (queued, delayed) and `curr`.
    #[inline]
    pub fn entities<'a>(
        &'a self,
        curr: Option<&'a Entity>,
    ) -> impl Iterator<Item = &'a Entity> + Clone {
        self.queued
            .iter()
            .chain(self.delayed.iter())
            .map(Queued::entity)
            .chain(curr)
    }

    /// Whether any entity besides `curr` is in the tree.
    #[inline]
    pub fn others(&self) -> bool {
        !self.queued.is_empty() || !self.delayed.is_empty()
    }

    /// `V`'s sums over the tree and `curr`.
    pub fn avg(&self, curr: Option<&Entity>) -> Avg {
        // [`Avg::of`] over [`FairQueue::entities`], the same sums from the
        // same base, a loop per part: a chained iterator costs a branch
        // per element on the hot path.
        let queued = self.queued.iter().map(Queued::entity);
        let delayed = self.delayed.iter().map(Queued::entity);
        let first = queued.clone().chain(delayed.clone()).chain(curr).next();
        let mut a = Avg::at(first.map_or(self.zero_v, |e| e.vruntime));
        queued.for_each(|e| a.add(e));
        delayed.for_each(|e| a.add(e));
        if let Some(c) = curr {
            a.add(c);
        }
        a
    }

    /// `cfs_rq_min_slice()`: the smallest slice in the tree and `curr`.
    pub fn min_slice(&self, curr: Option<&Entity>) -> u64 {
        self.entities(curr)
            .map(|e| e.slice)
            .min()
            .unwrap_or(u64::MAX)
    }

    /// `place_entity()` of `se`, about to join, against the tree and `curr`.
    pub fn place(&self, se: &mut Entity, curr: Option<&Entity>, cfg: &FairConfig, initial: bool) {
        place_entity(se, self.avg(curr), initial, cfg.features.on);
    }

    /// Places `t` and queues it (`ENQUEUE_INITIAL` for a new task).
    pub fn enqueue(&mut self, mut t: T, curr: Option<&Entity>, cfg: &FairConfig, initial: bool) {
        self.place(t.entity_mut(), curr, cfg, initial);
        self.queued.push(t);
    }

    /// `set_protect_slice()` for `next`, freshly picked to run (it has left
    /// the queue): to the smallest slice of the tree and `next` (6.17), or
    /// to its deadline (6.12).
    pub fn arm_protection(&self, next: &mut Entity, cfg: &FairConfig) {
        let min = if cfg.features.kernel.protects_to_min_slice() {
            self.min_slice(None).min(next.slice)
        } else {
            next.slice
        };
        next.set_protect(min);
    }

    /// Whether the running entity `e`, blocking now (its time charged),
    /// stays delayed: `DELAY_DEQUEUE`, and it is not eligible against the
    /// tree and itself. Without the feature, no sums are taken.
    #[inline]
    pub fn would_delay(&self, e: &Entity, cfg: &FairConfig) -> bool {
        cfg.has(Features::DELAY_DEQUEUE) && !self.avg(Some(e)).eligible(e.vruntime)
    }

    /// The running entity `t` blocks (`dequeue_entity()`, `DEQUEUE_SLEEP`;
    /// its time is charged). `None`: kept, delayed (`DELAY_DEQUEUE`, as it
    /// is not eligible). `Some`: it leaves with its lag.
    pub fn block(&mut self, t: T, cfg: &FairConfig) -> Option<T> {
        let delay = self.would_delay(t.entity(), cfg);
        self.block_as(t, cfg, delay)
    }

    /// [`FairQueue::block`] with the caller's [`FairQueue::would_delay`].
    pub fn block_as(&mut self, mut t: T, cfg: &FairConfig, delay: bool) -> Option<T> {
        self.clear_buddy(t.key());
        if delay {
            self.delayed.push(t);
            return None;
        }
        self.zero_v = self.avg(Some(t.entity())).v();
        t.entity_mut().update_lag(self.zero_v, cfg.tick_ns);
        Some(t)
    }

    /// The running entity `t` leaves for good or for another CPU (an exit,
    /// a push): its lag against the tree and itself.
    pub fn leave(&mut self, t: &mut T, cfg: &FairConfig, migrating: bool) {
        let v = self.avg(Some(t.entity())).v();
        self.clear_buddy(t.key());
        self.zero_v = v;
        let e = t.entity_mut();
        e.update_lag(v, cfg.tick_ns);
        if migrating {
            keep_relative(e, cfg);
        }
    }

    /// Takes queued `key` out of the queue: its lag against the tree and
    /// `curr`; `migrating` (for another CPU: not a sleep), its deadline
    /// kept relative with `PLACE_REL_DEADLINE`.
    pub fn dequeue(
        &mut self,
        key: u32,
        curr: Option<&Entity>,
        cfg: &FairConfig,
        migrating: bool,
    ) -> Option<T> {
        let i = self.queued.iter().position(|t| t.key() == key)?;
        let v = self.avg(curr).v();
        self.clear_buddy(key);
        let mut t = remove_at(&mut self.queued, i);
        let e = t.entity_mut();
        e.update_lag(v, cfg.tick_ns);
        if migrating {
            keep_relative(e, cfg);
        }
        Some(t)
    }

    /// Takes queued `i` out to run it (no lag: it stays on this queue as
    /// `curr`); clears it as a buddy (`set_next_entity()`).
    pub fn take(&mut self, i: usize) -> T {
        let t = remove_at(&mut self.queued, i);
        self.clear_buddy(t.key());
        t
    }

    /// The pick (`pick_next_entity()`): `PICK_BUDDY`'s next buddy when it
    /// is eligible, else `pick_eevdf()` over the tree and `curr`, a
    /// protected `curr` kept with `RUN_TO_PARITY`.
    pub fn pick(&self, curr: Option<&Entity>, cfg: &FairConfig) -> Choice {
        self.pick_with(curr, cfg, cfg.has(Features::RUN_TO_PARITY))
    }

    fn pick_with(&self, curr: Option<&Entity>, cfg: &FairConfig, protect: bool) -> Choice {
        if let Some(i) = self.buddy(curr, cfg) {
            return Choice::Queued(i);
        }
        let n = self.queued.len();
        let queued = self.queued.iter().map(Queued::entity);
        let pick = if self.delayed.is_empty() {
            // No delayed entity (always, without `DELAY_DEQUEUE`): the
            // queue alone, without the cost of a chained iterator.
            pick_eevdf(queued, curr, protect, self.zero_v)
        } else {
            let tree = queued.chain(self.delayed.iter().map(Queued::entity));
            pick_eevdf(tree, curr, protect, self.zero_v)
        };
        match pick {
            Pick::Current => Choice::Current,
            Pick::Queued(i) if i < n => Choice::Queued(i),
            Pick::Queued(i) => Choice::Delayed(i - n),
            Pick::Nothing => Choice::Nothing,
        }
    }

    /// The eligible next buddy's index, when `PICK_BUDDY` takes it (more
    /// than one entity in the tree: alone, an entity is picked anyway).
    fn buddy(&self, curr: Option<&Entity>, cfg: &FairConfig) -> Option<usize> {
        let key = self.next?;
        if !cfg.has(Features::PICK_BUDDY) {
            return None;
        }
        if self.queued.len() + self.delayed.len() + curr.is_some() as usize <= 1 {
            return None;
        }
        let i = self.queued.iter().position(|t| t.key() == key)?;
        let avg = self.avg(curr);
        avg.eligible(self.queued[i].entity().vruntime).then_some(i)
    }

    /// Finishes delayed `i`, which a pick landed on: it leaves with its lag
    /// (taken while it still counts in `V`), a positive one dropped with
    /// `DELAY_ZERO`.
    pub fn finish_delayed(&mut self, i: usize, curr: Option<&Entity>, cfg: &FairConfig) -> T {
        let v = self.avg(curr).v();
        self.zero_v = v;
        let mut t = remove_at(&mut self.delayed, i);
        let e = t.entity_mut();
        e.update_lag(v, cfg.tick_ns);
        if cfg.has(Features::DELAY_ZERO) {
            e.vlag = e.vlag.min(0);
        }
        t
    }

    /// The index of delayed `key`.
    pub fn delayed_at(&self, key: u32) -> Option<usize> {
        self.delayed.iter().position(|t| t.key() == key)
    }

    /// A wake of delayed `i` (`requeue_delayed_entity()`): it becomes
    /// runnable where it is; with `DELAY_ZERO`, a lag that became positive
    /// is dropped and it is placed again (at `V`). Returns its index in the
    /// queue.
    pub fn requeue_delayed(&mut self, i: usize, curr: Option<&Entity>, cfg: &FairConfig) -> usize {
        let mut t = remove_at(&mut self.delayed, i);
        if cfg.has(Features::DELAY_ZERO) {
            let v = Avg::of(self.entities(curr).chain([t.entity()]), self.zero_v).v();
            let e = t.entity_mut();
            e.update_lag(v, cfg.tick_ns);
            if e.vlag > 0 {
                e.vlag = 0;
                self.place(t.entity_mut(), curr, cfg, false);
            }
        }
        self.queued.push(t);
        self.queued.len() - 1
    }

    /// `clear_buddies()` of `key`.
    #[inline]
    pub fn clear_buddy(&mut self, key: u32) {
        if self.next == Some(key) {
            self.next = None;
        }
    }

    /// `check_preempt_wakeup_fair()`: whether queued `woken`, just woken
    /// (or a new task), preempts the running entity `curr`, whose time is
    /// already charged (`update_curr()` at the enqueue). Sets the next
    /// buddy and limits `curr`'s protection on the way, as Linux does.
    pub fn wakeup_preempt(
        &mut self,
        woken: usize,
        curr: &mut Entity,
        cfg: &FairConfig,
        now: u64,
        w: WakeFlags,
    ) -> bool {
        let kernel = cfg.features.kernel;
        let key = self.queued[woken].key();
        let old_buddy = !kernel.reworked_next_buddy();
        if old_buddy && cfg.has(Features::NEXT_BUDDY) && !w.fork {
            // Before the rework: every wake but a fork's, first of all.
            self.next = Some(key);
        }
        if w.resched_set || !cfg.has(Features::WAKEUP_PREEMPTION) {
            return false;
        }
        let pse = *self.queued[woken].entity();
        let short = cfg.has(Features::PREEMPT_SHORT) && pse.slice < curr.slice;
        if !short && !old_buddy {
            // The rework: no preemption by a fork; a waker no longer
            // eligible gives way (6.18's stable series only); the woken
            // task becomes the buddy unless an earlier deadline holds it,
            // and a sync wake then preempts only a waker that has run
            // `sysctl_sched_migration_cost` (`preempt_sync()`).
            if w.fork {
                return false;
            }
            let avg = self.avg(Some(curr));
            if kernel.preempts_ineligible_waker() && w.in_task && !avg.eligible(curr.vruntime) {
                return true;
            }
            if cfg.has(Features::NEXT_BUDDY) && self.set_preempt_buddy(&pse, key) && w.sync {
                return preempt_sync(&pse, curr, cfg, now, w);
            }
        }
        let protect = cfg.has(Features::RUN_TO_PARITY) && !short;
        if self.pick_with(Some(curr), cfg, protect) == Choice::Queued(woken) {
            if short {
                // `cancel_protect_slice()`.
                curr.vprot = curr.vruntime;
            }
            return true;
        }
        if cfg.has(Features::RUN_TO_PARITY) && kernel.protects_to_min_slice() {
            // `update_protect_slice()`: protection lasts at most the
            // smallest slice now queued.
            let min = self.min_slice(Some(curr));
            curr.vprot = curr
                .vprot
                .min(curr.vruntime + calc_delta_fair(min, curr.weight));
        }
        false
    }

    /// `set_preempt_buddy()`: a buddy with an earlier deadline stays; else
    /// `pse` becomes it.
    fn set_preempt_buddy(&mut self, pse: &Entity, key: u32) -> bool {
        let earlier = self.next.and_then(|b| {
            self.queued
                .iter()
                .find(|t| t.key() == b)
                .map(|t| t.entity().deadline < pse.deadline)
        });
        if earlier == Some(true) {
            return false;
        }
        self.next = Some(key);
        true
    }
}

/// `preempt_sync()`: a sync wake preempts when the woken entity's deadline
/// is earlier and the waker has run `sysctl_sched_migration_cost` since its
/// time was last charged (a quarter of it when placement chose this CPU).
/// As Linux reads `now - exec_start` right after `update_curr()` set
/// `exec_start`, a wake on the waker's own CPU waits for the waker to block.
fn preempt_sync(pse: &Entity, curr: &Entity, cfg: &FairConfig, now: u64, w: WakeFlags) -> bool {
    let mut threshold = cfg.migration_cost_ns;
    if w.selected {
        threshold >>= 2;
    }
    let delta = now.saturating_sub(curr.exec_start);
    pse.deadline < curr.deadline && delta >= threshold
}

/// `PLACE_REL_DEADLINE` on a dequeue that is not a sleep: the deadline is
/// kept relative to the vruntime until the entity is placed again.
fn keep_relative(e: &mut Entity, cfg: &FairConfig) {
    if cfg.has(Features::PLACE_REL_DEADLINE) && !e.rel_deadline {
        e.deadline -= e.vruntime;
        e.rel_deadline = true;
    }
}

/// `v.remove(i)`, without a call to move nothing when `i` is the last
/// (the usual case of a short queue). The order of the rest is kept: ties
/// in the pick go to the earlier.
#[inline]
pub(crate) fn remove_at<T>(v: &mut Vec<T>, i: usize) -> T {
    if i + 1 == v.len() {
        v.pop().expect("i is in bounds")
    } else {
        v.remove(i)
    }
}

#[cfg(test)]
mod tests;
