//! One real run of a scenario: build the shared mapping and the kernel
//! objects, fork a process per scenario process, start every task at its
//! CPU at once, watch for the end (every task exited, the deadline, a
//! stall, a fault, Ctrl-C), collect what each process measured, and leave
//! nothing behind.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use std::sync::Arc;

use schedlab_sim::engine::code::{Code, Instr};
use schedlab_sim::engine::{describe_wait, WaitState};
use schedlab_sim::objects::Objects as SimObjects;
use schedlab_sim::objects::{BarrierId, LockId, PortId};
use schedlab_sim::sched::{Band, TaskId};
use schedlab_sim::{find_cycle, LostWake, Outcome, SimSpec, Stall, StallCause, TaskOutcome, Wait};

use crate::exec::{self, Proc, Record, Run, TaskStart};
use crate::objects::{Kinds, Objects};
use crate::shm::{ctl, slot, Layout, Shm, State};
use crate::{sys, Error};

/// How long every live task must stay waiting, with no wait begun and
/// none posted, for a run to be called stalled before its deadline: long
/// enough that a woken task on a loaded machine has run by then (a wait
/// in the kernel, as a pipe's, shows no post).
const STALL_QUIET_NS: u64 = 500_000_000;
/// How often the parent looks.
const POLL_NS: u64 = 2_000_000;

/// The compiled scenario and what the parent needs to read the run back.
pub struct Prepared {
    pub run: Arc<Run>,
    pub objects: SimObjects,
    pub metrics: Vec<String>,
    /// The scenario processes' names, by index.
    pub proc_names: Vec<String>,
    io_path: Option<std::path::PathBuf>,
}

