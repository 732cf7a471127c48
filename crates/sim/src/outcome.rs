//! What a run measured ([`Outcome`]) and the one place that writes it down:
//! the [`Recorder`], which keeps the trace hash, the text log and the event
//! log, and the raw data figures read (laps, counts, moves).

use std::collections::BTreeMap;

use schedlab_sched::{Delivery, Kick, KickKind, KickWhy, PlaceReason, TaskId, Trace};
use schedlab_topology::{CpuId, Topology};
use serde::Deserialize;

use crate::events::{Event, EventKind, PrevState};

/// What a run measured.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub seed: u64,
    pub trace_hash: u64,
    pub events: u64,
    pub end_ns: u64,
    /// Lap durations by metric, ns.
    pub laps: BTreeMap<String, Vec<u64>>,
    pub counts: BTreeMap<String, u64>,
    pub counters: BTreeMap<String, u64>,
    /// The scheduler's counters per CPU, in CPU order (IPIs are counted by
    /// the CPU that sends them).
    pub cpu_counters: Vec<schedlab_sched::Counters>,
    /// Per task name: migrations, moves with their times and reasons, exit
    /// time, final CPU, CPU time.
    pub tasks: BTreeMap<String, TaskOutcome>,
    /// Per CPU: time in segments (a task's work, its block path, a
    /// switch; passes are charged inside them), and time without one.
    /// They sum to the run's length.
    pub busy_ns: Vec<u64>,
    pub idle_ns: Vec<u64>,
    pub log: Vec<String>,
    /// The event log, when the spec asked for it.
    pub event_log: Vec<Event>,
    /// Every task's name by its id.
    pub task_names: BTreeMap<u32, String>,
    pub topology: Option<Topology>,
    /// Why the run could not go on, when it could not.
    pub stall: Option<Stall>,
    /// Per LLC (in the topology's order), its warmth over the run.
    pub llcs: Vec<LlcOutcome>,
    /// When the spec asked (`count_wakers`): per woken task, per waker,
    /// the wakes posted to it parked; a wake no thread posted (a timer,
    /// an interrupt) is under `interrupt`, as the kernel's record names it.
    pub wakes_by: BTreeMap<String, BTreeMap<String, u64>>,
}

/// One LLC's warmth over a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LlcOutcome {
    pub capacity_bytes: u64,
    /// The most it held warm at once (at most its capacity).
    pub peak_warm_bytes: u64,
    /// Bytes evicted to make room: more hot data than it holds.
    pub evicted_bytes: u64,
    /// Bytes read into it by tasks starting there cold.
    pub refill_bytes: u64,
}

/// A run that could not go on: tasks blocked for ever, a program that
/// spins without spending time, or a full task table.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Stall {
    pub cause: StallCause,
    /// At the end, each task that had not exited and what it waited on.
    pub waits: Vec<Wait>,
    /// Tasks whose waits form a cycle (each waits on the next, the last on
    /// the first), when they do.
    pub cycle: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StallCause {
    /// Nothing was left to happen at `at_ns` while tasks had not exited.
    Blocked { at_ns: u64 },
    /// `task` ran `instructions` instructions without spending time (the
    /// watchdog), at op `op`.
    Watchdog {
        task: String,
        instructions: usize,
        op: String,
    },
    /// `program` was to start a task past the table's room for
    /// `max_tasks` spawned tasks.
    TaskTable { program: String, max_tasks: usize },
    /// `task` unlocked a lock it does not hold (`what` says which, and who
    /// held it): undefined for a default mutex, so the run stops there.
    Misuse {
        task: String,
        at_ns: u64,
        what: String,
    },
}

/// A cycle in the wait graph (each task waits on the next), if any: the
/// first found from the tasks in order.
pub fn find_cycle(edges: &[(TaskId, Vec<TaskId>)]) -> Vec<TaskId> {
    let next = |t: TaskId| {
        edges
            .iter()
            .find(|(k, _)| *k == t)
            .map(|(_, v)| v.as_slice())
    };
    for &(start, _) in edges {
        // Follow the first edge of each task: a wait names one holder.
        let mut path = vec![start];
        let mut at = start;
        while let Some(&n) = next(at).and_then(|v| v.first()) {
            if let Some(i) = path.iter().position(|&p| p == n) {
                return path[i..].to_vec();
            }
            path.push(n);
            at = n;
        }
    }
    Vec::new()
}

