//! Tasks: the spec a host creates one from, and the entity its owner holds.

use alloc::boxed::Box;
use core::fmt;

use schedlab_topology::{CpuId, CpuSet};

use crate::fair::{pick_eevdf, Entity, FairConfig, Pick};
use crate::pelt::SchedAvg;
use crate::streak::WakerStreak;

/// A task's id: its slot in the shared task table. Ids are not reused.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct TaskId(pub u32);

impl TaskId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Which band a task runs in.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Band {
    /// Fixed priority 1..=99, higher first, FIFO within one (SCHED_FIFO);
    /// preempts all fair work.
    Rt { prio: u8 },
    /// EEVDF with the weight of `nice` (-20..=19).
    Fair { nice: i8 },
}

/// What a host asks for when it creates a task. (Ordered, so a host can
/// keep the distinct specs it creates tasks with in an ordered map.)
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub struct TaskSpec {
    pub band: Band,
    /// The CPUs it may run on; `None` is every CPU.
    pub mask: Option<CpuSet>,
    /// Its requested slice (fair band); `None` is the base slice.
    pub slice_ns: Option<u64>,
    /// Core-scheduling cookie; `0` is none. Kept for core scheduling.
    pub cookie: u64,
    /// The process (address space) it belongs to, for cache-aware
    /// scheduling (`p->mm`); `None`: a process of its own, never grouped.
    pub process: Option<u32>,
}

impl TaskSpec {
    pub fn fair(nice: i8) -> TaskSpec {
        TaskSpec {
            band: Band::Fair { nice },
            mask: None,
            slice_ns: None,
            cookie: 0,
            process: None,
        }
    }

    pub fn rt(prio: u8) -> TaskSpec {
        TaskSpec {
            band: Band::Rt { prio },
            ..TaskSpec::fair(0)
        }
    }

    pub fn with_mask(mut self, mask: CpuSet) -> TaskSpec {
        self.mask = Some(mask);
        self
    }

    pub fn in_process(mut self, process: u32) -> TaskSpec {
        self.process = Some(process);
        self
    }
}

/// A task's scheduling state, held by exactly one CPU at a time (its
/// owner). It moves between owners only inside an `Adopt` message.
///
/// A handle: the state ([`TaskData`]) is allocated once, at spawn, so
/// moving a task between a queue, a mailbox and its slot moves a pointer,
/// as Linux passes a `task_struct *`.
///
/// `S` is the placement policy's per-task state ([`PolicyState`]).
#[derive(Clone, Debug)]
pub struct Task<S>(Box<TaskData<S>>);

impl<S> Task<S> {
    pub(crate) fn new(data: TaskData<S>) -> Task<S> {
        Task(Box::new(data))
    }
}

impl<S> core::ops::Deref for Task<S> {
    type Target = TaskData<S>;

    fn deref(&self) -> &TaskData<S> {
        &self.0
    }
}

impl<S> core::ops::DerefMut for Task<S> {
    fn deref_mut(&mut self) -> &mut TaskData<S> {
        &mut self.0
    }
}

/// What a [`Task`] holds.
#[derive(Clone, Debug)]
pub struct TaskData<S> {
    pub(crate) id: TaskId,
    pub(crate) band: Band,
    pub(crate) mask: CpuSet,
    pub(crate) cookie: u64,
    /// The placement policy's state for this task.
    pub(crate) policy: S,
    pub(crate) fair: Entity,
    /// Its PELT signal (`se->avg`), fair tasks only.
    pub(crate) avg: SchedAvg,
    /// Set once when the task begins leaving its process; never cleared.
    pub(crate) leaving: bool,
    pub(crate) stopped: bool,
    pub(crate) killed: bool,
    /// Wall ns it last stopped running: cache-hot tests.
    pub(crate) last_ran: u64,
    /// The deadline it sleeps until, if it parked with one.
    pub(crate) sleep_deadline: Option<u64>,
    /// Enqueue order, for FIFO within an RT priority.
    pub(crate) seq: u64,
    /// Its process (`p->mm`), for cache-aware scheduling.
    pub(crate) process: Option<u32>,
    /// `p->preferred_llc` (an LLC ordinal), set by cache-aware scheduling.
    pub(crate) pref_llc: Option<u16>,
    /// The CPU of it the process's occupancy peaks on (`mm->sc_stat.cpu`).
    pub(crate) pref_cpu: Option<u32>,
    /// `sum_exec` already charged to its process's occupancy.
    pub(crate) cache_acct: u64,
}

impl<S: PolicyState> Task<S> {
    /// A task as a host that rebuilds another scheduler's state holds it,
    /// to ask a policy what it would decide (the shadow of a kernel's
    /// record): fair at nice 0 on every CPU of `mask`, with this policy
    /// state and PELT signal. Nothing here runs it.
    pub fn for_host(id: TaskId, mask: CpuSet, state: S, avg: SchedAvg) -> Task<S> {
        let spec = TaskSpec::fair(0);
        let slice = FairConfig::for_cpus(mask.weight()).base_slice_ns;
        let mut t = new_task(id, &spec, mask, slice, 0);
        t.policy = state;
        t.avg = avg;
        t
    }

    pub fn id(&self) -> TaskId {
        self.id
    }

