//! A run's event log (the simulator's, or the kernel's record in the
//! simulator's terms: `schedlab_sim::events`) as a Perfetto trace:
//! protobuf, the messages in [`perfetto`], encoded by `prost`.
//!
//! What the `.pftrace` holds, so that ui.perfetto.dev ("Open trace file")
//! shows a CPU timeline:
//!
//! * per CPU, ftrace `sched_switch` and `sched_waking` events (pid 0 is the
//!   idle task; a task's pid is its id + 1, its comm its name; priority 120,
//!   the kernel's for nice 0, for every task), and an `ipi_raise` for every
//!   kick the CPU sends (reason `Rescheduling interrupts`, `Function call
//!   interrupts` for a mailbox kick, or `Wake from idle`, then ` cpuN`;
//!   Perfetto's `target_cpus` is a 32-bit mask, so it is empty past cpu31
//!   and the reason's ` cpuN` names the target on every machine);
//! * a process tree: one process (pid 1_000_000, the scenario's name) whose
//!   threads are the tasks;
//! * track descriptors for that process and each thread, and counter tracks:
//!   `runq cpuN` (running + waiting tasks on a CPU), `streak <task>` (its
//!   waker-streak run after each counted wake) and `llcN warm bytes` (what
//!   the LLC holds warm after each cold start there);
//! * an instant on the task's thread track for every placement decision:
//!   `place <reason>`, with the deciding CPU, from and to as annotations;
//! * who woke whom: each `sched_waking` carries the waking thread's pid in
//!   the event's `pid` (0 for an interrupt, the scheduler's own wakes and a
//!   leaving thread, as in Linux), and each wake a thread posted that found
//!   its task parked is a flow, from a `wake <task>` instant on the waker's
//!   track to a `run` instant on the wakee's when it next switches in: the
//!   arrows the UI draws are the edges a wake placement rule acts on.

use std::collections::{BTreeMap, BTreeSet};

use prost::Message;
use schedlab_sim::{Event, EventKind, Outcome, PrevState};

pub mod perfetto;

use perfetto::{
    CounterDescriptor, Data, DebugAnnotation, Ftrace, FtraceEvent, FtraceEventBundle,
    IpiRaiseFtraceEvent, Process, ProcessDescriptor, ProcessTree, SchedMigrateTaskFtraceEvent,
    SchedSwitchFtraceEvent, SchedWakingFtraceEvent, Thread, ThreadDescriptor, Trace, TracePacket,
    TrackDescriptor, TrackEvent, Type, SEQ_INCREMENTAL_STATE_CLEARED,
};

/// The reason of a placement that is the kernel's own migration (a
/// `sched_migrate_task` in a kernel record): written as that event.
pub const KERNEL_MIGRATION: &str = "sched_migrate_task";

/// The pid the trace gives the process the tasks belong to.
pub const PROCESS_PID: i32 = 1_000_000;
/// Every track event comes on this packet sequence.
const SEQ: u32 = 1;
/// Linux's priority of a nice-0 task.
const PRIO: i32 = 120;

/// `prev_state` as ftrace writes it: 0 runnable (R), 1 sleeping (S),
/// 0x10 dead (X, EXIT_DEAD).
pub fn prev_state_bits(s: PrevState) -> i64 {
    match s {
        PrevState::Runnable => 0,
        PrevState::Blocked => 1,
        PrevState::Exited => 0x10,
    }
}

/// An `ipi_raise` reason: Linux's for a resched or function-call IPI, ours
/// for a wake from idle, and the target CPU.
pub fn ipi_reason(resched: bool, idle: bool, target: usize) -> String {
    let what = match (idle, resched) {
        (true, _) => "Wake from idle",
        (false, true) => "Rescheduling interrupts",
        (false, false) => "Function call interrupts",
    };
    format!("{what} cpu{target}")
}

fn packet(ts: u64, data: Data) -> TracePacket {
    TracePacket {
        timestamp: Some(ts),
        data: Some(data),
        ..TracePacket::default()
    }
}

