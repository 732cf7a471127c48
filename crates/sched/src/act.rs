//! What a room leaves for its CPU to do ([`Act`]). A room (the wake
//! protocol, the pick, the lifecycle) never reaches the CPU that holds it:
//! it works on the fields it is lent (queueing a task, handing one to
//! another CPU through the doors: see `moves`) and returns what only the
//! CPU can do, which the CPU carries out (`CpuSched::act`): set its
//! reschedule flag, publish its new load, or wake a task through delivery.
//! The balancer seam does the same with its own vocabulary
//! ([`crate::balancer::Request`]).

use crate::effects::WakeCause;
use crate::runqueue::Resched;
use crate::task::TaskId;

/// One thing a room's decision leaves for its CPU to do.
#[must_use = "the CPU must carry out what a room decided"]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Act {
    /// A task was queued here: reschedule if it asked to preempt, ask for
    /// a pass if nothing runs, publish the new load.
    Queued(Option<Resched>),
    /// Set this CPU's reschedule flag.
    Resched(Resched),
    /// Wake `task` through delivery (the scheduler's own wake: a kill).
    Deliver { task: TaskId, cause: WakeCause },
}