/// One task's wait at the end of a stalled run.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Wait {
    pub task: String,
    /// What it waits on, e.g. `lock "a" (held by t2)` or `runnable`.
    pub on: String,
    /// The tasks that could end the wait (a lock's holder, a joined
    /// child, a port's server), when the wait names any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub on_tasks: Vec<String>,
    /// For a wait on a condition: its last signal or broadcast that found
    /// nobody waiting, and was lost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost: Option<LostWake>,
}

/// A signal or broadcast that found nobody waiting: who sent it, when.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct LostWake {
    pub by: String,
    pub at_ns: u64,
}

impl std::fmt::Display for Stall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.cause {
            StallCause::Blocked { at_ns } => write!(
                f,
                "stalled at {:.3} ms: nothing left to happen, {} task(s) blocked for ever",
                *at_ns as f64 / 1e6,
                self.waits.len()
            )?,
            StallCause::Watchdog {
                task,
                instructions,
                op,
            } => write!(
                f,
                "stalled: {task} ran {instructions} instructions without spending time (at {op}): a loop whose body takes no time?"
            )?,
            StallCause::Misuse { task, at_ns, what } => write!(
                f,
                "stopped at {:.3} ms: {task} {what}",
                *at_ns as f64 / 1e6
            )?,
            StallCause::TaskTable { program, max_tasks } => write!(
                f,
                "stalled: program {program:?} spawned more than {max_tasks} tasks: raise max_tasks (--param max_tasks=N) or bound the recursion"
            )?,
        }
        const SHOWN: usize = 12;
        for w in self.waits.iter().take(SHOWN) {
            write!(f, "\n  {} waits on {}", w.task, w.on)?;
            if let Some(l) = &w.lost {
                write!(
                    f,
                    "; its last wake, by {} at {:.3} ms, found nobody waiting and was lost",
                    l.by,
                    l.at_ns as f64 / 1e6
                )?;
            }
        }
        if self.waits.len() > SHOWN {
            write!(
                f,
                "\n  ... and {} more (--json lists all)",
                self.waits.len() - SHOWN
            )?;
        }
        if !self.cycle.is_empty() {
            write!(
                f,
                "\n  the waits form a cycle: {} -> {}",
                self.cycle.join(" -> "),
                self.cycle[0]
            )?;
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Default)]
pub struct TaskOutcome {
    /// Its process's name (a task of its own process is named after it; a
    /// forked one after the child).
    pub process: String,
    pub migrations: u64,
    /// When each move happened, and why ([`Moved::at`], [`Moved::reason`]).
    pub moved_at: Vec<Moved>,
    /// When the task exited.
    pub exited_at: Option<u64>,
    pub final_cpu: Option<CpuId>,
    pub cpu_ns: u64,
    /// Bytes of its own set and its process's shared data it read into an
    /// LLC where they were cold, and how many of its starts did.
    pub llc_refill_bytes: u64,
    pub cold_starts: u64,
    /// Its stamps ([`crate::Op::Stamp`], a timer's `stamp`), in program
    /// order: (metric, ns since the run began).
    pub stamps: Vec<(String, u64)>,
}

/// A move: its time and its reason in one word (8 bytes a move, not 24:
/// a long run of a busy machine records millions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Moved(u64);

impl Moved {
    const TIME_BITS: u32 = 56;

    pub fn new(at: u64, reason: MoveReason) -> Moved {
        debug_assert!(at < 1 << Moved::TIME_BITS, "a move past 2^56 ns");
        Moved((reason as u64) << Moved::TIME_BITS | (at & ((1 << Moved::TIME_BITS) - 1)))
    }

    /// When, ns.
    pub fn at(self) -> u64 {
        self.0 & ((1 << Moved::TIME_BITS) - 1)
    }

