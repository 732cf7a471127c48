//! `schedlab_real::import`: traces made by tools nobody here wrote read to
//! the counts those tools' own readers give, our own trace read back to
//! the same counts, and bad input answered with an error or a note, never
//! a panic.
//!
//! The fixtures (`tests/fixtures/import/`, gzipped) are perf's `sched
//! pipe -l 50` recorded on a 2-CPU machine by `trace-cmd record` (file
//! versions 6 and 7, the second zstd-compressed) and `perf sched record`,
//! and the first converted to Perfetto's compact sched encoding by
//! Perfetto's own Python SDK; `scripts/fixtures/import.sh` makes them and
//! prints the counts below, worked by `trace-cmd report` and `perf
//! script` (`scripts/fixtures/count.py`), not by this crate.

use proptest::prelude::*;
use schedlab_real::import::{self, Select};
use schedlab_real::recording::{Machine, Recording};
use schedlab_sim::EventKind;
use schedlab_trace::perfetto as pf;

fn fixture(name: &str) -> Vec<u8> {
    use std::io::Read;
    let path = format!(
        "{}/tests/fixtures/import/{name}.gz",
        env!("CARGO_MANIFEST_DIR")
    );
    let gz = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_end(&mut out)
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    out
}

fn machine(ncpus: usize) -> Machine {
    Machine {
        ncpus,
        hz: 250,
        topology: Some(import::flat(ncpus)),
    }
}

fn sched_pipe() -> Select {
    Select {
        comms: vec!["sched-pipe".into()],
        ..Select::default()
    }
}

