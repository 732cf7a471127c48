//! The wake path, whole: attribution, delivery, the deciding CPU's half,
//! adoption. Every wake goes through [`Waking::deliver`], the one caller
//! of the park word's `deliver`: a thread's wake, an exit's join wakes, a
//! fired deadline, a kill.
//!
//! The protocol is a room: [`Waking`] is lent what it reads and changes
//! (the sleepers, the run queue, the held tasks, the policy, the counters,
//! the balancer's LLC figures), moves tasks through the doors (`moves`),
//! and returns what only the CPU can do ([`Act`]); it never reaches the
//! CPU.
//!
//! ## The protocol
//!
//! 1. **Attribution** (the posting CPU). A wake names the CPU of the thread
//!    that posts it ([`CpuSched::waker`](crate::CpuSched::waker)), read with the post so that a
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
//! 4. **The deciding CPU's half** ([`Waking::take_in`]): refresh
//!    affinity (a task whose mask no longer names the CPU it parked on is
//!    relocated, never placed outside its mask); let the policy count the
//!    wake ([`Policy::wake_parked`]); ask it where the task goes (not for a
//!    stopped or killed task: those stay); queue it here, or send it with
//!    `Waking -> Moving` and the new owner in one CAS.
//! 5. **Adoption** (the target). `Moving -> Queued`; a mask that changed in
//!    flight is corrected by the adopter.
//! 6. **A delayed task** (`DELAY_DEQUEUE`: it blocked while not eligible
//!    and its owner's run queue kept it, the park word `Delayed`): the
//!    winner of `Delayed -> Waking` has the owner put it back among the
//!    runnable where it waited ([`Waking::requeue`]: at once when the
//!    winner is the owner, else by a `Requeue` message), whichever CPU
//!    would decide a parked wake, and no policy is asked: Linux's
//!    `try_to_wake_up()` finds it on its queue (`ttwu_runnable()`) before
//!    `select_task_rq()`. A stopped, killed or masked-out one is finished
//!    (dequeued for good) and taken in as a parked wake instead.
//!
//! The lost wake-up cannot happen (a wake between "decide to block" and
//! "park" finds `Committing` and sets the flag the park's CAS sees); a task
//! cannot be queued twice (only the CAS out of `Parked` proceeds); a parked
//! entity has one holder at a time (whoever the park word's state names:
//! the owner while `Parked`, the winner of the wake after). `tests/loom.rs`
//! checks all three, for both kinds of deciding.

use schedlab_topology::CpuId;

use crate::act::Act;
use crate::balancer::Balancer;
use crate::effects::{Effects, PlaceReason, Trace, WakeCause};
use crate::fair::{Features, WakeFlags};
use crate::lifecycle::forward;
use crate::moves::{Move, Mover};
use crate::park::{Delivery, TaskState};
use crate::policy::{Decides, Decision, Policy, PolicyState, Wake};
use crate::rooms::Rooms;
use crate::shared::{Msg, Shared};
use crate::sync::spin_wait;
use crate::task::{Task, TaskId};

/// The wake protocol on one CPU, over what it is lent for one step.
pub(crate) struct Waking<'a, P: Policy, B> {
    pub(crate) cpu: CpuId,
    pub(crate) sh: &'a Shared<P::TaskState>,
    pub(crate) policy: &'a mut P,
    /// Its LLC figures are the policy's view of the machine.
    pub(crate) balancer: &'a B,
    /// The sleepers, the run queue, the held tasks, the counters.
    pub(crate) rooms: &'a mut Rooms<P::TaskState>,
}

