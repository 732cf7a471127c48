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
//!    through delivery, with no waker).
//! 3. A CPU that no longer holds the task forwards the message to the owner
//!    its park word names now: a task moves only by `Adopt`, which names its
//!    new owner in the word first, so the message catches up. While a waker
//!    is placing the task it won (`Waking`, taken out of its slot, the word
//!    still naming this CPU), the message waits in this CPU's own mailbox
//!    for the next pass.
//!
//! Stopped, killed and masked tasks keep their own placement: a stopped one
//! is held where it is; a killed one runs only to its exit (the host checks
//! [`Shared::is_killed`]); a parked or held one whose mask changed is
//! corrected when it next runs.

use schedlab_topology::CpuSet;

use crate::balancer::Balancer;
use crate::effects::{Effects, WakeCause};
use crate::park::TaskState;
use crate::policy::Policy;
use crate::runqueue::Resched;
use crate::shared::{Msg, Shared};
use crate::task::{Task, TaskId};
use crate::CpuSched;

impl<P: Policy, B: Balancer> CpuSched<P, B> {
    /// Kills `target`: it runs only to its exit (the host checks
    /// [`Shared::is_killed`] before each of its steps).
    pub fn kill(&mut self, sh: &Shared<P::TaskState>, target: TaskId, now: u64) -> Effects {
        let old = sh.slot(target).park.kill();
        let mut fx = Effects::default();
        if old.state != TaskState::Dead {
            self.send_to_owner(sh, Msg::Kill { task: target }, now, &mut fx);
        }
        fx
    }

    pub fn stop(&mut self, sh: &Shared<P::TaskState>, target: TaskId, now: u64) -> Effects {
        let mut fx = Effects::default();
        self.send_to_owner(sh, Msg::Stop { task: target }, now, &mut fx);
        fx
    }

    pub fn cont(&mut self, sh: &Shared<P::TaskState>, target: TaskId, now: u64) -> Effects {
        let mut fx = Effects::default();
        self.send_to_owner(sh, Msg::Continue { task: target }, now, &mut fx);
        fx
    }

    /// Changes `target`'s mask; its owner corrects its place.
    pub fn set_mask(
        &mut self,
        sh: &Shared<P::TaskState>,
        target: TaskId,
        mask: CpuSet,
        now: u64,
    ) -> Effects {
        let mut fx = Effects::default();
        self.send_to_owner(
            sh,
            Msg::SetMask {
                task: target,
                mask: alloc::boxed::Box::new(mask),
            },
            now,
            &mut fx,
        );
        fx
    }

    /// Step 1: to the task's owner, or acted on here.
    fn send_to_owner(
        &mut self,
        sh: &Shared<P::TaskState>,
        msg: Msg<P::TaskState>,
        now: u64,
        fx: &mut Effects,
    ) {
        let task = msg.task().expect("lifecycle messages name a task");
        let owner = sh.task_word(task).owner;
        if owner == self.id {
            self.handle_lifecycle(sh, msg, now, fx);
        } else {
            let k = sh.post(Some(self.id), owner, msg);
            self.kick(k, fx);
        }
    }

