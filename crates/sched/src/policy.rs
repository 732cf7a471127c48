//! Placement policies: where a parked task's wake puts it, and where a new
//! task starts.
//!
//! A policy is a plain function over read-only state: it gets the woken
//! task, its owner (home), whether home is busy and the wake's cause, and
//! returns a [`Decision`]; the owner carries it out. [`Home`] is the seed's
//! base (ordinary placement only), [`WakerStreakRule`] adds the waker-streak
//! rule on top of it. A Linux-like policy (`select_task_rq_fair`) is one
//! more `WakePolicy`; the per-task state it needs (wakee flips) would sit
//! beside the streak in `Task`.
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

use schedlab_topology::{CpuId, CpuSet, Level, Topology};

use crate::config::{Placement, SpawnPolicy};
use crate::effects::{PlaceReason, WakeCause};
use crate::shared::Shared;
use crate::task::{Band, Task};

/// What to do with a woken task.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Decision {
    /// Queue it here, at home.
    Stay,
    /// Send it to `cpu`.
    Send(CpuId, PlaceReason),
}

/// What a policy may look at when it places a wake.
pub struct WakeCx<'a> {
    pub shared: &'a Shared,
    /// The owner CPU handling the wake.
    pub home: CpuId,
    /// Home runs a task or has one waiting.
    pub home_busy: bool,
    pub cause: WakeCause,
}

/// A wake placement policy.
pub trait WakePolicy {
    fn name(&self) -> &'static str;
    fn place(&self, cx: &WakeCx<'_>, task: &Task) -> Decision;
}

/// The seed's base: ordinary placement, no rule.
pub struct Home;

impl WakePolicy for Home {
    fn name(&self) -> &'static str {
        "home"
    }

    fn place(&self, cx: &WakeCx<'_>, task: &Task) -> Decision {
        ordinary(cx, task)
    }
}

/// Ordinary placement plus the waker-streak rule.
pub struct WakerStreakRule {
    pub waker_run: u8,
}

impl WakePolicy for WakerStreakRule {
    fn name(&self) -> &'static str {
        "waker-streak"
    }

    fn place(&self, cx: &WakeCx<'_>, task: &Task) -> Decision {
        if cfg!(feature = "mutant-no-rule") {
            return ordinary(cx, task);
        }
        if let Some(waker) = cx.cause.waker {
            let topo = cx.shared.topology();
            let movable = matches!(task.band, Band::Fair { .. }) && !task.stopped && !task.killed;
            if movable
                && task
                    .streak
                    .asks_move(topo.llc_id(waker), topo.llc_id(cx.home), self.waker_run)
            {
                if let Some(cpu) = toward_its_waker(cx.shared, waker, &task.mask) {
                    return Decision::Send(cpu, PlaceReason::WakerRule);
                }
            }
        }
        ordinary(cx, task)
    }
}

/// The policy a machine's config names, as one value a CPU keeps.
pub enum AnyPolicy {
    Home(Home),
    WakerStreak(WakerStreakRule),
}

impl AnyPolicy {
    pub fn of(p: &Placement) -> AnyPolicy {
        match *p {
            Placement::Home => AnyPolicy::Home(Home),
            Placement::WakerStreak { waker_run } => {
                AnyPolicy::WakerStreak(WakerStreakRule { waker_run })
            }
        }
    }
}

impl WakePolicy for AnyPolicy {
    fn name(&self) -> &'static str {
        match self {
            AnyPolicy::Home(p) => p.name(),
            AnyPolicy::WakerStreak(p) => p.name(),
        }
    }

    fn place(&self, cx: &WakeCx<'_>, task: &Task) -> Decision {
        match self {
            AnyPolicy::Home(p) => p.place(cx, task),
            AnyPolicy::WakerStreak(p) => p.place(cx, task),
        }
    }
}

fn ordinary(cx: &WakeCx<'_>, task: &Task) -> Decision {
    if !cx.home_busy {
        return Decision::Stay;
    }
    let topo = cx.shared.topology();
    let avoid = CpuSet::single(cx.home);
    match idle_among(
        cx.shared,
        topo.llc_cpus(cx.home),
        cx.home,
        &task.mask,
        &avoid,
    ) {
        Some(cpu) => Decision::Send(cpu, PlaceReason::Forward),
        None => Decision::Stay,
    }
}

