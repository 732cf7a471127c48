//! The real interpreter: a task's compiled program (the simulator's
//! `Instr`s, compiled by the simulator's `Code`) run op by op on a real
//! thread. What each op does is in the crate doc; the ops live in rooms
//! by kind: [`ipc`] (ports and pipes), [`sync`] (futexes, conditions,
//! barriers, locks), [`time`] (work, sleeps, timers, I/O), [`measure`]
//! (laps, stamps, counts), [`life`] (spawn, fork, join, affinity).

use std::collections::BTreeMap;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use std::sync::{Arc, Mutex};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use schedlab_sim::engine::code::Instr;
use serde::{Deserialize, Serialize};

use crate::objects::Objects;
use crate::shm::{ctl, slot, Shm, State};
use crate::sys;

mod ipc;
mod life;
mod measure;
mod sync;
mod time;

/// How an initial task starts: where, and with what the kernel is asked.
#[derive(Clone, Debug)]
pub struct TaskStart {
    pub name: String,
    pub cpu: usize,
    /// Its mask, `None`: every CPU of the machine.
    pub mask: Option<Vec<usize>>,
    pub nice: i8,
    pub rt: Option<u8>,
    pub slice_ns: Option<u64>,
    /// Its core-scheduling cookie's line in the shared mapping (tasks of
    /// one cookie value share one), when it has a cookie.
    pub cookie: Option<usize>,
    pub proc: usize,
}

/// What a run's processes share, built before the first fork (each
/// process has its own copy; the mapping is the one thing shared).
pub struct Run {
    pub shm: Shm,
    pub kinds: crate::objects::Kinds,
    /// Initial tasks' programs by task index, then the spawnable programs
    /// by id.
    pub programs: Vec<Arc<[Instr]>>,
    /// Spawnable programs' names by id.
    pub spawnable: Vec<String>,
    pub tasks: Vec<TaskStart>,
    /// Pipes by id: (read end, write end).
    pub pipes: Vec<(i32, i32)>,
    /// The file `io` ops read, and its size.
    pub io_file: Option<(i32, u64)>,
    pub machine_cpus: Vec<usize>,
    /// The CPUs of each `affinity` op's mask, by its index.
    pub masks: Vec<Vec<usize>>,
    pub seed: u64,
    /// Slots: the initial tasks' and room for `max_tasks` spawned ones.
    pub slots: usize,
    /// The scenario's processes; processes forked by `fork` ops take the
    /// indices after them.
    pub procs: usize,
    /// The scenario's processes' names, by index.
    pub proc_names: Vec<String>,
}

/// What one task measured, as its process reports it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Record {
    pub slot: usize,
    pub name: String,
    pub tid: i32,
    /// Its process's pid (its thread group).
    pub pid: i32,
    /// Its process's name: the scenario's, or a forked child's own.
    pub process: String,
    /// Laps by metric id, ns.
    pub laps: BTreeMap<u32, Vec<u64>>,
    pub counts: BTreeMap<u32, u64>,
    /// Stamps in program order: (metric id, ns since the run began).
    pub stamps: Vec<(u32, u64)>,
    pub cpu_ns: u64,
    /// Since the run began.
    pub exited_at: Option<u64>,
    pub final_cpu: Option<usize>,
    /// What went wrong, when an op could not be carried out.
    pub fault: Option<String>,
}

/// One process's own shared state: its tasks' records, how many of its
/// threads are live, and the spawned names it has given.
pub struct Proc {
    pub index: usize,
    pub name: String,
    pub records: Mutex<Vec<Arc<Mutex<Record>>>>,
    pub live: AtomicUsize,
    names: Mutex<BTreeMap<String, u32>>,
    /// Where it reports its records: the write end of a pipe its parent
    /// reads.
    pub report: i32,
    /// The processes its tasks forked, not yet reaped: (pid, the read end
    /// of its report, its process index). Held across a fork, so two tasks of one
    /// process never fork at once (each child must know every descriptor
    /// it inherited that is not its own).
    forked: Mutex<Vec<(i32, i32, usize)>>,
    /// The records its forked processes reported, reported with its own.
    pub adopted: Mutex<Vec<Record>>,
}

impl Proc {
    pub fn new(index: usize, name: String, report: i32) -> Proc {
        Proc {
            index,
            name,
            records: Mutex::new(Vec::new()),
            live: AtomicUsize::new(0),
            names: Mutex::new(BTreeMap::new()),
            report,
            forked: Mutex::new(Vec::new()),
            adopted: Mutex::new(Vec::new()),
        }
    }

