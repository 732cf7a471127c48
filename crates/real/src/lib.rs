//! The real executor: a scenario's programs run as real threads and
//! processes on the machine the tool runs on, under that machine's own
//! kernel scheduler, with the kernel's own record of the run.
//!
//! One program, two interpreters: a real run compiles the scenario with
//! the simulator's own `Code` (the same `Instr`s, the same object ids) and
//! runs each task's program op by op on a thread ([`exec`]). Figures are
//! computed from the simulator's `Outcome` type by the same `Figure`s, so
//! a real run prints the same table as a simulated one.
//!
//! ## What each op does for real
//!
//! | op | on this machine |
//! |---|---|
//! | `run ns` | spins until the thread has used `ns` more of its own CPU time (`CLOCK_THREAD_CPUTIME_ID`), so preemption never shortens work |
//! | `run_for ns` | spins until `ns` of `CLOCK_MONOTONIC` have passed |
//! | `call` / `serve` / `reply` | a port in shared memory: the request's bytes are copied into the client's buffer, the client queued and the server woken with `FUTEX_WAKE` if it waits; the reply's bytes are copied back and the client woken the same way (futexes in shared memory, not sockets: one wake per message, as the simulator posts) |
//! | `pipe_write` / `pipe_read` | a kernel pipe (`pipe2`, sized with `F_SETPIPE_SZ` to the scenario's capacity, rounded up by the kernel to a power of two pages); a read of N bytes reads until it has all N |
//! | `futex_wait` / `futex_wake n` | `FUTEX_WAIT` / `FUTEX_WAKE` on a generation word, as the simulator's futex: a wait goes on at once when the word moved since the task last saw it |
//! | `lock` / `unlock` | a FIFO hand-off lock (the simulator's): an unlock hands it to the first waiter and wakes it; a relock waits for ever (a default mutex deadlocks), an unlock by a task that does not hold it fails the run (exit 4) |
//! | `cond_wait` / `cond_signal` / `cond_broadcast` | a condition variable: a signal picks the first waiter; a signal nobody waits for is lost |
//! | `barrier` | the last of `n` arrivals wakes the rest |
//! | `sleep`, `random_sleep`, `exp_sleep` | `clock_nanosleep` |
//! | `timer` | `clock_nanosleep` with `TIMER_ABSTIME` to the timer's next expiry (the simulator's `Timer` rule) |
//! | `io` | a `pread` of 4 KiB at a random page of a 16 MiB file the run writes and removes. On this machine the file sits in the page cache, so an `io` is a syscall and a copy, not a device wait: its `ns` is not used |
//! | `spawn` / `join` / `join_any` / `exit` | a thread of the same process; `join` is `pthread_join`; `join_any` waits until any child has exited |
//! | `fork` | `fork(2)` from the task's thread: a process of its own, which runs the program on a thread and reports its records to its parent over a pipe; `join` and `join_any` return when the child's program has ended, and the process is `waitpid`ed, its report read, when its parent process ends (the executor's reporting stays out of the workload's time; `wait(2)` would also include the child's teardown) |
//! | `yield` | `sched_yield` |
//! | `affinity` | `sched_setaffinity` on the calling thread |
//! | `leave` | nothing: Linux has no "leaving" bit; a thread's wakes name it until it exits |
//! | `lap`, `lap_start`, `wake_lap`, `count`, `stamp` | `CLOCK_MONOTONIC`; a wake lap measures from when the waker posted the wake (ports, locks, conditions, barriers, futexes; not pipes), once per wake; a timer's `stamp` records the expiry it computed |
//!
//! The objects' wait protocol is in [`objects`]: every futex wake a run
//! makes is one the scenario asked for.
//!
//! A task starts pinned to its start CPU, waits there until every task is
//! ready, then takes its mask back (`sched_setaffinity`) and the kernel
//! places it from then on, as the simulator's scheduler does. `nice` is
//! `setpriority`, `rt` is `SCHED_FIFO` (root), `slice_ns` is
//! `sched_setattr`'s `sched_runtime`, a cookie is `PR_SCHED_CORE` (a clear
//! error on a kernel without `CONFIG_SCHED_CORE`).
//!
//! Each scenario process is a real process, forked from one thread before
//! any task starts; the objects they share sit in one `MAP_SHARED`
//! mapping ([`shm`]) and the pipes are inherited descriptors. The parent
//! takes no part: it starts the run, watches it and reads it back.
//!
//! ## How a run ends, and what it leaves
//!
//! A run ends when every task has exited, at the scenario's `run_ms`, when
//! every live task has waited on another for 500 ms with no new wait
//! begun (a stall: the report names who waits on what, as the simulator's
//! does), when a task's op fails, or on Ctrl-C. Each process then reports
//! its tasks' records over a pipe and exits; the parent kills and reaps
//! every process it forked, whatever happened (`Drop`), and every child
//! dies with the parent (`PR_SET_PDEATHSIG`). tracefs is restored by
//! [`tracefs::Capture`]'s `Drop`; a run killed outright (SIGKILL) runs no
//! `Drop`, so every capture first removes the instances and mounts of runs
//! that are gone ([`tracefs::sweep_stale`]) and says so in one line, and a
//! recorded command dies with its recorder too.
//!
//! ## Recording any program
//!
//! [`recording`] runs any command under the same capture, following it
//! through its forks and clones, and [`replay`] turns what the kernel
//! recorded into one program per thread (`schedlab record`,
//! `docs/RECORD.md`). [`shadow`] holds the model's fair class to the
//! kernel's decisions: from the kernel's own record, the pick and the
//! wake-up preemption the model would have made at each of the kernel's.
//! [`import`] reads a trace someone already has (trace-cmd's `trace.dat`,
//! `perf.data`, Perfetto) into the same recording, on the machine it came
//! from (`schedlab import`): no root, no capture.
//!
//! ## What a real run cannot have
//!
//! It has no trace hash (a real schedule is not reproducible), no LLC
//! warmth or refill (the hardware does not say), no scheduler placement
//! reasons (the kernel does not record why it placed a task), no IPI
//! counts and no flagged wakes: [`MISSING`] lists them, and outputs say so
//! instead of printing a value.
//!
//! ## Cost
//!
//! `cargo bench -p schedlab-real --bench ops` measures the executor's own
//! cost per op. On a 2-vCPU KVM guest (Intel Xeon, Linux 6.18.44; noisy,
//! one sitting):
//!
//! | op | what it costs beyond the program's own system call |
//! |---|---|
//! | `lap` | two `CLOCK_MONOTONIC` reads (vDSO, 38 ns) and an uncontended lock |
//! | `run ns` | reads of the thread's CPU clock, each a system call: a `run` of 1 µs takes 1.44 µs |
//! | `pipe_write`, `pipe_read`, `join`, a futex op | five stores to the task's own slot line (state, wait object, wait count: the stall watch's), no locked instruction |
//! | `call`, `serve`, `reply`, locks, conditions | the port's or object's line, one `FUTEX_WAKE` per wake the scenario asks for |
//! | a task's end | nothing in the workload's time: the thread sleeps until its process exits (its exit, two TLB shootdowns on this guest, comes after), a forked process reports when its parent reaps it |
//!
//! Beside the programs it imitates: a pipe ping-pong on one CPU reads
//! 2.18 µs a round trip against `perf bench sched pipe`'s 2.00 (the bare
//! benchmark, [`bare`], 2.05); recording the kernel's events adds about
//! 0.9 µs. hackbench reads 1.3–1.6× rt-tests' own. `docs/REAL.md` has the
//! table and what was found. Recording does not change what it records
//! beyond this VM's noise (`examples/capture_overhead.rs`: rt-tests'
//! `hackbench -g 4 -l 200`, with / without 0.92 and 0.98 in two sittings).

