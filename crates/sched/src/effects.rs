//! What entry points return: the effects the host must carry out, and the
//! trace of what was decided and why.

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
    /// The waker blocks right after (Linux's `WF_SYNC`: a socket or pipe
    /// wake, `wake_up_interruptible_sync_poll()`), so its CPU is about to
    /// be free. A hint a policy may use; the seed's rule ignores it.
    pub sync: bool,
}

impl WakeCause {
    pub const NONE: WakeCause = WakeCause {
        waker: None,
        sync: false,
    };

    pub fn from(cpu: CpuId) -> WakeCause {
        WakeCause {
            waker: Some(cpu),
            sync: false,
        }
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
#[must_use = "a kick must be sent, or the CPU sleeps on its message"]
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
    /// Woken where it waited delayed (`DELAY_DEQUEUE`; Linux's
    /// `ttwu_runnable()` with `ENQUEUE_DELAYED`): no placement decision.
    Delayed,
    /// A policy of its own, with its own reason (a policy outside this
    /// crate names its decisions this way).
    Custom(&'static str),
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
            PlaceReason::Delayed => "delayed",
            PlaceReason::Custom(r) => r,
        }
    }

    /// A stable number for hashing a trace.
    pub fn code(self) -> u32 {
        match self {
            PlaceReason::Home => 0,
            PlaceReason::Forward => 1,
            PlaceReason::WakerRule => 2,
            PlaceReason::Affinity => 3,
            PlaceReason::Steal => 4,
            PlaceReason::Balance => 5,
            PlaceReason::Spawn => 6,
            PlaceReason::Delayed => 7,
            PlaceReason::Custom(r) => {
                // FNV-1a of the name, kept clear of the built-in codes.
                let h = r.bytes().fold(0x811c_9dc5u32, |h, b| {
                    (h ^ b as u32).wrapping_mul(0x0100_0193)
                });
                h | 0x8000_0000
            }
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
    /// The deciding CPU counted a parked wake that names a waker: the
    /// policy's state for the task after it (`bits`), and that state as a
    /// waker streak when it is one.
    Counted {
        task: TaskId,
        bits: u64,
        streak: Option<WakerStreak>,
    },
    /// The task was placed on `cpu` (here, or sent there).
    Place {
        task: TaskId,
        /// The CPU it leaves (for a wake, the one it parked on, whichever
        /// CPU decided): `from == cpu` is no move.
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
    pub kicks: Kicks,
    /// Set by a pass: what the CPU runs now.
    pub switch: Option<Switch>,
    /// The CPU's earliest deadline, when it has one: (re)arm its timer.
    pub timer: Option<u64>,

    /// The running task should be rescheduled: run this CPU's pass.
    pub resched: bool,
    pub trace: Traces,
    /// What a call that may park its caller did (`block`, `sleep_until`,
    /// `join`); `NotAsked` for every other call.
    pub park: Park,
}

/// Whether a call that may park the running task parked it.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum Park {
    #[default]
    NotAsked,
    /// It parked: the CPU runs something else (or idles) now.
    Parked,
    /// It returned at once (a wake was pending, the deadline had passed,
    /// the joined task had exited): the caller runs on.
    Returned,
}

/// An [`Effects`]' kicks: a few inline, more on the heap.
pub type Kicks = smallvec::SmallVec<[Kick; 4]>;
/// An [`Effects`]' traces: a few inline, more on the heap.
pub type Traces = smallvec::SmallVec<[Trace; 4]>;

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
        if other.park != Park::NotAsked {
            self.park = other.park;
        }
    }
}