    /// Reads forked process `pid`'s report to its end (it writes it as it
    /// exits), keeps its records, and reaps it.
    fn reap(&self, pid: i32, report: i32) -> Result<(), String> {
        let bytes = sys::read_to_end(report);
        sys::close(report);
        let status = sys::wait(pid).map_err(|e| format!("waitpid({pid}): {e}"))?;
        let bytes = bytes.map_err(|e| format!("process {pid}'s report: {e}"))?;
        let recs: Vec<Record> = serde_json::from_slice(&bytes).map_err(|e| {
            format!("process {pid} sent no report ({e}; it ended with status {status})")
        })?;
        self.adopted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(recs);
        Ok(())
    }

    /// Reaps every process its tasks forked (a process waits for its
    /// children's reports before it writes its own): each is told to
    /// report first (it waits for that, [`manage`]), then read in turn.
    pub fn reap_all(&self, shm: &Shm) -> Result<(), String> {
        let left = std::mem::take(&mut *self.forked.lock().unwrap_or_else(|e| e.into_inner()));
        for &(_, _, index) in &left {
            shm.reap_now(index).store(1, Release);
            let m = shm.manager(index);
            m.fetch_add(1, Release);
            sys::futex_wake(m, u32::MAX);
        }
        left.into_iter()
            .try_for_each(|(pid, fd, _)| self.reap(pid, fd))
    }

    /// A spawned task's name: `parent.program`, numbered apart (`#k`)
    /// after the first, as the simulator names them (recursion keeps the
    /// parent's name).
    fn spawn_name(&self, parent: &str, program: &str) -> String {
        let base = if parent.ends_with(&format!(".{program}"))
            || parent.contains(&format!(".{program}#"))
        {
            parent.split('#').next().unwrap_or(parent).to_string()
        } else {
            format!("{parent}.{program}")
        };
        let mut names = self.names.lock().expect("no panics under it");
        let k = names.entry(base.clone()).or_insert(0);
        *k += 1;
        if *k == 1 {
            base
        } else {
            format!("{base}#{}", *k - 1)
        }
    }

    fn add(&self, r: Record) -> Arc<Mutex<Record>> {
        let r = Arc::new(Mutex::new(r));
        self.records
            .lock()
            .expect("no panics under it")
            .push(r.clone());
        r
    }
}

/// A task's own view while it runs.
struct Task<'a> {
    run: &'a Arc<Run>,
    proc: &'a Arc<Proc>,
    objs: Objects<'a>,
    me: usize,
    rec: Arc<Mutex<Record>>,
    rng: ChaCha8Rng,
    /// The futex generations it has seen.
    seen: Vec<u32>,
    lap_at: Vec<(u32, u64)>,
    /// The client whose request it serves.
    serving: Option<usize>,
    /// Its children not yet joined, by slot.
    children: std::collections::VecDeque<usize>,
    buf: Vec<u8>,
}

/// A process's main thread, once its tasks are started: waits until they
/// have all ended or the run stops, reaps the processes they forked and
/// nobody joined, writes every record (its forked processes' included) to
/// its report and exits, every thread of the process with it.
///
/// A process a task forked (`parent`: its parent's pid) counts itself done
/// when its tasks have ended, then sleeps until its parent process reaps
/// it ([`Proc::reap_all`]) or the run stops: its report and its exit (the
/// teardown of a copy of the executor, larger than the workload's own
/// process) fall outside the workload's time; the task that joined it had
/// already gone on. It also ends when its parent is gone
/// (`PR_SET_PDEATHSIG`, and a look every 100 ms while it waits here).
pub fn manage(run: &Run, proc: &Proc, parent: Option<i32>) -> ! {
    let shm = &run.shm;
    let stopped = || shm.ctl(ctl::STOP).load(Acquire) != 0;
    until(shm, proc.index, parent, || {
        proc.live.load(SeqCst) == 0 || stopped()
    });
    shm.ctl(ctl::PROCS_DONE).fetch_add(1, SeqCst);
    if parent.is_some() {
        let reap = shm.reap_now(proc.index);
        until(shm, proc.index, parent, || {
            reap.load(Acquire) != 0 || stopped()
        });
    }
    if let Err(e) = proc.reap_all(shm) {
        eprintln!("schedlab: {e}");
    }
    let mut records: Vec<Record> = proc
        .records
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|r| {
            let mut r = r.lock().unwrap_or_else(|e| e.into_inner()).clone();
            if r.exited_at.is_none() && r.tid > 0 {
                // Still running or blocked: the kernel's count of it.
                r.cpu_ns = proc_thread_cpu_ns(r.tid).unwrap_or(0);
                r.final_cpu = proc_thread_cpu(r.tid);
            }
            r
        })
        .collect();
    records.append(&mut proc.adopted.lock().unwrap_or_else(|e| e.into_inner()));
    let text = serde_json::to_vec(&records).unwrap_or_default();
    let _ = sys::write_all(proc.report, &text);
    sys::exit_now(0)
}