pub mod bare;
pub mod check;
pub mod exec;
pub mod files;
pub mod import;
pub mod machine;
pub mod objects;
pub mod record;
pub mod recording;
pub mod replay;
mod run;
pub mod shadow;
pub mod shm;
pub mod sys;
pub mod tracefs;

use std::collections::BTreeMap;

pub use machine::{measurable, Machine};
pub use record::KernelRecord;
use schedlab_sim::{Outcome, SimSpec, StallCause};

/// What a real run cannot measure, and why.
pub const MISSING: [(&str, &str); 5] = [
    ("trace_hash", "a real schedule is not reproducible"),
    (
        "warmth",
        "LLC warmth and refill bytes: the hardware does not report them per task",
    ),
    (
        "moves by reason",
        "the kernel does not record why it placed a task",
    ),
    ("ipi", "IPIs are not captured"),
    (
        "wakes.flagged",
        "a wake that finds its task running leaves no event",
    ),
];

/// Why a real run could not be carried out.
#[derive(Debug)]
pub enum Error {
    /// The scenario asks what this machine or user cannot give.
    Input(String),
    /// The kernel refused a call, or a task's op failed.
    Fault(String),
    /// Ctrl-C (SIGINT) or SIGTERM.
    Interrupted,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Input(m) | Error::Fault(m) => f.write_str(m),
            Error::Interrupted => f.write_str("interrupted"),
        }
    }
}

