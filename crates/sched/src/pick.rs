//! What runs next: the local pick (RT, then EEVDF, the running task
//! competing), or, under core scheduling, the core-wide pick whose protocol
//! is in `coresched`; and running what the pick chose
//! (`put_prev_set_next_task()`).
//!
//! A room: [`Picking`] is lent the run queue, the pick's own state
//! ([`PickState`]), the held tasks, the counters and the balancer (which
//! accounts a task's run as it leaves the CPU), and returns what it chose.
//! A running task that must leave (out of its mask, or pushed by the
//! stopper) is handed on through the doors (`moves`).

use alloc::vec::Vec;

use schedlab_topology::CpuId;

use crate::balancer::Balancer;
use crate::coresched::{CorePick, CoreState, RqView, View};
use crate::effects::{Effects, PlaceReason};
use crate::fair::Choice;
use crate::moves::{Move, Mover};
use crate::park::TaskState;
use crate::pick_state::PickState;
use crate::policy::PolicyState;
use crate::rooms::Rooms;
use crate::runqueue::RunQueue;
use crate::shared::Shared;
use crate::sync::spin_wait;
use crate::task::{pick_rt, Pickable, Task, TaskId};

/// What a pick chose.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Next {
    /// The running task, again (a re-pick).
    Again,
    /// This waiting task.
    Take(TaskId),
    Idle,
}

/// The pick on one CPU, over what it is lent.
pub(crate) struct Picking<'a, S, B> {
    pub(crate) cpu: CpuId,
    pub(crate) sh: &'a Shared<S>,
    pub(crate) balancer: &'a mut B,
    /// The run queue, the pick's state, the held tasks, the counters.
    pub(crate) rooms: &'a mut Rooms<S>,
}