impl Drop for Prepared {
    fn drop(&mut self) {
        for &(r, w) in &self.run.pipes {
            sys::close(r);
            sys::close(w);
        }
        if let Some((fd, _)) = self.run.io_file {
            sys::close(fd);
        }
        if let Some(p) = &self.io_path {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The size of the file `io` ops read.
const IO_FILE_BYTES: u64 = 16 << 20;

/// Compiles `spec` for a real run on a machine of `machine_cpus` CPUs.
pub fn prepare(spec: &SimSpec, seed: u64, machine_cpus: &[usize]) -> Result<Prepared, Error> {
    let ncpus = machine_cpus.len();
    let mut objects = SimObjects::default();
    let mut code = Code::new(&spec.programs, &mut objects);
    let mut programs: Vec<Arc<[Instr]>> = Vec::new();
    for t in &spec.tasks {
        programs.push(Arc::from(&*code.compile(&t.program, &mut objects)));
    }
    let spawnable: Vec<String> = code.programs.iter().map(|(n, _)| n.clone()).collect();
    programs.extend(code.programs.iter().map(|(_, c)| Arc::from(&**c)));
    let mut proc_ids: BTreeMap<String, usize> = BTreeMap::new();
    let mut proc_names = Vec::new();
    let mut tasks = Vec::new();
    let mut cookies: BTreeMap<u64, usize> = BTreeMap::new();
    let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(seed);
    for t in &spec.tasks {
        let pname = if t.process.is_empty() {
            t.name.clone()
        } else {
            t.process.clone()
        };
        let n = proc_ids.len();
        let proc = *proc_ids.entry(pname.clone()).or_insert_with(|| {
            proc_names.push(pname);
            n
        });
        tasks.push(task_start(t, proc, ncpus, &mut rng, &mut cookies)?);
    }
    let (buf, io) = buffer_and_io(&programs);
    let kinds = Kinds::new(&objects);
    let slots = spec.tasks.len() + spec.max_tasks;
    // Cookies' lines follow the objects'.
    for t in &mut tasks {
        t.cookie = t.cookie.map(|c| kinds.total + c);
    }
    let lines = kinds.total + cookies.len();
    // Room for a process per `fork` a run may make (one per slot).
    let forks = programs
        .iter()
        .any(|p| p.iter().any(|i| matches!(i, Instr::Fork(_))));
    let procs = proc_names.len() + if forks { slots } else { 0 };
    let shm = Shm::new(Layout::new(procs, slots, lines, buf))
        .map_err(|e| Error::Fault(format!("the shared mapping: {e}")))?;
    shm.ctl(ctl::NEXT_SLOT)
        .store(spec.tasks.len() as u32, Relaxed);
    let mut pipes = Vec::new();
    for _ in &objects.pipes {
        pipes.push(sys::pipe(spec.pipe_capacity).map_err(|e| Error::Fault(format!("pipe: {e}")))?);
    }
    let (io_file, io_path) = if io {
        let (fd, path) = io_file(seed)?;
        (Some((fd, IO_FILE_BYTES)), Some(path))
    } else {
        (None, None)
    };
    let metrics = code.metrics.clone();
    let masks = affinity_masks(&code.masks, ncpus)?;
    Ok(Prepared {
        run: Arc::new(Run {
            shm,
            kinds,
            programs,
            spawnable,
            tasks,
            pipes,
            io_file,
            machine_cpus: machine_cpus.to_vec(),
            masks,
            seed,
            slots,
            procs: proc_names.len(),
            proc_names: proc_names.clone(),
        }),
        objects,
        metrics,
        proc_names,
        io_path,
    })
}

/// Task `t` of process `proc` ready to start here: its first CPU (drawn
/// from its `start_in` set by `rng`), its mask on this machine's `ncpus`,
/// its class, and its core-scheduling cookie's index in `cookies`;
/// refused with why when this machine or this user cannot run it.
fn task_start(
    t: &schedlab_sim::TaskDef,
    proc: usize,
    ncpus: usize,
    rng: &mut rand_chacha::ChaCha8Rng,
    cookies: &mut BTreeMap<u64, usize>,
) -> Result<TaskStart, Error> {
    let cpu = match &t.start_in {
        Some(set) => {
            let c: Vec<usize> = set.iter().map(|c| c.index()).collect();
            c[rand::Rng::gen_range(rng, 0..c.len())]
        }
        None => t.start_cpu.index(),
    };
    if cpu >= ncpus {
        return Err(Error::Input(format!(
            "task {:?} starts on cpu{cpu}, which this machine lacks (it has {ncpus} CPUs): a real run runs here",
            t.name
        )));
    }
    let mask = t.spec.mask.map(|m| {
        m.iter()
            .map(|c| c.index())
            .filter(|&c| c < ncpus)
            .collect::<Vec<_>>()
    });
    if mask.as_ref().is_some_and(|m| m.is_empty()) {
        return Err(Error::Input(format!(
            "task {:?}: its mask names no CPU of this machine's {ncpus}",
            t.name
        )));
    }
    let (nice, rt) = match t.spec.band {
        Band::Fair { nice } => (nice, None),
        Band::Rt { prio } => (0, Some(prio)),
    };
    if rt.is_some() && !sys::is_root() {
        return Err(Error::Input(format!(
            "task {:?} is real-time (SCHED_FIFO), which needs root or CAP_SYS_NICE",
            t.name
        )));
    }
    if t.spec.cookie != 0 && !sys::has_core_sched() {
        return Err(Error::Input(format!(
            "task {:?} has a core-scheduling cookie, but this kernel has no core scheduling (CONFIG_SCHED_CORE; PR_SCHED_CORE is refused)",
            t.name
        )));
    }
    Ok(TaskStart {
        name: t.name.clone(),
        cpu,
        mask,
        nice,
        rt,
        slice_ns: t.spec.slice_ns,
        cookie: (t.spec.cookie != 0).then(|| {
            let n = cookies.len();
            *cookies.entry(t.spec.cookie).or_insert(n)
        }),
        proc,
    })
}

/// The largest message a call or reply moves (at least 64 bytes), and
/// whether any program does I/O.
fn buffer_and_io(programs: &[Arc<[Instr]>]) -> (usize, bool) {
    let (mut buf, mut io) = (64usize, false);
    for i in programs.iter().flat_map(|p| p.iter()) {
        match *i {
            Instr::Call { bytes, .. } | Instr::Reply { bytes } => buf = buf.max(bytes as usize),
            Instr::Io(_) => io = true,
            _ => {}
        }
    }
    (buf, io)
}

/// The affinity ops' masks on this machine's `ncpus`; a mask that names
/// none of them is refused.
fn affinity_masks(
    masks: &[schedlab_topology::CpuSet],
    ncpus: usize,
) -> Result<Vec<Vec<usize>>, Error> {
    masks
        .iter()
        .map(|m| {
            let cpus: Vec<usize> = m.iter().map(|c| c.index()).filter(|&c| c < ncpus).collect();
            if cpus.is_empty() {
                return Err(Error::Input(format!(
                    "an affinity op names no CPU of this machine's {ncpus}"
                )));
            }
            Ok(cpus)
        })
        .collect()
}

/// The file `io` ops `pread`: 16 MiB the run writes under the temporary
/// directory and removes after.
fn io_file(seed: u64) -> Result<(i32, std::path::PathBuf), Error> {
    use std::os::fd::IntoRawFd;
    let path = std::env::temp_dir().join(format!("schedlab-io-{}-{seed}.bin", std::process::id()));
    let data = vec![0xa5u8; IO_FILE_BYTES as usize];
    std::fs::write(&path, &data).map_err(|e| Error::Fault(format!("{}: {e}", path.display())))?;
    let f =
        std::fs::File::open(&path).map_err(|e| Error::Fault(format!("{}: {e}", path.display())))?;
    Ok((f.into_raw_fd(), path))
}

/// The forked processes of a run, killed and reaped however the run ends.
pub struct Children {
    pub pids: Vec<i32>,
    reports: Vec<i32>,
}

impl Drop for Children {
    fn drop(&mut self) {
        // The processes tasks forked first (found before their parents go,
        // which would leave them to init), then the scenario's.
        let forked = if self.pids.is_empty() {
            Vec::new()
        } else {
            sys::descendants(&self.pids)
        };
        for &pid in forked.iter().rev() {
            sys::kill(pid);
        }
        for &pid in &self.pids {
            sys::kill(pid);
        }
        for &pid in &self.pids {
            let _ = sys::wait(pid);
        }
        for &fd in &self.reports {
            sys::close(fd);
        }
    }
}

/// Forks a process per scenario process; each starts its initial tasks,
/// which pin themselves and wait for `GO`.
pub fn fork_all(p: &Prepared) -> Result<Children, Error> {
    let mut ch = Children {
        pids: Vec::new(),
        reports: Vec::new(),
    };
    for proc in 0..p.proc_names.len() {
        let (r, w) = sys::pipe(65536).map_err(|e| Error::Fault(format!("pipe: {e}")))?;
        match sys::fork().map_err(|e| Error::Fault(format!("fork: {e}")))? {
            None => {
                sys::close(r);
                manager(&p.run, proc, w)
            }
            Some(pid) => {
                sys::close(w);
                ch.pids.push(pid);
                ch.reports.push(r);
            }
        }
    }
    Ok(ch)
}

/// A scenario process's main thread: starts its tasks, waits until they
/// have all ended or the run stops, writes their records to the parent
/// and exits (every thread of the process with it).
fn manager(run: &Arc<Run>, index: usize, report: i32) -> ! {
    let proc = Arc::new(Proc::new(index, run.proc_names[index].clone(), report));
    let shm = &run.shm;
    for (i, t) in run
        .tasks
        .iter()
        .enumerate()
        .filter(|(_, t)| t.proc == index)
    {
        if let Err(e) = exec::start(run, &proc, i, i, t.name.clone(), Some(i)) {
            let _ = shm
                .ctl(ctl::FAULT)
                .compare_exchange(0, i as u32 + 1, SeqCst, SeqCst);
            eprintln!("schedlab: a real run could not start {}: {e}", t.name);
        }
    }
    exec::manage(run, &proc, None)
}

/// Why a run ended.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum End {
    /// Every task exited.
    Done,
    /// The scenario's `run_ms` passed.
    Deadline,
    /// Every live task waited on another for `STALL_QUIET_NS`.
    Stalled,
    /// A spawn found no free slot.
    TableFull(usize),
    /// A task could not do what its op asked.
    Fault(usize),
    Interrupted,
}

/// Waits for every task to be at its start CPU; a fault or a process gone
/// ends the wait.
pub fn wait_ready(p: &Prepared, ch: &Children) -> Result<(), Error> {
    let shm = &p.run.shm;
    let want = p.run.tasks.len() as u32;
    let started = sys::now();
    loop {
        if shm.ctl(ctl::READY).load(Acquire) >= want {
            return Ok(());
        }
        if shm.ctl(ctl::FAULT).load(Acquire) != 0 {
            return Ok(()); // read back with the records
        }
        if sys::INTERRUPTED.load(SeqCst) {
            return Err(Error::Interrupted);
        }
        if sys::now() - started > 10_000_000_000 {
            return Err(Error::Fault(format!(
                "{} of {want} tasks were ready after 10 s; processes {:?}",
                shm.ctl(ctl::READY).load(Acquire),
                ch.pids
            )));
        }
        sys::sleep_ns(POLL_NS / 2);
    }
}

/// Starts the tasks and watches the run until it ends; when it ended.
pub fn go_and_watch(p: &Prepared, run_ns: u64) -> (End, u64) {
    let shm = &p.run.shm;
    let t0 = sys::now();
    shm.t0().store(t0, Release);
    shm.ctl(ctl::GO).store(1, Release);
    sys::futex_wake(shm.ctl(ctl::GO), u32::MAX);
    let procs = p.proc_names.len() as u32;
    let forked = shm.ctl(ctl::FORKED);
    let mut quiet_since: Option<(u64, Vec<u32>)> = None;
    loop {
        sys::sleep_ns(POLL_NS);
        let now = sys::now();
        if shm.ctl(ctl::PROCS_DONE).load(Acquire) >= procs + forked.load(Acquire) {
            return (End::Done, now - t0);
        }
        if let s @ 1.. = shm.ctl(ctl::FAULT).load(Acquire) {
            return (End::Fault(s as usize - 1), now - t0);
        }
        if let s @ 1.. = shm.ctl(ctl::TABLE_FULL).load(Acquire) {
            return (End::TableFull(s as usize - 1), now - t0);
        }
        if sys::INTERRUPTED.load(SeqCst) {
            return (End::Interrupted, now - t0);
        }
        if now - t0 >= run_ns {
            return (End::Deadline, now - t0);
        }
        // A stall: every live task waits on another, and none began a new
        // wait for a while.
        let used = (shm.ctl(ctl::NEXT_SLOT).load(Acquire) as usize).min(p.run.slots);
        let mut all_waiting = true;
        let mut waits = Vec::with_capacity(used);
        for s in 0..used {
            match State::of(shm.slot(s, slot::STATE).load(Acquire)) {
                // Posted but not yet run: it will go on.
                State::Waiting if shm.slot(s, slot::WAKE).load(Acquire) == 0 => {
                    waits.push(shm.slot(s, slot::WAITS).load(Acquire))
                }
                State::Exited | State::Free => waits.push(u32::MAX),
                _ => all_waiting = false,
            }
        }
        if !all_waiting {
            quiet_since = None;
            continue;
        }
        match &quiet_since {
            Some((since, w)) if *w == waits => {
                if now - since >= STALL_QUIET_NS {
                    return (End::Stalled, now - t0);
                }
            }
            _ => quiet_since = Some((now, waits)),
        }
    }
}

/// Tells every process to stop and report.
pub fn stop(p: &Prepared) {
    let shm = &p.run.shm;
    shm.ctl(ctl::STOP).store(1, Release);
    let forked = shm.ctl(ctl::FORKED).load(Acquire) as usize;
    for i in 0..(p.proc_names.len() + forked).min(shm.layout.procs) {
        let m = shm.manager(i);
        m.fetch_add(1, Release);
        sys::futex_wake(m, u32::MAX);
    }
}

/// Reads every process's records, then reaps it.
pub fn collect(ch: &mut Children) -> Result<Vec<Record>, Error> {
    let mut all = Vec::new();
    for (i, &fd) in ch.reports.iter().enumerate() {
        let bytes = sys::read_to_end(fd).map_err(|e| Error::Fault(format!("a report: {e}")))?;
        let recs: Vec<Record> = serde_json::from_slice(&bytes).map_err(|e| {
            Error::Fault(format!(
                "process {} sent no report ({e}): it died before the end of the run",
                ch.pids[i]
            ))
        })?;
        all.extend(recs);
    }
    for &fd in &ch.reports {
        sys::close(fd);
    }
    ch.reports.clear();
    for &pid in &ch.pids {
        let _ = sys::wait(pid);
    }
    ch.pids.clear();
    all.sort_by_key(|r| r.slot);
    Ok(all)
}

/// The simulator's outcome type, filled with what a real run measured.
pub fn outcome(p: &Prepared, records: &[Record], end_ns: u64, rep: u64) -> Outcome {
    let mut o = Outcome {
        seed: rep,
        end_ns,
        ..Outcome::default()
    };
    for r in records {
        for (m, v) in &r.laps {
            o.laps
                .entry(p.metrics[*m as usize].clone())
                .or_default()
                .extend(v);
        }
        for (m, n) in &r.counts {
            *o.counts.entry(p.metrics[*m as usize].clone()).or_default() += n;
        }
        o.task_names.insert(r.slot as u32, r.name.clone());
        o.tasks.insert(
            r.name.clone(),
            TaskOutcome {
                process: r.process.clone(),
                exited_at: r.exited_at,
                final_cpu: r.final_cpu.map(schedlab_topology::CpuId::new),
                cpu_ns: r.cpu_ns,
                stamps: r
                    .stamps
                    .iter()
                    .map(|&(m, ns)| (p.metrics[m as usize].clone(), ns))
                    .collect(),
                ..TaskOutcome::default()
            },
        );
    }
    o
}

/// What each task that had not exited waits on, in the simulator's words
/// (`describe_wait`), and the cycle its waits form.
pub fn stall_report(p: &Prepared, records: &[Record], cause: StallCause) -> Stall {
    let shm = &p.run.shm;
    let st = Waits {
        objs: Objects {
            shm,
            k: p.run.kinds,
        },
        records,
    };
    let mut waits = Vec::new();
    let mut edges = Vec::new();
    for r in records.iter().filter(|r| r.exited_at.is_none()) {
        let s = r.slot;
        let state = State::of(shm.slot(s, slot::STATE).load(Acquire));
        let prog = shm.slot(s, slot::PROG).load(Acquire) as usize;
        let pc = shm.slot(s, slot::PC).load(Acquire) as usize;
        let instr = p.run.programs.get(prog).and_then(|c| c.get(pc)).copied();
        let (on, on_tasks) = match (state, instr) {
            (State::Waiting, Some(i)) => {
                // A join waits on the child it took off its list; a
                // join_any on every child still running.
                let children: Vec<TaskId> = match i {
                    Instr::Join => vec![TaskId(shm.slot(s, slot::WAIT_OBJ).load(Acquire))],
                    _ => records
                        .iter()
                        .filter(|c| {
                            c.exited_at.is_none()
                                && shm.slot(c.slot, slot::PARENT).load(Acquire) as usize == s + 1
                        })
                        .map(|c| TaskId(c.slot as u32))
                        .collect(),
                };
                describe_wait(i, TaskId(s as u32), &children, &p.objects, &st)
            }
            (State::Timed, _) => ("a sleep, timer or disk read of its own".into(), vec![]),
            _ => ("nothing: runnable".into(), vec![]),
        };
        waits.push(Wait {
            task: r.name.clone(),
            on,
            on_tasks: on_tasks.iter().map(|&t| st.name(t)).collect(),
            lost: lost_wake(p, &st, instr.filter(|_| state == State::Waiting)),
        });
        edges.push((TaskId(s as u32), on_tasks));
    }
    let cycle = find_cycle(&edges).iter().map(|&t| st.name(t)).collect();
    Stall {
        cause,
        waits,
        cycle,
    }
}

/// For a task waiting in `instr` on a condition or a futex: the object's
/// last signal or wake that found nobody waiting (who, when since the run
/// began), as the simulator's report names a condition's.
fn lost_wake(p: &Prepared, st: &Waits, instr: Option<Instr>) -> Option<LostWake> {
    let o = match instr? {
        Instr::CondWait { cond, .. } => p.run.kinds.conds + cond.index(),
        Instr::FutexWait(f) => p.run.kinds.futexes + f.index(),
        _ => return None,
    };
    let (at, by) = st.objs.lost(o)?;
    let t0 = p.run.shm.t0().load(Acquire);
    Some(LostWake {
        by: st.name(TaskId(by as u32)),
        at_ns: at.saturating_sub(t0),
    })
}

/// A real run's state as a stall report reads it: the shared objects and
/// what each process reported.
struct Waits<'a> {
    objs: Objects<'a>,
    records: &'a [Record],
}

impl WaitState for Waits<'_> {
    fn name(&self, t: TaskId) -> String {
        self.records
            .iter()
            .find(|r| r.slot == t.0 as usize)
            .map_or_else(|| "?".into(), |r| r.name.clone())
    }

    fn exited(&self, t: TaskId) -> bool {
        self.records
            .iter()
            .any(|r| r.slot == t.0 as usize && r.exited_at.is_some())
    }

    fn server(&self, port: PortId) -> Option<TaskId> {
        self.objs.server(port.index()).map(|s| TaskId(s as u32))
    }

    fn lock_owner(&self, lock: LockId) -> Option<TaskId> {
        self.objs.owner(lock.index()).map(|s| TaskId(s as u32))
    }

    fn arrived(&self, barrier: BarrierId) -> u32 {
        self.objs.arrived(barrier.index())
    }
}