/// What to record besides the figures.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Record the kernel's sched events (needs root and tracefs).
    pub capture: bool,
    /// Keep the kernel's events as an event log (for a trace).
    pub keep_events: bool,
}

/// One real run.
pub struct RealOutcome {
    /// The figures' source, as a simulated run's (no hash, no warmth).
    pub outcome: Outcome,
    /// The kernel's record, when it was captured.
    pub kernel: Option<KernelRecord>,
    /// Why there is no kernel record, when there is none.
    pub no_record: Option<String>,
    /// Each task's thread id and process id, by name.
    pub threads: BTreeMap<String, (i32, i32)>,
}

/// Runs `spec` for real once (`rep` plays a seed's role: it seeds the
/// programs' random sleeps and the draws of `start_in`). `spec.topology`
/// must be this machine's.
pub fn run(spec: &SimSpec, rep: u64, opts: &Options) -> Result<RealOutcome, Error> {
    let ncpus = spec.topology.num_cpus();
    let online = std::thread::available_parallelism().map_or(1, |n| n.get());
    if ncpus > online {
        return Err(Error::Input(format!(
            "the scenario's machine has {ncpus} CPUs and this process may use {online}: a real run needs the machine it runs on (--topology sysfs)"
        )));
    }
    let cpus: Vec<usize> = (0..ncpus).collect();
    let old = sys::catch_interrupts();
    let r = run_caught(spec, rep, opts, &cpus);
    sys::restore_interrupts(&old);
    if sys::INTERRUPTED.swap(false, std::sync::atomic::Ordering::SeqCst) {
        return Err(Error::Interrupted);
    }
    r
}

fn run_caught(
    spec: &SimSpec,
    rep: u64,
    opts: &Options,
    cpus: &[usize],
) -> Result<RealOutcome, Error> {
    let (capture, mut no_record) = open_capture(opts.capture, cpus.len());
    let p = run::prepare(spec, rep, cpus)?;
    let mut ch = run::fork_all(&p)?;
    run::wait_ready(&p, &ch)?;
    if let Some(c) = &capture {
        if let Err(e) = c.start(&threads_of(&ch.pids)) {
            no_record = Some(format!("tracefs: {e}"));
        }
    }
    let (end, end_ns) = run::go_and_watch(&p, spec.run_ns);
    if let Some(c) = &capture {
        let _ = c.stop();
    }
    if end != run::End::Done {
        run::stop(&p);
    }
    let records = run::collect(&mut ch)?;
    drop(ch);
    failed(&records, end)?;
    // A run whose tasks all exited ends at the last exit, as a simulated
    // one does; not when the parent next looked (it polls every 2 ms),
    // which would dilute every per-second figure.
    let end_ns = match end {
        run::End::Done => records
            .iter()
            .filter_map(|r| r.exited_at)
            .max()
            .unwrap_or(end_ns),
        _ => end_ns,
    };
    let mut outcome = run::outcome(&p, &records, end_ns, rep);
    outcome.topology = Some(spec.topology.clone());
    outcome.stall = stall_of(&p, &records, end, end_ns, spec.max_tasks);
    let threads: BTreeMap<String, (i32, i32)> = records
        .iter()
        .map(|r| (r.name.clone(), (r.tid, r.pid)))
        .collect();
    let kernel = match (&capture, &no_record) {
        (Some(c), None) => match kernel_record(c, &p, &records, &threads, end_ns) {
            Ok(k) => Some(k),
            Err(e) => {
                no_record = Some(format!("reading tracefs: {e}"));
                None
            }
        },
        _ => None,
    };
    drop(capture);
    if let Some(k) = &kernel {
        for (name, n) in &k.migrations {
            if let Some(t) = outcome.tasks.get_mut(name) {
                t.migrations = *n;
            }
        }
        outcome.counters.extend(k.counters.clone());
        if opts.keep_events {
            outcome.event_log = k.events.clone();
        }
    }
    Ok(RealOutcome {
        outcome,
        kernel,
        no_record,
        threads,
    })
}

