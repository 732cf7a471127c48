//! `schedlab import FILE`: a scheduler trace someone already has, made
//! into the recording `schedlab record` makes ([`crate::recording`]): the
//! same kernel record, replay and shadow, on the machine the trace came
//! from. No root is needed, nor the machine itself.
//!
//! The file's kind is told by its first bytes:
//!
//! * trace-cmd's `trace.dat` (versions 6 and 7): [`tracedat`], read by
//!   hand (no maintained crate reads it), with the event layouts the file
//!   carries;
//! * `perf.data` (`perf sched record`): [`perfdata`], read with the
//!   `linux-perf-data` crate; its tracing-data section is the same
//!   layouts, read by [`tracedat`]'s parsers;
//! * anything else is tried as a Perfetto trace: [`pftrace`] (our own
//!   `trace.pftrace` included).
//!
//! ## Which threads
//!
//! A trace of a whole machine holds every thread that ran. The recording
//! is of the threads `--pid` (a thread or a process id) and `--comm`
//! (a glob matched against every name a thread had in the trace) choose,
//! and of every task they started in it (`task_newtask`, or
//! `sched_process_fork` where the trace has no `task_newtask`, as `perf
//! sched record`'s); with neither, of every thread but the idle tasks. Each thread's process is its
//! `task_newtask`'s (a clone with `CLONE_THREAD` joins its parent's), or
//! the trace's process tree (Perfetto), else its own id. `--cpus` keeps
//! only the events of those CPUs.
//!
//! ## Pid reuse and equal times
//!
//! A pid the kernel gives again after its thread exited (SchedViz warns
//! of this) would make two threads one: a `task_newtask` of a pid whose
//! thread has exited (`sched_process_exit`, `sched_process_free`) starts a
//! new thread, and the events from there are the new one's: the `N`th
//! reuse of pid `P` is thread `N * 100000000 + P` (`comm-100000042` for
//! pid 42's first reuse). Each such reuse is counted in a note. Events of
//! equal time on different CPUs are ordered by CPU (every reader's events
//! are sorted once, by time then CPU, in [`read_bytes`]), as `record`
//! orders its own.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::recording::{self, Events, Machine, Recording, Span};
use crate::tracefs::{Format, Raw};
use crate::Error;

pub mod perfdata;
pub mod pftrace;
pub mod tracedat;

/// Which threads and CPUs to keep (module doc).
#[derive(Clone, Debug, Default)]
pub struct Select {
    pub pids: Vec<i32>,
    pub comms: Vec<String>,
    pub cpus: Option<BTreeSet<usize>>,
}

/// A trace read from a file, before threads are chosen.
pub struct Trace {
    /// `trace-cmd trace.dat v7`, `perf.data`, `Perfetto`.
    pub kind: String,
    pub raw: Vec<Raw>,
    pub formats: BTreeMap<u16, Format>,
    pub lost_pages: u64,
    pub ncpus: usize,
    /// Threads' processes the file names (tid to tgid).
    pub tgids: BTreeMap<i32, i32>,
    /// What was read and left out, in words.
    pub notes: Vec<String>,
}

/// Reads `path`, whichever kind of trace it is.
pub fn read(path: &Path) -> Result<Trace, Error> {
    let file = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| Error::Input(format!("{file}: {e}")))?;
    read_bytes(&bytes, &file).map_err(Error::Input)
}

/// Reads `bytes`, the trace file named `file`: its events in time order
/// (then CPU).
pub fn read_bytes(bytes: &[u8], file: &str) -> Result<Trace, String> {
    let mut t = read_any(bytes, file)?;
    if t.ncpus > schedlab_topology::MAX_CPUS {
        return Err(format!(
            "{file}: {} CPUs: more than {} are not read",
            t.ncpus,
            schedlab_topology::MAX_CPUS
        ));
    }
    t.raw.sort_by_key(|e| (e.ts, e.cpu));
    Ok(t)
}

fn read_any(bytes: &[u8], file: &str) -> Result<Trace, String> {
    if bytes.starts_with(tracedat::MAGIC) {
        return tracedat::read(bytes, file);
    }
    if bytes.starts_with(perfdata::MAGIC) {
        return perfdata::read(bytes, file);
    }
    if bytes.is_empty() {
        return Err(format!("{file}: an empty file"));
    }
    pftrace::read(bytes, file).map_err(|e| {
        format!("{e}; not trace-cmd's trace.dat nor perf.data either (their first bytes are \"\\x17\\x08Dtracing\" and \"PERFILE2\")")
    })
}

/// What one scan of the trace says of its threads.
#[derive(Default)]
struct Threads {
    /// By first appearance.
    order: Vec<i32>,
    names: BTreeMap<i32, BTreeSet<String>>,
    /// Started in the trace by this parent.
    parent: BTreeMap<i32, i32>,
}