    /// The placement policy's state for this task.
    pub fn state(&self) -> &S {
        &self.policy
    }

    /// The placement policy's state, to change (only the CPU holding the
    /// task can: it owns the `&mut`).
    pub fn state_mut(&mut self) -> &mut S {
        &mut self.policy
    }

    pub fn band(&self) -> Band {
        self.band
    }

    pub fn mask(&self) -> &CpuSet {
        &self.mask
    }

    pub fn cookie(&self) -> u64 {
        self.cookie
    }

    pub fn entity(&self) -> &Entity {
        &self.fair
    }

    /// Its PELT averages (`se->avg`): `util_avg`, `load_avg`, ...
    pub fn pelt(&self) -> &SchedAvg {
        &self.avg
    }

    /// When it last stopped running here or elsewhere (ns).
    pub fn last_ran(&self) -> u64 {
        self.last_ran
    }

    /// Its process, if it declared one.
    pub fn process(&self) -> Option<u32> {
        self.process
    }

    /// The LLC (ordinal) cache-aware scheduling prefers for it.
    pub fn preferred_llc(&self) -> Option<u16> {
        self.pref_llc
    }

    /// The CPU of its preferred LLC where its process ran most
    /// (`mm->sc_stat.cpu`, the RFC's `mm_sched_cpu`).
    pub fn preferred_cpu(&self) -> Option<CpuId> {
        self.pref_cpu.map(|c| CpuId::new(c as usize))
    }

    pub fn is_rt(&self) -> bool {
        matches!(self.band, Band::Rt { .. })
    }

    pub fn rt_prio(&self) -> u8 {
        match self.band {
            Band::Rt { prio } => prio,
            Band::Fair { .. } => 0,
        }
    }
}

/// What the band pick reads of a task: a [`Task`] on its owner, or the copy
/// of one that a CPU publishes for the core-wide pick.
pub(crate) trait Pickable {
    /// The band as a priority: 0 fair, `1 + prio` RT.
    fn class(&self) -> u16;
    fn entity(&self) -> &Entity;
}

impl<S: PolicyState> Pickable for Task<S> {
    fn class(&self) -> u16 {
        if self.is_rt() {
            1 + self.rt_prio() as u16
        } else {
            0
        }
    }

    fn entity(&self) -> &Entity {
        &self.fair
    }
}

/// `pick_task()` on one CPU: the running task (when it may go on), the
/// fair tasks waiting and the first RT task waiting (highest priority,
/// FIFO). RT first: a waiting RT task beats a fair running one, and a
/// running RT task yields only to a higher priority; then EEVDF with the
/// running task competing. `None`: nothing to run.
pub(crate) fn pick_task<'a, T: Pickable>(
    running: Option<&'a T>,
    fair: impl Iterator<Item = &'a T> + Clone,
    rt: Option<&'a T>,
    cfg: &FairConfig,
    zero_v: i64,
) -> Option<&'a T> {
    if let Some(p) = pick_rt(running, rt) {
        return Some(p);
    }
    match pick_eevdf(
        fair.clone().map(Pickable::entity),
        running.map(Pickable::entity),
        cfg.has(crate::fair::Features::RUN_TO_PARITY),
        zero_v,
    ) {
        Pick::Current => running,
        Pick::Queued(i) => fair.clone().nth(i),
        Pick::Nothing => None,
    }
}

/// The RT half of [`pick_task`]: a waiting RT task beats a fair running
/// one, and a running RT task yields only to a higher priority. `None`:
/// the fair class picks.
#[inline]
pub(crate) fn pick_rt<'a, T: Pickable>(running: Option<&'a T>, rt: Option<&'a T>) -> Option<&'a T> {
    match (running, rt) {
        (Some(r), Some(q)) if r.class() > 0 => Some(if q.class() > r.class() { q } else { r }),
        (Some(r), None) if r.class() > 0 => Some(r),
        (_, Some(q)) => Some(q),
        _ => None,
    }
}

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

/// A new task's PELT signal (`init_entity_runnable_average()`): its load
/// starts at its full weight, its utilization at 0 (Linux then gives it a
/// share of its CPU's spare capacity, `post_init_entity_util_avg()`; not
/// modelled).
fn new_task_avg(now: u64, weight: u32) -> SchedAvg {
    let mut a = SchedAvg::starting(now);
    a.load_avg = weight as u64;
    a
}

/// A new task of `spec`, runnable, with nothing recorded yet.
pub(crate) fn new_task<S: PolicyState>(
    id: TaskId,
    spec: &TaskSpec,
    mask: CpuSet,
    slice: u64,
    now: u64,
) -> Task<S> {
    let nice = match spec.band {
        Band::Fair { nice } => nice,
        Band::Rt { .. } => 0,
    };
    Task::new(TaskData {
        id,
        band: spec.band,
        mask,
        cookie: spec.cookie,
        policy: S::default(),
        fair: Entity::new(nice, slice),
        avg: new_task_avg(now, Entity::new(nice, slice).weight),
        leaving: false,
        stopped: false,
        killed: false,
        last_ran: 0,
        sleep_deadline: None,
        seq: 0,
        process: spec.process,
        pref_llc: None,
        pref_cpu: None,
        cache_acct: 0,
    })
}
