//! `schedlab record -- CMD`: a command run under the kernel's record,
//! followed through every fork and clone from its first instruction (the
//! command waits before `exec` until the capture is on), made into the
//! kernel's record of its threads ([`crate::record`]) and their programs
//! ([`crate::replay`]).
//!
//! The recorded threads are the command and every task it starts
//! (`task_newtask` in one of them), each in its process: a clone with
//! `CLONE_THREAD` joins its parent's, any other starts one of its own.
//! Every other thread the record names (kernel threads, other programs
//! that ran on the same CPUs) is left out and counted.

use std::collections::BTreeMap;

use schedlab_sim::sched::TaskId;

use crate::record::{self, KernelRecord};
use crate::replay::Life;
use crate::shadow;
use crate::tracefs::Capture;
use crate::{sys, Error};

/// `CLONE_THREAD`: the new task is a thread of its parent's process.
const CLONE_THREAD: i64 = 0x0001_0000;

/// How to record.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Stop (the command's process group killed) after this long, ns.
    pub duration_ns: Option<u64>,
    /// Each CPU's buffer, KiB (default [`crate::tracefs::BUFFER_KB`]).
    pub buffer_kb: Option<u64>,
    /// Stop (as at the duration) once the buffers hold this many events.
    pub max_events: Option<u64>,
}

/// A running process's threads now: (tid, comm).
fn threads_now(pid: i32) -> Vec<(i32, String)> {
    let mut v: Vec<(i32, String)> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let tid: i32 = e.ok()?.file_name().to_str()?.parse().ok()?;
            let comm = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).ok()?;
            Some((tid, comm.trim().to_string()))
        })
        .collect();
    v.sort();
    v
}

/// Records the running process `pid` (every thread it has, and every task
/// they start) for `duration_ns`, or until it exits. It is not ours to
/// stop: it goes on after.
pub fn attach(pid: i32, duration_ns: u64, o: &Options) -> Result<Recording, Error> {
    if let Some(why) = Capture::unavailable() {
        return Err(Error::Input(format!("record: {why}")));
    }
    let now = threads_now(pid);
    if now.is_empty() {
        return Err(Error::Input(format!("record --pid {pid}: no such process")));
    }
    let cap = Capture::new(ncpus()).map_err(|e| Error::Input(format!("record: tracefs: {e}")))?;
    if let Some(kb) = o.buffer_kb {
        cap.set_buffer_kb(kb)
            .map_err(|e| Error::Input(format!("record: --buffer-kb {kb}: {e}")))?;
    }
    let tids: Vec<i32> = now.iter().map(|(t, _)| *t).collect();
    cap.start(&tids)
        .map_err(|e| Error::Fault(format!("record: tracefs: {e}")))?;
    let t0 = sys::now();
    let old = sys::catch_interrupts();
    let mut interrupted = false;
    while sys::now().saturating_sub(t0) < duration_ns
        && std::path::Path::new(&format!("/proc/{pid}")).exists()
    {
        if sys::INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
            interrupted = true;
            break;
        }
        sys::sleep_ns(1_000_000);
    }
    sys::restore_interrupts(&old);
    sys::INTERRUPTED.store(false, std::sync::atomic::Ordering::SeqCst);
    let wall_ns = sys::now().saturating_sub(t0);
    let _ = cap.stop();
    if interrupted {
        return Err(Error::Interrupted);
    }
    let initial: Vec<(i32, i32, String)> = now.into_iter().map(|(t, c)| (t, pid, c)).collect();
    finish(&cap, &initial, t0, wall_ns, 0, wall_ns >= duration_ns)
}

/// One recorded thread.
#[derive(Clone, Debug)]
pub struct RecThread {
    pub tid: i32,
    pub tgid: i32,
    /// Its last command name.
    pub comm: String,
    /// `comm-tid`: unique in the recording.
    pub name: String,
}

/// What a recording holds.
pub struct Recording {
    /// The command's exit code (128 + a signal's number).
    pub status: i32,
    /// From the command's start to its end (or the duration's), ns.
    pub wall_ns: u64,
    /// The recording was stopped at the duration or at `max_events`, the
    /// command killed.
    pub cut: bool,
    pub threads: BTreeMap<TaskId, RecThread>,
    pub record: KernelRecord,
    pub life: Life,
    /// Threads outside the recording the record names, by command name:
    /// how many.
    pub outside: BTreeMap<String, u64>,
    /// Raw events read, and pages the kernel said lost events before them.
    pub raw_events: usize,
    pub lost_pages: u64,
    /// The kernel's decisions made again by the model's fair class.
    pub shadow: shadow::Report,
    /// The shape of the machine it was recorded on, when known.
    pub topology: Option<schedlab_topology::Topology>,
}

