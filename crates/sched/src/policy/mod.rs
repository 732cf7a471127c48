//! The policy seam: where a parked task's wake puts it, and where a new task
//! starts.
//!
//! ## The contract
//!
//! A placement policy is a type [`CpuSched`](crate::CpuSched) is generic
//! over, so a rule written outside this crate runs in the same code a kernel
//! would embed, with no dispatch and no fork. Each CPU holds its own copy of
//! the policy value (per-CPU state, touched only by that CPU: `&mut self`).
//! A policy:
//!
//! * keeps **per-task state** of its own type ([`Policy::TaskState`]),
//!   which travels with the task inside the scheduler and is touched only
//!   by the CPU that holds the task (the waker-streak rule's is the one
//!   `u16` [`WakerStreak`]);
//! * is told of a wake **as it is posted** ([`Policy::wake_posted`], on the
//!   waker's CPU, with the waking thread's own state: Linux's
//!   `record_wakee()` needs it) and **as a parked wake is taken in**
//!   ([`Policy::wake_parked`], by the CPU that decides: where the streak
//!   counts);
//! * reads a read-only [`Machine`]: the topology, the config, each CPU's
//!   doorbell and published load, `now`. Never a mailbox, a lock or
//!   delivery: a policy cannot post, only decide;
//! * returns a `#[must_use]` [`Decision`]: stay on the CPU the task parked
//!   on, or go to a CPU with a [`PlaceReason`];
//! * declares **where it decides** ([`Policy::DECIDES`]): on the task's
//!   owner after its own wake (the seed's kernel: two wakes in series for a
//!   move), or on the waker's CPU, which won the park word's
//!   `Parked -> Waking` transition and so holds the parked entity until the
//!   target adopts it (Linux's `try_to_wake_up()` with
//!   `ttwu_queue_wakelist()`: one wake). The `wake` module has the protocol.
//!
//! Spawn placement is behind the same seam: [`Policy::place_new`] may answer
//! for a new task; when it does not, the machine's [`SpawnRule`]
//! (`rotate` or `near`, from the config) does.
//!
//! Two policies live here, and one more outside this crate
//! (`examples/custom-policy`) shows the seam from a user's side:
//!
//! * [`Home`]: the seed's base. Ordinary placement only.
//! * [`WakerStreakRule`]: ordinary placement plus the waker-streak rule.
//!
//! ## Ordinary placement
//!
//! Home is free: stay. Home is busy (a task runs there or waits in its
//! queue): forward to a CPU of home's LLC that the mask names and that is
//! `sleeping_unrung`, a free core first, then the quickest to wake; none:
//! stay and let the bands decide about preemption. The forward stays in
//! home's LLC so the task keeps its cache.
//!
//! ## The waker-streak rule (`toward_its_waker`)
//!
//! The waker's LLC is not home's, the run from it is at or past
//! `waker_run`, and the task is fair and neither stopped nor killed: send it
//! to a CPU of the waker's LLC that the mask names, is `sleeping_unrung`, is
//! not on the waker's core, a free core first, then the shallowest idle
//! state, scanning that LLC alone in id order starting after the waker. No
//! such CPU: nothing moves (ordinary placement applies).

use schedlab_topology::{CpuId, CpuSet, LlcId};

use crate::effects::PlaceReason;
use crate::streak::{WakerStreak, WAKER_RUN};
use crate::task::{Band, Task};

pub use crate::task::PolicyState;

pub use crate::shared::{LlcStats, Machine};
mod seam;
pub use seam::{Decides, Decision, Policy, Wake};

/// The seed's base: ordinary placement, no rule. It keeps the waker streak
/// (never acting on it) so that a trace of `home` shows the runs the rule
/// would have seen.
#[derive(Clone, Copy, Debug, Default)]
pub struct Home;

impl Policy for Home {
    type TaskState = WakerStreak;

    fn name(&self) -> &str {
        "home"
    }

    fn wake_parked(&mut self, m: &Machine<'_>, wake: &Wake, state: &mut WakerStreak) {
        count_streak(m, wake, state);
    }

    fn place(&mut self, m: &Machine<'_>, wake: &Wake, task: &mut Task<WakerStreak>) -> Decision {
        ordinary(m, wake, task.mask())
    }
}

/// Ordinary placement plus the waker-streak rule.
///
/// With `flags` (`waker-streak:K:flags`), a flagged wake also reaches the
/// streak: the delivering CPU records the first flagging waker's LLC in the
/// park word with the pending flag (11 bits of the word's unused upper
/// half), and the owner counts it when the task consumes the flag. The
/// per-task state stays the one `u16`; only parked wakes still move a task.
/// So a server whose near client's requests keep finding it busy sees that
/// client in its streak, and a far client's parked wakes no longer make a
/// run alone.
#[derive(Clone, Copy, Debug)]
pub struct WakerStreakRule {
    pub waker_run: u8,
    pub flags: bool,
}

impl Default for WakerStreakRule {
    fn default() -> Self {
        WakerStreakRule {
            waker_run: WAKER_RUN,
            flags: false,
        }
    }
}

impl Policy for WakerStreakRule {
    type TaskState = WakerStreak;

    fn name(&self) -> &str {
        "waker-streak"
    }

    fn wake_parked(&mut self, m: &Machine<'_>, wake: &Wake, state: &mut WakerStreak) {
        count_streak(m, wake, state);
    }

    fn counts_flags(&self) -> bool {
        self.flags
    }

    fn flag_consumed(&mut self, _m: &Machine<'_>, waker_llc: LlcId, state: &mut WakerStreak) {
        state.observe(waker_llc);
    }

