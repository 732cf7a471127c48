//! `schedlab trace` end to end: the `.pftrace` decodes (`prost`, with the
//! messages `schedlab::perfetto` declares) back to the simulator's own event log for the same run, event for
//! event: every switch and waking per CPU, every run-queue sample, every
//! placement instant, and the thread names.

use crate::common::schedlab;

use std::collections::BTreeMap;

use schedlab_scenarios::{catalog, Params};
use schedlab_sim::{EventKind, Outcome, PrevState, Sim};
use schedlab_trace::perfetto::{
    Data, Ftrace, FtraceEventBundle, Trace, TracePacket, TrackDescriptor, TrackEvent, Type,
};

fn pid(t: Option<schedlab_sim::sched::TaskId>) -> i32 {
    t.map_or(0, |t| t.0 as i32 + 1)
}

fn sim_log(name: &str, seed: u64) -> Outcome {
    let mut s = catalog::build(name, None, Params::default()).unwrap();
    s.spec.keep_events = true;
    Sim::new(&s.spec, seed).run()
}

fn decode(args: &[&str]) -> Trace {
    let d_tmp = tempfile::tempdir().expect("a temp dir");
    let d = d_tmp.path().to_path_buf();
    let path = d.join(format!(
        "{}.pftrace",
        args.join("_").replace(['/', '-'], "")
    ));
    let mut all = vec!["trace"];
    all.extend_from_slice(args);
    all.extend(["-o", path.to_str().unwrap()]);
    let (code, out, err) = schedlab(&all);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("ui.perfetto.dev"),
        "says how to open it: {out}"
    );
    let bytes = std::fs::read(&path).unwrap();
    schedlab_trace::decode(&bytes).expect("a Perfetto trace that decodes")
}

fn bundle(p: &TracePacket) -> Option<&FtraceEventBundle> {
    match &p.data {
        Some(Data::FtraceEvents(b)) => Some(b),
        _ => None,
    }
}

fn track_event(p: &TracePacket) -> Option<&TrackEvent> {
    match &p.data {
        Some(Data::TrackEvent(e)) => Some(e),
        _ => None,
    }
}

fn descriptor(p: &TracePacket) -> Option<&TrackDescriptor> {
    match &p.data {
        Some(Data::TrackDescriptor(d)) => Some(d),
        _ => None,
    }
}

/// Per CPU, in order: (time, prev pid, next pid, prev state),
/// (time, woken pid, target CPU) and (time, IPI reason).
type Switches = BTreeMap<u32, Vec<(u64, i32, i32, i64)>>;
type Wakings = BTreeMap<u32, Vec<(u64, i32, i32)>>;
type Ipis = BTreeMap<u32, Vec<(u64, String)>>;

fn ipis(t: &Trace) -> Ipis {
    let mut out = Ipis::new();
    for b in t.packet.iter().filter_map(bundle) {
        for e in &b.event {
            if let Some(Ftrace::IpiRaise(ipi)) = &e.event {
                out.entry(b.cpu())
                    .or_default()
                    .push((e.timestamp(), ipi.reason().to_string()));
            }
        }
    }
    out
}

fn ftrace(t: &Trace) -> (Switches, Wakings) {
    let (mut sw, mut wk) = (Switches::new(), Wakings::new());
    for b in t.packet.iter().filter_map(bundle) {
        for e in &b.event {
            match &e.event {
                Some(Ftrace::SchedSwitch(s)) => sw.entry(b.cpu()).or_default().push((
                    e.timestamp(),
                    s.prev_pid(),
                    s.next_pid(),
                    s.prev_state(),
                )),
                Some(Ftrace::SchedWaking(w)) => {
                    wk.entry(b.cpu())
                        .or_default()
                        .push((e.timestamp(), w.pid(), w.target_cpu()))
                }
                _ => {}
            }
        }
    }
    (sw, wk)
}

fn expected(o: &Outcome, from: u64, to: u64) -> (Switches, Wakings) {
    let (mut sw, mut wk) = (Switches::new(), Wakings::new());
    for e in o.event_log.iter().filter(|e| e.at >= from && e.at < to) {
        match e.kind {
            EventKind::Switch {
                cpu,
                prev,
                prev_state,
                next,
            } => {
                let st = match prev_state {
                    PrevState::Runnable => 0,
                    PrevState::Blocked => 1,
                    PrevState::Exited => 0x10,
                };
                sw.entry(cpu.index() as u32)
                    .or_default()
                    .push((e.at, pid(prev), pid(next), st));
            }
            EventKind::Waking {
                cpu, task, target, ..
            } => wk.entry(cpu.index() as u32).or_default().push((
                e.at,
                pid(Some(task)),
                target.index() as i32,
            )),
            _ => {}
        }
    }
    (sw, wk)
}