/// Sleeps on process `index`'s manager word until `done`; a forked
/// process (`parent`) exits at once when its parent is gone.
fn until(shm: &Shm, index: usize, parent: Option<i32>, done: impl Fn() -> bool) {
    let m = shm.manager(index);
    loop {
        let seen = m.load(Acquire);
        if done() {
            return;
        }
        if parent.is_some_and(|p| sys::parent_pid() != p) {
            sys::exit_now(1);
        }
        sys::futex_wait(m, seen, parent.map(|_| 100_000_000));
    }
}

/// A live thread of this process's CPU time (`schedstat`'s first field).
fn proc_thread_cpu_ns(tid: i32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// The CPU a live thread of this process last ran on (`stat`'s field 39).
fn proc_thread_cpu(tid: i32) -> Option<usize> {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    rest.split_whitespace().nth(36)?.parse().ok()
}

/// Starts a task's thread in this process: `slot` holds it, `prog` is its
/// program; an initial task pins itself to its start CPU and waits for
/// `GO` first.
///
/// When its program has ended the thread records it ([`finish`]) and then
/// sleeps until its process exits (`exit_group` from [`manage`] ends it
/// with the rest): a thread's own exit here is dear and not the
/// workload's. Rust's runtime unmaps the thread's signal stack and glibc
/// releases its stack's pages (`madvise`), and each is a TLB shootdown,
/// an IPI to every other CPU that runs the process: 50-100 µs of CPU a
/// thread on a KVM guest, measured with `perf record` on 40 exiting
/// threads. rt-tests' hackbench threads (a `PTHREAD_STACK_MIN` stack:
/// no `madvise`; no signal stack) exit for a few µs. So a task's thread
/// ends only with its process, and the thread that forked a process
/// lives as long as its own process: a forked child's
/// `PR_SET_PDEATHSIG` ([`sys::fork_task`]) fires when its parent process
/// is gone.
pub fn start(
    run: &Arc<Run>,
    proc: &Arc<Proc>,
    me: usize,
    prog: usize,
    name: String,
    initial: Option<usize>,
) -> std::io::Result<()> {
    let rec = begin(run, proc, me, prog, &name);
    let (run, proc) = (run.clone(), proc.clone());
    // The thread's comm is the task's name (15 bytes at most), so the
    // kernel's record names it.
    let comm: String = name.chars().take(15).collect();
    std::thread::Builder::new().name(comm).spawn(move || {
        let r = rec.clone();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            thread_main(&run, &proc, me, prog, rec, initial)
        }));
        let fault = match result {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e),
            Err(p) => Some(format!(
                "panicked: {}",
                p.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default()
            )),
        };
        finish(&run, &proc, me, &r, fault);
        let state = run.shm.slot(me, slot::STATE);
        loop {
            sys::futex_wait(state, State::Exited as u32, None);
        }
    })?;
    Ok(())
}

/// A task's slot and record, before its program runs on a thread.
fn begin(run: &Run, proc: &Proc, me: usize, prog: usize, name: &str) -> Arc<Mutex<Record>> {
    let shm = &run.shm;
    shm.slot(me, slot::PROG).store(prog as u32, Relaxed);
    shm.slot(me, slot::PROC).store(proc.index as u32, Relaxed);
    shm.slot(me, slot::STATE)
        .store(State::Running as u32, Release);
    proc.live.fetch_add(1, SeqCst);
    proc.add(Record {
        slot: me,
        name: name.to_string(),
        process: proc.name.clone(),
        ..Record::default()
    })
}

