//! Kill, stop, continue and set-mask: asked of any task from any CPU, acted
//! on by the task's holder.
//!
//! ## Protocol
//!
//! 1. The asking CPU sends the message to the task's owner as the park
//!    word names it (or acts at once when that is itself). A kill first
//!    sets the word's `killed` bit, which anyone may set.
//! 2. The owner acts on the task wherever it holds it: running (flag it;
//!    reschedule when it must leave), queued (requeue, hold, or relocate),
//!    held (release), parked (change it in its slot; a kill also wakes it,
//!    through delivery, with no waker), delayed (changed where it waits in
//!    the run queue, as a parked one; its wake finishes it first when it is
//!    stopped, killed or masked out).
//! 3. A CPU that no longer holds the task forwards the message to the owner
//!    its park word names now: a task moves only by `Adopt`, which names its
//!    new owner in the word first, so the message catches up. While a waker
//!    is placing the task it won (`Waking`, taken out of its slot, the word
//!    still naming this CPU), the message waits in this CPU's own mailbox
//!    for the next pass.
//!
//! The entry points (`kill`, `stop`, `cont`, `set_mask`) are the CPU's, in
//! `thread`; this room is what the owner does (steps 2 and 3): `Held` (`held`)
//! owns the stopped tasks, and [`Lifecycle`] acts on a task over what it is
//! lent (the run queue, the held tasks, the sleepers) and returns what the
//! CPU must then do ([`Act`]).
//!
//! Stopped, killed and masked tasks keep their own placement: a stopped one
//! is held where it is; a killed one runs only to its exit (the host checks
//! [`Shared::is_killed`]); a parked or held one whose mask changed is
//! corrected when it next runs.

use schedlab_topology::{CpuId, CpuSet};

use crate::act::Act;
use crate::effects::{Effects, WakeCause};
use crate::fair::WakeFlags;
use crate::moves::Mover;
use crate::park::TaskState;
use crate::policy::PolicyState;
use crate::rooms::Rooms;
use crate::runqueue::Resched;
use crate::shared::{Msg, Shared};
use crate::task::{Task, TaskId};

/// Steps 2 and 3 on one CPU, over what they are lent.
pub(crate) struct Lifecycle<'a, S> {
    pub(crate) cpu: CpuId,
    pub(crate) sh: &'a Shared<S>,
    /// The run queue, the held tasks, the sleepers, the counters.
    pub(crate) rooms: &'a mut Rooms<S>,
}

