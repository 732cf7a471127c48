//! What entry points return: the effects the host must carry out, and the
//! trace of what was decided and why.

use alloc::vec::Vec;

use schedlab_topology::CpuId;

use crate::doorbell::{IdleDepth, KickKind};
use crate::park::Delivery;
use crate::streak::WakerStreak;
use crate::task::TaskId;

/// Who woke a task: the CPU of the thread that posted the wake, or none (a
/// device interrupt, the scheduler itself, a thread that is leaving).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct WakeCause {
    pub waker: Option<CpuId>,
}

impl WakeCause {
    pub const NONE: WakeCause = WakeCause { waker: None };

    pub fn from(cpu: CpuId) -> WakeCause {
        WakeCause { waker: Some(cpu) }
    }
}

/// Why a kick is sent.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum KickWhy {
    /// A message waits in the CPU's mailbox.
    Message,
    /// A reschedule of its current task.
    Resched,
}

/// Kick `cpu`: an IPI or a wake from idle.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Kick {
    pub cpu: CpuId,
    pub kind: KickKind,
    pub why: KickWhy,
}

/// What the CPU runs after a pass.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Switch {
    /// Run this task (it may be the one that was running).
    Run(TaskId),
    /// Nothing to run: sleep at this depth.
    Idle { depth: IdleDepth },
}

/// Why a task went where it went.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PlaceReason {
    /// Back to the CPU it parked on.
    Home,
    /// Home was busy: forwarded to a sleeping CPU near home.
    Forward,
    /// The waker-streak rule.
    WakerRule,
    /// Its mask no longer names the CPU it was on.
    Affinity,
    /// Taken by a newly idle CPU.
    Steal,
    /// Pushed to an idle CPU by a periodic balance pass.
    Balance,
    /// A new task's first CPU.
    Spawn,
}

impl PlaceReason {
    pub fn name(self) -> &'static str {
        match self {
            PlaceReason::Home => "home",
            PlaceReason::Forward => "forward",
            PlaceReason::WakerRule => "waker_rule",
            PlaceReason::Affinity => "affinity",
            PlaceReason::Steal => "steal",
            PlaceReason::Balance => "balance",
            PlaceReason::Spawn => "spawn",
        }
    }
}

/// One decision, for the trace.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Trace {
    /// A wake left the poster's CPU.
    Wake {
        task: TaskId,
        cause: WakeCause,
        delivery: Delivery,
    },
    /// The owner counted a parked wake.
    Counted {
        task: TaskId,
        streak: WakerStreak,
    },
    /// The task was placed on `cpu` (here, or sent there).
    Place {
        task: TaskId,
        from: CpuId,
        cpu: CpuId,
        reason: PlaceReason,
    },
    /// A park returned at once: a wake was pending.
    ParkReturned {
        task: TaskId,
    },
    Parked {
        task: TaskId,
    },
    /// The running task should give way.
    Resched {
        task: TaskId,
    },
    Exited {
        task: TaskId,
    },
}

/// What the host must do after an entry point.
#[must_use = "the host must carry out what the scheduler decided"]
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Effects {
    pub kicks: Vec<Kick>,
    /// Set by a pass: what the CPU runs now.
    pub switch: Option<Switch>,
    /// The CPU's earliest deadline, when it has one: (re)arm its timer.
    pub timer: Option<u64>,
    /// The running task should be rescheduled: run this CPU's pass.
    pub resched: bool,
    pub trace: Vec<Trace>,
}

impl Effects {
    pub fn merge(&mut self, mut other: Effects) {
        self.kicks.append(&mut other.kicks);
        self.trace.append(&mut other.trace);
        if other.switch.is_some() {
            self.switch = other.switch;
        }
        if other.timer.is_some() {
            self.timer = other.timer;
        }
        self.resched |= other.resched;
    }
}

/// Per-CPU counters. Names are the ones the CLI's JSON uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Wakes that found the task parked and went to its owner.
    pub wakes_parked: u64,
    /// Parked wakes whose cause named a waker: counted in the streak.
    pub wakes_counted: u64,
    /// Wakes that found the task running, committing or queued: a flag.
    pub wakes_flagged: u64,
    pub moves_waker_rule: u64,
    pub moves_forward: u64,
    pub moves_steal: u64,
    pub moves_balance: u64,
    pub moves_spawn: u64,
    pub moves_affinity: u64,
    /// Kicks sent as IPIs to awake CPUs (for messages).
    pub ipi_kick: u64,
    /// Kicks that woke a sleeping CPU.
    pub wake_from_idle: u64,
    /// Reschedule IPIs sent.
    pub ipi_resched: u64,
}

impl Counters {
    pub fn add(&mut self, o: &Counters) {
        for (a, b) in self.fields_mut().into_iter().zip(o.values()) {
            *a += b;
        }
    }

    fn values(&self) -> [u64; 12] {
        [
            self.wakes_parked,
            self.wakes_counted,
            self.wakes_flagged,
            self.moves_waker_rule,
            self.moves_forward,
            self.moves_steal,
            self.moves_balance,
            self.moves_spawn,
            self.moves_affinity,
            self.ipi_kick,
            self.wake_from_idle,
            self.ipi_resched,
        ]
    }

    fn fields_mut(&mut self) -> [&mut u64; 12] {
        [
            &mut self.wakes_parked,
            &mut self.wakes_counted,
            &mut self.wakes_flagged,
            &mut self.moves_waker_rule,
            &mut self.moves_forward,
            &mut self.moves_steal,
            &mut self.moves_balance,
            &mut self.moves_spawn,
            &mut self.moves_affinity,
            &mut self.ipi_kick,
            &mut self.wake_from_idle,
            &mut self.ipi_resched,
        ]
    }

    /// `(name, value)` pairs in a fixed order.
    pub fn named(&self) -> [(&'static str, u64); 12] {
        let names = [
            "wakes.parked",
            "wakes.counted",
            "wakes.flagged",
            "moves.waker_rule",
            "moves.forward",
            "moves.steal",
            "moves.balance",
            "moves.spawn",
            "moves.affinity",
            "ipi.kick",
            "wake_from_idle",
            "ipi.resched",
        ];
        let v = self.values();
        core::array::from_fn(|i| (names[i], v[i]))
    }

    pub(crate) fn count_move(&mut self, reason: PlaceReason) {
        match reason {
            PlaceReason::Home => {}
            PlaceReason::Forward => self.moves_forward += 1,
            PlaceReason::WakerRule => self.moves_waker_rule += 1,
            PlaceReason::Affinity => self.moves_affinity += 1,
            PlaceReason::Steal => self.moves_steal += 1,
            PlaceReason::Balance => self.moves_balance += 1,
            PlaceReason::Spawn => self.moves_spawn += 1,
        }
    }

    pub(crate) fn count_kick(&mut self, k: &Kick) {
        match (k.kind, k.why) {
            (KickKind::WakeFromIdle { .. }, _) => self.wake_from_idle += 1,
            (KickKind::Ipi, KickWhy::Message) => self.ipi_kick += 1,
            (KickKind::Ipi, KickWhy::Resched) => self.ipi_resched += 1,
        }
    }
}
