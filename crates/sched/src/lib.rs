//! The schedlab scheduler: code a kernel could embed.
//!
//! ## Principles
//!
//! 1. **Per-CPU ownership.** Every task has one owner CPU; only the owner
//!    touches its scheduling state ([`Task`]). Ownership moves by an `Adopt`
//!    message the new owner takes in. No global lock.
//! 2. **What is shared, exactly.** CPUs reach each other through a per-CPU
//!    mailbox (a lock-protected MPSC queue of messages), a per-CPU
//!    [`doorbell`] (awake or asleep, idle depth, "rung"), per-CPU published
//!    numbers (load, PELT averages, the reschedule flag, the overloaded
//!    mask: atomics the owner writes), and per-task slots (the [`park`]
//!    word, the join list and the parked entity, each behind its own
//!    lock). SMT siblings share a core-scheduling lock; a balancer shares
//!    what it keeps behind its own locks (Linux's: each CPU's domain state,
//!    `nohz.next_balance`, each LLC's recorded utilization, each process's
//!    occupancy). The topology and config are shared read-only
//!    ([`Shared`]). There is no global lock.
//! 3. **Decisions are values.** Entry points on [`CpuSched`] run on behalf of
//!    one CPU, take `now`, and return `#[must_use]` [`Effects`]: kicks to
//!    send, the task to run, a timer to arm, and a trace of every decision
//!    with its reason. The crate reads no clock and no RNG; the host
//!    (a simulator, a test, a kernel) carries the effects out.
//! 4. **One wake path.** Every wake goes through one function (the `wake`
//!    module has the protocol): a flag for a task that is not parked (not
//!    counted); for one that is, the deciding CPU (its owner, or the waker
//!    for a policy that decides there) refreshes affinity, lets the policy
//!    count the wake, and asks it where the task goes.
//! 5. **Every atomic and lock through `sync`**, which swaps in loom's types
//!    under `cfg(loom)`; `tests/loom.rs` model-checks the park word, the
//!    mailbox and the doorbell.
//! 6. **Policies are types.** [`CpuSched`] is generic over a [`Policy`]:
//!    per-task state of the policy's own type, hooks on the waker's and the
//!    deciding CPU, a read-only [`policy::Machine`] view, a `#[must_use]`
//!    [`policy::Decision`]. A policy written outside this crate runs in the
//!    same code, with no dispatch.
//! 7. **Balancers are types too.** [`CpuSched`] is generic over a
//!    [`Balancer`] ([`balancer`]): its hooks return `#[must_use]`
//!    [`Requests`] the core carries out; the seed's, Linux's and Linux's
//!    cache-aware balancers are three implementations, [`Builtin`] the one
//!    a config names.
//!
//! Modules: [`park`] and [`doorbell`] (the protocols), [`policy`] (the
//! seam and the built-in policies), [`balancer`] (the balancer seam;
//! `balance` the seed's, [`linux`] Linux's), [`streak`] (the waker-streak
//! state), [`fair`] (EEVDF), [`cpu`] (the struct, the tick and the pass,
//! the running thread's calls, and the one place that carries out what the
//! rooms decide), the rooms that own the CPU's state (`runqueue`,
//! `sleepers`, `held`, `pick_state`, side by side in `rooms`), what the CPU
//! does with them (`wake`, `pick`, `lifecycle`, `cookie`, `moves`: steps
//! lent what they work on, which never reach the CPU and return what only
//! the CPU can do, `act`), `coresched` (the core-wide pick of core
//! scheduling), [`shared`], [`config`], [`effects`].

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;
#[cfg(test)]
#[macro_use]
extern crate std;

mod act;
pub mod balance;
pub mod balancer;
pub mod balancers;
pub mod config;
mod cookie;
pub(crate) mod coresched;
pub mod cpu;
pub mod doorbell;
pub mod effects;
pub mod fair;
mod held;
pub mod invariants;
mod lifecycle;
pub mod linux;
mod moves;
pub mod park;
pub mod pelt;
mod pick;
mod pick_state;
pub mod policy;
mod rooms;
pub mod runqueue;
pub mod shared;
mod sleepers;
mod spawn;
pub mod streak;
pub(crate) mod sync;
pub mod task;
#[cfg(feature = "testhost")]
pub mod testhost;
mod wake;

pub use balance::Seed;
pub use balancer::{Balancer, Cx, Request, Requests};
pub use balancers::Builtin;
pub use config::{Balance, BalanceKind, CasTunables, Config, SpawnPolicy};
pub use cpu::{CpuSched, Holding, Spawned};
pub use doorbell::{IdleDepth, KickKind};
pub use effects::{Counters, Effects, Kick, KickWhy, Park, PlaceReason, Switch, Trace, WakeCause};
pub use park::{Delivery, Parked, TaskState};
pub use policy::{
    BuiltinPolicy, Decides, Decision, Home, Machine, OnWaker, Policy, PolicyState, Wake,
    WakerStreakRule,
};
pub use schedlab_topology as topology;
pub use shared::{Shared, SpawnError};
pub use streak::{WakerStreak, MAX_RUN, WAKER_RUN};
pub use task::{Band, Task, TaskData, TaskId, TaskSpec};