impl<S: PolicyState, B: Balancer> Picking<'_, S, B> {
    /// Picks what runs next; the running task competes. `None`: idle.
    pub(crate) fn schedule(&mut self, now: u64, fx: &mut Effects) -> Option<TaskId> {
        let resched = core::mem::take(&mut self.rooms.pick.need_resched);
        self.rooms.rq.update_curr(now);
        let current = self.rooms.rq.current_id();
        if self
            .rooms
            .pick
            .pushing
            .is_some_and(|(id, _)| current != Some(id))
        {
            self.rooms.pick.pushing = None;
        }
        let runnable = running(self.cpu, &self.rooms.pick, &self.rooms.rq).is_some();
        if runnable && !resched {
            return current;
        }
        let next = if self.rooms.pick.core_sched {
            self.core_pick(now, fx)
        } else {
            match self.local_pick() {
                Some(next) => next,
                None => {
                    // A wake won a delayed task the pick landed on: the
                    // pass drains the winner's requeue, then picks again.
                    self.rooms.pick.need_resched = true;
                    self.rooms.pick.wait_mail = true;
                    return current;
                }
            }
        };
        self.run_pick(next, now, fx)
    }

    /// The pick on this CPU alone: RT first ([`pick_rt`]), then the fair
    /// class's, the running task competing. A fair pick that lands on a
    /// delayed task finishes it (it leaves for good, parked) and picks
    /// again, as `pick_task_fair()` does. `None`: a wake won that delayed
    /// task first, and its requeue is in this CPU's mailbox or about to be.
    fn local_pick(&mut self) -> Option<Next> {
        loop {
            let rq = &self.rooms.rq;
            let run = running(self.cpu, &self.rooms.pick, rq);
            let current = rq.current_id();
            let take = |t: &Task<S>| {
                if Some(t.id) == current {
                    Next::Again
                } else {
                    Next::Take(t.id)
                }
            };
            if let Some(t) = pick_rt(run, rq.rt.first()) {
                return Some(take(t));
            }
            let curr = run.filter(|c| !c.is_rt()).map(|c| &c.fair);
            match rq.pick_fair(curr) {
                Choice::Current => return Some(take(run.expect("picked"))),
                Choice::Queued(i) => return Some(Next::Take(rq.fair.queued[i].id)),
                Choice::Nothing => return Some(Next::Idle),
                Choice::Delayed(i) => {
                    if !self.settle(i) {
                        return None;
                    }
                }
            }
        }
    }

    /// Finishes delayed `i`, which the pick landed on: `Delayed -> Parked`,
    /// its entity into its slot (its sleepers' entry stays: it parked
    /// here). `false` when a wake won it first (see `park`'s step 4).
    fn settle(&mut self, i: usize) -> bool {
        let id = self.rooms.rq.fair.delayed[i].id;
        let slot = self.sh.slot(id);
        if !slot.park.settle_delayed() {
            while !self.sh.has_mail(self.cpu) {
                spin_wait();
            }
            return false;
        }
        let t = self.rooms.rq.finish_delayed(i);
        *slot.parked.lock() = Some(t);
        true
    }

    /// The core-wide pick (the protocol is in `coresched`): the pick a
    /// sibling's selection left here, else the local pick when no cookie
    /// is in play, else a selection; siblings it reschedules are kicked.
    // Out of line: only core scheduling picks core-wide, and the common
    // pick stays small without it.
    #[inline(never)]
    fn core_pick(&mut self, now: u64, fx: &mut Effects) -> Next {
        let (cpu, cfg) = (self.cpu, self.rooms.rq.cfg);
        let (pick, resched) = {
            let mut core = self.sh.core(cpu).lock();
            publish_view(cpu, &self.rooms.pick, &mut self.rooms.rq, &mut core);
            let mut pick = core
                .take_pick(cpu, &mut self.rooms.pick.sched_seq)
                .filter(|p| self.can_run(*p));
            if pick.is_none() && !core.need_sync() {
                pick = core.local_pick(cpu, &cfg);
            }
            match pick {
                Some(p) => (p, Vec::new()),
                None => {
                    let s = core.select(cpu, now, &cfg, &mut self.rooms.pick.sched_seq);
                    (s.mine, s.resched)
                }
            }
        };
        for sib in resched {
            let k = self.sh.resched_remote(sib);
            self.rooms.counters.kick(k, fx);
        }
        let running = running(cpu, &self.rooms.pick, &self.rooms.rq).map(|c| c.id);
        match pick {
            CorePick::Task(id) if running == Some(id) => Next::Again,
            CorePick::Task(id) => Next::Take(id),
            CorePick::Idle => Next::Idle,
        }
    }

    /// Whether a pick a sibling's selection left here can still be run.
    fn can_run(&self, p: CorePick) -> bool {
        match p {
            CorePick::Task(id) => {
                running(self.cpu, &self.rooms.pick, &self.rooms.rq).is_some_and(|c| c.id == id)
                    || self.rooms.rq.waits(id)
            }
            CorePick::Idle => true,
        }
    }

    /// Runs what the pick chose (`put_prev_set_next_task()`): the running
    /// task again, another task, or nothing.
    fn run_pick(&mut self, next: Next, now: u64, fx: &mut Effects) -> Option<TaskId> {
        let next = match next {
            Next::Again => {
                // A re-pick: Linux renews nothing, so an expired vprot stays
                // expired; the seed-004 fix renews it.
                if self.rooms.rq.cfg.protect_on_repick {
                    self.rooms.rq.renew_protection();
                }
                return self.rooms.rq.current_id();
            }
            Next::Take(id) => Some(self.rooms.rq.take_waiting(id)),
            Next::Idle => None,
        };
        // Switching (`put_prev_entity()`, `set_next_entity()` update the
        // signals first): the previous task goes back (or away).
        self.rooms.rq.sync_pelt();
        if let Some(prev) = self.rooms.rq.current.take() {
            self.put_prev(prev, now, fx);
        }
        let mut next = next?;
        self.rooms.rq.sync_task(&mut next, true, false);
        self.sh
            .slot(next.id)
            .park
            .set(TaskState::Queued, TaskState::Running);
        next.fair.exec_start = now;
        next.fair.prev_sum_exec = next.fair.sum_exec;
        // A fresh pick arms protection, a sibling's selection included: its
        // install ends in `put_prev_set_next_task()` too.
        self.rooms.rq.arm_protection(&mut next);
        let id = next.id;
        self.rooms.rq.current = Some(next);
        Some(id)
    }

    /// The task that ran goes back to the queue, or is held (stopped), or
    /// leaves: relocated (out of its mask) or pushed (the stopper's
    /// `active_load_balance_cpu_stop()`).
    fn put_prev(&mut self, mut prev: Task<S>, now: u64, fx: &mut Effects) {
        prev.last_ran = now;
        self.balancer
            .ran(self.cpu, self.sh.topology(), &mut prev, now);
        let push = self.rooms.pick.pushing.take();
        self.sh
            .slot(prev.id)
            .park
            .set(TaskState::Running, TaskState::Queued);
        let mut mover = Mover {
            cpu: self.cpu,
            sh: self.sh,
            counters: &mut self.rooms.counters,
        };
        if prev.stopped {
            self.rooms.rq.dirty = true;
            self.rooms.held.hold(prev);
            return;
        }
        mover.counters.switches_preempted += 1;
        if !prev.mask.contains(self.cpu) {
            self.rooms.rq.dirty = true;
            self.rooms.rq.dequeue_lag(&mut prev);
            mover.relocate(prev, TaskState::Queued, self.cpu, now, fx);
        } else if let Some((_, to)) = push.filter(|(id, _)| *id == prev.id) {
            self.rooms.rq.dirty = true;
            self.rooms.rq.dequeue_lag(&mut prev);
            let mv = Move {
                origin: self.cpu,
                to,
                reason: PlaceReason::Balance,
                from: TaskState::Queued,
                sync: false,
            };
            mover.hand(prev, mv, fx);
        } else {
            self.rooms.rq.put_back(prev);
        }
    }
}