    /// Step 2 (or 3, when the task is not here).
    pub(crate) fn handle_lifecycle(
        &mut self,
        sh: &Shared<P::TaskState>,
        msg: Msg<P::TaskState>,
        now: u64,
        fx: &mut Effects,
    ) {
        let Some(task) = msg.task() else { return };
        if !self.owns(sh, task) {
            return self.forward(sh, msg, fx);
        }
        let parked = self.parked_here(sh, task);
        match msg {
            Msg::Kill { task } => {
                if parked {
                    if let Some(t) = sh.slot(task).parked.lock().as_mut() {
                        t.killed = true;
                    }
                    // The scheduler's own wake, through delivery.
                    self.deliver(sh, task, WakeCause::NONE, now, fx);
                    fx.resched = true;
                } else if let Some(mut t) = self.held.remove(&task) {
                    t.killed = true;
                    t.stopped = false;
                    self.release(sh, t, now, fx);
                } else if let Some(t) = self.rq.runnable_mut(task) {
                    t.killed = true;
                }
            }
            Msg::Stop { task } => {
                if let Some(mut t) = self.take_waiting(task) {
                    t.stopped = true;
                    self.held.insert(task, t);
                } else if self.current() == Some(task) {
                    self.rq.current.as_mut().expect("checked").stopped = true;
                    self.resched(Resched(task), fx);
                } else if parked {
                    if let Some(t) = sh.slot(task).parked.lock().as_mut() {
                        t.stopped = true;
                    }
                }
            }
            Msg::Continue { task } => {
                if let Some(mut t) = self.held.remove(&task) {
                    t.stopped = false;
                    self.release(sh, t, now, fx);
                } else if parked {
                    if let Some(t) = sh.slot(task).parked.lock().as_mut() {
                        t.stopped = false;
                    }
                } else if let Some(t) = self.rq.runnable_mut(task) {
                    t.stopped = false;
                }
            }
            Msg::SetMask { task, mask } => self.set_mask_here(sh, task, *mask, parked, now, fx),
            Msg::Wake { .. } | Msg::Adopt { .. } | Msg::StealRequest { .. } | Msg::Balance(_) => {
                unreachable!("not a lifecycle message")
            }
        }
    }

    /// A `SetMask` for a task this CPU holds (`parked`: parked here).
    fn set_mask_here(
        &mut self,
        sh: &Shared<P::TaskState>,
        task: TaskId,
        mask: CpuSet,
        parked: bool,
        now: u64,
        fx: &mut Effects,
    ) {
        let mask = mask & *sh.topology().cpus();
        if mask.is_empty() {
            return;
        }
        let here = mask.contains(self.id);
        if parked {
            // Corrected at its next wake.
            if let Some(t) = sh.slot(task).parked.lock().as_mut() {
                t.mask = mask;
            }
        } else if let Some(t) = self.held.get_mut(&task) {
            // Corrected at its continue.
            t.mask = mask;
        } else if self.current() == Some(task) {
            self.rq.current.as_mut().expect("checked").mask = mask;
            if !here {
                self.resched(Resched(task), fx);
            }
        } else if let Some(mut t) = self.take_waiting(task) {
            t.mask = mask;
            if here {
                self.rq.put_back(t);
            } else {
                self.relocate(sh, t, TaskState::Queued, self.id, now, fx);
            }
        }
    }

    /// A queued task taken out of the queue (its lag recorded).
    fn take_waiting(&mut self, task: TaskId) -> Option<Task<P::TaskState>> {
        if self.rq.waits(task) {
            self.rq.take_queued(task)
        } else {
            None
        }
    }

    /// A held task runs again: here, or inside a mask changed meanwhile.
    fn release(
        &mut self,
        sh: &Shared<P::TaskState>,
        t: Task<P::TaskState>,
        now: u64,
        fx: &mut Effects,
    ) {
        if t.mask.contains(self.id) {
            self.enqueue(sh, t, now, false, fx);
        } else {
            self.relocate(sh, t, TaskState::Queued, self.id, now, fx);
        }
    }

    /// Step 3: a message for a task that is not here goes to its owner now.
    pub(crate) fn forward(
        &mut self,
        sh: &Shared<P::TaskState>,
        msg: Msg<P::TaskState>,
        fx: &mut Effects,
    ) {
        let Some(task) = msg.task() else { return };
        let w = sh.task_word(task);
        if w.state == TaskState::Dead {
            return;
        }
        if w.owner == self.id {
            if w.state == TaskState::Waking {
                // A waker is placing it: try again at the next pass.
                let k = sh.post(Some(self.id), self.id, msg);
                self.kick(k, fx);
            }
            return;
        }
        let k = sh.post(Some(self.id), w.owner, msg);
        self.kick(k, fx);
    }
}