fn import_bytes(bytes: &[u8], name: &str, sel: &Select) -> (Recording, Vec<String>) {
    let t = import::read_bytes(bytes, name).unwrap_or_else(|e| panic!("{name}: {e}"));
    let m = machine(t.ncpus);
    import::recording(t, sel, &m).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// wakes, by a kept thread, from an interrupt, switches, migrations.
fn counts(r: &Recording) -> [u64; 5] {
    let k = &r.record.counters;
    [
        k["kernel.wakes"],
        k["kernel.wakes.by_task"],
        k["kernel.wakes.from_interrupt"],
        k["kernel.switches"],
        k["kernel.migrations"],
    ]
}

/// Each file, and what `scripts/fixtures/import.sh` printed for it:
/// wakes, by_task, from_interrupt, switches, migrations.
const TOOLS: [(&str, [u64; 5]); 3] = [
    ("pipe-v6.dat", [64, 61, 3, 107, 2]),
    ("pipe-v7.dat", [67, 67, 0, 105, 5]),
    // perf script prints no flags: its one wake by another thread is
    // perf's own (its parent), not an interrupt's.
    ("pipe.perf.data", [100, 99, 0, 103, 1]),
];

#[test]
fn each_tool_s_trace_imports_to_the_counts_the_tool_itself_reads() {
    for (name, want) in TOOLS {
        let (r, _) = import_bytes(&fixture(name), name, &sched_pipe());
        assert_eq!(
            counts(&r),
            want,
            "{name}: [wakes, by a kept thread, from interrupts, switches, migrations] as trace-cmd report / perf script count them"
        );
        assert_eq!(
            r.threads.len(),
            2,
            "{name}: sched pipe's two threads: {:?}",
            r.threads
        );
        assert!(
            r.life.forks.len() == 1,
            "{name}: the first forks the second: {:?}",
            r.life.forks
        );
        assert!(
            r.shadow.model.agreement.picks > 0,
            "{name}: the shadow compared the kernel's picks"
        );
        assert!(
            r.shadow.placement.is_some(),
            "{name}: and its placement, on the flat machine"
        );
    }
}

#[test]
fn a_compact_sched_trace_written_by_perfetto_s_sdk_imports_as_its_source_did() {
    let (src, _) = import_bytes(&fixture("pipe-v6.dat"), "v6", &sched_pipe());
    let (r, notes) = import_bytes(&fixture("pipe-compact.pftrace"), "compact", &sched_pipe());
    let (a, b) = (counts(&src), counts(&r));
    assert_eq!(
        [b[0], b[1], b[2], b[4]],
        [a[0], a[1], a[2], a[4]],
        "wakes, wakers and migrations as the trace.dat it was made from"
    );
    // Each CPU's first switch names no previous task: dropped, and said.
    assert!(
        b[3] <= a[3] && a[3] - b[3] <= 2,
        "switches: the source's {} less at most one per CPU, got {}",
        a[3],
        b[3]
    );
    assert!(
        notes.iter().any(|n| n.contains("compact switches dropped")),
        "the drop is noted: {notes:?}"
    );
}

#[test]
fn our_own_trace_reads_back_to_the_same_counts() {
    let (r, _) = import_bytes(&fixture("pipe-v6.dat"), "v6", &sched_pipe());
    let conv = r.convert(schedlab_real::replay::Edges::Inbox);
    let files = schedlab_real::files::files(&r, &conv, "v6", &[]).unwrap();
    // Our trace names each recorded thread `comm-tid`.
    let sel = Select {
        comms: vec!["sched-pipe-*".into()],
        ..Select::default()
    };
    let (back, _) = import_bytes(&files.trace, "trace.pftrace", &sel);
    assert_eq!(
        counts(&back),
        counts(&r),
        "trace.pftrace holds what it was written from"
    );
}

/// A Perfetto trace of `events` per CPU, in the order given.
fn pftrace(bundles: Vec<(u32, Vec<pf::FtraceEvent>)>) -> Vec<u8> {
    use prost::Message;
    let packet = bundles
        .into_iter()
        .map(|(cpu, event)| pf::TracePacket {
            data: Some(pf::Data::FtraceEvents(pf::FtraceEventBundle {
                cpu: Some(cpu),
                event,
                ..Default::default()
            })),
            ..Default::default()
        })
        .collect();
    pf::Trace { packet }.encode_to_vec()
}

fn ev(ts: u64, pid: u32, e: pf::Ftrace) -> pf::FtraceEvent {
    pf::FtraceEvent {
        timestamp: Some(ts),
        pid: Some(pid),
        event: Some(e),
        common_flags: None,
    }
}

fn switch(prev: (i32, &str), state: i64, next: (i32, &str)) -> pf::Ftrace {
    pf::Ftrace::SchedSwitch(pf::SchedSwitchFtraceEvent {
        prev_comm: Some(prev.1.into()),
        prev_pid: Some(prev.0),
        prev_state: Some(state),
        next_comm: Some(next.1.into()),
        next_pid: Some(next.0),
        ..Default::default()
    })
}

fn newtask(pid: i32, comm: &str) -> pf::Ftrace {
    pf::Ftrace::TaskNewtask(pf::TaskNewtaskFtraceEvent {
        pid: Some(pid),
        comm: Some(comm.into()),
        clone_flags: Some(0),
    })
}

fn exit(pid: i32, comm: &str) -> pf::Ftrace {
    pf::Ftrace::SchedProcessExit(pf::SchedProcessExitFtraceEvent {
        comm: Some(comm.into()),
        pid: Some(pid),
    })
}

fn waking(pid: i32, comm: &str, target: i32) -> pf::Ftrace {
    pf::Ftrace::SchedWaking(pf::SchedWakingFtraceEvent {
        comm: Some(comm.into()),
        pid: Some(pid),
        target_cpu: Some(target),
        ..Default::default()
    })
}

/// SchedViz's warning: pid 42 exits and the kernel gives it to a new
/// task; the two are two threads, not one.
#[test]
fn a_pid_given_again_after_its_thread_exited_is_another_thread() {
    let evs = vec![
        ev(10, 0, switch((0, "swapper"), 0, (7, "shell"))),
        ev(20, 7, newtask(42, "job")),
        ev(30, 7, switch((7, "shell"), 1, (42, "job"))),
        ev(40, 42, exit(42, "job")),
        ev(50, 42, switch((42, "job"), 16, (7, "shell"))),
        ev(60, 7, newtask(42, "job")),
        ev(70, 7, switch((7, "shell"), 1, (42, "job"))),
        ev(80, 42, waking(7, "shell", 0)),
        ev(90, 42, switch((42, "job"), 1, (7, "shell"))),
    ];
    let sel = Select {
        comms: vec!["shell".into()],
        ..Select::default()
    };
    let (r, notes) = import_bytes(&pftrace(vec![(0, evs)]), "reuse", &sel);
    let names: Vec<&str> = r.threads.values().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        ["shell-7", "job-42", "job-100000042"],
        "the shell, its first job, and the job that got pid 42 again"
    );
    assert_eq!(r.life.forks.len(), 2, "two forks: {:?}", r.life.forks);
    assert!(
        notes.iter().any(|n| n.starts_with("1 pids given again")),
        "noted: {notes:?}"
    );
    assert_eq!(
        r.record.wakes_by["shell-7"].get("job-100000042"),
        Some(&1),
        "the second job woke the shell: {:?}",
        r.record.wakes_by
    );
}

