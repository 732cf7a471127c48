//! rt-app's JSON workload files (`schedlab run FILE.json`), read as rt-app
//! reads them (scheduler-tools/rt-app: `doc/tutorial.txt`,
//! `src/rt-app_parse_config.c`, the events of `run_event()` in
//! `src/rt-app.c`), on the machine `--topology` names.
//!
//! ## What a file becomes
//!
//! * `tasks`: each key is a thread (`instance` copies of it: named `NAME`
//!   for one, `NAME-0`, `NAME-1`, ... for several; `instance: 0` only
//!   defines it, for `fork`). Its program is its `delay` (µs), then its
//!   phases (`phases`, in file order, each repeated its `loop`, default 1)
//!   repeated the thread's `loop` (default -1: until the run ends). A thread
//!   with no `phases` is one phase; then a `loop` key makes the thread run
//!   it once, that many times (`parse_task_data()`).
//! * events, in the order the file lists them; a key is an event by its
//!   prefix, as rt-app's `obj_is_event()` matches it (`run0`, `sleep1`):
//!   - `run` (µs): work at the simulated CPU's speed, slowed by a busy SMT
//!     sibling (rt-app's calibrated loop); `runtime` (µs): work until that
//!     much wall time passed since the event began, in 32 µs pieces;
//!   - `sleep` (µs); `timer` `{ref, period, mode}`: a timer shared by every
//!     thread naming `ref` (a `ref` starting with `unique`: one per thread),
//!     whose next expiry moves on by `period` at each use; a missed expiry
//!     restarts it from now, unless `mode` is `absolute`;
//!   - `lock`/`unlock` (a mutex); `wait` `{ref, mutex}` (`pthread_cond_wait`
//!     on `ref` releasing `mutex`), `signal`, `broad`, `sync` (signal then
//!     wait); `suspend` and `resume` NAME: a wait for, and a broadcast to,
//!     the condition named NAME under the mutex named NAME, as rt-app's
//!     `run_event()` does them. NAME names a resource, not a thread
//!     (`parse_task_event_data()` makes a condition and a mutex of that
//!     name): threads `BrowserSub1` and `BrowserSub2` may both suspend on
//!     `BrowserSub`;
//!   - `barrier` NAME: every reference to NAME in the file, times the
//!     referencing thread's instances, is one arrival the barrier waits for
//!     (rt-app counts its users so); the last arrival wakes the others;
//!   - `yield`; `fork` NAME: starts a thread running task NAME's program;
//!   - `mem` and `iorun` (bytes): run time at [`MEM_BYTES_PER_NS`], noted.
//!
//!   Every event that wakes a thread (`signal`, `broad`, `sync`, `resume`,
//!   `unlock` handing the mutex on, a barrier's last arrival) posts that wake
//!   from the thread that ran the event: the scheduler sees who woke whom.
//! * `policy` (`default_policy`): SCHED_OTHER with `priority` as nice
//!   (default 0, -20..19); SCHED_FIFO and SCHED_RR with `priority` as the RT
//!   priority (default 10, 1..99; RR runs as FIFO: no round-robin quantum);
//!   SCHED_DEADLINE and SCHED_IDLE are errors. `cpus` is the affinity; a
//!   thread starts on one of its CPUs drawn from the run's seed.
//! * `global.duration` (s) is the run's length; -1 (the default) runs until
//!   every thread ends, or for `run_ms` (1000 by default) when one loops
//!   for ever. `calibration` is noted: `run` is already work at the
//!   simulated CPU's speed. Logging keys are ignored.
//!
//! ## Simplified, and said so in the run's notes
//!
//! * `policy` and `priority` may not change inside `phases` (the simulated
//!   task's class is fixed): an error if they differ from the thread's.
//!   `cpus` may: when any phase names them, each phase begins by setting
//!   the thread's affinity to its own `cpus`, else the thread's, else every
//!   CPU, as rt-app's `set_thread_affinity()` does at each phase.
//! * rt-app's main creates its threads one after another, and they meet at
//!   its `threads_barrier` before their first loop (`main()`,
//!   `thread_body()`); so do ours: the k-th thread of the file begins k
//!   thread creations (`spawn_ns` of the scenario's cost model as built,
//!   not of a later `--costs`) after the first, and the last to arrive
//!   wakes the rest, who start a wake's latency after it. That is what
//!   keeps two threads of equal work from ending at the same nanosecond, as
//!   on a real machine (`tutorial/example4.json`: each resumes the other,
//!   and a resume that finds its target still running is lost).
//! * A forked thread runs with the forking thread's class and affinity.
//! * A timer's first period starts at its first use, not at the thread's
//!   start (rt-app's `t_first`): the first activation is late by the work
//!   before the first `timer` event, once.
//! * `taskgroup` is ignored with a warning; `util_min`, `util_max` and
//!   `nodes_membind` with a note; `pi_enabled` with a note (no priority
//!   inheritance).
//!
//! ## rt-app's log
//!
//! Each loop of a phase is stamped where rt-app takes its times (its start
//! and end, around each `run`/`runtime`, and each `timer`'s use, expiry and
//! wake), so a run, simulated or real, yields rt-app's per-thread log:
//! [`log`] says how each column is derived.
//!
//! rt-app's JSON may carry C comments and trailing commas (json-c reads
//! both); they are blanked before parsing, so every error still names the
//! file's own line and column. Files written for rt-app's `workgen` script
//! (`video-*.json`, `mp3-*.json`) get its two rewrites first, each noted:
//! a bare `"suspend"` takes its thread's name, and a key repeated in one
//! object is numbered (`json::workgen`). The legacy `resources` section is read for
//! what it changes (a `signal` resource's `target` condition). An unknown
//! `global` key is noted (rt-app ignores it); any other unknown key is an
//! error naming it, never skipped.