impl Recording {
    /// Its threads' programs rebuilt from the record, each wake edge
    /// through the pipe `edges` says ([`crate::replay::convert`]).
    pub fn convert(&self, edges: crate::replay::Edges) -> crate::replay::Converted {
        let names: BTreeMap<TaskId, String> = self
            .threads
            .iter()
            .map(|(id, t)| (*id, t.name.clone()))
            .collect();
        crate::replay::convert(&self.record.events, &self.life, &names, self.wall_ns, edges)
    }
}

/// The CPUs this machine has online (their count: the highest + 1).
fn ncpus() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| schedlab_topology::parse_cpulist(&s).ok())
        .and_then(|set| set.last())
        .map_or(1, |c| c.index() + 1)
}

/// Records `cmd` (program and arguments) until it exits, or until
/// `o.duration_ns`.
pub fn record(cmd: &[String], o: &Options) -> Result<Recording, Error> {
    if let Some(why) = Capture::unavailable() {
        return Err(Error::Input(format!("record: {why}")));
    }
    let cap = Capture::new(ncpus()).map_err(|e| Error::Input(format!("record: tracefs: {e}")))?;
    if let Some(kb) = o.buffer_kb {
        cap.set_buffer_kb(kb)
            .map_err(|e| Error::Input(format!("record: --buffer-kb {kb}: {e}")))?;
    }
    let (root, gate) = sys::spawn_gated(cmd)
        .map_err(|e| Error::Input(format!("record: {}: {e}", cmd.join(" "))))?;
    if let Err(e) = cap.start(&[root]) {
        sys::kill_group(root);
        let _ = sys::wait(root);
        return Err(Error::Fault(format!("record: tracefs: {e}")));
    }
    let t0 = sys::now();
    if let Err(e) = sys::open_gate(gate) {
        sys::kill_group(root);
        let _ = sys::wait(root);
        return Err(Error::Fault(format!("record: starting the command: {e}")));
    }
    let (status, cut) = wait(root, o, t0, &cap)?;
    let wall_ns = sys::now().saturating_sub(t0);
    let _ = cap.stop();
    // What the command left behind (children it did not wait for) goes
    // with it.
    sys::kill_group(root);
    let first_comm = cmd
        .first()
        .map(|c| c.rsplit('/').next().unwrap_or(c).to_string())
        .unwrap_or_default();
    finish(&cap, &[(root, root, first_comm)], t0, wall_ns, status, cut)
}

/// Reads the capture and makes the recording of `initial` threads (tid,
/// tgid, comm) and every task they started, on this machine.
fn finish(
    cap: &Capture,
    initial: &[(i32, i32, String)],
    t0: u64,
    wall_ns: u64,
    status: i32,
    cut: bool,
) -> Result<Recording, Error> {
    let (raw, lost_pages) = cap
        .read()
        .map_err(|e| Error::Fault(format!("record: reading the record: {e}")))?;
    let events = Events {
        raw: &raw,
        formats: &cap.formats,
        lost_pages,
        starter: Some(sys::gettid()),
    };
    let span = Span {
        t0,
        wall_ns,
        status,
        cut,
    };
    Ok(assemble(&events, &Machine::this(), initial, &span))
}

/// A record's events, wherever they were read.
pub struct Events<'a> {
    pub raw: &'a [crate::tracefs::Raw],
    pub formats: &'a BTreeMap<u16, crate::tracefs::Format>,
    /// Pages that said events were lost before them.
    pub lost_pages: u64,
    /// The thread that posted the start wakes (this process's, for a
    /// command it ran; none for a trace read from a file).
    pub starter: Option<i32>,
}

/// The machine a record was taken on.
pub struct Machine {
    pub ncpus: usize,
    /// The kernel's tick.
    pub hz: u32,
    /// Its shape, when known (placement and balance are compared on it).
    pub topology: Option<schedlab_topology::Topology>,
}