    pub fn reason(self) -> MoveReason {
        MoveReason::ALL[(self.0 >> Moved::TIME_BITS) as usize]
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;

/// FNV-1a over 8-byte words: the trace hash's mixing step, a word at a
/// time rather than a byte (with a shift, so high bits reach low ones).
fn fnv(mut h: u64, words: &[u64]) -> u64 {
    for w in words {
        h ^= w;
        h = h.wrapping_mul(FNV_PRIME);
        h ^= h >> 29;
    }
    h
}

/// A trace event as words for the hash: its kind and its numbers.
fn encode(cpu: CpuId, t: &Trace) -> [u64; 2] {
    let (kind, task, x, y): (u8, u32, u32, u32) = match *t {
        Trace::Wake {
            task,
            cause,
            delivery,
        } => (
            1,
            task.0,
            cause.waker.map_or(u32::MAX, |c| c.index() as u32),
            match delivery {
                Delivery::Flagged => 0,
                Delivery::Post { owner } => 1 + owner.index() as u32,
                Delivery::Requeue { owner } => 6000 + owner.index() as u32,
                Delivery::Coalesced => 5000,
                Delivery::Dead => 5001,
            },
        ),
        Trace::Counted { task, bits, .. } => (2, task.0, bits as u32, 0),
        Trace::Place {
            task,
            from,
            cpu,
            reason,
        } => (
            3,
            task.0,
            (from.index() as u32) << 16 | cpu.index() as u32,
            reason.code(),
        ),
        Trace::ParkReturned { task } => (4, task.0, 0, 0),
        Trace::Parked { task } => (5, task.0, 0, 0),
        Trace::Resched { task } => (6, task.0, 0, 0),
        Trace::Exited { task } => (7, task.0, 0, 0),
    };
    [
        cpu.index() as u64 | (kind as u64) << 16 | (task as u64) << 32,
        x as u64 | (y as u64) << 32,
    ]
}

/// The run's one trace emitter: every event the engine handles and every
/// decision the scheduler traces goes through here, into the hash, the
/// text log (`keep_log`) and the event log (`keep_events`).
#[derive(Debug)]
pub(crate) struct Recorder {
    hash: u64,
    pub events: u64,
    pub out: Outcome,
    keep_log: bool,
    keep_events: bool,
    /// Wakes by (wakee, waker id + 1; 0: none), when counted.
    wakers: Option<BTreeMap<(u32, u32), u64>>,
    /// What the event log last showed running on each CPU.
    shown: Vec<Option<TaskId>>,
    /// Each CPU's run-queue length as the event log last showed it.
    runq: Vec<u32>,
    /// Each task's moves by id, until [`Recorder::take_moves`] hands them
    /// to its outcome (no name is looked up per move).
    moves: Vec<Vec<Moved>>,
}

impl Recorder {
    /// Starts the hash from `fair` too (its feature word and `CONFIG_HZ`),
    /// unless it is the model's base at 1000 Hz: two runs under different
    /// fair classes never share a hash, and the base runs keep theirs.
    pub fn fold_fair(&mut self, fair: &schedlab_sched::fair::FairConfig) {
        let base = schedlab_sched::fair::FeatureSet::default();
        if fair.features != base || fair.hz() != 1000 {
            self.hash = fnv(self.hash, &[fair.features.word(), fair.hz()]);
        }
    }

    pub fn new(
        seed: u64,
        topo: &Topology,
        keep_log: bool,
        keep_events: bool,
        count_wakers: bool,
    ) -> Recorder {
        let n = topo.num_cpus();
        Recorder {
            hash: FNV_OFFSET,
            events: 0,
            out: Outcome {
                seed,
                topology: Some(topo.clone()),
                ..Outcome::default()
            },
            keep_log,
            keep_events,
            wakers: count_wakers.then(BTreeMap::new),
            shown: vec![None; n],
            runq: vec![0; n],
            moves: Vec::new(),
        }
    }

    /// The moves of `task`, in time order, taken out of the recorder.
    pub fn take_moves(&mut self, task: TaskId) -> Vec<Moved> {
        self.moves
            .get_mut(task.index())
            .map(std::mem::take)
            .unwrap_or_default()
    }

    pub fn keeps_events(&self) -> bool {
        self.keep_events
    }

    /// An engine event: its time and words into the hash.
    #[inline]
    pub fn record(&mut self, now: u64, text: impl FnOnce() -> String, words: &[u64]) {
        self.hash ^= now;
        self.hash = fnv(self.hash.wrapping_mul(FNV_PRIME), words);
        if self.keep_log {
            self.log(now, text());
        }
    }

    // Out of line: only a run that keeps its text log comes here.
    #[cold]
    #[inline(never)]
    fn log(&mut self, now: u64, t: String) {
        self.out.log.push(format!("{now} {t}"));
    }

    /// An LLC's warm bytes changed (the event log only).
    pub fn llc_warm(&mut self, at: u64, llc: u32, bytes: u64) {
        if self.keep_events {
            self.event_log(at, EventKind::LlcWarm { llc, bytes });
        }
    }

    fn event_log(&mut self, at: u64, kind: EventKind) {
        self.out.event_log.push(Event { at, kind });
    }

    /// A scheduler trace from `cpu`; `owner` finds where a flagged task
    /// runs, for the event log.
    pub fn trace(&mut self, now: u64, cpu: CpuId, t: &Trace, owner: impl FnOnce(TaskId) -> CpuId) {
        if let Trace::Place {
            task,
            from,
            cpu: to,
            reason,
        } = *t
        {
            if reason != PlaceReason::Home && from != to {
                if self.moves.len() <= task.index() {
                    self.moves.resize_with(task.index() + 1, Vec::new);
                }
                self.moves[task.index()].push(Moved::new(now, MoveReason::of(reason)));
            }
        }
        let words = encode(cpu, t);
        self.record(now, || format!("{cpu:?} {t:?}"), &words);
        if self.wakers.is_some() || self.keep_events {
            self.trace_logs(now, cpu, t, owner);
        }
    }

    /// The rest of [`Recorder::trace`], for a run that counts wakes by
    /// waker or keeps the event log (out of line: most runs do neither).
    #[cold]
    #[inline(never)]
    fn trace_logs(&mut self, now: u64, cpu: CpuId, t: &Trace, owner: impl FnOnce(TaskId) -> CpuId) {
        if let (
            Some(w),
            Trace::Wake {
                task,
                delivery: Delivery::Post { .. } | Delivery::Requeue { .. },
                cause,
            },
        ) = (self.wakers.as_mut(), t)
        {
            let by = cause.waker.and(self.shown[cpu.index()]);
            *w.entry((task.0, by.map_or(0, |b| b.0 + 1))).or_default() += 1;
        }
        if !self.keep_events {
            return;
        }
        let kind = match *t {
            Trace::Wake {
                task,
                delivery,
                cause,
            } => {
                let (target, parked) = match delivery {
                    Delivery::Post { owner } | Delivery::Requeue { owner } => (owner, true),
                    Delivery::Flagged => (owner(task), false),
                    Delivery::Coalesced | Delivery::Dead => return,
                };
                // A thread's wake: the one this CPU runs, as last shown.
                let waker = cause.waker.and(self.shown[cpu.index()]);
                EventKind::Waking {
                    cpu,
                    task,
                    waker,
                    target,
                    parked,
                }
            }
            Trace::Place {
                task,
                from,
                cpu: to,
                reason,
            } => EventKind::Place {
                cpu,
                task,
                from,
                to,
                reason: reason.name(),
            },
            Trace::Counted {
                task,
                streak: Some(streak),
                ..
            } => EventKind::Streak {
                task,
                llc: streak.llc_index() as u16,
                run: streak.run(),
            },
            _ => return,
        };
        self.event_log(now, kind);
    }

    /// A kick `cpu` sends.
    pub fn kick(&mut self, now: u64, cpu: CpuId, k: &Kick) {
        if self.keep_events {
            self.event_log(
                now,
                EventKind::Kick {
                    cpu,
                    target: k.cpu,
                    resched: k.why == KickWhy::Resched,
                    idle: k.kind != KickKind::Ipi,
                },
            );
        }
    }

    /// `cpu`'s run-queue length after a decision.
    pub fn run_queue(&mut self, now: u64, cpu: CpuId, len: u32) {
        if self.keep_events && self.runq[cpu.index()] != len {
            self.runq[cpu.index()] = len;
            self.event_log(now, EventKind::RunQueue { cpu, len });
        }
    }

    /// `cpu` switches to `next`; `prev_state` says how the one before left.
    pub fn switch(
        &mut self,
        now: u64,
        cpu: CpuId,
        next: Option<TaskId>,
        prev_state: impl FnOnce(TaskId) -> PrevState,
    ) {
        if !self.keep_events && self.wakers.is_none() {
            return;
        }
        let prev = self.shown[cpu.index()];
        if !self.keep_events {
            self.shown[cpu.index()] = next;
            return;
        }
        if prev != next {
            self.shown[cpu.index()] = next;
            let prev_state = prev.map_or(PrevState::Runnable, prev_state);
            self.event_log(
                now,
                EventKind::Switch {
                    cpu,
                    prev,
                    prev_state,
                    next,
                },
            );
        }
    }

    /// Closes the record: the hash, the event count, the end.
    pub fn finish(mut self, end_ns: u64) -> Outcome {
        for ((wakee, by), n) in self.wakers.take().unwrap_or_default() {
            let name = |id: u32| {
                self.out
                    .task_names
                    .get(&id)
                    .cloned()
                    .unwrap_or_else(|| format!("task {id}"))
            };
            let waker = match by {
                0 => "interrupt".to_string(),
                b => name(b - 1),
            };
            *self
                .out
                .wakes_by
                .entry(name(wakee))
                .or_default()
                .entry(waker)
                .or_default() += n;
        }
        self.out.trace_hash = self.hash;
        self.out.events = self.events;
        self.out.end_ns = end_ns;
        self.out
    }
}

/// One metric's laps while a run records them, in chunks of at most
/// [`LapLog::CHUNK`]: recording never copies what it holds and never holds
/// more than one chunk of room beyond it, where one growing vector holds up
/// to twice its laps (a `many_pairs` run on epyc-2s-384: 341 -> 200 bytes
/// per task for its laps at 50 rounds). The first chunk grows as a vector
/// does, so a metric with a few laps holds a few. [`LapLog::into_vec`]
/// joins them once the run's tables are gone.
#[derive(Debug, Default)]
pub(crate) struct LapLog(Vec<Vec<u64>>);

impl LapLog {
    /// Laps per chunk: 4 KiB.
    pub const CHUNK: usize = 512;

    pub fn push(&mut self, ns: u64) {
        match self.0.last_mut() {
            Some(c) if c.len() < Self::CHUNK => c.push(ns),
            Some(_) => {
                let mut c = Vec::with_capacity(Self::CHUNK);
                c.push(ns);
                self.0.push(c);
            }
            None => self.0.push(vec![ns]),
        }
    }

    /// The laps in the order they were recorded (one chunk is returned as
    /// it is, without a copy).
    pub fn into_vec(mut self) -> Vec<u64> {
        match self.0.len() {
            0 | 1 => self.0.pop().unwrap_or_default(),
            _ => self.0.concat(),
        }
    }
}

/// Why a task moved, as a figure names it: the scheduler's built-in
/// reasons, and `policy` for any reason a policy names itself (Linux's
/// wake path steps, a user's policy). An unknown name is an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MoveReason {
    Home,
    Forward,
    WakerRule,
    Affinity,
    Steal,
    Balance,
    Spawn,
    Policy,
}

impl MoveReason {
    /// Every reason, in declaration order (`ALL[r as usize] == r`).
    pub const ALL: [MoveReason; 8] = [
        MoveReason::Home,
        MoveReason::Forward,
        MoveReason::WakerRule,
        MoveReason::Affinity,
        MoveReason::Steal,
        MoveReason::Balance,
        MoveReason::Spawn,
        MoveReason::Policy,
    ];