use std::collections::BTreeMap;
use std::path::Path;

use schedlab_sim::sched::TaskSpec;
use schedlab_sim::{Figure, Op};
use schedlab_topology::read::{read_text, ReadError};
use schedlab_topology::{CpuId, CpuSet, Topology};
use serde_json::value::RawValue;

use crate::{Builder, Params, Scenario};

mod events;
mod json;
pub mod log;

use events::{event, stamp, EVENTS, UNIQUE};
use json::{strip_comments, workgen, Obj, Reader, Res};

/// Bytes per ns `mem` and `iorun` are charged at: 10 GB/s, an estimate of
/// one core's `memset` bandwidth to a buffer of rt-app's default size.
pub const MEM_BYTES_PER_NS: u64 = 10;

/// Keys rt-app's `global` takes that only steer its logging.
const LOGGING: &[&str] = &[
    "logdir",
    "log_basename",
    "log_size",
    "ftrace",
    "gnuplot",
    "lock_pages",
    "io_device",
    "mem_buffer_size",
    "cumulative_slack",
    "spacing",
];

/// The barrier rt-app's threads meet at before they start
/// (`threads_barrier`), named apart from any of a file's.
pub const START_BARRIER: &str = "rt-app's threads_barrier";

/// Loads an rt-app file onto `topology`; `params` are the common ones.
pub fn load(path: &Path, topology: Topology, params: Params) -> Result<Scenario, ReadError> {
    load_str(&read_text(path)?, path, topology, params)
}