impl<P: Policy, B: Balancer> Waking<'_, P, B> {
    fn mover(&mut self) -> Mover<'_, P::TaskState> {
        Mover {
            cpu: self.cpu,
            sh: self.sh,
            counters: &mut self.rooms.counters,
        }
    }

    /// Steps 2 and 3 for a wake posted on this CPU (the running thread's
    /// policy state is the waker's, when the wake names one).
    pub(crate) fn deliver(
        &mut self,
        task: TaskId,
        cause: WakeCause,
        now: u64,
        fx: &mut Effects,
    ) -> Option<Act> {
        let sh = self.sh;
        let flag_llc = cause
            .waker
            .filter(|_| self.policy.counts_flags())
            .map(|w| sh.topology().llc_id(w).index() as u16);
        let delivery = sh.deliver_from(task, flag_llc);
        let m = sh.machine(self.cpu, now).with_llcs(self.balancer);
        let waker_state = match cause.waker {
            Some(_) => self.rooms.rq.current.as_mut().map(|t| &mut t.policy),
            None => None,
        };
        self.policy.wake_posted(&m, waker_state, task, delivery);
        fx.trace.push(Trace::Wake {
            task,
            cause,
            delivery,
        });
        match delivery {
            Delivery::Flagged => self.rooms.counters.wakes_flagged += 1,
            Delivery::Requeue { owner } if owner == self.cpu => {
                return self.requeue(task, cause, now, fx);
            }
            Delivery::Requeue { owner } => {
                self.mover().post(owner, Msg::Requeue { task, cause }, fx);
            }
            Delivery::Post { owner } if P::DECIDES == Decides::Waker => {
                let t = take_parked(sh, task);
                return self.take_in(t, owner, cause, now, fx);
            }
            Delivery::Post { owner } => {
                // A wake for a task parked here waits in this CPU's own
                // mailbox: the host must run a pass.
                if owner == self.cpu {
                    fx.resched = true;
                }
                self.mover().post(owner, Msg::Wake { task, cause }, fx);
            }
            Delivery::Coalesced | Delivery::Dead => {}
        }
        None
    }

    /// The owner drains a `Wake` (a policy that decides on the owner).
    pub(crate) fn handle_wake(
        &mut self,
        id: TaskId,
        cause: WakeCause,
        now: u64,
        fx: &mut Effects,
    ) -> Option<Act> {
        let task = self
            .rooms
            .sleepers
            .unpark(id)
            .then(|| self.sh.slot(id).parked.lock().take())
            .flatten();
        let Some(task) = task else {
            debug_assert!(
                false,
                "{:?}: a Wake for {id:?}, which it does not hold parked",
                self.cpu
            );
            forward(&mut self.mover(), Msg::Wake { task: id, cause }, fx);
            return None;
        };
        self.take_in(task, self.cpu, cause, now, fx)
    }

    /// Step 6, on the owner: a wake won delayed `id` (`Delayed -> Waking`).
    pub(crate) fn requeue(
        &mut self,
        id: TaskId,
        cause: WakeCause,
        now: u64,
        fx: &mut Effects,
    ) -> Option<Act> {
        let Some(i) = self.rooms.rq.fair.delayed_at(id.0) else {
            debug_assert!(
                false,
                "{:?}: a Requeue for {id:?}, which is not delayed here",
                self.cpu
            );
            forward(&mut self.mover(), Msg::Requeue { task: id, cause }, fx);
            return None;
        };
        self.rooms.sleepers.unpark(id);
        let t = &mut self.rooms.rq.fair.delayed[i];
        if t.killed || t.stopped || !t.mask.contains(self.cpu) {
            // Finished, then what a parked wake does with such a task.
            let task = self.rooms.rq.finish_delayed(i);
            return self.take_in(task, self.cpu, cause, now, fx);
        }
        if let Some(d) = t.sleep_deadline.take() {
            self.rooms.sleepers.cancel(d, id);
        }
        let counters = &mut self.rooms.counters;
        counters.wakes_parked += 1;
        counters.wakes_delayed += 1;
        (self.sh.slot(id).park).set(TaskState::Waking, TaskState::Queued);
        fx.trace.push(Trace::Place {
            task: id,
            from: self.cpu,
            cpu: self.cpu,
            reason: PlaceReason::Delayed,
        });
        let w = WakeFlags {
            sync: cause.sync,
            in_task: cause.waker.is_some(),
            resched_set: self.rooms.pick.need_resched,
            ..WakeFlags::default()
        };
        Some(Act::Queued(self.rooms.rq.requeue_delayed(i, now, w)))
    }

    /// Step 4: the deciding CPU's half of a parked wake. `prev` is the CPU
    /// the task parked on (this CPU when the owner decides).
    pub(crate) fn take_in(
        &mut self,
        mut task: Task<P::TaskState>,
        prev: CpuId,
        cause: WakeCause,
        now: u64,
        fx: &mut Effects,
    ) -> Option<Act> {
        let (sh, id) = (self.sh, task.id);
        if let Some(d) = task.sleep_deadline.take() {
            if prev == self.cpu {
                self.rooms.sleepers.cancel(d, id);
            }
            // Else the owner's heap keeps a stale entry, which it skips
            // when it fires (the slot no longer holds the task).
        }
        self.rooms.counters.wakes_parked += 1;
        if !task.mask.contains(prev) {
            self.mover()
                .relocate(task, TaskState::Waking, prev, now, fx);
            return None;
        }
        let prev_busy = if prev == self.cpu {
            self.rooms.rq.current.is_some() || self.rooms.rq.queued() > 0
        } else {
            sh.load(prev) > 0
        };
        let wake = Wake {
            task: id,
            prev,
            prev_busy,
            cause,
        };
        let m = sh.machine(self.cpu, now).with_llcs(self.balancer);
        self.policy.wake_parked(&m, &wake, &mut task.policy);
        if cause.waker.is_some() {
            self.rooms.counters.wakes_counted += 1;
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
        let (to, reason) = match decision {
            Decision::Stay => (prev, PlaceReason::Home),
            Decision::Send(cpu, reason) => (cpu, reason),
        };
        if to != self.cpu {
            // A policy may name prev itself, with its reason: no move.
            let from = TaskState::Waking;
            let mv = Move {
                origin: prev,
                to,
                reason,
                from,
                sync: cause.sync,
            };
            self.mover().hand(task, mv, fx);
            return None;
        }
        self.keep(task, prev, reason, cause, now, fx)
    }

    /// The waking task stays on this CPU, the one that decided (a move when
    /// it parked elsewhere).
    fn keep(
        &mut self,
        task: Task<P::TaskState>,
        prev: CpuId,
        reason: PlaceReason,
        cause: WakeCause,
        now: u64,
        fx: &mut Effects,
    ) -> Option<Act> {
        if self.cpu != prev {
            self.rooms.counters.count_move(reason);
        }
        (self.sh.slot(task.id).park).set_owned(TaskState::Waking, TaskState::Queued, self.cpu);
        fx.trace.push(Trace::Place {
            task: task.id,
            from: prev,
            cpu: self.cpu,
            reason,
        });
        let w = WakeFlags {
            sync: cause.sync,
            selected: self.selected(cause.sync, &task),
            in_task: cause.waker.is_some(),
            ..WakeFlags::default()
        };
        self.rooms.queue(self.cpu, task, now, w)
    }

    /// `WF_RQ_SELECTED` of a wake (the task could have run elsewhere),
    /// which `preempt_sync()` alone reads: looked at only for a sync wake
    /// under `NEXT_BUDDY`, so no other wake pays for the mask.
    fn selected(&self, sync: bool, task: &Task<P::TaskState>) -> bool {
        sync && self.rooms.rq.cfg.has(Features::NEXT_BUDDY) && task.mask.several()
    }

    /// Step 5: a task sent here (`sync`: by a sync wake).
    pub(crate) fn adopt(
        &mut self,
        task: Task<P::TaskState>,
        reason: PlaceReason,
        sync: bool,
        now: u64,
        fx: &mut Effects,
    ) -> Option<Act> {
        if !task.mask.contains(self.cpu) {
            // The mask changed in flight: the adopter corrects it.
            let around = self.cpu;
            self.mover()
                .relocate(task, TaskState::Moving, around, now, fx);
            return None;
        }
        (self.sh.slot(task.id).park).set(TaskState::Moving, TaskState::Queued);
        // A wake placed elsewhere arrives as a queued remote wake (the
        // wakelist's IPI: not `in_task()`); a balancer's move is no wake.
        let w = WakeFlags {
            fork: reason == PlaceReason::Spawn,
            sync,
            selected: self.selected(sync, &task),
            ..WakeFlags::default()
        };
        self.rooms.queue(self.cpu, task, now, w)
    }

    /// The next due deadline of a task still parked here with that
    /// deadline, taken (its wake has no waker, and goes through delivery).
    pub(crate) fn next_due(&mut self, now: u64) -> Option<TaskId> {
        while let Some((t, id)) = self.rooms.sleepers.pop_due(now) {
            if !self.rooms.sleepers.holds(id) || self.sh.task_word(id).owner != self.cpu {
                continue;
            }
            let mut slot = self.sh.slot(id).parked.lock();
            match slot.as_mut() {
                Some(task) if task.sleep_deadline == Some(t) => {
                    task.sleep_deadline = None;
                    return Some(id);
                }
                Some(_) => {}
                None => {
                    // Delayed here: its entity is in the run queue.
                    if let Some(task) = self.rooms.rq.delayed_mut(id) {
                        if task.sleep_deadline == Some(t) {
                            task.sleep_deadline = None;
                            return Some(id);
                        }
                    }
                }
            }
        }
        None
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