impl Threads {
    fn saw(&mut self, tid: i32, comm: String) {
        if tid == 0 {
            return;
        }
        if !self.names.contains_key(&tid) {
            self.order.push(tid);
        }
        let n = self.names.entry(tid).or_default();
        if !comm.is_empty() {
            n.insert(comm);
        }
    }
}

/// The id the `n`th reuse of pid `pid` is read as: `n * 10^8 + pid`
/// (Linux's pids stay below 2^22), else the next id above 2^30.
fn reused_id(pid: i32, n: i32, spare: &mut i32) -> i32 {
    n.checked_mul(REUSE)
        .and_then(|x| x.checked_add(pid))
        .filter(|_| (0..REUSE).contains(&pid))
        .unwrap_or_else(|| {
            *spare += 1;
            *spare
        })
}

/// The step between a pid's reuses' ids.
const REUSE: i32 = 100_000_000;

/// Pid reuse (module doc): a thread started again under a pid whose
/// thread exited is read as another thread ([`reused_id`]) from there on.
/// The number of reuses.
fn split_reused(raw: &mut [Raw], formats: &BTreeMap<u16, Format>) -> u64 {
    let mut gone: BTreeSet<i32> = BTreeSet::new();
    let mut alias: BTreeMap<i32, i32> = BTreeMap::new();
    let mut times: BTreeMap<i32, i32> = BTreeMap::new();
    let mut spare = 1 << 30;
    let mut reuses = 0;
    let fields = ["pid", "prev_pid", "next_pid", "common_pid"];
    for e in raw.iter_mut() {
        let Some(f) = formats.get(&e.id()) else {
            continue;
        };
        // The pid as the kernel wrote it (its thread's exit makes the pid
        // free again; the thread's last events, as its final switch, still
        // name it until a new task takes it).
        if matches!(f.name.as_str(), "sched_process_exit" | "sched_process_free") {
            gone.insert(e.int(f, "pid") as i32);
        }
        if f.name == "task_newtask" {
            let pid = e.int(f, "pid") as i32;
            if gone.remove(&pid) {
                reuses += 1;
                let n = times.entry(pid).or_default();
                *n += 1;
                alias.insert(pid, reused_id(pid, *n, &mut spare));
            }
        }
        for name in fields {
            let Some(fl) = f.fields.get(name) else {
                continue;
            };
            if fl.size != 4 || fl.offset + 4 > e.payload.len() {
                continue;
            }
            let pid = e.int(f, name) as i32;
            if let Some(&a) = alias.get(&pid) {
                e.payload[fl.offset..fl.offset + 4].copy_from_slice(&a.to_le_bytes());
            }
        }
    }
    reuses
}

fn scan(raw: &[Raw], formats: &BTreeMap<u16, Format>) -> Threads {
    let mut t = Threads::default();
    for e in raw {
        let Some(f) = formats.get(&e.id()) else {
            continue;
        };
        match f.name.as_str() {
            "sched_switch" => {
                t.saw(e.int(f, "prev_pid") as i32, e.str(f, "prev_comm"));
                t.saw(e.int(f, "next_pid") as i32, e.str(f, "next_comm"));
            }
            "task_newtask" => {
                let (pid, parent) = (e.int(f, "pid") as i32, e.int(f, "common_pid") as i32);
                t.saw(parent, String::new());
                t.saw(pid, e.str(f, "comm"));
                t.parent.entry(pid).or_insert(parent);
            }
            "sched_process_fork" => {
                let (parent, pid) = (e.int(f, "parent_pid") as i32, e.int(f, "child_pid") as i32);
                t.saw(parent, e.str(f, "parent_comm"));
                t.saw(pid, e.str(f, "child_comm"));
                t.parent.entry(pid).or_insert(parent);
            }
            "sched_waking" | "sched_wakeup" | "sched_wakeup_new" | "sched_migrate_task"
            | "sched_process_exit" | "sched_process_free" => {
                t.saw(e.int(f, "pid") as i32, e.str(f, "comm"));
            }
            _ => {}
        }
    }
    t
}

/// The threads `sel` chooses (tid, tgid, comm), but those a chosen parent
/// started in the trace (they are its children, not threads of their own
/// at the start), by first appearance.
fn initial(t: &Threads, sel: &Select, tgids: &BTreeMap<i32, i32>) -> Vec<(i32, i32, String)> {
    let globs: Vec<wildmatch::WildMatch> = sel
        .comms
        .iter()
        .map(|g| wildmatch::WildMatch::new(g))
        .collect();
    let any = sel.pids.is_empty() && sel.comms.is_empty();
    let chosen = |tid: i32| -> bool {
        any || sel.pids.contains(&tid)
            || tgids.get(&tid).is_some_and(|g| sel.pids.contains(g))
            || t.names[&tid]
                .iter()
                .any(|n| globs.iter().any(|g| g.matches(n)))
    };
    t.order
        .iter()
        .copied()
        .filter(|&tid| chosen(tid) && !t.parent.get(&tid).is_some_and(|&p| chosen(p)))
        .map(|tid| {
            let comm = t.names[&tid].iter().next().cloned().unwrap_or_default();
            (tid, tgids.get(&tid).copied().unwrap_or(tid), comm)
        })
        .collect()
}

