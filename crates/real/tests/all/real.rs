//! Real runs on this machine: the semantics of each op (laps counted,
//! programs completing, a deadlock reported), nothing left behind, and
//! the kernel's record naming who woke whom. Never timings.
//!
//! CI runs as root, so the tracefs tests run there; without root they
//! check that the run says why it has no kernel record.

use std::path::PathBuf;

use schedlab_real::{run, Options, RealOutcome};
use schedlab_scenarios::{catalog, file, Params, Scenario};

fn machine() -> schedlab_topology::Topology {
    schedlab_scenarios::topology("sysfs").expect("this machine's topology from sysfs")
}

/// Real runs one at a time: each forks, and the tests count what is left.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A scenario file on this machine; `top` holds its top-level keys.
fn scenario(name: &str, top: &str, text: &str) -> Scenario {
    let dir_tmp = tempfile::tempdir().expect("a temp dir");
    let dir = dir_tmp.path().to_path_buf();
    let p: PathBuf = dir.join(format!("{name}.toml"));
    std::fs::write(&p, format!("{top}[topology]\npreset = \"amd-2x8\"\n{text}")).expect("write");
    let s = file::load_on(&p, Params::new([]), machine()).unwrap_or_else(|e| panic!("{name}: {e}"));
    // Loaded: nothing of it stays behind (the directory goes with its
    // last file; another test may still be writing one).
    let _ = std::fs::remove_file(&p);
    let _ = std::fs::remove_dir(&dir);
    s
}

fn real(s: &Scenario, capture: bool) -> RealOutcome {
    let opts = Options {
        capture,
        keep_events: capture,
    };
    run(&s.spec, 1, &opts).unwrap_or_else(|e| panic!("{}: the real run failed: {e}", s.name))
}

fn all_exited(o: &RealOutcome, what: &str) {
    for (name, t) in &o.outcome.tasks {
        assert!(t.exited_at.is_some(), "{what}: task {name} never exited");
    }
    assert!(
        o.outcome.stall.is_none(),
        "{what}: stalled: {:?}",
        o.outcome.stall
    );
}

#[test]
fn a_ping_pong_of_n_rounds_records_n_laps() {
    let _one = serial();
    let s = catalog::build(
        "reqrep",
        Some("sysfs"),
        Params::new([("rounds".into(), "300".into())]),
    )
    .expect("reqrep builds on this machine");
    let o = real(&s, false);
    let laps = o.outcome.laps.values().map(Vec::len).sum::<usize>();
    assert_eq!(
        laps,
        300,
        "300 round trips, one lap each: {:?}",
        o.outcome.laps.keys()
    );
    all_exited(&o, "reqrep");
    assert!(
        schedlab_real::sys::children(std::process::id()).is_empty(),
        "a process outlived the run: {:?}",
        schedlab_real::sys::children(std::process::id())
    );
}

#[test]
fn futex_condition_barrier_lock_pipe_and_spawn_programs_complete() {
    let _one = serial();
    let s = scenario(
        "ops",
        "",
        r#"
[programs]
child = [{ run = 20000 }, { count = { metric = "children", n = 1 } }]

[[task]]
name = "a"
cpu = 0
process = "p"
program = [{ loop = { n = 40, body = [
  { lock = { lock = "m" } }, { run = 2000 }, { unlock = { lock = "m" } },
  { barrier = { barrier = "b", n = 2 } },
  { pipe_write = { pipe = "q", bytes = 4096 } },
  { lock = { lock = "m" } }, { futex_wake = { futex = "f", n = 1 } },
  { cond_wait = { cond = "c", lock = "m" } }, { unlock = { lock = "m" } },
  { count = { metric = "rounds", n = 1 } } ] } },
  { spawn = { program = "child" } }, { spawn = { program = "child" } }, "join", "join_any",
  { sleep = 100000 }, { timer = { timer = "t", period = 50000 } }]

[[task]]
name = "b"
cpu = 1
process = "p"
program = [{ loop = { n = 40, body = [
  { lock = { lock = "m" } }, { run = 2000 }, { unlock = { lock = "m" } },
  { barrier = { barrier = "b", n = 2 } },
  { pipe_read = { pipe = "q", bytes = 4096 } },
  { futex_wait = { futex = "f" } },
  { lock = { lock = "m" } }, { cond_signal = { cond = "c" } }, { unlock = { lock = "m" } } ] } }]

[[process]]
name = "p"
"#,
    );
    let o = real(&s, false);
    all_exited(&o, "ops");
    assert_eq!(
        o.outcome.counts.get("rounds"),
        Some(&40),
        "40 rounds: {:?}",
        o.outcome.counts
    );
    assert_eq!(
        o.outcome.counts.get("children"),
        Some(&2),
        "two children ran: {:?}",
        o.outcome.counts
    );
    assert!(
        o.outcome.tasks.contains_key("a.child#1"),
        "children named as the simulator names them: {:?}",
        o.outcome.tasks.keys()
    );
    let (a, b) = (o.threads["a"], o.threads["b"]);
    assert_eq!(
        a.1, b.1,
        "threads of one scenario process are one real process"
    );
    assert_ne!(a.0, b.0, "and two threads");
    assert!(
        schedlab_real::sys::children(std::process::id()).is_empty(),
        "a process outlived the run: {:?}",
        schedlab_real::sys::children(std::process::id())
    );
}

