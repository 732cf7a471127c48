//! The one place a CPU carries out what its rooms decide: the messages a
//! pass drains, the [`Act`]s the wake protocol, the pick and the lifecycle
//! return, and the balancer's [`Request`]s. Only here is a task queued on
//! this CPU, handed to another, a message posted and a CPU kicked, and the
//! CPU's numbers published.

use schedlab_topology::CpuId;

use crate::act::Act;
use crate::balancer::{Balancer, Cx, Request, Requests};
use crate::cookie::give_cookie;
use crate::effects::{Effects, PlaceReason, Trace, WakeCause};
use crate::fair::WakeFlags;
use crate::lifecycle::Lifecycle;
use crate::moves::{Move, Mover};
use crate::park::TaskState;
use crate::pick::{publish_core, Picking};
use crate::policy::Policy;
use crate::runqueue::Resched;
use crate::shared::{Msg, Shared};
use crate::task::{Task, TaskId};

use super::CpuSched;

impl<P: Policy, B: Balancer> CpuSched<P, B> {
    /// Sets this CPU's reschedule flag (traced once per setting).
    pub(crate) fn resched(&mut self, r: Resched, fx: &mut Effects) {
        if !self.rooms.pick.need_resched {
            fx.trace.push(Trace::Resched { task: r.0 });
        }
        self.rooms.pick.need_resched = true;
        fx.resched = true;
    }

    pub(super) fn handle(
        &mut self,
        sh: &Shared<P::TaskState>,
        msg: Msg<P::TaskState>,
        now: u64,
        fx: &mut Effects,
    ) {
        match msg {
            Msg::Wake { task, cause } => {
                if let Some(a) = waking!(self, sh).handle_wake(task, cause, now, fx) {
                    self.act(sh, a, now, fx);
                }
            }
            Msg::Requeue { task, cause } => {
                if let Some(a) = waking!(self, sh).requeue(task, cause, now, fx) {
                    self.act(sh, a, now, fx);
                }
            }
            Msg::Adopt { task, reason, sync } => {
                if let Some(a) = waking!(self, sh).adopt(task, reason, sync, now, fx) {
                    self.act(sh, a, now, fx);
                }
            }
            Msg::StealRequest {
                thief,
                cookie: Some(c),
            } => {
                if let Some(t) = give_cookie(&mut self.rooms.rq, thief, c) {
                    self.send(sh, t, thief, PlaceReason::Steal, TaskState::Queued, fx);
                    self.publish(sh);
                }
            }
            Msg::StealRequest {
                thief,
                cookie: None,
            } => {
                let req = self.balancer.asked(&mut cx!(self, sh), thief, now);
                self.carry_out(sh, req, fx);
            }
            Msg::Balance(msg) => {
                let msg = crate::shared::unbox::<B::Msg>(msg);
                let req = self.balancer.handle(&mut cx!(self, sh), msg, now);
                self.carry_out(sh, req, fx);
            }
            Msg::Kill { .. } | Msg::Stop { .. } | Msg::Continue { .. } | Msg::SetMask { .. } => {
                self.handle_lifecycle(sh, msg, now, fx)
            }
        }
    }

    /// Queues a task here (a stopped one is held), then asks for a pass when
    /// nothing runs, and publishes the new load.
    pub(crate) fn enqueue(
        &mut self,
        sh: &Shared<P::TaskState>,
        task: Task<P::TaskState>,
        now: u64,
        w: WakeFlags,
        fx: &mut Effects,
    ) {
        if let Some(a) = self.rooms.queue(self.id, task, now, w) {
            self.act(sh, a, now, fx);
        }
    }

    /// Publishes this CPU's load for balancing and, under core scheduling,
    /// its run queue to its core.
    pub(crate) fn publish(&mut self, sh: &Shared<P::TaskState>) {
        let rq = &self.rooms.rq;
        let load = rq.current.is_some() as u32 + rq.queued() as u32;
        let fair = rq.fair.queued.len() + rq.current.as_ref().is_some_and(|t| !t.is_rt()) as usize;
        sh.publish_cpu(self.id, load, fair as u32, &rq.avg);
        self.balancer.publish(&cx!(self, sh));
        publish_core(self.id, sh, &self.rooms.pick, &mut self.rooms.rq);
    }

