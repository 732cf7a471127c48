//! `schedlab trace`: one run's event log as a Perfetto trace (protobuf,
//! `perfetto_protos` + `protobuf`), or as JSON lines. Both are made from
//! the simulator's one event log (`schedlab_sim::events`).
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
use std::path::PathBuf;

use clap::Args;
use perfetto_protos::counter_descriptor::CounterDescriptor;
use perfetto_protos::debug_annotation::DebugAnnotation;
use perfetto_protos::ftrace_event::FtraceEvent;
use perfetto_protos::ftrace_event_bundle::FtraceEventBundle;
use perfetto_protos::ipi::IpiRaiseFtraceEvent;
use perfetto_protos::process_descriptor::ProcessDescriptor;
use perfetto_protos::process_tree::{process_tree, ProcessTree};
use perfetto_protos::sched::{SchedSwitchFtraceEvent, SchedWakingFtraceEvent};
use perfetto_protos::thread_descriptor::ThreadDescriptor;
use perfetto_protos::trace::Trace;
use perfetto_protos::trace_packet::{trace_packet, TracePacket};
use perfetto_protos::track_descriptor::TrackDescriptor;
use perfetto_protos::track_event::{track_event, TrackEvent};
use protobuf::{Message, MessageField};
use schedlab_sim::{Event, EventKind, Outcome, PrevState, Registry, Sim};

use crate::run::{build, Common};
use crate::Failure;

#[derive(Args, Debug)]
pub struct TraceArgs {
    #[command(flatten)]
    common: Common,
    /// The seed to run.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Where the Perfetto trace goes (default: SCENARIO.pftrace).
    #[arg(short = 'o', long, value_name = "FILE.pftrace")]
    out: Option<PathBuf>,
    /// Keep events at or after this simulated time.
    #[arg(long, value_name = "NS")]
    from: Option<u64>,
    /// Keep events before this simulated time.
    #[arg(long, value_name = "NS")]
    to: Option<u64>,
}

/// The pid the trace gives the process the tasks belong to.
pub const PROCESS_PID: i32 = 1_000_000;
/// Every track event comes on this packet sequence.
const SEQ: u32 = 1;
/// Linux's priority of a nice-0 task.
const PRIO: i32 = 120;

/// A task's pid in the trace: its id + 1 (0 is idle).
pub fn pid(task: Option<schedlab_sim::sched::TaskId>) -> i32 {
    task.map_or(0, |t| t.0 as i32 + 1)
}

/// `prev_state` as ftrace writes it: 0 runnable (R), 1 sleeping (S),
/// 0x10 dead (X, EXIT_DEAD).
pub fn prev_state_bits(s: PrevState) -> i64 {
    match s {
        PrevState::Runnable => 0,
        PrevState::Blocked => 1,
        PrevState::Exited => 0x10,
    }
}

