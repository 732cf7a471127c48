//! The wake path, whole: attribution, delivery, the deciding CPU's half,
//! adoption. Every wake goes through [`CpuSched::deliver`], the one caller
//! of the park word's `deliver`: a thread's wake, an exit's join wakes, a
//! fired deadline, a kill.
//!
//! ## The protocol
//!
//! 1. **Attribution** (the posting CPU). A wake names the CPU of the thread
//!    that posts it ([`CpuSched::waker`]), read with the post so that a
//!    migration in between cannot name the previous CPU. It names none
//!    inside a device interrupt, when the scheduler posts it (a deadline, a
//!    kill), or when the thread has begun leaving its process (a dying
//!    waker is no partner: a parent woken by each child's exit would follow
//!    children already gone).
//! 2. **Delivery** (the posting CPU, the park word's CAS). A task that is
//!    running, committing, queued or moving gets its pending flag: its next
//!    park returns at once, and the wake is seen by no one (**not
//!    counted**). A parked task goes `Parked -> Waking`; only the one CAS
//!    that wins does step 3. A waking task's wake coalesces; a dead one's is
//!    dropped. The policy hears of every outcome on the posting CPU, with
//!    the posting thread's own state ([`Policy::wake_posted`]).
//! 3. **Who decides** ([`Policy::DECIDES`]).
//!    * *Owner*: the winner posts `Wake { task, cause }` to the owner's
//!      mailbox and rings it. The owner takes the entity out of the task's
//!      slot when it drains the message. A move is then a second message:
//!      two wakes in series, as in the seed's kernel.
//!    * *Waker*: the winner takes the entity out of the slot itself (if
//!      the parker has not stored it yet, it waits, as Linux's
//!      `try_to_wake_up()` waits for `p->on_cpu` to clear) and decides on
//!      the spot: one message to the target, or a local enqueue when the
//!      target is this CPU (`ttwu_queue_wakelist()` or `ttwu_do_activate()`).
//! 4. **The deciding CPU's half** ([`CpuSched::take_in`]): refresh
//!    affinity (a task whose mask no longer names the CPU it parked on is
//!    relocated, never placed outside its mask); let the policy count the
//!    wake ([`Policy::wake_parked`]); ask it where the task goes (not for a
//!    stopped or killed task: those stay); queue it here, or send it with
//!    `Waking -> Moving` and the new owner in one CAS.
//! 5. **Adoption** (the target). `Moving -> Queued`; a mask that changed in
//!    flight is corrected by the adopter.
//!
//! The lost wake-up cannot happen (a wake between "decide to block" and
//! "park" finds `Committing` and sets the flag the park's CAS sees); a task
//! cannot be queued twice (only the CAS out of `Parked` proceeds); a parked
//! entity has one holder at a time (whoever the park word's state names:
//! the owner while `Parked`, the winner of the wake after). `tests/loom.rs`
//! checks all three, for both kinds of deciding.

use schedlab_topology::CpuId;

use crate::balancer::Balancer;
use crate::effects::{Effects, PlaceReason, Trace, WakeCause};
use crate::park::{Delivery, TaskState};
use crate::policy::{nearest_in_mask, Decides, Decision, Policy, PolicyState, Wake};
use crate::shared::{Msg, Shared};
use crate::sync::spin_wait;
use crate::task::{Task, TaskId};
use crate::CpuSched;