fn track_packet(ts: u64, data: Data, first: &mut bool) -> TracePacket {
    TracePacket {
        trusted_packet_sequence_id: Some(SEQ),
        sequence_flags: std::mem::take(first).then_some(SEQ_INCREMENTAL_STATE_CLEARED),
        ..packet(ts, data)
    }
}

fn annotation(name: &str, v: i64) -> DebugAnnotation {
    DebugAnnotation {
        name: Some(name.into()),
        int_value: Some(v),
    }
}

/// A track event of `kind` on `track`.
fn track_event(kind: Type, track: u64) -> TrackEvent {
    TrackEvent {
        r#type: Some(kind as i32),
        track_uuid: Some(track),
        ..TrackEvent::default()
    }
}

/// Who the trace's threads are: per task id, its thread id, process id
/// and name; per process id, its name. A simulated run's tasks are one
/// process's threads (pid `id + 1`); a real run's are the kernel's own.
pub struct Who {
    pub threads: BTreeMap<u32, (i32, i32, String)>,
    pub processes: BTreeMap<i32, String>,
}

impl Who {
    /// A simulated run: every task a thread of one process.
    pub fn simulated(scenario: &str, o: &Outcome) -> Who {
        Who {
            threads: o
                .task_names
                .iter()
                .map(|(&id, n)| (id, (id as i32 + 1, PROCESS_PID, n.clone())))
                .collect(),
            processes: [(PROCESS_PID, scenario.to_string())].into(),
        }
    }

    pub fn tid(&self, t: Option<schedlab_sim::sched::TaskId>) -> i32 {
        t.map_or(0, |t| {
            self.threads.get(&t.0).map_or(t.0 as i32 + 1, |w| w.0)
        })
    }

    pub fn comm(&self, t: Option<schedlab_sim::sched::TaskId>) -> String {
        match t {
            Some(t) => self
                .threads
                .get(&t.0)
                .map_or_else(|| format!("task{}", t.0), |w| w.2.clone()),
            None => "swapper".to_string(),
        }
    }
}

/// The trace of `events` (a run of `scenario` whose outcome is `o`).
pub fn perfetto(scenario: &str, o: &Outcome, events: &[&Event]) -> Vec<u8> {
    perfetto_of(&Who::simulated(scenario, o), o, events)
}

/// The trace of `events`, its threads named by `who`.
pub fn perfetto_of(who: &Who, o: &Outcome, events: &[&Event]) -> Vec<u8> {
    let mut trace = Trace::default();
    let mut first = true;
    descriptors(who, o, events, &mut trace, &mut first);
    ftrace(who, events, &mut trace);
    track_events(who, events, &mut trace, &mut first);
    trace.encode_to_vec()
}

/// The simulated process keeps uuid 1 (the fixture's bytes).
fn process_uuid(pid: i32) -> u64 {
    if pid == PROCESS_PID {
        1
    } else {
        1u64 << 40 | pid as u32 as u64
    }
}

fn thread_uuid(id: u32) -> u64 {
    1_000 + id as u64
}

fn runq_uuid(cpu: usize) -> u64 {
    1_000_000 + cpu as u64
}

fn streak_uuid(id: u32) -> u64 {
    2_000_000 + id as u64
}

fn llc_uuid(l: usize) -> u64 {
    3_000_000 + l as u64
}

/// A counter track's descriptor packet.
fn counter(uuid: u64, name: String, parent: Option<u64>, first: &mut bool) -> TracePacket {
    let td = TrackDescriptor {
        uuid: Some(uuid),
        name: Some(name),
        parent_uuid: parent,
        counter: Some(CounterDescriptor {}),
        ..TrackDescriptor::default()
    };
    track_packet(0, Data::TrackDescriptor(td), first)
}