/// Declares `Counters` once: each field with its JSON name.
macro_rules! counters {
    ($($(#[$doc:meta])* $field:ident => $name:literal,)*) => {
        /// Per-CPU counters. Names are the ones the CLI's JSON uses.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct Counters {
            $($(#[$doc])* pub $field: u64,)*
        }

        impl Counters {
            pub fn add(&mut self, o: &Counters) {
                $(self.$field += o.$field;)*
            }

            /// `(name, value)` pairs in a fixed order.
            pub fn named(&self) -> impl Iterator<Item = (&'static str, u64)> {
                [$(($name, self.$field)),*].into_iter()
            }
        }
    };
}

counters! {
    /// Wakes that found the task parked and went to its owner.
    wakes_parked => "wakes.parked",
    /// Parked wakes whose cause named a waker: counted in the streak.
    wakes_counted => "wakes.counted",
    /// Of the parked wakes, those that found the task delayed
    /// (`DELAY_DEQUEUE`) and put it back where it waited, with no
    /// placement decision (`ttwu_runnable()`, `ENQUEUE_DELAYED`).
    wakes_delayed => "wakes.delayed",
    /// Wakes that found the task running, committing or queued: a flag.
    wakes_flagged => "wakes.flagged",
    /// Blocks that left the task queued, delayed (`DELAY_DEQUEUE`: it was
    /// not eligible).
    fair_delayed => "fair.delayed",
    /// A running task switched out while still runnable: preempted,
    /// yielding, or pushed or relocated by the pick (Linux's involuntary
    /// switches: `sched_switch` with `prev_state` R, a real run's and a
    /// recording's `kernel.switches.preempted`).
    switches_preempted => "switches.preempted",
    moves_waker_rule => "moves.waker_rule",
    moves_forward => "moves.forward",
    moves_steal => "moves.steal",
    moves_balance => "moves.balance",
    moves_spawn => "moves.spawn",
    moves_affinity => "moves.affinity",
    /// Moves a policy of its own made (`PlaceReason::Custom`).
    moves_policy => "moves.policy",
    /// Kicks sent as IPIs to awake CPUs (for messages).
    ipi_kick => "ipi.kick",
    /// Kicks that woke a sleeping CPU.
    wake_from_idle => "wake_from_idle",
    /// Reschedule IPIs sent.
    ipi_resched => "ipi.resched",
    /// Linux's balancer: pull requests a balance pass sent.
    lb_pulls => "balance.pulls",
    /// Linux's balancer: running tasks pushed by an active balance.
    lb_active => "balance.active",
    /// Linux's balancer: kicks of the idle load balancer.
    lb_nohz_kicks => "balance.nohz_kicks",
    /// Cache-aware: a process's scans (`task_cache_work()`) that chose or
    /// kept a preferred LLC.
    cas_scans => "cas.scans",
    /// Cache-aware: scans that found the process too wide for an LLC, or
    /// of one thread (`invalid_llc_nr()`): no preference.
    cas_invalid => "cas.invalid",
    /// Cache-aware: tasks the balancer moved into their preferred LLC.
    cas_to_pref => "cas.to_pref",
    /// Cache-aware: candidates a balance left where they were because the
    /// move would take them out of their preferred LLC or not into it
    /// (`LBF_LLC_PINNED`).
    cas_llc_pinned => "cas.llc_pinned",
}

impl Counters {
    pub(crate) fn count_move(&mut self, reason: PlaceReason) {
        match reason {
            PlaceReason::Home | PlaceReason::Delayed => {}
            PlaceReason::Forward => self.moves_forward += 1,
            PlaceReason::WakerRule => self.moves_waker_rule += 1,
            PlaceReason::Affinity => self.moves_affinity += 1,
            PlaceReason::Steal => self.moves_steal += 1,
            PlaceReason::Balance => self.moves_balance += 1,
            PlaceReason::Spawn => self.moves_spawn += 1,
            PlaceReason::Custom(_) => self.moves_policy += 1,
        }
    }

    /// Counts a kick and hands it to the host.
    #[inline]
    pub(crate) fn kick(&mut self, k: Option<Kick>, fx: &mut Effects) {
        if let Some(k) = k {
            self.count_kick(&k);
            fx.kicks.push(k);
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