/// The recording of `trace`'s threads `sel` chooses, on `m`.
pub fn recording(
    mut trace: Trace,
    sel: &Select,
    m: &Machine,
) -> Result<(Recording, Vec<String>), Error> {
    if let Some(cpus) = &sel.cpus {
        trace.raw.retain(|e| cpus.contains(&e.cpu));
    }
    if trace.raw.is_empty() {
        return Err(Error::Input(
            "the trace holds no scheduler events (on the CPUs asked for)".into(),
        ));
    }
    let reuses = split_reused(&mut trace.raw, &trace.formats);
    if reuses > 0 {
        trace.notes.push(format!(
            "{reuses} pids given again after their thread exited: each reuse read as a new thread"
        ));
    }
    let initial = initial(&scan(&trace.raw, &trace.formats), sel, &trace.tgids);
    if initial.is_empty() {
        return Err(Error::Input(format!(
            "no thread of the trace matches --pid {:?} --comm {:?}",
            sel.pids, sel.comms
        )));
    }
    cpus_named_exist(&trace, m)?;
    times_plausible(&trace)?;
    let first = trace.raw.first().map_or(0, |e| e.ts);
    let last = trace.raw.last().map_or(0, |e| e.ts);
    let events = Events {
        raw: &trace.raw,
        formats: &trace.formats,
        lost_pages: trace.lost_pages,
        starter: None,
    };
    let span = Span {
        t0: first,
        wall_ns: last - first,
        status: 0,
        cut: false,
    };
    Ok((
        recording::assemble(&events, m, &initial, &span),
        trace.notes,
    ))
}

/// Every CPU an event names (where it was recorded, a wake's target, a
/// migration's ends) is one of the machine's: its topology's, else its
/// `ncpus`.
fn cpus_named_exist(trace: &Trace, m: &Machine) -> Result<(), Error> {
    let (ncpus, shape) = match &m.topology {
        Some(t) => (t.num_cpus(), format!("the topology {:?}", t.name())),
        None => (m.ncpus, "the machine".to_string()),
    };
    let first = trace.raw.first().map_or(0, |e| e.ts);
    for e in &trace.raw {
        let Some(f) = trace.formats.get(&e.id()) else {
            continue;
        };
        let named = ["target_cpu", "orig_cpu", "dest_cpu"]
            .into_iter()
            .filter(|n| f.fields.contains_key(*n))
            .map(|n| e.int(f, n));
        if let Some(cpu) = std::iter::once(e.cpu as i64)
            .chain(named)
            .find(|&c| c < 0 || c >= ncpus as i64)
        {
            return Err(Error::Input(format!(
                "a {} at {} ns names CPU {cpu}, which {shape} ({ncpus} CPUs) lacks: give the topology of the machine the trace came from (--topology), or the trace is corrupt",
                f.name,
                e.ts.saturating_sub(first)
            )));
        }
    }
    Ok(())
}

/// The longest quiet a trace may hold between two events, ns: a day. A
/// longer one is a corrupt time (a flipped bit of a timestamp makes one
/// event years late), which the shadow would charge tick by tick.
const MAX_GAP_NS: u64 = 86_400 * 1_000_000_000;

/// No two events in time order are more than [`MAX_GAP_NS`] apart.
fn times_plausible(trace: &Trace) -> Result<(), Error> {
    let first = trace.raw.first().map_or(0, |e| e.ts);
    for w in trace.raw.windows(2) {
        if w[1].ts - w[0].ts > MAX_GAP_NS {
            return Err(Error::Input(format!(
                "an event on CPU {} at {} ns comes {} s after the one before it: a corrupt timestamp",
                w[1].cpu,
                w[1].ts - first,
                (w[1].ts - w[0].ts) / 1_000_000_000
            )));
        }
    }
    Ok(())
}

/// A machine of `ncpus` CPUs, each a core of its own, in one LLC: the
/// shape a trace that names no topology is read on.
pub fn flat(ncpus: usize) -> schedlab_topology::Topology {
    use schedlab_topology::{CpuId, CpuSet};
    let cores: Vec<CpuSet> = (0..ncpus.max(1))
        .map(|c| CpuSet::single(CpuId::new(c)))
        .collect();
    let all = cores.iter().fold(CpuSet::new(), |a, b| a | *b);
    schedlab_topology::Topology::from_groups(&format!("flat-{ncpus}"), &cores, &[all], &[(0, all)])
        .expect("one LLC of single-CPU cores is a topology")
}