/// Who is who: the process tree, and the track descriptors (processes,
/// threads, each CPU's run queue, each LLC's warmth, each streak).
fn descriptors(who: &Who, o: &Outcome, events: &[&Event], trace: &mut Trace, first: &mut bool) {
    let tree = ProcessTree {
        processes: who
            .processes
            .iter()
            .map(|(&p, name)| Process {
                pid: Some(p),
                cmdline: vec![name.clone()],
            })
            .collect(),
        threads: who
            .threads
            .values()
            .map(|(tid, tgid, name)| Thread {
                tid: Some(*tid),
                tgid: Some(*tgid),
                name: Some(name.clone()),
            })
            .collect(),
    };
    trace.packet.push(packet(0, Data::ProcessTree(tree)));
    for (&p, name) in &who.processes {
        let td = TrackDescriptor {
            uuid: Some(process_uuid(p)),
            process: Some(ProcessDescriptor {
                pid: Some(p),
                process_name: Some(name.clone()),
            }),
            ..TrackDescriptor::default()
        };
        trace
            .packet
            .push(track_packet(0, Data::TrackDescriptor(td), first));
    }
    for (&id, (tid, tgid, name)) in &who.threads {
        let td = TrackDescriptor {
            uuid: Some(thread_uuid(id)),
            parent_uuid: Some(process_uuid(*tgid)),
            thread: Some(ThreadDescriptor {
                pid: Some(*tgid),
                tid: Some(*tid),
                thread_name: Some(name.clone()),
            }),
            ..TrackDescriptor::default()
        };
        trace
            .packet
            .push(track_packet(0, Data::TrackDescriptor(td), first));
    }
    let ncpus = o.topology.as_ref().map_or(0, |t| t.num_cpus());
    for cpu in 0..ncpus {
        let name = format!("runq cpu{cpu}");
        trace
            .packet
            .push(counter(runq_uuid(cpu), name, None, first));
    }
    let nllcs = o.topology.as_ref().map_or(0, |t| t.llcs().len());
    for l in 0..nllcs {
        let name = format!("llc{l} warm bytes");
        trace.packet.push(counter(llc_uuid(l), name, None, first));
    }
    let streaked: BTreeSet<u32> = events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::Streak { task, .. } => Some(task.0),
            _ => None,
        })
        .collect();
    for &id in &streaked {
        let name = format!("streak {}", who.comm(Some(schedlab_sim::sched::TaskId(id))));
        let parent = Some(thread_uuid(id));
        trace
            .packet
            .push(counter(streak_uuid(id), name, parent, first));
    }
}

/// ftrace: one bundle per CPU, its events (switches, IPIs, wakes) in time
/// order.
fn ftrace(who: &Who, events: &[&Event], trace: &mut Trace) {
    let mut per_cpu: BTreeMap<usize, Vec<FtraceEvent>> = BTreeMap::new();
    for e in events {
        let Some((cpu, pid, ev)) = ftrace_event(who, e) else {
            continue;
        };
        per_cpu.entry(cpu).or_default().push(FtraceEvent {
            timestamp: Some(e.at),
            pid,
            event: Some(ev),
            common_flags: None,
        });
    }
    for (cpu, evs) in per_cpu {
        let b = FtraceEventBundle {
            cpu: Some(cpu as u32),
            event: evs,
            ..FtraceEventBundle::default()
        };
        trace.packet.push(TracePacket {
            data: Some(Data::FtraceEvents(b)),
            ..TracePacket::default()
        });
    }
}

