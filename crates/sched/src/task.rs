//! Tasks: the spec a host creates one from, and the entity its owner holds.

use schedlab_topology::CpuSet;

use crate::fair::Entity;
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
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Band {
    /// Fixed priority 1..=99, higher first, FIFO within one (SCHED_FIFO);
    /// preempts all fair work.
    Rt { prio: u8 },
    /// EEVDF with the weight of `nice` (-20..=19).
    Fair { nice: i8 },
}

/// What a host asks for when it creates a task.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct TaskSpec {
    pub band: Band,
    /// The CPUs it may run on; `None` is every CPU.
    pub mask: Option<CpuSet>,
    /// Its requested slice (fair band); `None` is the base slice.
    pub slice_ns: Option<u64>,
    /// Core-scheduling cookie; `0` is none. Kept for core scheduling.
    pub cookie: u64,
}

impl TaskSpec {
    pub fn fair(nice: i8) -> TaskSpec {
        TaskSpec {
            band: Band::Fair { nice },
            mask: None,
            slice_ns: None,
            cookie: 0,
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
}

/// A task's scheduling state, held by exactly one CPU at a time (its
/// owner). It moves between owners only inside an `Adopt` message.
#[derive(Clone, Debug)]
pub struct Task {
    pub(crate) id: TaskId,
    pub(crate) band: Band,
    pub(crate) mask: CpuSet,
    pub(crate) cookie: u64,
    pub(crate) streak: WakerStreak,
    pub(crate) fair: Entity,
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
}

impl Task {
    pub fn id(&self) -> TaskId {
        self.id
    }

    pub fn streak(&self) -> WakerStreak {
        self.streak
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