/// A task's thread, after its program ends (or faults): its record, its
/// slot, its parent's and its process's counts.
fn finish(run: &Run, proc: &Proc, me: usize, rec: &Mutex<Record>, fault: Option<String>) {
    let shm = &run.shm;
    {
        let mut r = rec.lock().unwrap_or_else(|e| e.into_inner());
        r.cpu_ns = sys::thread_cpu_ns();
        r.final_cpu = Some(sys::current_cpu());
        r.exited_at = Some(sys::now().saturating_sub(shm.t0().load(Acquire)));
        if fault.is_some() {
            r.fault = fault;
            let _ = shm
                .ctl(ctl::FAULT)
                .compare_exchange(0, me as u32 + 1, SeqCst, SeqCst);
        }
    }
    shm.slot(me, slot::STATE)
        .store(State::Exited as u32, Release);
    // Its exit wakes a parent waiting in `join_any`.
    if let parent @ 1.. = shm.slot(me, slot::PARENT).load(Acquire) {
        let w = shm.slot(parent as usize - 1, slot::EXITS);
        w.fetch_add(1, Release);
        sys::futex_wake(w, 1);
    }
    if proc.live.fetch_sub(1, SeqCst) == 1 {
        let m = shm.manager(proc.index);
        m.fetch_add(1, Release);
        sys::futex_wake(m, 1);
    }
}