/// The kernel's record of a run that ended `end_ns` after it began: its
/// own events only, for after its end come the processes' exits, which
/// wake every finished task's sleeping thread to end it (`exec::start`).
fn kernel_record(
    c: &tracefs::Capture,
    p: &run::Prepared,
    records: &[exec::Record],
    threads: &BTreeMap<String, (i32, i32)>,
    end_ns: u64,
) -> std::io::Result<KernelRecord> {
    let (mut raw, lost) = c.read()?;
    let t0 = p.run.shm.t0().load(std::sync::atomic::Ordering::Acquire);
    raw.retain(|e| e.ts <= t0 + end_ns);
    let ours = records
        .iter()
        .map(|r| (r.tid, (r.slot as u32, r.name.clone(), threads[&r.name].1)))
        .collect();
    Ok(record::read(
        &raw,
        &c.formats,
        &ours,
        t0,
        lost,
        Some(sys::gettid()),
    ))
}

/// The kernel's capture when asked for and available; else why not.
fn open_capture(asked: bool, ncpus: usize) -> (Option<tracefs::Capture>, Option<String>) {
    if !asked {
        return (None, Some("not asked for".into()));
    }
    match tracefs::Capture::unavailable() {
        Some(why) => (None, Some(why)),
        None => match tracefs::Capture::new(ncpus) {
            Ok(c) => (Some(c), None),
            Err(e) => (None, Some(format!("tracefs: {e}"))),
        },
    }
}

/// Every thread id of processes `pids`, from `/proc/PID/task`.
fn threads_of(pids: &[i32]) -> Vec<i32> {
    let mut tids = Vec::new();
    for &pid in pids {
        if let Ok(d) = std::fs::read_dir(format!("/proc/{pid}/task")) {
            tids.extend(d.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok()));
        }
    }
    tids
}

/// A task's fault, a failed slot or Ctrl-C, as the run's error.
fn failed(records: &[exec::Record], end: run::End) -> Result<(), Error> {
    if let Some(r) = records.iter().find(|r| r.fault.is_some()) {
        return Err(Error::Fault(format!(
            "task {}: {}",
            r.name,
            r.fault.as_deref().unwrap_or_default()
        )));
    }
    if let run::End::Fault(s) = end {
        return Err(Error::Fault(format!("task in slot {s} failed")));
    }
    if end == run::End::Interrupted {
        return Err(Error::Interrupted);
    }
    Ok(())
}

/// The stall report of a run that ended blocked or with a full task
/// table, as the simulator's.
fn stall_of(
    p: &run::Prepared,
    records: &[exec::Record],
    end: run::End,
    end_ns: u64,
    max_tasks: usize,
) -> Option<schedlab_sim::Stall> {
    let cause = match end {
        run::End::Stalled => StallCause::Blocked { at_ns: end_ns },
        run::End::TableFull(s) => StallCause::TaskTable {
            program: records
                .iter()
                .find(|r| r.slot == s)
                .map_or("?".into(), |r| r.name.clone()),
            max_tasks,
        },
        _ => return None,
    };
    Some(run::stall_report(p, records, cause))
}