/// Loads rt-app JSON from `text`; `file` names it in errors.
pub fn load_str(
    text: &str,
    file: &Path,
    topology: Topology,
    mut params: Params,
) -> Result<Scenario, ReadError> {
    let whole = |message: String| ReadError::whole(file, message);
    let stripped = strip_comments(text).map_err(whole)?;
    let (clean, rewrites) = workgen(&stripped);
    let root: Obj = serde_json::from_str(&clean).map_err(|e| ReadError {
        file: file.to_path_buf(),
        line: Some(e.line()),
        column: Some(e.column()),
        message: e
            .to_string()
            .split(" at line")
            .next()
            .unwrap_or("")
            .to_string(),
    })?;
    let mut r = Reader {
        text: &clean,
        file,
        notes: Vec::new(),
        targets: BTreeMap::new(),
        held: Default::default(),
    };
    for (at, what) in rewrites {
        // The offset is the file's, before the rewrites.
        let (line, column) = schedlab_topology::read::line_column(&stripped, at);
        let e = ReadError {
            file: file.to_path_buf(),
            line: Some(line),
            column: Some(column),
            message: format!("workgen's rewrite: {what}"),
        };
        r.notes.push(e.to_string());
    }
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "rt-app".into());
    let mut b = Builder::new(&stem, topology);
    let mut global = Global::default();
    let mut tasks = None;
    // The `tasks` object is read last, after `global` and `resources`
    // wherever the file puts them.
    for (k, v) in &root.0 {
        match k.as_str() {
            "global" => global = read_global(&mut r, v)?,
            "tasks" => tasks = Some(r.obj(v)?),
            "resources" => read_resources(&mut r, v)?,
            _ => {
                return Err(r.at(
                    v,
                    format!("unknown key {k:?}: expected tasks, global or resources"),
                ))
            }
        }
    }
    let tasks = tasks.ok_or_else(|| whole("expected a \"tasks\" object, found none".into()))?;
    let threads = read_tasks(&mut r, &tasks, &global, b.topology())?;
    let endless = build(&mut b, threads);
    match global.duration_s {
        Some(s) => {
            b.run_ns(s.saturating_mul(1_000_000_000));
        }
        None if endless => r.notes.push(format!(
            "{}: duration -1 and a thread loops for ever: the run stops at run_ms",
            file.display()
        )),
        None => {
            b.run_ns(3_600_000_000_000);
        }
    }
    b.figure("migrations", Figure::Migrations { tasks: vec![] });
    b.figure(
        "moves",
        Figure::Moves {
            tasks: vec![],
            reasons: vec![],
            while_running: vec![],
        },
    );
    b.common(&mut params).map_err(|e| whole(e.0))?;
    let used = params.finish(&stem).map_err(|e| whole(e.0))?;
    let mut s = b.build(used);
    let programs = s.spec.tasks.iter().map(|t| t.program.as_slice());
    for w in crate::check::never_woken(programs.chain(s.spec.programs.values().map(Vec::as_slice)))
    {
        r.notes.push(format!(
            "{}: warning: {w} is waited on and signalled by no event: each wait lasts for ever",
            file.display()
        ));
    }
    s.notes = r.notes;
    Ok(s)
}

/// The file as rt-app itself should run it beside a simulation: comments
/// and trailing commas gone, and in `global` the logs sent to `logdir`
/// under `basename`, `duration` set to `duration_s` (a file that loops for
/// ever with duration -1 would never end), `calibration` to `ns_per_loop`
/// when given (rt-app then skips its own, which takes seconds), and rt-app's
/// ftrace markers and gnuplot files off. Everything else is the file's, in
/// its order.
pub fn for_rtapp(
    text: &str,
    file: &Path,
    logdir: &Path,
    basename: &str,
    duration_s: u64,
    ns_per_loop: Option<u64>,
) -> Result<String, ReadError> {
    let whole = |message: String| ReadError::whole(file, message);
    let (clean, _) = workgen(&strip_comments(text).map_err(whole)?);
    let mut root: serde_json::Value =
        serde_json::from_str(&clean).map_err(|e| whole(e.to_string()))?;
    let obj = root
        .as_object_mut()
        .ok_or_else(|| whole("expected an object".into()))?;
    let g = obj.entry("global").or_insert_with(|| serde_json::json!({}));
    let g = g
        .as_object_mut()
        .ok_or_else(|| whole("global: expected an object".into()))?;
    g.insert("logdir".into(), logdir.display().to_string().into());
    g.insert("log_basename".into(), basename.into());
    g.insert("duration".into(), duration_s.into());
    g.insert("ftrace".into(), false.into());
    g.insert("gnuplot".into(), false.into());
    if let Some(n) = ns_per_loop {
        g.insert("calibration".into(), n.into());
    }
    Ok(serde_json::to_string_pretty(&root).expect("plain data"))
}

/// What `global` says that the run uses.
#[derive(Default)]
struct Global {
    /// `None`: -1, until every thread ends.
    duration_s: Option<u64>,
    default_policy: Option<String>,
}