impl<P: Policy, B: Balancer> CpuSched<P, B> {
    /// Steps 2 and 3 for a wake posted on this CPU.
    pub(crate) fn deliver(
        &mut self,
        sh: &Shared<P::TaskState>,
        task: TaskId,
        cause: WakeCause,
        now: u64,
        fx: &mut Effects,
    ) {
        let flag_llc = cause
            .waker
            .filter(|_| self.policy.counts_flags())
            .map(|w| sh.topology().llc_id(w).index() as u16);
        let delivery = sh.deliver_from(task, flag_llc);
        let m = sh.machine(self.id, now).with_llcs(&self.balancer);
        let waker_state = match cause.waker {
            Some(_) => self.rq.current.as_mut().map(|t| &mut t.policy),
            None => None,
        };
        self.policy.wake_posted(&m, waker_state, task, delivery);
        fx.trace.push(Trace::Wake {
            task,
            cause,
            delivery,
        });
        match delivery {
            Delivery::Flagged => self.counters.wakes_flagged += 1,
            Delivery::Post { owner } if P::DECIDES == Decides::Waker => {
                let t = take_parked(sh, task);
                self.take_in(sh, t, owner, cause, now, fx);
            }
            Delivery::Post { owner } => {
                let k = sh.post(Some(self.id), owner, Msg::Wake { task, cause });
                // A wake for a task parked here waits in this CPU's own
                // mailbox: the host must run a pass.
                if owner == self.id {
                    fx.resched = true;
                }
                self.kick(k, fx);
            }
            Delivery::Coalesced | Delivery::Dead => {}
        }
    }

    /// The owner drains a `Wake` (a policy that decides on the owner).
    pub(crate) fn handle_wake(
        &mut self,
        sh: &Shared<P::TaskState>,
        id: TaskId,
        cause: WakeCause,
        now: u64,
        fx: &mut Effects,
    ) {
        let task = self
            .sleepers
            .unpark(id)
            .then(|| sh.slot(id).parked.lock().take())
            .flatten();
        let Some(task) = task else {
            debug_assert!(
                false,
                "{:?}: a Wake for {id:?}, which it does not hold parked",
                self.id
            );
            return self.forward(sh, Msg::Wake { task: id, cause }, fx);
        };
        self.take_in(sh, task, self.id, cause, now, fx);
    }

    /// Step 4: the deciding CPU's half of a parked wake. `prev` is the CPU
    /// the task parked on (this CPU when the owner decides).
    pub(crate) fn take_in(
        &mut self,
        sh: &Shared<P::TaskState>,
        mut task: Task<P::TaskState>,
        prev: CpuId,
        cause: WakeCause,
        now: u64,
        fx: &mut Effects,
    ) {
        let id = task.id;
        if let Some(d) = task.sleep_deadline.take() {
            if prev == self.id {
                self.sleepers.cancel(d, id);
            }
            // Else the owner's heap keeps a stale entry, which it skips
            // when it fires (the slot no longer holds the task).
        }
        self.counters.wakes_parked += 1;
        if !task.mask.contains(prev) {
            return self.relocate(sh, task, TaskState::Waking, prev, now, fx);
        }
        let prev_busy = if prev == self.id {
            self.rq.current.is_some() || self.queued() > 0
        } else {
            sh.load(prev) > 0
        };
        let wake = Wake {
            task: id,
            prev,
            prev_busy,
            cause,
        };
        let m = sh.machine(self.id, now).with_llcs(&self.balancer);
        self.policy.wake_parked(&m, &wake, &mut task.policy);
        if cause.waker.is_some() {
            self.counters.wakes_counted += 1;
            fx.trace.push(Trace::Counted {
                task: id,
                bits: task.policy.bits(),
                streak: task.policy.streak(),
            });
        }
        if task.killed {
            task.stopped = false;
        }
        let decision = if task.stopped || task.killed {
            Decision::Stay
        } else {
            self.policy.place(&m, &wake, &mut task)
        };
        let (cpu, reason) = match decision {
            Decision::Stay => (prev, PlaceReason::Home),
            Decision::Send(cpu, reason) => (cpu, reason),
        };
        if cpu != self.id {
            // A policy may name prev itself, with its reason: no move.
            return self.hand_to(sh, task, prev, cpu, reason, TaskState::Waking, fx);
        }
        if cpu != prev {
            self.counters.count_move(reason);
        }
        sh.slot(id)
            .park
            .set_owned(TaskState::Waking, TaskState::Queued, self.id);
        fx.trace.push(Trace::Place {
            task: id,
            from: prev,
            cpu: self.id,
            reason,
        });
        self.enqueue(sh, task, now, false, fx);
    }