pub fn run(a: &TraceArgs, reg: &Registry) -> Result<(), Failure> {
    let mut s = build(&a.common, &a.common.params, reg)?;
    s.spec.keep_events = true;
    let o = Sim::new(&s.spec, a.seed).run();
    let (from, to) = (a.from.unwrap_or(0), a.to.unwrap_or(u64::MAX));
    if from >= to {
        return Err(Failure::Input(format!(
            "--from {from} --to {to}: expected from < to"
        )));
    }
    let events: Vec<&Event> = o
        .event_log
        .iter()
        .filter(|e| e.at >= from && e.at < to)
        .collect();
    if a.common.json {
        for e in &events {
            say!("{}", serde_json::to_string(e).expect("plain data"));
        }
        return Ok(());
    }
    let bytes = perfetto(&s.name, &o, &events);
    let path = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{}.pftrace", s.name)));
    std::fs::write(&path, &bytes)
        .map_err(|e| Failure::Input(format!("{}: cannot write: {e}", path.display())))?;
    let count = |f: fn(&EventKind) -> bool| events.iter().filter(|e| f(&e.kind)).count();
    say!(
        "{}: {} switches, {} wakings, {} IPIs and idle kicks, {} placements, {} bytes; open it at https://ui.perfetto.dev (\"Open trace file\")",
        path.display(),
        count(|k| matches!(k, EventKind::Switch { .. })),
        count(|k| matches!(k, EventKind::Waking { .. })),
        count(|k| matches!(k, EventKind::Kick { .. })),
        count(|k| matches!(k, EventKind::Place { .. })),
        bytes.len()
    );
    Ok(())
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

fn packet(ts: u64) -> TracePacket {
    let mut p = TracePacket::new();
    p.set_timestamp(ts);
    p
}

fn track_packet(ts: u64, first: &mut bool) -> TracePacket {
    let mut p = packet(ts);
    p.set_trusted_packet_sequence_id(SEQ);
    if std::mem::take(first) {
        p.set_sequence_flags(trace_packet::SequenceFlags::SEQ_INCREMENTAL_STATE_CLEARED as u32);
    }
    p
}

fn annotation(name: &str, v: i64) -> DebugAnnotation {
    let mut d = DebugAnnotation::new();
    d.set_name(name.into());
    d.set_int_value(v);
    d
}

/// The trace of `events` (a run of `scenario` whose outcome is `o`).
pub fn perfetto(scenario: &str, o: &Outcome, events: &[&Event]) -> Vec<u8> {
    let comm = |t: Option<schedlab_sim::sched::TaskId>| match t {
        Some(t) => o
            .task_names
            .get(&t.0)
            .cloned()
            .unwrap_or_else(|| format!("task{}", t.0)),
        None => "swapper".to_string(),
    };
    let mut trace = Trace::new();
    let mut first = true;

    // Who is who: the process tree, and track descriptors.
    let mut tree = ProcessTree::new();
    let mut proc_ = process_tree::Process::new();
    proc_.set_pid(PROCESS_PID);
    proc_.cmdline.push(scenario.to_string());
    tree.processes.push(proc_);
    for (&id, name) in &o.task_names {
        let mut t = process_tree::Thread::new();
        t.set_tid(id as i32 + 1);
        t.set_tgid(PROCESS_PID);
        t.set_name(name.clone());
        tree.threads.push(t);
    }
    let mut p = packet(0);
    p.set_process_tree(tree);
    trace.packet.push(p);

    let process_uuid = 1u64;
    let thread_uuid = |id: u32| 1_000 + id as u64;
    let runq_uuid = |cpu: usize| 1_000_000 + cpu as u64;
    let streak_uuid = |id: u32| 2_000_000 + id as u64;
    let llc_uuid = |l: usize| 3_000_000 + l as u64;
    let mut td = TrackDescriptor::new();
    td.set_uuid(process_uuid);
    let mut pd = ProcessDescriptor::new();
    pd.set_pid(PROCESS_PID);
    pd.set_process_name(scenario.to_string());
    td.process = MessageField::some(pd);
    let mut p = track_packet(0, &mut first);
    p.set_track_descriptor(td);
    trace.packet.push(p);
    for (&id, name) in &o.task_names {
        let mut td = TrackDescriptor::new();
        td.set_uuid(thread_uuid(id));
        td.set_parent_uuid(process_uuid);
        let mut th = ThreadDescriptor::new();
        th.set_pid(PROCESS_PID);
        th.set_tid(id as i32 + 1);
        th.set_thread_name(name.clone());
        td.thread = MessageField::some(th);
        let mut p = track_packet(0, &mut first);
        p.set_track_descriptor(td);
        trace.packet.push(p);
    }
    let counter = |uuid: u64, name: String, parent: Option<u64>, first: &mut bool| {
        let mut td = TrackDescriptor::new();
        td.set_uuid(uuid);
        td.set_name(name);
        if let Some(p) = parent {
            td.set_parent_uuid(p);
        }
        td.counter = MessageField::some(CounterDescriptor::new());
        let mut p = track_packet(0, first);
        p.set_track_descriptor(td);
        p
    };
    let ncpus = o.topology.as_ref().map_or(0, |t| t.num_cpus());
    for cpu in 0..ncpus {
        trace.packet.push(counter(
            runq_uuid(cpu),
            format!("runq cpu{cpu}"),
            None,
            &mut first,
        ));
    }
    let nllcs = o.topology.as_ref().map_or(0, |t| t.llcs().len());
    for l in 0..nllcs {
        trace.packet.push(counter(
            llc_uuid(l),
            format!("llc{l} warm bytes"),
            None,
            &mut first,
        ));
    }
    let streaked: BTreeSet<u32> = events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::Streak { task, .. } => Some(task.0),
            _ => None,
        })
        .collect();
    for &id in &streaked {
        let name = format!("streak {}", comm(Some(schedlab_sim::sched::TaskId(id))));
        trace.packet.push(counter(
            streak_uuid(id),
            name,
            Some(thread_uuid(id)),
            &mut first,
        ));
    }

    // ftrace: one bundle per CPU, its events in time order.
    let mut per_cpu: BTreeMap<usize, Vec<FtraceEvent>> = BTreeMap::new();
    for e in events {
        let (cpu, ev) = match &e.kind {
            EventKind::Switch {
                cpu,
                prev,
                prev_state,
                next,
            } => {
                let mut sw = SchedSwitchFtraceEvent::new();
                sw.set_prev_comm(comm(*prev));
                sw.set_prev_pid(pid(*prev));
                sw.set_prev_prio(PRIO);
                sw.set_prev_state(prev_state_bits(*prev_state));
                sw.set_next_comm(comm(*next));
                sw.set_next_pid(pid(*next));
                sw.set_next_prio(PRIO);
                let mut fe = FtraceEvent::new();
                fe.set_pid(pid(*prev) as u32);
                fe.set_sched_switch(sw);
                (cpu.index(), fe)
            }
            EventKind::Kick {
                cpu,
                target,
                resched,
                idle,
            } => {
                let mut ipi = IpiRaiseFtraceEvent::new();
                let t = target.index();
                ipi.set_target_cpus(if t < 32 { 1u32 << t } else { 0 });
                ipi.set_reason(ipi_reason(*resched, *idle, t));
                let mut fe = FtraceEvent::new();
                fe.set_ipi_raise(ipi);
                (cpu.index(), fe)
            }
            EventKind::Waking {
                cpu,
                task,
                waker,
                target,
                ..
            } => {
                let mut w = SchedWakingFtraceEvent::new();
                w.set_comm(comm(Some(*task)));
                w.set_pid(pid(Some(*task)));
                w.set_prio(PRIO);
                w.set_success(1);
                w.set_target_cpu(target.index() as i32);
                let mut fe = FtraceEvent::new();
                // The thread running when the wake was posted: what the UI
                // shows as "woken by" (0 for an interrupt, as in Linux).
                fe.set_pid(pid(*waker) as u32);
                fe.set_sched_waking(w);
                (cpu.index(), fe)
            }
            _ => continue,
        };
        let mut ev = ev;
        ev.set_timestamp(e.at);
        per_cpu.entry(cpu).or_default().push(ev);
    }
    for (cpu, evs) in per_cpu {
        let mut b = FtraceEventBundle::new();
        b.set_cpu(cpu as u32);
        b.event = evs;
        let mut p = TracePacket::new();
        p.set_ftrace_events(b);
        trace.packet.push(p);
    }

    // Counters, instants, and a flow from each parked wake a thread posted
    // to the wakee's next switch in.
    let mut flows: BTreeMap<u32, u64> = BTreeMap::new();
    let mut next_flow = 1u64;
    for e in events {
        let mut te = TrackEvent::new();
        match &e.kind {
            EventKind::Waking {
                task,
                waker: Some(w),
                parked: true,
                ..
            } => {
                te.set_type(track_event::Type::TYPE_INSTANT);
                te.set_track_uuid(thread_uuid(w.0));
                te.set_name(format!("wake {}", comm(Some(*task))));
                te.flow_ids.push(next_flow);
                flows.insert(task.0, next_flow);
                next_flow += 1;
            }
            EventKind::Switch { next: Some(t), .. } => {
                let Some(id) = flows.remove(&t.0) else {
                    continue;
                };
                te.set_type(track_event::Type::TYPE_INSTANT);
                te.set_track_uuid(thread_uuid(t.0));
                te.set_name("run".to_string());
                te.terminating_flow_ids.push(id);
            }
            EventKind::RunQueue { cpu, len } => {
                te.set_type(track_event::Type::TYPE_COUNTER);
                te.set_track_uuid(runq_uuid(cpu.index()));
                te.set_counter_value(*len as i64);
            }
            EventKind::LlcWarm { llc, bytes } => {
                te.set_type(track_event::Type::TYPE_COUNTER);
                te.set_track_uuid(llc_uuid(*llc as usize));
                te.set_counter_value(*bytes as i64);
            }
            EventKind::Streak { task, run, .. } => {
                te.set_type(track_event::Type::TYPE_COUNTER);
                te.set_track_uuid(streak_uuid(task.0));
                te.set_counter_value(*run as i64);
            }
            EventKind::Place {
                cpu,
                task,
                from,
                to,
                reason,
            } => {
                te.set_type(track_event::Type::TYPE_INSTANT);
                te.set_track_uuid(thread_uuid(task.0));
                te.set_name(format!("place {reason}"));
                te.debug_annotations
                    .push(annotation("decided_on_cpu", cpu.index() as i64));
                te.debug_annotations
                    .push(annotation("from_cpu", from.index() as i64));
                te.debug_annotations
                    .push(annotation("to_cpu", to.index() as i64));
            }
            _ => continue,
        }
        let mut p = track_packet(e.at, &mut first);
        p.set_track_event(te);
        trace.packet.push(p);
    }
    trace.write_to_bytes().expect("a trace always encodes")
}