fn read_global<'a>(r: &mut Reader<'a>, v: &'a RawValue) -> Res<Global> {
    let mut g = Global::default();
    for (k, v) in r.obj(v)?.0 {
        match k.as_str() {
            "duration" => {
                let d = r.int(v)?;
                g.duration_s = match d {
                    -1 => None,
                    d if d > 0 => Some(d as u64),
                    d => return Err(r.at(v, format!("expected -1 or a duration in s, found {d}"))),
                };
            }
            "default_policy" => g.default_policy = Some(r.string(v)?),
            "calibration" => r.note(
                v,
                "calibration: ignored; a run event is work at the simulated CPU's speed",
            ),
            "pi_enabled" => {
                if r.parse::<bool>(v, "true or false")? {
                    r.note(v, "pi_enabled: no priority inheritance is modelled");
                }
            }
            k if LOGGING.contains(&k) => {}
            // rt-app ignores a global key it does not know; say so.
            _ => r.note(
                v,
                &format!("global key {k:?}: unknown to rt-app's current grammar, ignored"),
            ),
        }
    }
    Ok(g)
}

/// The legacy `resources` section: every resource is made as events name
/// it, but a `signal`/`broadcast` resource's `target` is the condition its
/// events wake (rt-app's `init_signal_resource()`).
fn read_resources<'a>(r: &mut Reader<'a>, v: &'a RawValue) -> Res<()> {
    if r.int(v).is_ok() {
        r.note(v, "resources: a count of mutexes, made as events name them");
        return Ok(());
    }
    for (name, rv) in r.obj(v)?.0 {
        let mut target = None;
        for (k, x) in r.obj(rv)?.0 {
            match k.as_str() {
                "type" => {
                    let t = r.string(x)?;
                    let known = [
                        "mutex",
                        "wait",
                        "signal",
                        "broadcast",
                        "sync",
                        "sleep",
                        "run",
                        "timer",
                        "barrier",
                    ];
                    if !known.contains(&t.as_str()) {
                        return Err(r.at(
                            x,
                            format!(
                                "unknown resource type {t:?}: expected one of {}",
                                known.join(", ")
                            ),
                        ));
                    }
                }
                "target" => target = Some(r.string(x)?),
                _ => return Err(r.at(x, format!("unknown key {k:?}: expected type or target"))),
            }
        }
        if let Some(t) = target {
            r.targets.insert(name, t);
        }
    }
    Ok(())
}

/// One thread object, read.
struct Thread {
    name: String,
    instances: u32,
    spec: TaskSpec,
    cpus: Option<CpuSet>,
    /// The program of one instance; `unique` timers are named per instance
    /// when the instances are made.
    program: Vec<Op>,
    /// It loops for ever.
    endless: bool,
}

/// The scheduling properties of a thread or a phase.
#[derive(Default, Clone, PartialEq)]
struct Sched {
    policy: Option<String>,
    priority: Option<i64>,
    cpus: Option<Vec<usize>>,
    /// Where `cpus` is in the file, for its errors.
    cpus_at: usize,
}

fn read_tasks<'a>(
    r: &mut Reader<'a>,
    tasks: &Obj<'a>,
    g: &Global,
    topo: &Topology,
) -> Res<Vec<Thread>> {
    let names: Vec<&str> = tasks.0.iter().map(|(k, _)| k.as_str()).collect();
    let mut out = Vec::new();
    for (name, v) in &tasks.0 {
        let t = read_thread(r, name, v, g, topo, &names)?;
        out.push(t);
    }
    // Barriers wait for every reference times its thread's instances.
    let mut users: BTreeMap<String, u32> = BTreeMap::new();
    for t in &out {
        count_barriers(&t.program, t.instances, &mut users);
    }
    for t in &mut out {
        set_barriers(&mut t.program, &users);
    }
    Ok(out)
}

fn count_barriers(ops: &[Op], instances: u32, users: &mut BTreeMap<String, u32>) {
    crate::check::for_each_op(ops, &mut |op| {
        if let Op::Barrier { barrier, .. } = op {
            *users.entry(barrier.clone()).or_default() += instances;
        }
    });
}