    /// Step 5: a task sent here.
    pub(crate) fn adopt(
        &mut self,
        sh: &Shared<P::TaskState>,
        task: Task<P::TaskState>,
        reason: PlaceReason,
        now: u64,
        fx: &mut Effects,
    ) {
        if !task.mask.contains(self.id) {
            // The mask changed in flight: the adopter corrects it.
            return self.relocate(sh, task, TaskState::Moving, self.id, now, fx);
        }
        sh.slot(task.id)
            .park
            .set(TaskState::Moving, TaskState::Queued);
        let initial = reason == PlaceReason::Spawn;
        self.enqueue(sh, task, now, initial, fx);
    }

    /// Hands `task` to `cpu` (`from` is its park state now): a move.
    pub(crate) fn send(
        &mut self,
        sh: &Shared<P::TaskState>,
        task: Task<P::TaskState>,
        cpu: CpuId,
        reason: PlaceReason,
        from: TaskState,
        fx: &mut Effects,
    ) {
        self.hand_to(sh, task, self.id, cpu, reason, from, fx);
    }

    /// Hands `task`, which was last on `origin`, to `cpu`: a move unless
    /// `cpu` is `origin` (a waker sending a task back to the CPU it parked
    /// on does not move it).
    #[allow(clippy::too_many_arguments)]
    fn hand_to(
        &mut self,
        sh: &Shared<P::TaskState>,
        task: Task<P::TaskState>,
        origin: CpuId,
        cpu: CpuId,
        reason: PlaceReason,
        from: TaskState,
        fx: &mut Effects,
    ) {
        debug_assert!(
            task.mask.contains(cpu),
            "{reason:?} would place {:?} outside its mask",
            task.id
        );
        sh.slot(task.id).park.send(from, cpu);
        if cpu != origin {
            self.counters.count_move(reason);
        }
        fx.trace.push(Trace::Place {
            task: task.id,
            from: origin,
            cpu,
            reason,
        });
        let k = sh.post(Some(self.id), cpu, Msg::Adopt { task, reason });
        self.kick(k, fx);
    }

    /// Sends a task whose mask no longer names the CPU it was on to the
    /// nearest CPU around `around` that it names.
    pub(crate) fn relocate(
        &mut self,
        sh: &Shared<P::TaskState>,
        task: Task<P::TaskState>,
        from: TaskState,
        around: CpuId,
        now: u64,
        fx: &mut Effects,
    ) {
        let m = sh.machine(self.id, now);
        let cpu = nearest_in_mask(&m, around, &task.mask).expect("masks are never empty");
        self.hand_to(sh, task, around, cpu, PlaceReason::Affinity, from, fx);
    }

    /// Fires due deadlines: a wake with no waker, through delivery, for a
    /// task still parked here with that deadline.
    pub(crate) fn fire_deadlines(&mut self, sh: &Shared<P::TaskState>, now: u64, fx: &mut Effects) {
        while let Some((t, id)) = self.sleepers.pop_due(now) {
            if !self.sleepers.holds(id) || sh.task_word(id).owner != self.id {
                continue;
            }
            let due = {
                let mut slot = sh.slot(id).parked.lock();
                match slot.as_mut() {
                    Some(task) if task.sleep_deadline == Some(t) => {
                        task.sleep_deadline = None;
                        true
                    }
                    _ => false,
                }
            };
            if due {
                self.deliver(sh, id, WakeCause::NONE, now, fx);
            }
        }
    }
}

/// The winner of a wake takes the parked entity out of its slot, waiting
/// for the parker to store it (it may still be on its way off the CPU).
fn take_parked<S: PolicyState>(sh: &Shared<S>, task: TaskId) -> Task<S> {
    loop {
        if let Some(t) = sh.slot(task).parked.lock().take() {
            return t;
        }
        spin_wait();
    }
}
