//! rt-app's task section: each thread's keys, phases and scheduling
//! properties, read as rt-app's `parse_task_data()` and
//! `parse_thread_phase_data()` read them (the module doc of [`super`] has
//! the grammar and what is simplified).

use std::collections::BTreeMap;

use schedlab_sim::sched::TaskSpec;
use schedlab_sim::Op;
use schedlab_topology::read::ReadError;
use schedlab_topology::{CpuId, CpuSet, Topology};
use serde_json::value::RawValue;

use super::events::{event, stamp, EVENTS};
use super::json::{Obj, Reader, Res};
use super::log;
use super::Global;

/// One thread object, read.
pub(super) struct Thread {
    pub(super) name: String,
    pub(super) instances: u32,
    pub(super) spec: TaskSpec,
    pub(super) cpus: Option<CpuSet>,
    /// The program of one instance; `unique` timers are named per instance
    /// when the instances are made.
    pub(super) program: Vec<Op>,
    /// It loops for ever.
    pub(super) endless: bool,
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

/// The `tasks` object's threads, in the file's order, each barrier's
/// count set to its users' instances.
pub(super) fn read_tasks<'a>(
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
    let (ph, endless) = match phases {
        Some(p) => {
            for (k, v) in &obj.0 {
                if !read_property(r, k, v, &mut sched)? && !is_thread_key(k) {
                    return Err(r.at(v, format!("{k:?} in thread {name:?}: events go inside its phases when it has phases")));
                }
            }
            let n = thread_loop.unwrap_or(-1);
            let body = read_phases(r, &p, &sched, topo, names, name)?;
            (vec![Op::Loop { n: times(n), body }], n < 0)
        }
        None => {
            let (phase, own) = read_phase(r, &obj, None, names, name)?;
            sched = own;
            // A `loop` key loops the one phase; without one, the thread
            // loops for ever (parse_task_data()).
            let endless = thread_loop.is_none();
            let n = if endless { u64::MAX } else { 1 };
            (
                vec![Op::Loop {
                    n,
                    body: vec![phase],
                }],
                endless,
            )
        }
    };
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

/// A thread's `phases`, in order, each with the affinity rt-app sets at
/// it when any phase has its own cpus: the phase's, else the thread's
/// (`set_thread_affinity()`).
fn read_phases<'a>(
    r: &mut Reader<'a>,
    p: &Obj<'a>,
    sched: &Sched,
    topo: &Topology,
    names: &[&str],
    name: &str,
) -> Res<Vec<Op>> {
    let mut phases = Vec::new();
    for (_, pv) in &p.0 {
        let pobj = r.obj(pv)?;
        let (op, own) = read_phase(r, &pobj, Some(sched), names, name)?;
        phases.push((op, cpu_set(r, &own, topo)?));
    }
    let moves = phases.iter().any(|(_, c)| c.is_some());
    let thread_cpus = cpu_set(r, sched, topo)?.unwrap_or(*topo.cpus());
    let mut ph = Vec::new();
    for (op, cpus) in phases {
        if moves {
            let set = cpus.unwrap_or(thread_cpus);
            ph.push(Op::Affinity {
                cpus: set.iter().map(|c| c.index()).collect(),
            });
        }
        ph.push(op);
    }
    Ok(ph)
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
