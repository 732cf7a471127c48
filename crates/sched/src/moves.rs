//! How a task comes to a CPU's queue or leaves for another CPU: the steps
//! every room that places a task shares (the wake protocol, the pick, the
//! lifecycle, and the CPU for its balancer's requests).
//!
//! * `Rooms::queue` (in `rooms`): onto this CPU's run queue (a stopped
//!   task is held); what is left for the CPU (its reschedule flag,
//!   publishing the new load) comes back as an `Act`.
//! * [`Mover::hand`]: to another CPU, through the task's park word
//!   (`-> Moving`, the new owner named in the same CAS) and an `Adopt` in
//!   its mailbox; a move is counted unless the task goes back where it was.
//! * [`Mover::relocate`]: a task whose mask no longer names the CPU it
//!   was on goes to the nearest CPU the mask names.
//!
//! None of them reaches the CPU: they go through the doors ([`Shared`]) and
//! the fields they are lent.

use schedlab_topology::CpuId;

use crate::effects::{Counters, Effects, PlaceReason, Trace};
use crate::park::TaskState;
use crate::policy::{nearest_in_mask, PolicyState};
use crate::shared::{Msg, Shared};
use crate::task::Task;

/// Where a task goes, from where, why, and its park state now.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Move {
    /// The CPU it was last on (a move unless `to` is this).
    pub(crate) origin: CpuId,
    pub(crate) to: CpuId,
    pub(crate) reason: PlaceReason,
    pub(crate) from: TaskState,
    /// Placed by a sync wake (`WF_SYNC`), for the adopter's preemption
    /// check.
    pub(crate) sync: bool,
}

/// What sending a task away needs: the CPU that sends it, the doors, and
/// that CPU's counters.
pub(crate) struct Mover<'a, S> {
    pub(crate) cpu: CpuId,
    pub(crate) sh: &'a Shared<S>,
    pub(crate) counters: &'a mut Counters,
}

impl<S: PolicyState> Mover<'_, S> {
    /// Hands `task` to `mv.to`: a move unless that is `mv.origin` (a waker
    /// sending a task back to the CPU it parked on does not move it).
    pub(crate) fn hand(&mut self, task: Task<S>, mv: Move, fx: &mut Effects) {
        let Move {
            origin,
            to,
            reason,
            from,
            sync,
        } = mv;
        debug_assert!(
            task.mask.contains(to),
            "{reason:?} would place {:?} outside its mask",
            task.id
        );
        self.sh.slot(task.id).park.send(from, to);
        if to != origin {
            self.counters.count_move(reason);
        }
        fx.trace.push(Trace::Place {
            task: task.id,
            from: origin,
            cpu: to,
            reason,
        });
        self.post(to, Msg::Adopt { task, reason, sync }, fx);
    }

    /// Sends `task`, whose mask no longer names the CPU it was on, to the
    /// nearest CPU around `around` that it names.
    pub(crate) fn relocate(
        &mut self,
        task: Task<S>,
        from: TaskState,
        around: CpuId,
        now: u64,
        fx: &mut Effects,
    ) {
        let m = self.sh.machine(self.cpu, now);
        let to = nearest_in_mask(&m, around, &task.mask).expect("masks are never empty");
        let reason = PlaceReason::Affinity;
        let mv = Move {
            origin: around,
            to,
            reason,
            from,
            sync: false,
        };
        self.hand(task, mv, fx);
    }

    /// Posts `msg` to `to`'s mailbox and kicks it if it must be.
    #[inline]
    pub(crate) fn post(&mut self, to: CpuId, msg: Msg<S>, fx: &mut Effects) {
        let k = self.sh.post(Some(self.cpu), to, msg);
        self.counters.kick(k, fx);
    }
}