    fn place(&mut self, m: &Machine<'_>, wake: &Wake, task: &mut Task<WakerStreak>) -> Decision {
        if let Some(waker) = wake.cause.waker {
            let topo = m.topology();
            let movable = matches!(task.band(), Band::Fair { .. });
            if movable
                && task.state().asks_move(
                    topo.llc_id(waker),
                    topo.llc_id(wake.prev),
                    self.waker_run,
                )
            {
                if let Some(cpu) = toward_its_waker(m, waker, task.mask()) {
                    return Decision::Send(cpu, PlaceReason::WakerRule);
                }
            }
        }
        ordinary(m, wake, task.mask())
    }
}

/// A parked wake that names a waker counts in the streak.
fn count_streak(m: &Machine<'_>, wake: &Wake, state: &mut WakerStreak) {
    if let Some(w) = wake.cause.waker {
        state.observe(m.topology().llc_id(w));
    }
}

mod builtin;
pub use crate::config::{PolicyNameError, SpawnPolicy};
pub use builtin::BuiltinPolicy;

/// Ordinary placement (see the module doc): stay when home is free, else a
/// wake forward inside home's LLC.
pub fn ordinary(m: &Machine<'_>, wake: &Wake, mask: &CpuSet) -> Decision {
    if !wake.prev_busy {
        return Decision::Stay;
    }
    let avoid = CpuSet::single(wake.prev);
    match idle_among(m, m.topology().llc_cpus(wake.prev), wake.prev, mask, &avoid) {
        Some(cpu) => Decision::Send(cpu, PlaceReason::Forward),
        None => Decision::Stay,
    }
}

/// The rule's target in the waker's LLC, or `None`.
pub fn toward_its_waker(m: &Machine<'_>, waker: CpuId, mask: &CpuSet) -> Option<CpuId> {
    let topo = m.topology();
    idle_among(m, topo.llc_cpus(waker), waker, mask, topo.core_cpus(waker))
}

/// A core whose every thread is asleep with no kick on its way: a sibling
/// that is rung is about to be busy.
pub fn free_core(m: &Machine<'_>, cpu: CpuId) -> bool {
    m.topology()
        .core_siblings(cpu)
        .iter()
        .all(|&c| m.sleeping_unrung(c))
}

/// The best idle CPU of `scope`: in `mask`, not in `avoid`, asleep with no
/// kick on its way; a free core first, then the shallowest idle depth;
/// ties go to the first in id order starting after `after`.
pub fn idle_among(
    m: &Machine<'_>,
    scope: &CpuSet,
    after: CpuId,
    mask: &CpuSet,
    avoid: &CpuSet,
) -> Option<CpuId> {
    let n = m.topology().num_cpus();
    let mut best: Option<((bool, u8), CpuId)> = None;
    let start = CpuId::new((after.index() + 1) % n);
    for cpu in scope.iter_from(start) {
        if !mask.contains(cpu) || avoid.contains(cpu) || !m.sleeping_unrung(cpu) {
            continue;
        }
        let key = (!free_core(m, cpu), m.doorbell(cpu).load().depth);
        if key == (false, 0) {
            return Some(cpu);
        }
        if best.is_none_or(|(k, _)| key < k) {
            best = Some((key, cpu));
        }
    }
    best.map(|(_, c)| c)
}

/// The nearest idle CPU in `mask` around `cpu` (its [`Topology::rings`](schedlab_topology::Topology::rings));
/// else the first CPU of the mask from `cpu` on. `None` only for an empty
/// mask.
pub fn nearest_in_mask(m: &Machine<'_>, cpu: CpuId, mask: &CpuSet) -> Option<CpuId> {
    let topo = m.topology();
    let none = CpuSet::new();
    topo.rings_outward(cpu)
        .find_map(|ring| idle_among(m, &ring, cpu, mask, &none))
        .or_else(|| mask.iter_from(cpu).find(|c| topo.contains(*c)))
}

/// Where a new task starts: a CPU's spawn placement, with whatever state of
/// its own it keeps (the rotation's cursor).
pub trait SpawnRule {
    /// A CPU of `mask`, or `None` when the rule finds none (the spawner's
    /// CPU or the mask's first CPU is taken then).
    fn place_new(&mut self, m: &Machine<'_>, spawner: CpuId, mask: &CpuSet) -> Option<CpuId>;
}

/// The `rotate` rule: its cursor is this CPU's place in the rotation.
#[derive(Clone, Copy, Debug)]
pub struct Rotate {
    pub cursor: usize,
}

impl SpawnRule for Rotate {
    fn place_new(&mut self, m: &Machine<'_>, _spawner: CpuId, mask: &CpuSet) -> Option<CpuId> {
        let topo = m.topology();
        let n = topo.num_cpus();
        // idle_among starts after its `after`, so start one before.
        let before = CpuId::new((self.cursor % n + n - 1) % n);
        let c = idle_among(m, topo.cpus(), before, mask, &CpuSet::new());
        if let Some(c) = c {
            self.cursor = c.index() + 1;
        }
        c
    }
}

/// The `near` rule.
#[derive(Clone, Copy, Debug, Default)]
pub struct Near;

impl SpawnRule for Near {
    fn place_new(&mut self, m: &Machine<'_>, spawner: CpuId, mask: &CpuSet) -> Option<CpuId> {
        let rings = m.topology().rings(spawner);
        let free = rings.iter().find_map(|ring| {
            ring.iter_from(spawner)
                .find(|&c| mask.contains(c) && m.sleeping_unrung(c) && free_core(m, c))
        });
        free.or_else(|| {
            rings
                .iter()
                .find_map(|ring| idle_among(m, ring, spawner, mask, &CpuSet::new()))
        })
    }
}

mod on_waker;
pub use on_waker::OnWaker;