/// Two CPUs' events at the same times: the import is the same whichever
/// CPU's bundle comes first in the file.
#[test]
fn equal_times_across_cpus_read_the_same_in_any_file_order() {
    let cpu0 = vec![
        ev(10, 0, switch((0, "swapper/0"), 0, (5, "a"))),
        ev(20, 5, waking(6, "b", 1)),
        ev(30, 5, switch((5, "a"), 1, (0, "swapper/0"))),
    ];
    let cpu1 = vec![
        ev(10, 0, switch((0, "swapper/1"), 0, (6, "b"))),
        ev(20, 6, waking(5, "a", 0)),
        ev(30, 6, switch((6, "b"), 1, (0, "swapper/1"))),
    ];
    let one = pftrace(vec![(0, cpu0.clone()), (1, cpu1.clone())]);
    let two = pftrace(vec![(1, cpu1), (0, cpu0)]);
    let (a, _) = import_bytes(&one, "0 then 1", &Select::default());
    let (b, _) = import_bytes(&two, "1 then 0", &Select::default());
    assert_eq!(
        counts(&a),
        [2, 2, 0, 2, 0],
        "two wakes by the other thread, two switches away"
    );
    assert_eq!(counts(&a), counts(&b), "the same counts");
    assert_eq!(
        format!("{:?}", a.record.events),
        format!("{:?}", b.record.events),
        "the same events in the same order"
    );
}

fn err(bytes: &[u8]) -> String {
    match import::read_bytes(bytes, "bad") {
        Ok(t) => match import::recording(t, &Select::default(), &machine(2)) {
            Ok(_) => panic!("bad input accepted"),
            Err(e) => e.to_string(),
        },
        Err(e) => e,
    }
}

#[test]
fn bad_input_is_an_error_that_says_where_and_what() {
    let v6 = fixture("pipe-v6.dat");
    let cut = err(&v6[..20_000]);
    assert!(
        cut.contains("bad at offset 0x") && cut.contains("truncated"),
        "a truncated trace.dat names the offset: {cut}"
    );
    let e = err(&fixture("pipe-v7.dat")[..3_000]);
    assert!(
        e.contains("offset 0x"),
        "a truncated v7 names the offset: {e}"
    );
    let e = err(&fixture("pipe.perf.data")[..4_000]);
    assert!(
        e.starts_with("bad: perf.data:"),
        "a truncated perf.data: {e}"
    );
    let e = err(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x03\0>\0");
    assert!(
        e.contains("not a Perfetto trace") && e.contains("nor perf.data"),
        "another format is named none of the three: {e}"
    );
    let tree_only = {
        use prost::Message;
        pf::Trace {
            packet: vec![pf::TracePacket {
                data: Some(pf::Data::ProcessTree(pf::ProcessTree::default())),
                ..Default::default()
            }],
        }
        .encode_to_vec()
    };
    let e = err(&tree_only);
    assert!(
        e.contains("no ftrace events"),
        "a trace without sched events: {e}"
    );
    let e = err(b"");
    assert!(e.contains("empty"), "{e}");
    // The format of sched_switch renamed (same length): no switches.
    let mut renamed = v6.clone();
    let at = renamed
        .windows(18)
        .position(|w| w == b"name: sched_switch")
        .expect("sched_switch's format");
    renamed[at + 16..at + 18].copy_from_slice(b"XX");
    let e = err(&renamed);
    assert!(e.contains("no sched_switch events' format"), "{e}");
}

/// The kernel marks a page after lost events (bit 31 of its commit word):
/// the import counts it, as `record` does.
#[test]
fn a_page_after_lost_events_is_counted() {
    let mut v6 = fixture("pipe-v6.dat");
    let fly = v6
        .windows(10)
        .rposition(|w| w == b"flyrecord\0")
        .expect("the flyrecord header");
    let off = u64::from_le_bytes(v6[fly + 10..fly + 18].try_into().unwrap()) as usize;
    v6[off + 8 + 3] |= 0x80;
    let (r, _) = import_bytes(&v6, "lost", &sched_pipe());
    assert_eq!(r.lost_pages, 1, "one page said events were lost before it");
    assert_eq!(counts(&r), TOOLS[0].1, "and its events are still read");
}

/// A topology that lacks a CPU the trace names is refused, by name.
#[test]
fn a_topology_without_the_trace_s_cpus_is_refused() {
    let t = import::read_bytes(&fixture("pipe-v6.dat"), "v6").unwrap();
    let one = Machine {
        ncpus: 1,
        hz: 250,
        topology: Some(import::flat(1)),
    };
    let e = import::recording(t, &sched_pipe(), &one)
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("names CPU 1") && e.contains("--topology"), "{e}");
}