impl Machine {
    /// This machine: its online CPUs, its kernel's tick where it can be
    /// read (as `--topology sysfs` reads it; else the default), its shape.
    pub fn this() -> Machine {
        Machine {
            ncpus: ncpus(),
            hz: schedlab_topology::read::kernel_hz(std::path::Path::new("/"))
                .map_or(schedlab_topology::DEFAULT_HZ, |(hz, _)| hz),
            topology: schedlab_topology::read::from_sysfs(std::path::Path::new("/")).ok(),
        }
    }
}

/// When a recording began (the events' clock), how long it ran, how the
/// command ended and whether it was cut short.
pub struct Span {
    pub t0: u64,
    pub wall_ns: u64,
    pub status: i32,
    pub cut: bool,
}

/// The recording of `initial` threads (tid, tgid, comm) and every task
/// they started, from `ev`, taken on `m`.
pub fn assemble(
    ev: &Events,
    m: &Machine,
    initial: &[(i32, i32, String)],
    span: &Span,
) -> Recording {
    let (threads, life_raw) = threads_of(ev.raw, ev.formats, initial);
    let ours: BTreeMap<i32, (u32, String, i32)> = threads
        .iter()
        .map(|(id, t)| (t.tid, (id.0, t.name.clone(), t.tgid)))
        .collect();
    let t0 = span.t0;
    let rec = record::read(ev.raw, ev.formats, &ours, t0, ev.lost_pages, ev.starter);
    let by_tid: BTreeMap<i32, TaskId> = threads.iter().map(|(id, t)| (t.tid, *id)).collect();
    let life = Life {
        forks: life_raw
            .forks
            .iter()
            .filter_map(|&(at, p, c)| {
                Some((at.saturating_sub(t0), *by_tid.get(&p)?, *by_tid.get(&c)?))
            })
            .collect(),
        exits: life_raw
            .exits
            .iter()
            .filter_map(|&(at, t)| Some((at.saturating_sub(t0), *by_tid.get(&t)?)))
            .collect(),
    };
    let tids: std::collections::BTreeSet<i32> = threads.values().map(|t| t.tid).collect();
    let tick_ns = 1_000_000_000 / u64::from(m.hz.max(1));
    let evs = shadow::events(ev.raw, ev.formats);
    let ours = |tid| tids.contains(&tid);
    let mut shadow = shadow::Report::of(&evs, &ours, m.ncpus, tick_ns);
    // Placement needs the machine's shape (none: not compared).
    if let Some(topo) = &m.topology {
        let mut cfg = schedlab_sim::sched::fair::FairConfig::for_cpus(m.ncpus).with_hz(m.hz);
        cfg.features = schedlab_sim::sched::fair::FeatureSet::LINUX;
        let on_queue = shadow::on_queue_at_wakes(&evs, &ours, cfg);
        let (placement, balance) = shadow::balance::compare(&evs, &ours, topo, &on_queue);
        shadow.placement = Some(placement);
        shadow.balance = Some(balance);
    }
    let mut outside: BTreeMap<String, u64> = BTreeMap::new();
    for t in rec.threads.values().filter(|t| !t.ours) {
        *outside.entry(t.name.clone()).or_default() += 1;
    }
    Recording {
        status: span.status,
        wall_ns: span.wall_ns,
        cut: span.cut,
        threads,
        record: rec,
        life,
        outside,
        raw_events: ev.raw.len(),
        lost_pages: ev.lost_pages,
        shadow,
        topology: m.topology.clone(),
    }
}

/// Waits for the command, or kills its group at the duration, at
/// `max_events` held (both: cut short) or at Ctrl-C: its exit code, and
/// whether it was cut short.
fn wait(root: i32, o: &Options, t0: u64, cap: &Capture) -> Result<(i32, bool), Error> {
    let old = sys::catch_interrupts();
    let mut polls = 0u64;
    let out = loop {
        match sys::try_wait(root) {
            Ok(Some(code)) => break Ok((code, false)),
            Ok(None) => {}
            Err(e) => {
                break Err(Error::Fault(format!(
                    "record: waiting for the command: {e}"
                )))
            }
        }
        polls += 1;
        let late = o
            .duration_ns
            .is_some_and(|d| sys::now().saturating_sub(t0) >= d);
        // The buffers' stats every 10 ms: a read of each CPU's file.
        let full = o
            .max_events
            .is_some_and(|m| polls % 10 == 0 && cap.entries().is_ok_and(|(held, _)| held >= m));
        if late || full || sys::INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
            sys::kill_group(root);
            let code = sys::wait(root).map_err(|e| Error::Fault(format!("record: {e}")))?;
            break if late || full {
                Ok((code, true))
            } else {
                Err(Error::Interrupted)
            };
        }
        sys::sleep_ns(1_000_000);
    };
    sys::restore_interrupts(&old);
    sys::INTERRUPTED.store(false, std::sync::atomic::Ordering::SeqCst);
    out
}

