//! The rooms one CPU composes ([`Rooms`]): each owns its fields, and the
//! CPU keeps them side by side so that a room's step is lent the rooms it
//! works on through one reference (a step of the wake protocol, of the
//! pick or of the lifecycle reads and changes several of them).

use crate::effects::Counters;
use crate::held::Held;
use crate::pick_state::PickState;
use crate::runqueue::RunQueue;
use crate::sleepers::Sleepers;

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