fn set_barriers(ops: &mut [Op], users: &BTreeMap<String, u32>) {
    for op in ops {
        match op {
            Op::Barrier { barrier, n } => *n = users.get(barrier).copied().unwrap_or(1),
            Op::Loop { body, .. } => set_barriers(body, users),
            _ => {}
        }
    }
}

/// A loop count: -1 (or any negative) is for ever.
fn times(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

fn read_thread<'a>(
    r: &mut Reader<'a>,
    name: &str,
    v: &'a RawValue,
    g: &Global,
    topo: &Topology,
    names: &[&str],
) -> Res<Thread> {
    let obj = r.obj(v)?;
    r.held.clear();
    let mut sched = Sched::default();
    let (mut instances, mut delay, mut thread_loop) = (1u32, 0u64, None);
    let mut phases = None;
    for (k, v) in &obj.0 {
        match k.as_str() {
            "instance" => {
                let n = r.int(v)?;
                instances = u32::try_from(n)
                    .ok()
                    .filter(|&n| n <= 4096)
                    .ok_or_else(|| r.at(v, format!("expected 0 to 4096 instances, found {n}")))?;
            }
            "delay" => delay = r.us(v)?,
            "loop" => thread_loop = Some(r.int(v)?),
            "phases" => phases = Some(r.obj(v)?),
            _ => {}
        }
    }
    let mut ph = Vec::new();
    let endless;
    match phases {
        Some(p) => {
            for (k, v) in &obj.0 {
                if !read_property(r, k, v, &mut sched)? && !is_thread_key(k) {
                    return Err(r.at(v, format!("{k:?} in thread {name:?}: events go inside its phases when it has phases")));
                }
            }
            let mut phases = Vec::new();
            for (_, pv) in &p.0 {
                let pobj = r.obj(pv)?;
                let (op, own) = read_phase(r, &pobj, Some(&sched), names, name)?;
                phases.push((op, cpu_set(r, &own, topo)?));
            }
            // rt-app sets a thread's affinity at each phase: the phase's
            // cpus, else the thread's (set_thread_affinity()).
            let moves = phases.iter().any(|(_, c)| c.is_some());
            let thread_cpus = cpu_set(r, &sched, topo)?.unwrap_or(*topo.cpus());
            for (op, cpus) in phases {
                if moves {
                    let set = cpus.unwrap_or(thread_cpus);
                    ph.push(Op::Affinity {
                        cpus: set.iter().map(|c| c.index()).collect(),
                    });
                }
                ph.push(op);
            }
            let n = thread_loop.unwrap_or(-1);
            endless = n < 0;
            ph = vec![Op::Loop {
                n: times(n),
                body: ph,
            }];
        }
        None => {
            let (phase, own) = read_phase(r, &obj, None, names, name)?;
            sched = own;
            // A `loop` key loops the one phase; without one, the thread
            // loops for ever (parse_task_data()).
            endless = thread_loop.is_none();
            ph = vec![Op::Loop {
                n: if endless { u64::MAX } else { 1 },
                body: vec![phase],
            }];
        }
    }
    let (spec, cpus) = class(r, v, &sched, g, topo)?;
    let mut program = Vec::new();
    if delay > 0 {
        program.push(Op::Sleep(delay));
    }
    program.extend(ph);
    Ok(Thread {
        name: name.to_string(),
        instances,
        spec,
        cpus,
        program,
        endless,
    })
}

fn is_thread_key(k: &str) -> bool {
    matches!(k, "instance" | "delay" | "loop" | "phases")
}