#[test]
fn a_forked_child_is_a_process_of_its_own_and_its_parent_joins_it() {
    let _one = serial();
    // A parent forks two children and spawns a thread; each child forks
    // a grandchild; they pass a pipe's bytes and a futex across processes.
    let s = scenario(
        "forks",
        "",
        r#"
[programs]
child = [{ fork = { program = "grandchild" } }, { pipe_write = { pipe = "q", bytes = 100 } }, "join",
  { count = { metric = "children", n = 1 } }]
grandchild = [{ futex_wait = { futex = "f" } }, { count = { metric = "grandchildren", n = 1 } }]
thread = [{ pipe_read = { pipe = "q", bytes = 200 } }, { futex_wake = { futex = "f", n = 2 } }]

[[task]]
name = "main"
cpu = 0
program = [{ fork = { program = "child" } }, { fork = { program = "child" } },
  { spawn = { program = "thread" } }, "join", "join_any", "join"]
"#,
    );
    let o = real(&s, false);
    all_exited(&o, "forks");
    assert_eq!(
        (
            o.outcome.counts.get("children"),
            o.outcome.counts.get("grandchildren")
        ),
        (Some(&2), Some(&2)),
        "two children and two grandchildren ran to their end: {:?}",
        o.outcome.counts
    );
    let pid = |n: &str| {
        o.threads
            .get(n)
            .unwrap_or_else(|| panic!("task {n} reported: {:?}", o.threads.keys()))
            .1
    };
    let main = pid("main");
    assert_eq!(
        pid("main.thread"),
        main,
        "a spawned thread is of its parent's process"
    );
    let kids = [pid("main.child"), pid("main.child#1")];
    let grandkids = [pid("main.child.grandchild"), pid("main.child#1.grandchild")];
    let mut all = vec![main];
    all.extend(kids);
    all.extend(grandkids);
    let distinct: std::collections::BTreeSet<i32> = all.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        5,
        "main, two children, two grandchildren: five processes, got pids {all:?}"
    );
    assert!(
        schedlab_real::sys::children(std::process::id()).is_empty(),
        "a process outlived the run: {:?}",
        schedlab_real::sys::children(std::process::id())
    );
}

#[test]
fn separate_processes_share_a_port_and_a_pipe() {
    let _one = serial();
    let s = scenario(
        "procs",
        "",
        r#"
[[task]]
name = "client"
cpu = 0
program = [{ loop = { n = 50, body = [{ call = { port = "p", bytes = 4096 } }, { pipe_read = { pipe = "x", bytes = 100 } }, { lap = { metric = "rtt" } }] } }]

[[task]]
name = "server"
cpu = 1
program = [{ loop = { n = 50, body = [{ serve = { port = "p" } }, { reply = { bytes = 4096 } }, { pipe_write = { pipe = "x", bytes = 100 } }] } }]
"#,
    );
    let o = real(&s, false);
    all_exited(&o, "procs");
    assert_eq!(
        o.outcome.laps["rtt"].len(),
        49,
        "50 round trips: the first starts the lap"
    );
    assert_ne!(
        o.threads["client"].1, o.threads["server"].1,
        "two scenario processes are two real processes"
    );
}

#[test]
fn a_deadlock_ends_with_a_report_of_who_waits_on_what() {
    let _one = serial();
    let s = scenario(
        "deadlock",
        "run_ms = 20000\n",
        r#"
[[task]]
name = "a"
cpu = 0
program = [{ lock = { lock = "x" } }, { sleep = 2000000 }, { lock = { lock = "y" } }]

[[task]]
name = "b"
cpu = 1
program = [{ lock = { lock = "y" } }, { sleep = 2000000 }, { lock = { lock = "x" } }]
"#,
    );
    let o = real(&s, false);
    let st = o.outcome.stall.as_ref().expect("a deadlock is a stall");
    let text = st.to_string();
    assert!(
        text.contains("a waits on lock \"y\" (held by b)"),
        "who waits on what: {text}"
    );
    assert!(
        text.contains("b waits on lock \"x\" (held by a)"),
        "who waits on what: {text}"
    );
    assert_eq!(st.cycle.len(), 2, "the waits form a cycle: {text}");
    assert!(
        o.outcome.end_ns < 20_000_000_000,
        "found before the deadline: {} ns",
        o.outcome.end_ns
    );
    assert!(
        schedlab_real::sys::children(std::process::id()).is_empty(),
        "a blocked process outlived the run: {:?}",
        schedlab_real::sys::children(std::process::id())
    );
}

