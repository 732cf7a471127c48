//! What runs next: the local pick (RT, then EEVDF, the running task
//! competing), or, under core scheduling, the core-wide pick whose protocol
//! is in `coresched`; and running what the pick chose
//! (`put_prev_set_next_task()`).

use alloc::vec::Vec;

use crate::balancer::Balancer;
use crate::coresched::{CorePick, CoreState, RqView, View};
use crate::effects::Effects;
use crate::park::TaskState;
use crate::policy::Policy;
use crate::shared::Shared;
use crate::task::{pick_task, Pickable, Task, TaskId};
use crate::CpuSched;

/// What a pick chose.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Next {
    /// The running task, again (a re-pick).
    Again,
    /// This waiting task.
    Take(TaskId),
    Idle,
}

impl<P: Policy, B: Balancer> CpuSched<P, B> {
    /// Picks what runs next; the running task competes. `None`: idle.
    pub(crate) fn schedule(
        &mut self,
        sh: &Shared<P::TaskState>,
        now: u64,
        fx: &mut Effects,
    ) -> Option<TaskId> {
        let resched = core::mem::take(&mut self.pick.need_resched);
        self.rq.update_curr(now);
        if self
            .pick
            .pushing
            .is_some_and(|(id, _)| self.current() != Some(id))
        {
            self.pick.pushing = None;
        }
        let runnable = self.running().is_some();
        if runnable && !resched {
            return self.current();
        }
        let next = if self.pick.core_sched {
            self.core_pick(sh, now, fx)
        } else {
            let p = pick_task(
                self.running(),
                self.rq.fair.iter(),
                self.rq.rt.first(),
                &self.rq.cfg,
                self.rq.zero_v,
            );
            match p {
                Some(t) if Some(t.id) == self.current() => Next::Again,
                Some(t) => Next::Take(t.id),
                None => Next::Idle,
            }
        };
        self.run_pick(sh, next, now, fx)
    }

    /// The running task, when it may go on running here (not stopped, in
    /// its mask).
    fn running(&self) -> Option<&Task<P::TaskState>> {
        let pushed = self.pick.pushing.map(|(id, _)| id);
        self.rq
            .current
            .as_ref()
            .filter(|c| !c.stopped && c.mask.contains(self.id) && Some(c.id) != pushed)
    }

    /// The core-wide pick (the protocol is in `coresched`): the pick a
    /// sibling's selection left here, else the local pick when no cookie
    /// is in play, else a selection; siblings it reschedules are kicked.
    fn core_pick(&mut self, sh: &Shared<P::TaskState>, now: u64, fx: &mut Effects) -> Next {
        let cfg = self.rq.cfg;
        let (pick, resched) = {
            let mut core = sh.core(self.id).lock();
            self.publish_view(&mut core);
            let mut pick = core
                .take_pick(self.id, &mut self.pick.sched_seq)
                .filter(|p| self.can_run(*p));
            if pick.is_none() && !core.need_sync() {
                pick = core.local_pick(self.id, &cfg);
            }
            match pick {
                Some(p) => (p, Vec::new()),
                None => {
                    let s = core.select(self.id, now, &cfg, &mut self.pick.sched_seq);
                    (s.mine, s.resched)
                }
            }
        };
        for cpu in resched {
            let k = sh.resched_remote(cpu);
            self.kick(k, fx);
        }
        match pick {
            CorePick::Task(id) if self.running().is_some_and(|c| c.id == id) => Next::Again,
            CorePick::Task(id) => Next::Take(id),
            CorePick::Idle => Next::Idle,
        }
    }

    /// Whether a pick a sibling's selection left here can still be run.
    fn can_run(&self, p: CorePick) -> bool {
        match p {
            CorePick::Task(id) => self.running().is_some_and(|c| c.id == id) || self.rq.waits(id),
            CorePick::Idle => true,
        }
    }

    /// Runs what the pick chose (`put_prev_set_next_task()`): the running
    /// task again, another task, or nothing.
    fn run_pick(
        &mut self,
        sh: &Shared<P::TaskState>,
        next: Next,
        now: u64,
        fx: &mut Effects,
    ) -> Option<TaskId> {
        let next = match next {
            Next::Again => {
                // A re-pick: Linux renews nothing, so an expired vprot stays
                // expired; the seed-004 fix renews it.
                if self.rq.cfg.protect_on_repick {
                    self.rq.renew_protection();
                }
                return self.current();
            }
            Next::Take(id) => Some(self.rq.take_waiting(id)),
            Next::Idle => None,
        };
        // Switching (`put_prev_entity()`, `set_next_entity()` update the
        // signals first): the previous task goes back (or away).
        self.rq.sync_pelt();
        if let Some(mut prev) = self.rq.current.take() {
            prev.last_ran = now;
            self.balancer.ran(self.id, sh.topology(), &mut prev, now);
            let push = self.pick.pushing.take();
            sh.slot(prev.id)
                .park
                .set(TaskState::Running, TaskState::Queued);
            if prev.stopped {
                self.rq.dirty = true;
                self.held.insert(prev.id, prev);
            } else if !prev.mask.contains(self.id) {
                self.rq.dirty = true;
                self.rq.dequeue_lag(&mut prev);
                self.relocate(sh, prev, TaskState::Queued, self.id, now, fx);
            } else if let Some((_, dst)) = push.filter(|(id, _)| *id == prev.id) {
                // The stopper's `active_load_balance_cpu_stop()`.
                self.rq.dirty = true;
                self.rq.dequeue_lag(&mut prev);
                self.send(
                    sh,
                    prev,
                    dst,
                    crate::effects::PlaceReason::Balance,
                    TaskState::Queued,
                    fx,
                );
            } else {
                self.rq.put_back(prev);
            }
        }
        let mut next = next?;
        self.rq.sync_task(&mut next, true, false);
        sh.slot(next.id)
            .park
            .set(TaskState::Queued, TaskState::Running);
        next.fair.exec_start = now;
        next.fair.prev_sum_exec = next.fair.sum_exec;
        // A fresh pick arms protection, a sibling's selection included: its
        // install ends in `put_prev_set_next_task()` too.
        self.rq.arm_protection(&mut next);
        let id = next.id;
        self.rq.current = Some(next);
        Some(id)
    }

    /// Publishes this CPU's run queue to its core (core scheduling only),
    /// telling it first when the runnable set changed; returns how many
    /// siblings the core's last selection forced idle.
    pub(crate) fn publish_core(&mut self, sh: &Shared<P::TaskState>) -> u32 {
        if !self.pick.core_sched {
            return 0;
        }
        let mut core = sh.core(self.id).lock();
        self.publish_view(&mut core);
        core.forceidle
    }

    fn publish_view(&mut self, core: &mut CoreState) {
        if core::mem::take(&mut self.rq.dirty) {
            core.task_seq += 1;
        }
        let view = |t: &Task<P::TaskState>| View {
            id: t.id,
            cookie: t.cookie,
            class: t.class(),
            fair: t.fair,
        };
        let running = self.running().map(view);
        let curr = self.current();
        let v: &mut RqView = &mut core.sib(self.id).view;
        v.curr = curr;
        v.running = running;
        v.zero_v = self.rq.zero_v;
        v.waiting.clear();
        v.waiting
            .extend(self.rq.fair.iter().chain(self.rq.rt.iter()).map(view));
    }
}