#[test]
fn the_perfetto_trace_decodes_back_to_the_simulators_event_log() {
    let t = decode(&["split_pair", "--seed", "3"]);
    let o = sim_log("split_pair", 3);
    let (sw, wk) = ftrace(&t);
    let (want_sw, want_wk) = expected(&o, 0, u64::MAX);
    assert!(
        want_sw.values().map(Vec::len).sum::<usize>() > 100,
        "a real run"
    );
    assert_eq!(sw, want_sw, "sched_switch per CPU, event for event");
    assert_eq!(wk, want_wk, "sched_waking per CPU, event for event");

    // Track descriptors: names by uuid.
    let mut names: BTreeMap<u64, String> = BTreeMap::new();
    for d in t.packet.iter().filter_map(descriptor) {
        let n = match &d.thread {
            Some(th) => th.thread_name().to_string(),
            None => d.name().to_string(),
        };
        names.insert(d.uuid(), n);
    }
    for (id, n) in &o.task_names {
        assert!(
            names.values().any(|v| v == n),
            "thread {id} {n} has a track"
        );
    }
    // Run-queue counters and placement instants, in order.
    let (mut runq, mut places) = (Vec::new(), Vec::new());
    for p in &t.packet {
        let Some(e) = track_event(p) else {
            continue;
        };
        let track = &names[&e.track_uuid()];
        match e.r#type() {
            Type::Counter if track.starts_with("runq cpu") => runq.push((
                p.timestamp(),
                track["runq cpu".len()..].parse::<usize>().unwrap(),
                e.counter_value(),
            )),
            Type::Instant if e.name().starts_with("place ") => {
                places.push((p.timestamp(), e.name().to_string()))
            }
            _ => {}
        }
    }
    let want_runq: Vec<(u64, usize, i64)> = o
        .event_log
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::RunQueue { cpu, len } => Some((e.at, cpu.index(), len as i64)),
            _ => None,
        })
        .collect();
    assert_eq!(runq, want_runq, "run-queue counters, sample for sample");
    let want_places: Vec<(u64, String)> = o
        .event_log
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::Place { reason, .. } => Some((e.at, format!("place {reason}"))),
            _ => None,
        })
        .collect();
    assert_eq!(places, want_places, "one instant per placement decision");
    assert!(
        places.iter().any(|(_, n)| n == "place waker_rule"),
        "the split pair's move is in the trace"
    );
}

/// The storm's IPIs are in the trace, one `ipi_raise` per kick the
/// simulator logged, with Linux's reason for a resched IPI.
#[test]
fn every_kick_is_an_ipi_raise() {
    let t = decode(&[
        "cs_spinners",
        "--param",
        "protect_on_repick=false",
        "--seed",
        "1",
        "--to",
        "120000000",
    ]);
    let o = {
        let p = Params::parse(&["protect_on_repick=false".to_string()]).unwrap();
        let mut s = catalog::build("cs_spinners", None, p).unwrap();
        s.spec.keep_events = true;
        Sim::new(&s.spec, 1).run()
    };
    let mut want = Ipis::new();
    for e in o.event_log.iter().filter(|e| e.at < 120_000_000) {
        if let EventKind::Kick {
            cpu,
            target,
            resched,
            idle,
        } = e.kind
        {
            let what = match (idle, resched) {
                (true, _) => "Wake from idle",
                (false, true) => "Rescheduling interrupts",
                (false, false) => "Function call interrupts",
            };
            want.entry(cpu.index() as u32)
                .or_default()
                .push((e.at, format!("{what} cpu{}", target.index())));
        }
    }
    let got = ipis(&t);
    let resched = got
        .values()
        .flatten()
        .filter(|(_, r)| r.starts_with("Rescheduling"))
        .count();
    assert!(
        resched > 1000,
        "seed 1 storms in its first 120 ms: {resched} resched IPIs"
    );
    assert_eq!(got, want, "ipi_raise per CPU, kick for kick");
}

#[test]
fn a_window_keeps_only_its_events() {
    let (from, to) = (20_000u64, 120_000u64);
    let t = decode(&["split_pair", "--from", "20000", "--to", "120000"]);
    let (sw, wk) = ftrace(&t);
    let (want_sw, want_wk) = expected(&sim_log("split_pair", 1), from, to);
    assert!(!want_sw.is_empty(), "the window holds switches");
    assert_eq!(sw, want_sw);
    assert_eq!(wk, want_wk);
    let (code, _, err) = schedlab(&["trace", "split_pair", "--from", "5", "--to", "5"]);
    assert_eq!(code, 2, "an empty window is bad input");
    assert!(err.contains("expected from < to"), "{err}");
}

#[test]
fn the_json_event_log_is_the_same_stream() {
    let (code, out, err) = schedlab(&["trace", "split_pair", "--json"]);
    assert_eq!(code, 0, "{err}");
    let o = sim_log("split_pair", 1);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), o.event_log.len(), "one line per event");
    for (line, e) in lines.iter().zip(&o.event_log) {
        assert_eq!(*line, serde_json::to_string(e).unwrap());
    }
}

/// Who woke whom: in the split pair every wake is posted by the other
/// thread, so each `sched_waking` names it as the event's pid, and each
/// parked wake is a flow from the waker's track that ends when the wakee
/// next runs.
#[test]
fn wakes_name_their_waker_and_flow_to_the_wakee() {
    let t = decode(&["split_pair"]);
    let o = sim_log("split_pair", 1);
    let mut wakings = 0;
    for b in t.packet.iter().filter_map(bundle) {
        for e in &b.event {
            if let Some(Ftrace::SchedWaking(w)) = &e.event {
                wakings += 1;
                let (woken, waker) = (w.pid(), e.pid() as i32);
                assert!(
                    waker != 0 && waker != woken,
                    "a pair's wake is posted by the other thread: waker pid {waker}, woken {woken}"
                );
            }
        }
    }
    assert!(wakings > 0, "the pair wakes each other");
    let (mut starts, mut ends) = (0, 0);
    for e in t.packet.iter().filter_map(track_event) {
        starts += e.flow_ids.len();
        ends += e.terminating_flow_ids.len();
    }
    let parked_by_threads = o
        .event_log
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                EventKind::Waking {
                    waker: Some(_),
                    parked: true,
                    ..
                }
            )
        })
        .count();
    assert_eq!(
        starts, parked_by_threads,
        "a flow for each parked wake a thread posted"
    );
    assert!(
        ends + 1 >= starts && ends <= starts,
        "each flow ends at the wakee's next switch in (the last may be cut by the end): {starts} started, {ends} ended"
    );
}
