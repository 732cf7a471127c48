//! What the pick keeps between passes ([`PickState`]): a room of the CPU
//! that owns its fields and imports nothing of the CPU.

use schedlab_topology::CpuId;

use crate::task::TaskId;

/// What the pick keeps between passes: the reschedule flag, the
/// core-wide selection it last ran, whether this CPU's core schedules by
/// cookie, and the running task the stopper pushes at the next pick.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PickState {
    /// `TIF_NEED_RESCHED` as this CPU holds it.
    pub(crate) need_resched: bool,
    /// The core-wide selection this CPU last ran (`rq->core_sched_seq`).
    pub(crate) sched_seq: u64,
    /// Core scheduling is on and this CPU has SMT siblings.
    pub(crate) core_sched: bool,
    /// The running task the stopper pushes to a CPU at the next pick, as
    /// the balancer asked ([`crate::balancer::Request::PushRunning`]).
    pub(crate) pushing: Option<(TaskId, CpuId)>,
    /// A pick landed on a delayed task a wake had just won: the pass
    /// drains its mailbox (where the winner's requeue is) and picks again.
    pub(crate) wait_mail: bool,
}

impl PickState {
    pub(crate) fn new(core_sched: bool) -> PickState {
        PickState {
            need_resched: false,
            sched_seq: 0,
            core_sched,
            pushing: None,
            wait_mail: false,
        }
    }
}