/// The running task on `cpu`, when it may go on running there (not
/// stopped, in its mask, not being pushed).
pub(crate) fn running<'r, S>(
    cpu: CpuId,
    pick: &PickState,
    rq: &'r RunQueue<S>,
) -> Option<&'r Task<S>> {
    let pushed = pick.pushing.map(|(id, _)| id);
    rq.current
        .as_ref()
        .filter(|c| !c.stopped && c.mask.contains(cpu) && Some(c.id) != pushed)
}

/// Publishes `cpu`'s run queue to its core (core scheduling only), telling
/// it first when the runnable set changed; returns how many siblings the
/// core's last selection forced idle.
#[inline]
pub(crate) fn publish_core<S: PolicyState>(
    cpu: CpuId,
    sh: &Shared<S>,
    pick: &PickState,
    rq: &mut RunQueue<S>,
) -> u32 {
    if !pick.core_sched {
        return 0;
    }
    let mut core = sh.core(cpu).lock();
    publish_view(cpu, pick, rq, &mut core);
    core.forceidle
}

fn publish_view<S: PolicyState>(
    cpu: CpuId,
    pick: &PickState,
    rq: &mut RunQueue<S>,
    core: &mut CoreState,
) {
    if core::mem::take(&mut rq.dirty) {
        core.task_seq += 1;
    }
    let view = |t: &Task<S>| View {
        id: t.id,
        cookie: t.cookie,
        class: t.class(),
        fair: t.fair,
    };
    let running = running(cpu, pick, rq).map(view);
    let curr = rq.current_id();
    let v: &mut RqView = &mut core.sib(cpu).view;
    v.curr = curr;
    v.running = running;
    v.zero_v = rq.fair.zero_v;
    v.waiting.clear();
    // Delayed tasks are not runnable: the core-wide pick does not see them
    // (nor, simplified, count them in `V`).
    v.waiting
        .extend(rq.fair.queued.iter().chain(rq.rt.iter()).map(view));
}
