//! The rooms one CPU composes ([`Rooms`]): each owns its fields, and the
//! CPU keeps them side by side so that a room's step is lent the rooms it
//! works on through one reference (a step of the wake protocol, of the
//! pick or of the lifecycle reads and changes several of them), and queue a
//! task here ([`Rooms::queue`]), the one step that puts a task on this
//! CPU.

use schedlab_topology::CpuId;

use crate::act::Act;
use crate::effects::Counters;
use crate::fair::WakeFlags;
use crate::held::Held;
use crate::pick_state::PickState;
use crate::policy::PolicyState;
use crate::runqueue::RunQueue;
use crate::sleepers::Sleepers;
use crate::task::Task;

/// One CPU's rooms.
pub(crate) struct Rooms<S> {
    /// The run queue: what runs and waits, its order, charging, PELT.
    pub(crate) rq: RunQueue<S>,
    /// The tasks that parked here and their deadlines (the wake
    /// protocol's room on the owner).
    pub(crate) sleepers: Sleepers,
    /// Runnable but stopped (the lifecycle's room).
    pub(crate) held: Held<S>,
    /// What the pick keeps between passes.
    pub(crate) pick: PickState,
    /// What the CPU counts; every room counts what it does here.
    pub(crate) counters: Counters,
}

impl<S: PolicyState> Rooms<S> {
    /// Queues `task` on `cpu`, these rooms' CPU (holds it, if stopped:
    /// then nothing is left to do). `w`: the wake that queues it (`w.fork`:
    /// a new task's first enqueue, `ENQUEUE_INITIAL`), for the wake-up
    /// preemption check, which stops when this CPU's flag is already set.
    /// What is left for the CPU (its reschedule flag, publishing the new
    /// load) comes back as an [`Act`].
    #[inline]
    pub(crate) fn queue(
        &mut self,
        cpu: CpuId,
        task: Task<S>,
        now: u64,
        w: WakeFlags,
    ) -> Option<Act> {
        debug_assert!(
            task.mask.contains(cpu),
            "{:?} queued on {cpu:?}, outside its mask",
            task.id
        );
        if task.stopped {
            self.held.hold(task);
            return None;
        }
        let w = WakeFlags {
            resched_set: w.resched_set || self.pick.need_resched,
            ..w
        };
        Some(Act::Queued(self.rq.enqueue(task, now, w)))
    }
}
