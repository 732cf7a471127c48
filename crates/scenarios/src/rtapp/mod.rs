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

use schedlab_sim::{Figure, Op};
use schedlab_topology::read::{read_text, ReadError};
use schedlab_topology::Topology;
use serde_json::value::RawValue;

use crate::{Builder, Params, Scenario};

mod events;
mod json;
pub mod log;
mod tasks;

use events::UNIQUE;
use json::{strip_comments, workgen, Obj, Reader, Res};
use tasks::{read_tasks, Thread};

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
    let root: Obj = serde_json::from_str(&clean).map_err(|e| json_error(&e, file))?;
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
    let (global, tasks) = read_root(&mut r, &root)?;
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
    r.notes.extend(never_woken_notes(&s, file));
    s.notes = r.notes;
    Ok(s)
}

/// serde_json's error at its line and column, without its own "at line".
fn json_error(e: &serde_json::Error, file: &Path) -> ReadError {
    ReadError {
        file: file.to_path_buf(),
        line: Some(e.line()),
        column: Some(e.column()),
        message: e
            .to_string()
            .split(" at line")
            .next()
            .unwrap_or("")
            .to_string(),
    }
}

/// The file's top level: `global` and `resources` read, and the `tasks`
/// object returned to be read last, after them wherever the file puts
/// them.
fn read_root<'a>(r: &mut Reader<'a>, root: &Obj<'a>) -> Res<(Global, Obj<'a>)> {
    let mut global = Global::default();
    let mut tasks = None;
    for (k, v) in &root.0 {
        match k.as_str() {
            "global" => global = read_global(r, v)?,
            "tasks" => tasks = Some(r.obj(v)?),
            "resources" => read_resources(r, v)?,
            _ => {
                return Err(r.at(
                    v,
                    format!("unknown key {k:?}: expected tasks, global or resources"),
                ))
            }
        }
    }
    let tasks =
        tasks.ok_or_else(|| ReadError::whole(r.file, "expected a \"tasks\" object, found none"))?;
    Ok((global, tasks))
}

/// A warning per object that is waited on and that no event signals.
fn never_woken_notes(s: &Scenario, file: &Path) -> Vec<String> {
    let programs = s.spec.tasks.iter().map(|t| t.program.as_slice());
    crate::check::never_woken(programs.chain(s.spec.programs.values().map(Vec::as_slice)))
        .into_iter()
        .map(|w| {
            format!(
                "{}: warning: {w} is waited on and signalled by no event: each wait lasts for ever",
                file.display()
            )
        })
        .collect()
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
