//! The event log a run keeps when asked (`SimSpec::keep_events`): what a
//! CPU timeline shows, in the order it happened. It is the one stream every
//! detailed output is made from (`schedlab trace`'s Perfetto file and its
//! JSON lines), so they cannot disagree.

use schedlab_sched::TaskId;
use schedlab_topology::CpuId;
use serde::Serialize;

/// One event at `at` ns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Event {
    pub at: u64,
    #[serde(flatten)]
    pub kind: EventKind,
}

/// Task ids are the scheduler's; `Outcome::task_names` names them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum EventKind {
    /// `cpu` stops running `prev` and runs `next` (`None`: idle). `prev`
    /// was preempted (`Runnable`), blocked (`Blocked`) or exited (`Exited`).
    Switch {
        #[serde(serialize_with = "cpu_index")]
        cpu: CpuId,
        #[serde(serialize_with = "task_index")]
        prev: Option<TaskId>,
        prev_state: PrevState,
        #[serde(serialize_with = "task_index")]
        next: Option<TaskId>,
    },
    /// A wake of `task` posted on `cpu` (by its running thread, an
    /// interrupt, or the scheduler itself); it goes to `target`, the CPU
    /// that holds the task. `parked`: it found the task parked (otherwise a
    /// flag). `waker`: the thread that posted it (`null` for an interrupt,
    /// the scheduler's own wakes, and a thread already leaving).
    Waking {
        #[serde(serialize_with = "cpu_index")]
        cpu: CpuId,
        #[serde(serialize_with = "one_task")]
        task: TaskId,
        #[serde(serialize_with = "task_index")]
        waker: Option<TaskId>,
        #[serde(serialize_with = "cpu_index")]
        target: CpuId,
        parked: bool,
    },
    /// LLC `llc` (its ordinal) holds `bytes` warm now, after a task read
    /// cold data into it (and it evicted to make room).
    LlcWarm { llc: u32, bytes: u64 },
    /// `cpu` kicks `target`: an IPI (`idle` false) or a wake from idle, to
    /// `resched` it or to make it read its mailbox.
    Kick {
        #[serde(serialize_with = "cpu_index")]
        cpu: CpuId,
        #[serde(serialize_with = "cpu_index")]
        target: CpuId,
        resched: bool,
        idle: bool,
    },
    /// A placement decision made on `cpu`: `task` goes from `from` to `to`.
    Place {
        #[serde(serialize_with = "cpu_index")]
        cpu: CpuId,
        #[serde(serialize_with = "one_task")]
        task: TaskId,
        #[serde(serialize_with = "cpu_index")]
        from: CpuId,
        #[serde(serialize_with = "cpu_index")]
        to: CpuId,
        reason: &'static str,
    },
    /// `cpu`'s run queue holds `len` tasks now (running and waiting).
    RunQueue {
        #[serde(serialize_with = "cpu_index")]
        cpu: CpuId,
        len: u32,
    },
    /// A counted wake left `task`'s waker streak at (`llc`, `run`).
    Streak {
        #[serde(serialize_with = "one_task")]
        task: TaskId,
        llc: u16,
        run: u8,
    },
}

/// How a switched-out task left the CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PrevState {
    Runnable,
    Blocked,
    Exited,
}

fn cpu_index<S: serde::Serializer>(c: &CpuId, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u32(c.index() as u32)
}

fn one_task<S: serde::Serializer>(t: &TaskId, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u32(t.0)
}

fn task_index<S: serde::Serializer>(t: &Option<TaskId>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => s.serialize_some(&t.0),
        None => s.serialize_none(),
    }
}