/// Forks (raw times, parent tid, child tid) and exits (raw time, tid).
#[derive(Default)]
struct RawLife {
    forks: Vec<(u64, i32, i32)>,
    exits: Vec<(u64, i32)>,
}

/// The threads followed so far: in the order they started, their
/// processes and names, and their forks and exits.
struct Tree {
    order: Vec<i32>,
    tgid: BTreeMap<i32, i32>,
    comm: BTreeMap<i32, String>,
    life: RawLife,
}

impl Tree {
    /// `parent` started `pid` at `ts` (a thread of its process when
    /// `thread`): followed when the parent is and the child is new.
    fn start(&mut self, ts: u64, parent: i32, pid: i32, thread: bool, comm: String) {
        let Some(&ptg) = self.tgid.get(&parent) else {
            return;
        };
        if self.tgid.contains_key(&pid) {
            return;
        }
        self.tgid.insert(pid, if thread { ptg } else { pid });
        self.comm.insert(pid, comm);
        self.order.push(pid);
        self.life.forks.push((ts, parent, pid));
    }
}

/// The recorded threads: the `initial` ones (tid, tgid, comm) and every
/// task one of them started, in the order they were started, with their
/// processes and last names.
fn threads_of(
    raw: &[crate::tracefs::Raw],
    formats: &BTreeMap<u16, crate::tracefs::Format>,
    initial: &[(i32, i32, String)],
) -> (BTreeMap<TaskId, RecThread>, RawLife) {
    let mut t = Tree {
        order: initial.iter().map(|(t, _, _)| *t).collect(),
        tgid: initial.iter().map(|(t, g, _)| (*t, *g)).collect(),
        comm: initial.iter().map(|(t, _, c)| (*t, c.clone())).collect(),
        life: RawLife::default(),
    };
    // Per CPU in order, so all of one CPU's before the next: sorted by
    // time first (a child's first events may be on another CPU than its
    // parent's clone).
    let mut evs: Vec<&crate::tracefs::Raw> = raw.iter().collect();
    evs.sort_by_key(|e| e.ts);
    for e in evs {
        let Some(f) = formats.get(&e.id()) else {
            continue;
        };
        match f.name.as_str() {
            "task_newtask" => {
                let parent = e.int(f, "common_pid") as i32;
                let thread = e.int(f, "clone_flags") & CLONE_THREAD != 0;
                t.start(
                    e.ts,
                    parent,
                    e.int(f, "pid") as i32,
                    thread,
                    e.str(f, "comm"),
                );
            }
            // A fork without its task_newtask (perf sched record has none):
            // the child's process is unknown, taken as its own.
            "sched_process_fork" => {
                let (parent, pid) = (e.int(f, "parent_pid") as i32, e.int(f, "child_pid") as i32);
                t.start(e.ts, parent, pid, false, e.str(f, "child_comm"));
            }
            "sched_process_exit" => {
                let pid = e.int(f, "pid") as i32;
                if t.tgid.contains_key(&pid) {
                    t.life.exits.push((e.ts, pid));
                }
            }
            "sched_switch" => {
                for (p, c) in [("prev_pid", "prev_comm"), ("next_pid", "next_comm")] {
                    let pid = e.int(f, p) as i32;
                    if t.tgid.contains_key(&pid) {
                        t.comm.insert(pid, e.str(f, c));
                    }
                }
            }
            _ => {}
        }
    }
    let Tree {
        order,
        tgid,
        comm,
        life,
    } = t;
    let threads = order
        .iter()
        .enumerate()
        .map(|(i, &tid)| {
            let c = comm.get(&tid).cloned().unwrap_or_default();
            (
                TaskId(i as u32),
                RecThread {
                    tid,
                    tgid: tgid[&tid],
                    name: format!("{c}-{tid}"),
                    comm: c,
                },
            )
        })
        .collect();
    (threads, life)
}