/// The ftrace event of `e`, if it has one: its CPU, the pid it is
/// recorded under, the event.
fn ftrace_event(who: &Who, e: &Event) -> Option<(usize, Option<u32>, Ftrace)> {
    let comm = |t: Option<schedlab_sim::sched::TaskId>| who.comm(t);
    let pid = |t: Option<schedlab_sim::sched::TaskId>| who.tid(t);
    let ev = match &e.kind {
        EventKind::Switch {
            cpu,
            prev,
            prev_state,
            next,
        } => {
            let sw = SchedSwitchFtraceEvent {
                prev_comm: Some(comm(*prev)),
                prev_pid: Some(pid(*prev)),
                prev_prio: Some(PRIO),
                prev_state: Some(prev_state_bits(*prev_state)),
                next_comm: Some(comm(*next)),
                next_pid: Some(pid(*next)),
                next_prio: Some(PRIO),
            };
            (
                cpu.index(),
                Some(pid(*prev) as u32),
                Ftrace::SchedSwitch(sw),
            )
        }
        EventKind::Kick {
            cpu,
            target,
            resched,
            idle,
        } => {
            let t = target.index();
            let ipi = IpiRaiseFtraceEvent {
                target_cpus: Some(if t < 32 { 1u32 << t } else { 0 }),
                reason: Some(ipi_reason(*resched, *idle, t)),
            };
            (cpu.index(), None, Ftrace::IpiRaise(ipi))
        }
        EventKind::Waking {
            cpu,
            task,
            waker,
            target,
            ..
        } => {
            let w = SchedWakingFtraceEvent {
                comm: Some(comm(Some(*task))),
                pid: Some(pid(Some(*task))),
                prio: Some(PRIO),
                success: Some(1),
                target_cpu: Some(target.index() as i32),
            };
            // The thread running when the wake was posted: what the UI
            // shows as "woken by" (0 for an interrupt, as in Linux).
            (
                cpu.index(),
                Some(pid(*waker) as u32),
                Ftrace::SchedWaking(w),
            )
        }
        EventKind::Place {
            cpu,
            task,
            from,
            to,
            reason: KERNEL_MIGRATION,
        } => {
            let m = SchedMigrateTaskFtraceEvent {
                comm: Some(comm(Some(*task))),
                pid: Some(pid(Some(*task))),
                prio: Some(PRIO),
                orig_cpu: Some(from.index() as i32),
                dest_cpu: Some(to.index() as i32),
            };
            (cpu.index(), None, Ftrace::SchedMigrateTask(m))
        }
        _ => return None,
    };
    Some(ev)
}

/// Counters, instants, and a flow from each parked wake a thread posted to
/// the wakee's next switch in.
fn track_events(who: &Who, events: &[&Event], trace: &mut Trace, first: &mut bool) {
    let comm = |t: Option<schedlab_sim::sched::TaskId>| who.comm(t);
    let mut flows: BTreeMap<u32, u64> = BTreeMap::new();
    let mut next_flow = 1u64;
    for e in events {
        let te = match &e.kind {
            EventKind::Waking {
                task,
                waker: Some(w),
                parked: true,
                ..
            } => {
                let te = TrackEvent {
                    name: Some(format!("wake {}", comm(Some(*task)))),
                    flow_ids: vec![next_flow],
                    ..track_event(Type::Instant, thread_uuid(w.0))
                };
                flows.insert(task.0, next_flow);
                next_flow += 1;
                te
            }
            EventKind::Switch { next: Some(t), .. } => {
                let Some(id) = flows.remove(&t.0) else {
                    continue;
                };
                TrackEvent {
                    name: Some("run".to_string()),
                    terminating_flow_ids: vec![id],
                    ..track_event(Type::Instant, thread_uuid(t.0))
                }
            }
            EventKind::RunQueue { cpu, len } => TrackEvent {
                counter_value: Some(*len as i64),
                ..track_event(Type::Counter, runq_uuid(cpu.index()))
            },
            EventKind::LlcWarm { llc, bytes } => TrackEvent {
                counter_value: Some(*bytes as i64),
                ..track_event(Type::Counter, llc_uuid(*llc as usize))
            },
            EventKind::Streak { task, run, .. } => TrackEvent {
                counter_value: Some(*run as i64),
                ..track_event(Type::Counter, streak_uuid(task.0))
            },
            EventKind::Place {
                cpu,
                task,
                from,
                to,
                reason,
            } => TrackEvent {
                name: Some(format!("place {reason}")),
                debug_annotations: vec![
                    annotation("decided_on_cpu", cpu.index() as i64),
                    annotation("from_cpu", from.index() as i64),
                    annotation("to_cpu", to.index() as i64),
                ],
                ..track_event(Type::Instant, thread_uuid(task.0))
            },
            _ => continue,
        };
        trace
            .packet
            .push(track_packet(e.at, Data::TrackEvent(te), first));
    }
}

/// A Perfetto trace read back (the messages of [`perfetto`]; what they do
/// not declare is skipped).
pub fn decode(bytes: &[u8]) -> Result<Trace, prost::DecodeError> {
    Trace::decode(bytes)
}