/// The rule's target in the waker's LLC, or `None`.
pub fn toward_its_waker(sh: &Shared, waker: CpuId, mask: &CpuSet) -> Option<CpuId> {
    let topo = sh.topology();
    let avoid = if cfg!(feature = "mutant-no-core-check") {
        CpuSet::single(waker)
    } else {
        *topo.core_cpus(waker)
    };
    let all = CpuSet::first_n(topo.num_cpus());
    let mask = if cfg!(feature = "mutant-mask-ignored") {
        &all
    } else {
        mask
    };
    idle_among(sh, topo.llc_cpus(waker), waker, mask, &avoid)
}

/// Whether an idle search may choose `cpu`: asleep with no kick on its way.
fn candidate(sh: &Shared, cpu: CpuId) -> bool {
    if cfg!(feature = "mutant-rung-accepted") {
        sh.doorbell(cpu).asleep()
    } else {
        sh.doorbell(cpu).sleeping_unrung()
    }
}

/// A core whose every thread is a candidate: a sibling that is rung is
/// about to be busy.
fn free_core(sh: &Shared, topo: &Topology, cpu: CpuId) -> bool {
    topo.core_cpus(cpu).iter().all(|c| candidate(sh, c))
}

/// The best idle CPU of `scope`: in `mask`, not in `avoid`, a candidate; a
/// free core first, then the shallowest idle depth; ties go to the first in
/// id order starting after `after`.
pub fn idle_among(
    sh: &Shared,
    scope: &CpuSet,
    after: CpuId,
    mask: &CpuSet,
    avoid: &CpuSet,
) -> Option<CpuId> {
    let topo = sh.topology();
    let mut best: Option<((bool, u8), CpuId)> = None;
    let start = CpuId::new((after.index() + 1) % topo.num_cpus());
    for cpu in scope.iter_from(start) {
        if !mask.contains(cpu) || avoid.contains(cpu) || !candidate(sh, cpu) {
            continue;
        }
        let key = (!free_core(sh, topo, cpu), sh.doorbell(cpu).load().depth);
        if key == (false, 0) {
            return Some(cpu);
        }
        if best.is_none_or(|(k, _)| key < k) {
            best = Some((key, cpu));
        }
    }
    best.map(|(_, c)| c)
}

/// The nearest idle CPU in `mask` around `cpu`, own LLC, then node, then
/// machine; else the first CPU of the mask from `cpu` on. `None` only for
/// an empty mask.
pub fn nearest_in_mask(sh: &Shared, cpu: CpuId, mask: &CpuSet) -> Option<CpuId> {
    let topo = sh.topology();
    for level in [Level::Llc, Level::Node, Level::Machine] {
        if let Some(c) = idle_among(sh, &topo.span(cpu, level), cpu, mask, &CpuSet::new()) {
            return Some(c);
        }
    }
    mask.iter_from(cpu).find(|c| topo.contains(*c))
}

/// Where a new task starts (DESIGN.md section 5).
pub fn spawn_target(
    sh: &Shared,
    policy: SpawnPolicy,
    spawner: CpuId,
    cursor: &mut usize,
    mask: &CpuSet,
) -> Option<CpuId> {
    let topo = sh.topology();
    let none = CpuSet::new();
    let chosen = match policy {
        SpawnPolicy::Rotate => {
            let start = CpuId::new(*cursor % topo.num_cpus());
            let all = *topo.cpus();
            // idle_among starts after its `after`, so start one before.
            let before = CpuId::new((start.index() + topo.num_cpus() - 1) % topo.num_cpus());
            let c = idle_among(sh, &all, before, mask, &none);
            if let Some(c) = c {
                *cursor = c.index() + 1;
            }
            c
        }
        SpawnPolicy::Near => {
            let scopes = [Level::Llc, Level::Node, Level::Machine];
            let free = scopes.iter().find_map(|&l| {
                topo.span(spawner, l)
                    .iter_from(spawner)
                    .find(|&c| mask.contains(c) && candidate(sh, c) && free_core(sh, topo, c))
            });
            free.or_else(|| {
                scopes
                    .iter()
                    .find_map(|&l| idle_among(sh, &topo.span(spawner, l), spawner, mask, &none))
            })
        }
    };
    chosen.or_else(|| {
        if mask.contains(spawner) {
            Some(spawner)
        } else {
            mask.iter_from(spawner).find(|c| topo.contains(*c))
        }
    })
}