fn thread_main(
    run: &Arc<Run>,
    proc: &Arc<Proc>,
    me: usize,
    prog: usize,
    rec: Arc<Mutex<Record>>,
    initial: Option<usize>,
) -> Result<(), String> {
    let shm = &run.shm;
    let tid = sys::gettid();
    shm.slot(me, slot::TID).store(tid as u32, Release);
    {
        let mut r = rec.lock().expect("ours");
        r.tid = tid;
        r.pid = std::process::id() as i32;
    }
    if let Some(i) = initial {
        let t = &run.tasks[i];
        prepare(t, shm)?;
        shm.ctl(ctl::READY).fetch_add(1, SeqCst);
        sys::futex_wake(shm.ctl(ctl::READY), 1);
        let go = shm.ctl(ctl::GO);
        while go.load(Acquire) == 0 {
            sys::futex_wait(go, 0, None);
        }
        // Started where the scenario put it; from here the kernel places it.
        let mask = t.mask.as_deref().unwrap_or(&run.machine_cpus);
        sys::set_affinity(mask).map_err(|e| format!("{}: sched_setaffinity: {e}", t.name))?;
    }
    let mut task = Task {
        run,
        proc,
        objs: Objects { shm, k: run.kinds },
        me,
        rec,
        rng: ChaCha8Rng::seed_from_u64(run.seed ^ (me as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        // One per futex (the futexes' ids run from `futexes` to `timers`).
        seen: vec![0; run.kinds.timers - run.kinds.futexes],
        lap_at: Vec::new(),
        serving: None,
        children: Default::default(),
        buf: Vec::new(),
    };
    // Children it never joined go on: the process waits for them.
    task.interpret(&run.programs[prog])
}

/// The first `n` bytes of a task's message buffer, grown as needed: what a
/// message writes, and where a read copies to.
fn bytes_of(buf: &mut Vec<u8>, n: u64) -> &mut [u8] {
    let n = n as usize;
    if buf.len() < n {
        buf.resize(n, 0x5a);
    }
    &mut buf[..n]
}

/// An initial task's attributes, asked of the kernel on its own thread
/// before it starts: its start CPU (pinned), nice or SCHED_FIFO, slice,
/// core-scheduling cookie.
fn prepare(t: &TaskStart, shm: &Shm) -> Result<(), String> {
    let name = &t.name;
    sys::set_affinity(&[t.cpu]).map_err(|e| format!("{name}: pinning to cpu{}: {e}", t.cpu))?;
    match t.rt {
        Some(p) => sys::set_fifo(p).map_err(|e| {
            format!("{name}: SCHED_FIFO priority {p}: {e} (a real-time task needs root or CAP_SYS_NICE)")
        })?,
        None if t.nice != 0 => sys::set_nice(t.nice).map_err(|e| {
            format!("{name}: nice {}: {e} (a negative nice needs root or CAP_SYS_NICE)", t.nice)
        })?,
        None => {}
    }
    if let Some(ns) = t.slice_ns {
        sys::set_slice(ns, t.nice).map_err(|e| {
            format!("{name}: a slice of {ns} ns (sched_setattr's sched_runtime, taken by EEVDF since Linux 6.12): {e}")
        })?;
    }
    if let Some(line) = t.cookie {
        cookie(shm, line)
            .map_err(|e| format!("{name}: a core-scheduling cookie (PR_SCHED_CORE): {e}"))?;
    }
    Ok(())
}

/// A cookie line's word while its first task makes the cookie, and after
/// that failed; otherwise 0 (nobody yet) or the maker's thread id.
const COOKIE_MAKING: u32 = u32::MAX;
const COOKIE_FAILED: u32 = u32::MAX - 1;

/// The first task of a cookie value makes the cookie (`PR_SCHED_CORE_CREATE`)
/// and publishes its thread id; the others take it from that thread
/// (`PR_SCHED_CORE_SHARE_FROM`), so tasks of one value share one cookie.
fn cookie(shm: &Shm, line: usize) -> Result<(), String> {
    let w = shm.obj(line, 0);
    if w.compare_exchange(0, COOKIE_MAKING, SeqCst, SeqCst).is_ok() {
        return match sys::core_cookie_create() {
            Ok(()) => {
                w.store(sys::gettid() as u32, Release);
                Ok(())
            }
            Err(e) => {
                w.store(COOKIE_FAILED, Release);
                Err(e.to_string())
            }
        };
    }
    loop {
        match w.load(Acquire) {
            COOKIE_MAKING => sys::yield_now(),
            COOKIE_FAILED => return Err("the task that made it failed".into()),
            tid => return sys::core_cookie_share_from(tid as i32).map_err(|e| e.to_string()),
        }
    }
}

/// Spins until this thread has used `ns` more of CPU time, or the run
/// stops.
pub fn spin_cpu(ns: u64, stop: &std::sync::atomic::AtomicU32) {
    let end = sys::thread_cpu_ns() + ns;
    while sys::thread_cpu_ns() < end && stop.load(Relaxed) == 0 {
        for _ in 0..16 {
            std::hint::spin_loop();
        }
    }
}

impl Task<'_> {
    fn interpret(&mut self, code: &[Instr]) -> Result<(), String> {
        let shm = &self.run.shm;
        let stop = shm.ctl(ctl::STOP);
        let pc_word = shm.slot(self.me, slot::PC);
        let mut left: Vec<u64> = vec![0; code.len()];
        let mut pc = 0;
        while pc < code.len() {
            if stop.load(Relaxed) != 0 {
                return Ok(());
            }
            pc_word.store(pc as u32, Relaxed);
            match code[pc] {
                Instr::LoopStart { n, end } => {
                    if n == 0 {
                        pc = end + 1;
                    } else {
                        left[pc] = n;
                        pc += 1;
                    }
                    continue;
                }
                Instr::LoopEnd { start } => {
                    left[start] -= 1;
                    pc = if left[start] > 0 { start + 1 } else { pc + 1 };
                    continue;
                }
                Instr::Exit => return Ok(()),
                op => self.op(op)?,
            }
            pc += 1;
        }
        Ok(())
    }

    /// One op, by its kind's room.
    fn op(&mut self, op: Instr) -> Result<(), String> {
        match op {
            Instr::Call { .. }
            | Instr::Serve(_)
            | Instr::Reply { .. }
            | Instr::PipeWrite { .. }
            | Instr::PipeRead { .. } => self.ipc(op),
            Instr::FutexWait(_)
            | Instr::FutexWake { .. }
            | Instr::CondWait { .. }
            | Instr::CondSignal(_)
            | Instr::CondBroadcast(_)
            | Instr::Barrier { .. }
            | Instr::Lock(_)
            | Instr::Unlock(_) => self.sync(op),
            Instr::Run(_)
            | Instr::RunFor(_)
            | Instr::Timer { .. }
            | Instr::Sleep(_)
            | Instr::RandomSleep { .. }
            | Instr::ExpSleep { .. }
            | Instr::Io(_) => self.time(op),
            Instr::LapStart(_)
            | Instr::Lap(_)
            | Instr::WakeLap(_)
            | Instr::Stamp(_)
            | Instr::Count { .. } => self.measure(op),
            Instr::Spawn(_)
            | Instr::Fork(_)
            | Instr::Join
            | Instr::JoinAny
            | Instr::Yield
            | Instr::Leave
            | Instr::Affinity(_) => self.life(op),
            Instr::Exit | Instr::LoopStart { .. } | Instr::LoopEnd { .. } => {
                unreachable!("stepped by interpret")
            }
        }
    }
}