/// Reads a scheduling or ignored property into `s`: `true` if `k` is one.
fn read_property<'a>(r: &mut Reader<'a>, k: &str, v: &'a RawValue, s: &mut Sched) -> Res<bool> {
    match k {
        "policy" => s.policy = Some(r.string(v)?),
        "priority" => s.priority = Some(r.int(v)?),
        "cpus" => {
            s.cpus = Some(r.parse(v, "an array of CPU numbers")?);
            s.cpus_at = r.offset(v);
        }
        "taskgroup" => r.note(v, "warning: taskgroup ignored (no cgroups are modelled)"),
        "util_min" | "util_max" | "nodes_membind" | "membind_nodes" => {
            r.note(v, &format!("{k}: ignored (not modelled)"))
        }
        // Only SCHED_DEADLINE reads them (and the legacy `period`,
        // `deadline`), and it is refused.
        "dl-runtime" | "dl-period" | "dl-deadline" | "period" | "deadline" => {}
        _ => return Ok(false),
    }
    Ok(true)
}

/// A phase: its events in order, repeated its `loop`, and its scheduling
/// properties. `thread` is the thread's scheduling, which a phase may
/// repeat but not change (`None`: the thread is its one phase).
fn read_phase<'a>(
    r: &mut Reader<'a>,
    obj: &Obj<'a>,
    thread: Option<&Sched>,
    names: &[&str],
    me: &str,
) -> Res<(Op, Sched)> {
    let mut body = Vec::new();
    let mut n = 1i64;
    let mut own = Sched::default();
    for (k, v) in &obj.0 {
        if let Some(ev) = EVENTS.iter().find(|e| k.starts_with(**e)) {
            event(r, ev, v, names, me, &mut body)?;
        } else if k == "loop" {
            n = r.int(v)?;
        } else if read_property(r, k, v, &mut own)? {
            if let Some(t) = thread {
                let differs = (own.policy.is_some() && own.policy != t.policy)
                    || (own.priority.is_some() && own.priority != t.priority);
                if differs {
                    return Err(r.at(v, format!("{k} in a phase, unlike its thread's: a simulated thread's class is fixed (its affinity may change by phase)")));
                }
            }
        } else if matches!(k.as_str(), "exec" | "lock_order" | "resources") {
            return Err(r.at(
                v,
                format!("{k:?}: rt-app's first grammar (exec, period, lock_order, resources per thread) is not read; write the thread as events (run, sleep, lock, wait, signal, ...)"),
            ));
        } else if thread.is_some() || !is_thread_key(k) {
            return Err(r.at(
                v,
                format!(
                    "unknown key {k:?}: expected an event ({}) or loop, cpus, policy, priority",
                    EVENTS.join(", ")
                ),
            ));
        }
    }
    if body.is_empty() {
        let first = obj.0.first().map(|(_, v)| *v);
        let msg = "expected at least one event in a phase, found none".to_string();
        return Err(match first {
            Some(v) => r.at(v, msg),
            None => ReadError {
                file: r.file.to_path_buf(),
                line: None,
                column: None,
                message: format!("thread {me:?}: {msg}"),
            },
        });
    }
    // rt-app's log: a stamp at the loop's start naming what it
    // configures, and one at its end.
    let (mut c_duration, mut c_period) = (0, 0);
    for w in body.windows(2) {
        match (&w[0], &w[1]) {
            (Op::Stamp { metric }, Op::Run(ns) | Op::RunFor(ns)) if metric == log::RUN => {
                c_duration += ns / 1000
            }
            (_, Op::Timer { period, .. }) => c_period += period / 1000,
            _ => {}
        }
    }
    body.insert(0, stamp(&log::start(c_duration, c_period)));
    body.push(stamp(log::END));
    Ok((Op::Loop { n: times(n), body }, own))
}