/// A forked child that waits for ever: the run stalls, the report names
/// the parent waiting on the child and the child on its futex, and neither
/// the scenario's process nor the forked one outlives the run.
#[test]
fn a_stalled_forked_child_is_reported_and_left_nowhere() {
    let _one = serial();
    let s = scenario(
        "forkstall",
        "run_ms = 20000\n",
        r#"
[programs]
child = [{ futex_wait = { futex = "never" } }]

[[task]]
name = "main"
cpu = 0
program = [{ fork = { program = "child" } }, "join"]
"#,
    );
    let o = real(&s, false);
    let st = o
        .outcome
        .stall
        .as_ref()
        .expect("a child waiting for ever is a stall");
    let text = st.to_string();
    assert!(
        text.contains("main waits on child main.child to exit (join)")
            && text.contains("main.child waits on a wake of futex \"never\""),
        "who waits on what, across the fork: {text}"
    );
    let left: Vec<i32> = schedlab_real::sys::descendants(&[std::process::id() as i32]);
    assert!(left.is_empty(), "processes outlived the run: {left:?}");
}

#[test]
fn a_cpu_this_machine_lacks_is_refused_at_its_place() {
    let dir_tmp = tempfile::tempdir().expect("a temp dir");
    let dir = dir_tmp.path().to_path_buf();
    let p = dir.join("far.toml");
    std::fs::write(&p, "[topology]\npreset = \"amd-2x8\"\n[[task]]\nname = \"a\"\ncpu = 900\nprogram = [{ run = 10 }]\n").expect("write");
    let Err(e) = file::load_on(&p, Params::new([]), machine()) else {
        panic!("cpu900 is refused on a machine without it");
    };
    let text = e.to_string();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        text.contains("far.toml:5:7") && text.contains("this machine"),
        "the place and why: {text}"
    );
}

fn tracefs_state() -> (Vec<String>, Vec<String>) {
    let mounts: Vec<String> = std::fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("tracefs"))
        .map(str::to_string)
        .collect();
    let instances = mounts
        .iter()
        .filter_map(|l| l.split_whitespace().nth(1))
        .flat_map(|d| {
            std::fs::read_dir(format!("{d}/instances"))
                .into_iter()
                .flatten()
        })
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    (mounts, instances)
}

#[test]
fn the_kernel_names_every_waker_of_a_pair_and_tracefs_is_left_as_found() {
    let _one = serial();
    let s = catalog::build(
        "reqrep",
        Some("sysfs"),
        Params::new([("rounds".into(), "200".into())]),
    )
    .expect("reqrep builds on this machine");
    let before = tracefs_state();
    let o = real(&s, true);
    assert_eq!(
        tracefs_state(),
        before,
        "tracefs mounts and instances as found"
    );
    if !schedlab_real::sys::is_root() {
        let why = o.no_record.expect("no record without root");
        assert!(why.contains("root"), "says why: {why}");
        return;
    }
    let k = o
        .kernel
        .as_ref()
        .unwrap_or_else(|| panic!("as root the kernel's record is there: {:?}", o.no_record));
    let by = |wakee: &str, waker: &str| {
        k.wakes_by
            .get(wakee)
            .and_then(|m| m.get(waker))
            .copied()
            .unwrap_or(0)
    };
    assert!(
        by("server", "client") > 0 && by("client", "server") > 0,
        "wakes name their wakers: {:?}",
        k.wakes_by
    );
    let named = k.counters["kernel.wakes.by_task"] + k.counters["kernel.wakes.start"];
    assert_eq!(
        k.counters["kernel.wakes"],
        named + k.counters["kernel.wakes.from_interrupt"] + k.counters["kernel.wakes.by_other"],
        "every wake is counted once: {:?}",
        k.counters
    );
    assert_eq!(
        k.counters["kernel.wakes.by_other"], 0,
        "nobody outside the pair wakes it: {:?}",
        k.wakes_by
    );
    let tids: Vec<i32> = o.threads.values().map(|t| t.0).collect();
    let switches_in = o.outcome.event_log.iter().filter(|e| matches!(&e.kind, schedlab_sim::EventKind::Switch { next: Some(t), .. } if k.threads[&t.0].ours)).count();
    assert!(
        switches_in > 0 && tids.iter().all(|t| *t > 0),
        "the log switches to the run's threads"
    );
}

#[test]
fn a_cookie_is_the_kernels_or_a_clear_error() {
    let _one = serial();
    let s = scenario(
        "cookie",
        "",
        "[[task]]\nname = \"a\"\ncpu = 0\ncookie = 7\nprogram = [{ run = 1000 }]\n[[task]]\nname = \"b\"\ncpu = 1\ncookie = 7\nprogram = [{ run = 1000 }]\n",
    );
    match run(&s.spec, 1, &Options::default()) {
        Ok(o) => {
            assert!(
                schedlab_real::sys::has_core_sched(),
                "a cookie ran on a kernel without core scheduling"
            );
            all_exited(&o, "cookie");
        }
        Err(e) => {
            assert!(
                !schedlab_real::sys::has_core_sched(),
                "this kernel has core scheduling, yet: {e}"
            );
            assert!(
                e.to_string().contains("CONFIG_SCHED_CORE"),
                "names the missing option: {e}"
            );
        }
    }
}
