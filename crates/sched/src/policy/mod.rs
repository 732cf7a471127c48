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

use core::fmt;
use core::str::FromStr;

use schedlab_topology::{CpuId, CpuSet, LlcId, Topology};

use crate::config::Config;
use crate::doorbell::Doorbell;
use crate::effects::{PlaceReason, WakeCause};
use crate::linux::fork::LinuxFork;
use crate::park::Delivery;
use crate::shared::Doors;
use crate::streak::{WakerStreak, WAKER_RUN};
use crate::task::{Band, Task, TaskId};

/// A policy's per-task state: small, copied with the task, and shown in
/// the trace.
pub trait PolicyState: Copy + Default + fmt::Debug + Send + Sync + 'static {
    /// The state as one word, for the trace (hashed by the simulator).
    fn bits(&self) -> u64 {
        0
    }

    /// The state as a waker streak, when it is one (traces draw a streak
    /// counter from it).
    fn streak(&self) -> Option<WakerStreak> {
        None
    }
}

impl PolicyState for () {}

impl PolicyState for WakerStreak {
    fn bits(&self) -> u64 {
        WakerStreak::bits(*self) as u64
    }

    fn streak(&self) -> Option<WakerStreak> {
        Some(*self)
    }
}

// The seed's owner ruling: one u16 of per-task placement state.
const _: () = assert!(core::mem::size_of::<WakerStreak>() == 2);

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

/// The machine as a policy may see it: read-only.
#[derive(Clone, Copy)]
pub struct Machine<'a> {
    pub(crate) topo: &'a Topology,
    pub(crate) config: &'a Config,
    pub(crate) doors: &'a [Doors],
    /// The balancer's record of each LLC's utilization and capacity, when
    /// it keeps one (cache-aware scheduling).
    pub(crate) llcs: Option<&'a dyn LlcStats>,
    /// The CPU deciding.
    pub(crate) cpu: CpuId,
    pub(crate) now: u64,
}

impl<'a> Machine<'a> {
    pub fn topology(&self) -> &'a Topology {
        self.topo
    }

    pub fn config(&self) -> &'a Config {
        self.config
    }

    /// The CPU this decision runs on.
    pub fn cpu(&self) -> CpuId {
        self.cpu
    }

    pub fn now(&self) -> u64 {
        self.now
    }

    pub fn doorbell(&self, cpu: CpuId) -> &'a Doorbell {
        &self.doors[cpu.index()].doorbell
    }

    /// Running + queued tasks on `cpu`, as it last published them.
    pub fn load(&self, cpu: CpuId) -> u32 {
        self.doors[cpu.index()].load()
    }

    /// The CPU's fair `util_avg` (PELT, 0..=1024 per CPU), as it last
    /// published it.
    pub fn util(&self, cpu: CpuId) -> u32 {
        self.doors[cpu.index()]
            .util
            .load(crate::sync::Ordering::Relaxed)
    }

    /// The CPU's fair `load_avg` (PELT, weight-scaled), as last published.
    pub fn load_avg(&self, cpu: CpuId) -> u32 {
        self.doors[cpu.index()]
            .load_avg
            .load(crate::sync::Ordering::Relaxed)
    }

    /// The CPU's fair `runnable_avg` (PELT, 0..=1024 per runnable task), as
    /// last published.
    pub fn runnable_avg(&self, cpu: CpuId) -> u32 {
        self.doors[cpu.index()]
            .runnable_avg
            .load(crate::sync::Ordering::Relaxed)
    }

    /// LLC `llc`'s (utilization, capacity) as periodic balancing last
    /// recorded them (`sd_llc_shared->util_avg`, `->capacity`): what a wake
    /// sees of an LLC's load, as stale as the last balance; `(0, 0)` without
    /// cache-aware scheduling.
    pub fn llc_stats(&self, llc: usize) -> (u64, u64) {
        self.llcs.and_then(|l| l.recorded(llc)).unwrap_or((0, 0))
    }

    /// The same view with the balancer's record of the LLCs.
    pub(crate) fn with_llcs(self, llcs: &'a dyn LlcStats) -> Machine<'a> {
        Machine {
            llcs: Some(llcs),
            ..self
        }
    }

    /// Asleep with no kick on its way: the test every idle search uses, so
    /// a burst of moves spreads over several CPUs.
    pub fn sleeping_unrung(&self, cpu: CpuId) -> bool {
        self.doorbell(cpu).sleeping_unrung()
    }
}