/// The thread's class and affinity, from its own keys and the global
/// default policy.
fn class<'a>(
    r: &Reader<'a>,
    v: &'a RawValue,
    s: &Sched,
    g: &Global,
    topo: &Topology,
) -> Res<(TaskSpec, Option<CpuSet>)> {
    let policy = s
        .policy
        .clone()
        .or_else(|| g.default_policy.clone())
        .unwrap_or_else(|| "SCHED_OTHER".into());
    let spec = match policy.as_str() {
        "SCHED_OTHER" => {
            let nice = s.priority.unwrap_or(0);
            if !(-20..=19).contains(&nice) {
                return Err(r.at(
                    v,
                    format!("expected a SCHED_OTHER priority (nice) in -20..19, found {nice}"),
                ));
            }
            TaskSpec::fair(nice as i8)
        }
        "SCHED_FIFO" | "SCHED_RR" => {
            let p = s.priority.unwrap_or(10);
            if !(1..=99).contains(&p) {
                return Err(r.at(v, format!("expected an RT priority in 1..99, found {p}")));
            }
            TaskSpec::rt(p as u8)
        }
        "SCHED_DEADLINE" | "SCHED_IDLE" => {
            return Err(r.at(
                v,
                format!("{policy}: not modelled (SCHED_OTHER, SCHED_FIFO and SCHED_RR are)"),
            ))
        }
        p => {
            return Err(r.at(
                v,
                format!("unknown policy {p:?}: expected SCHED_OTHER, SCHED_FIFO or SCHED_RR"),
            ))
        }
    };
    let cpus = cpu_set(r, s, topo)?;
    Ok((spec, cpus))
}

/// The CPU set `s.cpus` names on `topo`, checked (`None`: none named).
fn cpu_set(r: &Reader, s: &Sched, topo: &Topology) -> Res<Option<CpuSet>> {
    let n = topo.num_cpus();
    let Some(list) = &s.cpus else {
        return Ok(None);
    };
    let mut set = CpuSet::new();
    for &c in list {
        if c >= n {
            return Err(r.at_offset(
                s.cpus_at,
                format!(
                    "cpus: expected CPUs below {n} on {}, found {c}",
                    topo.name()
                ),
            ));
        }
        set.insert(CpuId::new(c));
    }
    if set.is_empty() {
        return Err(r.at_offset(
            s.cpus_at,
            "cpus: expected at least one CPU, found []".into(),
        ));
    }
    Ok(Some(set))
}

/// Puts every thread's instances into `b`; `true` when one loops for ever.
fn build(b: &mut Builder, threads: Vec<Thread>) -> bool {
    let all = *b.topology().cpus();
    let mut endless = false;
    for t in &threads {
        b.program(&t.name, per_instance(&t.program, &t.name));
    }
    // rt-app's main creates its threads one after another (main():
    // create_thread() in a loop), and they meet at `threads_barrier` before
    // their first loop (thread_body(); forked threads skip it): the k-th
    // begins k thread creations (the cost model's `spawn_ns`) after the
    // first, and the last to arrive wakes the others, who start a wake's
    // latency after it.
    let started: u32 = threads.iter().map(|t| t.instances).sum();
    let spawn_ns = b.spec.cost.spawn_ns;
    let mut k = 0u64;
    let mut start = |program: Vec<Op>| -> Vec<Op> {
        if started < 2 {
            return program;
        }
        let mut p = Vec::new();
        if k > 0 {
            p.push(Op::Sleep(k * spawn_ns));
        }
        k += 1;
        p.push(Op::Barrier {
            barrier: START_BARRIER.into(),
            n: started,
        });
        p.extend(program);
        p
    };
    for t in threads {
        for i in 0..t.instances {
            let name = if t.instances == 1 {
                t.name.clone()
            } else {
                format!("{}-{i}", t.name)
            };
            let set = t.cpus.unwrap_or(all);
            let first = set.iter().next().map_or(0, |c| c.index());
            let program = start(per_instance(&t.program, &name));
            // rt-app is one process: its threads are one process's.
            b.task(&name, first, t.cpus, t.spec, program)
                .start_in(set)
                .in_process("rt-app");
            endless |= t.endless;
        }
    }
    endless
}

/// The program with its `unique` timers named for `who`.
fn per_instance(ops: &[Op], who: &str) -> Vec<Op> {
    ops.iter()
        .map(|op| match op {
            Op::Timer {
                timer,
                period,
                absolute,
                stamp,
            } if timer.starts_with(UNIQUE) => Op::Timer {
                timer: format!("{who}/{}", &timer[UNIQUE.len()..]),
                period: *period,
                absolute: *absolute,
                stamp: stamp.clone(),
            },
            Op::Loop { n, body } => Op::Loop {
                n: *n,
                body: per_instance(body, who),
            },
            op => op.clone(),
        })
        .collect()
}