    /// Carries out a balancer's requests in order (see [`crate::balancer`]);
    /// when a task moved, publishes the new load.
    pub(super) fn carry_out(
        &mut self,
        sh: &Shared<P::TaskState>,
        req: Requests<B::Msg>,
        fx: &mut Effects,
    ) {
        if req.is_empty() {
            return;
        }
        let mut moved = false;
        for r in req {
            match r {
                Request::Send { task, to, reason } => {
                    let t = self
                        .rooms
                        .rq
                        .take_queued(task, true)
                        .expect("a balancer sends a task queued here");
                    self.send(sh, t, to, reason, TaskState::Queued, fx);
                    moved = true;
                }
                Request::Post { to, msg } => {
                    let msg = Msg::Balance(alloc::boxed::Box::new(msg));
                    self.post(sh, to, msg, fx);
                }
                Request::Ask { victim } => self.ask(sh, victim, None, fx),
                Request::PushRunning { task, to } => {
                    self.rooms.pick.pushing = Some((task, to));
                    self.resched(Resched(task), fx);
                }
            }
        }
        if moved {
            self.publish(sh);
        }
    }

    /// A wake posted on this CPU (the `wake` room's steps 2 and 3).
    pub(crate) fn deliver(
        &mut self,
        sh: &Shared<P::TaskState>,
        task: TaskId,
        cause: WakeCause,
        now: u64,
        fx: &mut Effects,
    ) {
        if let Some(a) = waking!(self, sh).deliver(task, cause, now, fx) {
            self.act(sh, a, now, fx);
        }
    }

    /// Fires due deadlines: a wake with no waker, through delivery.
    pub(super) fn fire_deadlines(&mut self, sh: &Shared<P::TaskState>, now: u64, fx: &mut Effects) {
        // Most passes have none due: no room is lent for those.
        while self
            .rooms
            .sleepers
            .next_deadline()
            .is_some_and(|d| d <= now)
        {
            let Some(id) = waking!(self, sh).next_due(now) else {
                break;
            };
            self.deliver(sh, id, WakeCause::NONE, now, fx);
        }
    }

    /// Picks what runs next (the `pick` room); `None`: idle.
    pub(super) fn schedule(
        &mut self,
        sh: &Shared<P::TaskState>,
        now: u64,
        fx: &mut Effects,
    ) -> Option<TaskId> {
        Picking {
            cpu: self.id,
            sh,
            balancer: &mut self.balancer,
            rooms: &mut self.rooms,
        }
        .schedule(now, fx)
    }

    /// A lifecycle message for a task here (the `lifecycle` room).
    pub(crate) fn handle_lifecycle(
        &mut self,
        sh: &Shared<P::TaskState>,
        msg: Msg<P::TaskState>,
        now: u64,
        fx: &mut Effects,
    ) {
        let act = Lifecycle {
            cpu: self.id,
            sh,
            rooms: &mut self.rooms,
        }
        .handle(msg, now, fx);
        if let Some(a) = act {
            self.act(sh, a, now, fx);
        }
    }

    /// Carries out what a room left for the CPU.
    pub(crate) fn act(&mut self, sh: &Shared<P::TaskState>, act: Act, now: u64, fx: &mut Effects) {
        match act {
            Act::Queued(resched) => {
                if let Some(r) = resched {
                    self.resched(r, fx);
                }
                if self.rooms.rq.current.is_none() {
                    // Nothing runs here: a pass must pick it.
                    fx.resched = true;
                }
                self.publish(sh);
            }
            Act::Resched(r) => self.resched(r, fx),
            Act::Deliver { task, cause } => self.deliver(sh, task, cause, now, fx),
        }
    }

    fn mover<'a>(&'a mut self, sh: &'a Shared<P::TaskState>) -> Mover<'a, P::TaskState> {
        Mover {
            cpu: self.id,
            sh,
            counters: &mut self.rooms.counters,
        }
    }

    /// Hands `task` from here to `to` (`from` is its park state now).
    pub(crate) fn send(
        &mut self,
        sh: &Shared<P::TaskState>,
        task: Task<P::TaskState>,
        to: CpuId,
        reason: PlaceReason,
        from: TaskState,
        fx: &mut Effects,
    ) {
        let origin = self.id;
        let mv = Move {
            origin,
            to,
            reason,
            from,
            sync: false,
        };
        self.mover(sh).hand(task, mv, fx);
    }

    /// Posts `msg` to `to` and kicks it if it must be.
    pub(crate) fn post(
        &mut self,
        sh: &Shared<P::TaskState>,
        to: CpuId,
        msg: Msg<P::TaskState>,
        fx: &mut Effects,
    ) {
        self.mover(sh).post(to, msg, fx);
    }

    /// Asks `victim` for a queued task (of `cookie`, when one is named).
    /// One ask is out at a time (`steal_pending`, cleared at the next
    /// round of the pass).
    pub(super) fn ask(
        &mut self,
        sh: &Shared<P::TaskState>,
        victim: CpuId,
        cookie: Option<u64>,
        fx: &mut Effects,
    ) {
        self.steal_pending = true;
        let msg = Msg::StealRequest {
            thief: self.id,
            cookie,
        };
        self.post(sh, victim, msg, fx);
    }
}
