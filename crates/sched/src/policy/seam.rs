//! The seam itself: the [`Policy`] trait and the types it speaks in (the
//! module doc of `policy` has the contract).

use schedlab_topology::{CpuId, CpuSet, LlcId};

use crate::config::SpawnPolicy;
use crate::effects::{PlaceReason, WakeCause};
use crate::park::Delivery;
use crate::shared::Machine;
use crate::task::{PolicyState, Task, TaskId};

/// Where a policy decides a parked task's wake.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Decides {
    /// The task's owner, after the `Wake` message reaches it: a move is two
    /// wakes in series (the seed's kernel).
    Owner,
    /// The CPU that posts the wake, as Linux's `try_to_wake_up()` does: a
    /// move is one wake, the target's.
    Waker,
}

/// What to do with a woken task.
#[must_use = "a placement decision must be carried out"]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Decision {
    /// Queue it on the CPU it parked on.
    Stay,
    /// Send it to `cpu` (which must be in its mask). `cpu` may be the CPU
    /// it parked on: it stays, and the trace carries the reason.
    Send(CpuId, PlaceReason),
}

/// A parked wake, as the deciding CPU sees it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Wake {
    pub task: TaskId,
    /// The CPU the task parked on (its owner until it moves).
    pub prev: CpuId,
    /// `prev` runs a task or has one waiting: exact on the owner, the
    /// published load on a waker.
    pub prev_busy: bool,
    pub cause: WakeCause,
}

/// A placement policy. See the module doc for the contract.
pub trait Policy: Clone + Send + Sync + 'static {
    /// Per-task state, travelling with the task.
    type TaskState: PolicyState;

    /// Where parked wakes are decided.
    const DECIDES: Decides = Decides::Owner;

    fn name(&self) -> &str;

    /// A thread on this CPU posted a wake of `wakee`; `waker` is that
    /// thread's own state (`None` for a wake from an interrupt, the
    /// scheduler, or a thread that has begun leaving). Runs for every
    /// delivery outcome, after it is known.
    fn wake_posted(
        &mut self,
        _m: &Machine<'_>,
        _waker: Option<&mut Self::TaskState>,
        _wakee: TaskId,
        _delivery: Delivery,
    ) {
    }

    /// The deciding CPU takes in a parked wake, before [`Policy::place`]:
    /// count it in the task's own state. Not called for a wake whose task
    /// must first be moved into its mask.
    fn wake_parked(&mut self, _m: &Machine<'_>, _wake: &Wake, _state: &mut Self::TaskState) {}

    /// Whether a flagged wake (one that found the task running or about to
    /// park) should record its waker's LLC for [`Policy::flag_consumed`].
    fn counts_flags(&self) -> bool {
        false
    }

    /// The task consumed a flag whose first waker ran in `waker_llc`
    /// (its park returned at once), on the owner, with the task's state.
    /// No placement follows: only parked wakes are placed.
    fn flag_consumed(&mut self, _m: &Machine<'_>, _waker_llc: LlcId, _state: &mut Self::TaskState) {
    }

    /// Where the woken task goes. Not asked for a stopped or killed task.
    /// The task's own state may change here too (Linux's
    /// `select_idle_sibling()` records `recent_used_cpu`).
    fn place(&mut self, m: &Machine<'_>, wake: &Wake, task: &mut Task<Self::TaskState>)
        -> Decision;

    /// The machine spawn rule this policy comes with (`linux`: Linux's fork
    /// path), which a scenario takes unless its user names another; `None`:
    /// the scenario's own. A rule of the policy's own goes in
    /// [`Policy::place_new`] instead.
    fn spawn_rule(&self) -> Option<SpawnPolicy> {
        None
    }

    /// The load balancer this policy comes with (`linux`: Linux's), which a
    /// scenario takes unless its user names another; `None`: the
    /// scenario's own.
    fn balance_rule(&self) -> Option<crate::config::BalanceKind> {
        None
    }

    /// The fair class this policy's kernel runs (`linux`: its release's
    /// feature set, [`crate::fair::FeatureSet::LINUX`]), which a scenario
    /// takes unless its user names a kernel or features; `None`: the
    /// machine's (the model's base set).
    fn fair_features(&self) -> Option<crate::fair::FeatureSet> {
        None
    }

    /// Where a new task starts, or `None` for the machine's [`SpawnRule`](crate::policy::SpawnRule).
    fn place_new(&mut self, _m: &Machine<'_>, _spawner: CpuId, _mask: &CpuSet) -> Option<CpuId> {
        None
    }
}