/// What a balancer records of each LLC for the wake path to read
/// ([`Machine::llc_stats`]).
pub trait LlcStats {
    /// LLC `llc`'s (utilization, capacity), if recorded.
    fn recorded(&self, llc: usize) -> Option<(u64, u64)>;
}

impl<B: crate::balancer::Balancer> LlcStats for B {
    fn recorded(&self, llc: usize) -> Option<(u64, u64)> {
        crate::balancer::Balancer::llc_stats(self, llc)
    }
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

    /// Where a new task starts, or `None` for the machine's [`SpawnRule`].
    fn place_new(&mut self, _m: &Machine<'_>, _spawner: CpuId, _mask: &CpuSet) -> Option<CpuId> {
        None
    }
}

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
pub use builtin::{BuiltinPolicy, PolicyNameError};

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
        .core_cpus(cpu)
        .iter()
        .all(|c| m.sleeping_unrung(c))
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

/// The nearest idle CPU in `mask` around `cpu` (its [`Topology::rings`]);
/// else the first CPU of the mask from `cpu` on. `None` only for an empty
/// mask.
pub fn nearest_in_mask(m: &Machine<'_>, cpu: CpuId, mask: &CpuSet) -> Option<CpuId> {
    let topo = m.topology();
    let none = CpuSet::new();
    topo.rings(cpu)
        .iter()
        .find_map(|ring| idle_among(m, ring, cpu, mask, &none))
        .or_else(|| mask.iter_from(cpu).find(|c| topo.contains(*c)))
}

/// The built-in spawn rules' names: `near` and `rotate`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SpawnPolicy {
    /// The seed's base: the shallowest of the equal free-core sleepers, in a
    /// rotation over all CPUs that ignores LLCs.
    Rotate,
    /// A free core in the spawner's LLC, then its node, then anywhere; then
    /// any sleeping CPU in that order; else the spawner's CPU.
    Near,
    /// Linux's fork placement, `sched_balance_find_dst_cpu()`
    /// ([`crate::linux::fork`]).
    Linux,
}

impl fmt::Display for SpawnPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SpawnPolicy::Rotate => "rotate",
            SpawnPolicy::Near => "near",
            SpawnPolicy::Linux => "linux",
        })
    }
}

impl FromStr for SpawnPolicy {
    type Err = PolicyNameError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "near" => Ok(SpawnPolicy::Near),
            "rotate" => Ok(SpawnPolicy::Rotate),
            "linux" => Ok(SpawnPolicy::Linux),
            o => Err(PolicyNameError(alloc::format!(
                "spawn {o:?}: expected near, rotate or linux"
            ))),
        }
    }
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

/// The spawn rule a config names, as one CPU keeps it.
#[derive(Clone, Copy, Debug)]
pub enum MachineSpawn {
    Rotate(Rotate),
    Near(Near),
    Linux(LinuxFork),
}

impl MachineSpawn {
    pub fn new(p: SpawnPolicy, cpu: CpuId) -> MachineSpawn {
        match p {
            SpawnPolicy::Rotate => MachineSpawn::Rotate(Rotate {
                cursor: cpu.index() + 1,
            }),
            SpawnPolicy::Near => MachineSpawn::Near(Near),
            SpawnPolicy::Linux => MachineSpawn::Linux(LinuxFork),
        }
    }
}

impl SpawnRule for MachineSpawn {
    fn place_new(&mut self, m: &Machine<'_>, spawner: CpuId, mask: &CpuSet) -> Option<CpuId> {
        match self {
            MachineSpawn::Rotate(r) => r.place_new(m, spawner, mask),
            MachineSpawn::Near(n) => n.place_new(m, spawner, mask),
            MachineSpawn::Linux(l) => l.place_new(m, spawner, mask),
        }
    }
}

mod on_waker;
pub use on_waker::OnWaker;