    pub fn of(r: PlaceReason) -> MoveReason {
        match r {
            PlaceReason::Home | PlaceReason::Delayed => MoveReason::Home,
            PlaceReason::Forward => MoveReason::Forward,
            PlaceReason::WakerRule => MoveReason::WakerRule,
            PlaceReason::Affinity => MoveReason::Affinity,
            PlaceReason::Steal => MoveReason::Steal,
            PlaceReason::Balance => MoveReason::Balance,
            PlaceReason::Spawn => MoveReason::Spawn,
            PlaceReason::Custom(_) => MoveReason::Policy,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_move_keeps_its_time_and_reason_in_one_word() {
        for r in MoveReason::ALL {
            assert_eq!(
                MoveReason::ALL[r as usize],
                r,
                "ALL is in declaration order"
            );
            for at in [0, 1, 123_456_789, (1 << 56) - 1] {
                let m = Moved::new(at, r);
                assert_eq!((m.at(), m.reason()), (at, r), "packed {at} {r:?}");
            }
        }
    }

    #[test]
    fn a_lap_log_gives_back_every_lap_in_order() {
        for n in [
            0,
            1,
            5,
            LapLog::CHUNK - 1,
            LapLog::CHUNK,
            LapLog::CHUNK + 1,
            5 * LapLog::CHUNK + 7,
        ] {
            let mut log = LapLog::default();
            for i in 0..n as u64 {
                log.push(i * 3 + 1);
            }
            let chunks = log.0.len();
            assert!(
                log.0.iter().all(|c| c.len() <= LapLog::CHUNK),
                "{n} laps: a chunk holds more than {}",
                LapLog::CHUNK
            );
            assert_eq!(chunks, n.div_ceil(LapLog::CHUNK), "{n} laps: chunks");
            let v = log.into_vec();
            let want: Vec<u64> = (0..n as u64).map(|i| i * 3 + 1).collect();
            assert_eq!(v, want, "{n} laps come back as recorded");
        }
    }
}