/// `--cpus` keeps one CPU's events: every event left is on it.
#[test]
fn cpus_keep_only_their_events() {
    let t = import::read_bytes(&fixture("pipe-v6.dat"), "v6").unwrap();
    let sel = Select {
        cpus: Some([1].into_iter().collect()),
        ..sched_pipe()
    };
    let (r, _) = import::recording(t, &sel, &machine(2)).unwrap();
    let on: std::collections::BTreeSet<usize> = r
        .record
        .events
        .iter()
        .map(|e| match e.kind {
            EventKind::Switch { cpu, .. }
            | EventKind::Waking { cpu, .. }
            | EventKind::Place { cpu, .. } => cpu.index(),
            _ => usize::MAX,
        })
        .collect();
    assert_eq!(on, [1].into(), "the CPUs of the events kept");
    assert!(
        r.record.counters["kernel.switches"] > 0,
        "some switches on CPU 1"
    );
}

/// Fuzzing: each format's fixture, cut short and with bytes changed, is
/// an error or an import, never a panic. `PROPTEST_CASES=5000` for more.
fn mangle(mut b: Vec<u8>, len: usize, flips: &[(usize, u8)]) -> Vec<u8> {
    for &(at, x) in flips {
        let n = b.len().max(1);
        if let Some(v) = b.get_mut(at % n) {
            *v ^= x;
        }
    }
    b.truncate(len);
    b
}

fn never_panics(name: &str, b: &[u8]) {
    if let Ok(t) = import::read_bytes(b, name) {
        let m = machine(t.ncpus.max(1));
        let _ = import::recording(t, &Select::default(), &m);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn trace_dat_fuzz_never_panics(v7 in any::<bool>(), len in 0usize..40_000, flips in proptest::collection::vec((0usize..200_000, 1u8..=255), 0..6)) {
        let f = if v7 { "pipe-v7.dat" } else { "pipe-v6.dat" };
        let b = fixture(f);
        let n = if len < 20_000 { len } else { b.len() };
        never_panics(f, &mangle(b, n, &flips));
    }

    #[test]
    fn perf_data_fuzz_never_panics(len in 0usize..40_000, flips in proptest::collection::vec((0usize..200_000, 1u8..=255), 0..6)) {
        let b = fixture("pipe.perf.data");
        let n = if len < 20_000 { len } else { b.len() };
        never_panics("perf.data", &mangle(b, n, &flips));
    }

    #[test]
    fn perfetto_fuzz_never_panics(len in 0usize..20_000, flips in proptest::collection::vec((0usize..20_000, 1u8..=255), 0..6)) {
        let b = fixture("pipe-compact.pftrace");
        let n = if len < 4_000 { len } else { b.len() };
        never_panics("pftrace", &mangle(b, n, &flips));
    }
}