impl<S: PolicyState> Lifecycle<'_, S> {
    fn mover(&mut self) -> Mover<'_, S> {
        Mover {
            cpu: self.cpu,
            sh: self.sh,
            counters: &mut self.rooms.counters,
        }
    }

    /// Step 2 (or 3, when the task is not here).
    pub(crate) fn handle(&mut self, msg: Msg<S>, now: u64, fx: &mut Effects) -> Option<Act> {
        let (sh, cpu) = (self.sh, self.cpu);
        let task = msg.task()?;
        if !self.owns(task) {
            forward(&mut self.mover(), msg, fx);
            return None;
        }
        let parked = self.rooms.sleepers.parked_here(cpu, sh, task);
        if self.rooms.rq.fair.delayed_at(task.0).is_some() {
            return self.delayed(msg, fx);
        }
        match msg {
            Msg::Kill { task } => {
                if parked {
                    if let Some(t) = sh.slot(task).parked.lock().as_mut() {
                        t.killed = true;
                    }
                    // The scheduler's own wake, through delivery.
                    fx.resched = true;
                    let cause = WakeCause::NONE;
                    return Some(Act::Deliver { task, cause });
                }
                if let Some(mut t) = self.rooms.held.release(task) {
                    t.killed = true;
                    t.stopped = false;
                    return self.release(t, now, fx);
                }
                if let Some(t) = self.rooms.rq.runnable_mut(task) {
                    t.killed = true;
                }
            }
            Msg::Stop { task } => {
                if let Some(mut t) = self.take_waiting(task, false) {
                    t.stopped = true;
                    self.rooms.held.hold(t);
                } else if self.rooms.rq.current_id() == Some(task) {
                    self.rooms.rq.current.as_mut().expect("checked").stopped = true;
                    return Some(Act::Resched(Resched(task)));
                } else if parked {
                    if let Some(t) = sh.slot(task).parked.lock().as_mut() {
                        t.stopped = true;
                    }
                }
            }
            Msg::Continue { task } => {
                if let Some(mut t) = self.rooms.held.release(task) {
                    t.stopped = false;
                    return self.release(t, now, fx);
                }
                if parked {
                    if let Some(t) = sh.slot(task).parked.lock().as_mut() {
                        t.stopped = false;
                    }
                } else if let Some(t) = self.rooms.rq.runnable_mut(task) {
                    t.stopped = false;
                }
            }
            Msg::SetMask { task, mask } => return self.set_mask(task, *mask, parked, now, fx),
            Msg::Wake { .. }
            | Msg::Requeue { .. }
            | Msg::Adopt { .. }
            | Msg::StealRequest { .. }
            | Msg::Balance(_) => {
                unreachable!("not a lifecycle message")
            }
        }
        None
    }

    /// Step 2 for a task delayed here (`DELAY_DEQUEUE`): changed where it
    /// waits, as a parked one is in its slot; a kill wakes it.
    fn delayed(&mut self, msg: Msg<S>, fx: &mut Effects) -> Option<Act> {
        let cpus = *self.sh.topology().cpus();
        let task = msg.task()?;
        let t = self.rooms.rq.delayed_mut(task)?;
        match msg {
            Msg::Kill { .. } => {
                t.killed = true;
                fx.resched = true;
                let cause = WakeCause::NONE;
                return Some(Act::Deliver { task, cause });
            }
            Msg::Stop { .. } => t.stopped = true,
            Msg::Continue { .. } => t.stopped = false,
            Msg::SetMask { mask, .. } => {
                let mask = *mask & cpus;
                if !mask.is_empty() {
                    t.mask = mask;
                }
            }
            _ => unreachable!("not a lifecycle message"),
        }
        None
    }

    /// Whether this CPU holds `task` (running, queued, held, delayed, or
    /// parked with its entity still in its slot).
    pub(crate) fn owns(&self, task: TaskId) -> bool {
        self.rooms.rq.runnable().any(|t| t.id == task)
            || self.rooms.held.get(task).is_some()
            || self.rooms.rq.fair.delayed_at(task.0).is_some()
            || self.rooms.sleepers.parked_here(self.cpu, self.sh, task)
    }

    /// A `SetMask` for a task this CPU holds (`parked`: parked here).
    fn set_mask(
        &mut self,
        task: TaskId,
        mask: CpuSet,
        parked: bool,
        now: u64,
        fx: &mut Effects,
    ) -> Option<Act> {
        let mask = mask & *self.sh.topology().cpus();
        if mask.is_empty() {
            return None;
        }
        let here = mask.contains(self.cpu);
        if parked {
            // Corrected at its next wake.
            if let Some(t) = self.sh.slot(task).parked.lock().as_mut() {
                t.mask = mask;
            }
        } else if let Some(t) = self.rooms.held.get_mut(task) {
            // Corrected at its continue.
            t.mask = mask;
        } else if self.rooms.rq.current_id() == Some(task) {
            self.rooms.rq.current.as_mut().expect("checked").mask = mask;
            if !here {
                return Some(Act::Resched(Resched(task)));
            }
        } else if let Some(mut t) = self.take_waiting(task, !here) {
            t.mask = mask;
            if !here {
                let around = self.cpu;
                self.mover().relocate(t, TaskState::Queued, around, now, fx);
                return None;
            }
            self.rooms.rq.put_back(t);
        }
        None
    }

    /// A queued task taken out of the queue (its lag recorded; `migrating`:
    /// it leaves for another CPU).
    fn take_waiting(&mut self, task: TaskId, migrating: bool) -> Option<Task<S>> {
        if self.rooms.rq.waits(task) {
            self.rooms.rq.take_queued(task, migrating)
        } else {
            None
        }
    }

    /// A held task runs again: here, or inside a mask changed meanwhile.
    fn release(&mut self, task: Task<S>, now: u64, fx: &mut Effects) -> Option<Act> {
        if task.mask.contains(self.cpu) {
            return self.rooms.queue(self.cpu, task, now, WakeFlags::default());
        }
        let around = self.cpu;
        self.mover()
            .relocate(task, TaskState::Queued, around, now, fx);
        None
    }
}

/// Step 3: a message for a task that is not on the mover's CPU goes to its
/// owner now.
pub(crate) fn forward<S: PolicyState>(mover: &mut Mover<'_, S>, msg: Msg<S>, fx: &mut Effects) {
    let Some(task) = msg.task() else { return };
    let w = mover.sh.task_word(task);
    if w.state == TaskState::Dead {
        return;
    }
    if w.owner == mover.cpu {
        if w.state == TaskState::Waking {
            // A waker is placing it: try again at the next pass.
            mover.post(mover.cpu, msg, fx);
        }
        return;
    }
    mover.post(w.owner, msg, fx);
}
