//! Task programs: what a simulated thread does, op by op.
//!
//! Every blocking op waits through the scheduler (`block`, `sleep_until`,
//! `join`), re-checking its condition each time the park returns; every
//! waking op posts through the scheduler's delivery on the poster's CPU,
//! so attribution is the scheduler's (a device completion posts from an
//! interrupt and names no waker; `exit` sets leaving before its wakes).

use serde::{Deserialize, Serialize};

/// Names of the objects programs share (ports, pipes, futexes, locks),
/// resolved to indices when a simulation is built.
pub type ObjName = String;

/// One op of a program (written back as a scenario file writes it:
/// `schedlab record`'s replay files).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub enum Op {
    /// Compute for this many ns (slower while the SMT sibling is busy).
    Run(u64),
    /// Send a request of `bytes` to `port` and wait for its reply.
    Call {
        port: ObjName,
        bytes: u64,
    },
    /// Wait for a request on `port`; it becomes the one `reply` answers.
    Serve {
        port: ObjName,
    },
    /// Reply to the request being served with `bytes`.
    Reply {
        bytes: u64,
    },
    /// Write `bytes` into a pipe, waiting while it is full.
    PipeWrite {
        pipe: ObjName,
        bytes: u64,
    },
    /// Read `bytes` from a pipe, waiting while it is empty.
    PipeRead {
        pipe: ObjName,
        bytes: u64,
    },
    /// Wait until the futex's generation moves past the one last seen.
    FutexWait {
        futex: ObjName,
    },
    /// Move the futex's generation on and wake up to `n` waiters.
    FutexWake {
        futex: ObjName,
        n: u32,
    },
    /// Wait on the condition variable `cond`, as `pthread_cond_wait`
    /// does: join its waiters and release `lock` (when this task holds
    /// it) in one step, sleep until a signal or broadcast picks this task,
    /// then take `lock` again. A signal nobody waits for is lost.
    CondWait {
        cond: ObjName,
        #[serde(default)]
        lock: Option<ObjName>,
    },
    /// Wake the first waiter of `cond`, if any (`pthread_cond_signal`).
    CondSignal {
        cond: ObjName,
    },
    /// Wake every waiter of `cond` (`pthread_cond_broadcast`).
    CondBroadcast {
        cond: ObjName,
    },
    /// Wait at `barrier` until `n` tasks have arrived; the last to arrive
    /// wakes the others and goes on.
    Barrier {
        barrier: ObjName,
        n: u32,
    },
    /// A periodic timer shared by every task naming it (rt-app's `timer`):
    /// its next expiry moves on by `period` ns at each use, and the task
    /// sleeps until it. An expiry already past is not slept for; the timer
    /// then restarts from now, unless `absolute` (rt-app's `"mode":
    /// "absolute"`) keeps its phase. The first period starts at the first
    /// use. With `stamp`, each use records the expiry it computed (ns
    /// since the run began, slept for or already past) as a stamp of that
    /// name ([`Op::Stamp`]): what rt-app's log derives slack and wakeup
    /// latency from.
    Timer {
        timer: ObjName,
        period: u64,
        #[serde(default)]
        absolute: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stamp: Option<String>,
    },
    /// Compute until `ns` of wall time has passed since the op began,
    /// preempted or not, in 32 µs pieces of work (rt-app's `runtime`).
    RunFor(u64),
    /// Record the time since the last wake posted to this task, as a lap
    /// of `metric` (schbench's wakeup latency); once per wake: with no
    /// wake posted since the last lap, nothing is recorded.
    WakeLap {
        metric: String,
    },
    /// Take a sleeplock (hand-off on unlock).
    Lock {
        lock: ObjName,
    },
    Unlock {
        lock: ObjName,
    },
    /// Sleep this many ns (a deadline in the owner's heap).
    Sleep(u64),
    /// A disk request that completes after this many ns, by interrupt.
    Io(u64),
    /// Start a thread running the program named here.
    Spawn {
        program: String,
    },
    /// Start a process running the program named here (`fork(2)`): a
    /// child like a spawned thread (joined the same way), but in a process
    /// of its own, named after it, that shares no data with its parent's.
    Fork {
        program: String,
    },
    /// Wait for the earliest spawned, not yet joined, child.
    Join,
    /// Wait for any spawned child to exit (`wait4(-1)`), and reap it; at
    /// once when one already has, or when no child is left. Each exit wakes
    /// the waiting parent (a wake posted after the child began leaving).
    JoinAny,
    Exit,
    Yield,
    /// Repeat the body `n` times.
    Loop {
        n: u64,
        body: Vec<Op>,
    },
    /// Sleep a uniformly random time in `[min, max]` ns, drawn from the
    /// run's program RNG stream.
    RandomSleep {
        min: u64,
        max: u64,
    },
    /// Sleep an exponentially distributed time of mean `mean` ns: a
    /// memoryless (Poisson) source, so which of several such sources fires
    /// next is independent of the past.
    ExpSleep {
        mean: u64,
    },
    /// Begin leaving the process: from here on this thread's wakes name no
    /// waker (what `exit` does first).
    Leave,
    /// Record the time since this task's previous lap (or lap start) of
    /// `metric`.
    Lap {
        metric: String,
    },
    /// Start a lap of `metric` now, recording nothing: the next `lap`
    /// measures from here.
    LapStart {
        metric: String,
    },
    /// Add `n` to the counter `metric` (bytes moved, ops done).
    Count {
        metric: String,
        n: u64,
    },
    /// Change this task's own affinity to `cpus` (`sched_setaffinity(0,
    /// ...)`, as rt-app does at a phase that names `cpus`): the scheduler
    /// moves it when the CPU it runs on is not among them; threads it
    /// spawns after inherit the new mask.
    Affinity {
        cpus: Vec<usize>,
    },
    /// Record the time now (ns since the run began) under `metric`, in
    /// this task's own sequence of stamps ([`crate::TaskOutcome::stamps`]):
    /// points a figure is derived from afterwards, in program order (rt-app's
    /// per-loop log).
    Stamp {
        metric: String,
    },
}
