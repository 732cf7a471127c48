//! `--real` end to end through the binary: the JSON of a real run, the
//! exit code and report of a real deadlock, and a real trace that decodes
//! with the kernel's thread ids in it. Semantics only, never timings.
//! CI runs as root, so the kernel's record is there.

use crate::common::{is_root, schedlab, scratch_file, Scratch};
use schedlab_trace::perfetto::{Data, Ftrace};
use serde_json::Value;

/// Runs the binary, expects exit 0 and JSON on stdout.
fn json(args: &[&str]) -> Value {
    let (code, out, err) = schedlab(args);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: JSON: {e}: {out}"))
}

#[test]
fn a_real_reqrep_prints_real_figures_and_names_every_waker() {
    let v = json(&["run", "reqrep", "--real", "--param", "rounds=200", "--json"]);
    assert_eq!(v["real"], true);
    assert!(
        v["machine"]["kernel"].is_string() && v["machine"]["cpus"].as_u64() > Some(0),
        "{}",
        v["machine"]
    );
    let run = &v["runs"][0];
    assert!(
        run["figures"]["rtt_us"].as_f64().is_some_and(|x| x > 0.0),
        "a real round trip: {}",
        run["figures"]
    );
    assert!(
        v["not_measured"]
            .as_array()
            .is_some_and(|m| m.iter().any(|x| x["figure"] == "trace_hash")),
        "says what it cannot measure: {}",
        v["not_measured"]
    );
    if is_root() {
        let by = &run["kernel"]["wakes_by"];
        assert!(
            by["server"]["client"].as_u64() > Some(0) && by["client"]["server"].as_u64() > Some(0),
            "{by}"
        );
    } else {
        assert!(
            run["kernel"]["missing"]
                .as_str()
                .is_some_and(|m| m.contains("root")),
            "{}",
            run["kernel"]
        );
    }
}

#[test]
fn a_real_deadlock_exits_3_naming_who_waits_on_what() {
    let d_tmp = tempfile::tempdir().expect("a temp dir");
    let d = d_tmp.path().to_path_buf();
    let f = d.join("deadlock.toml");
    // Each holds its first lock 100 ms before asking for the second: both
    // hold one before either asks, however late the second starts (with
    // 1 ms, a `b` started late under the test suite's load found `a` gone,
    // holding both: a stall, but no cycle).
    std::fs::write(
        &f,
        "[topology]\npreset = \"amd-2x8\"\n[[task]]\nname = \"a\"\ncpu = 0\nprogram = [{ lock = { lock = \"x\" } }, { sleep = 100000000 }, { lock = { lock = \"y\" } }]\n[[task]]\nname = \"b\"\ncpu = 1\nprogram = [{ lock = { lock = \"y\" } }, { sleep = 100000000 }, { lock = { lock = \"x\" } }]\n",
    )
    .unwrap();
    let (code, _, err) = schedlab(&["run", f.to_str().unwrap(), "--real"]);
    assert_eq!(code, 3, "a real deadlock is a stall: {err}");
    assert!(
        err.contains("a waits on lock \"y\" (held by b)") && err.contains("the waits form a cycle"),
        "{err}"
    );
}

#[test]
fn a_real_trace_decodes_with_the_kernels_thread_ids() {
    if !is_root() {
        let (code, _, err) = schedlab(&["trace", "reqrep", "--real", "--param", "rounds=20"]);
        assert_eq!(code, 2, "a real trace needs root: {err}");
        return;
    }
    let path_tmp = tempfile::tempdir().expect("a temp dir");
    let path = path_tmp.path().join("t.pftrace");
    let (code, out, err) = schedlab(&[
        "trace",
        "reqrep",
        "--real",
        "--param",
        "rounds=200",
        "--out",
        path.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("ui.perfetto.dev"), "{out}");
    let bytes = std::fs::read(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    let t = schedlab_trace::decode(&bytes).expect("a Perfetto trace that decodes");
    let mut threads = std::collections::BTreeMap::new();
    let (mut switches, mut wakings, mut flows) = (0, 0, 0);
    for p in &t.packet {
        match &p.data {
            Some(Data::ProcessTree(tree)) => {
                for th in &tree.threads {
                    threads.insert(th.tid(), th.name().to_string());
                }
            }
            Some(Data::FtraceEvents(b)) => {
                for e in &b.event {
                    match &e.event {
                        Some(Ftrace::SchedSwitch(s))
                            if threads
                                .get(&s.next_pid())
                                .is_some_and(|n| n == "client" || n == "server") =>
                        {
                            switches += 1
                        }
                        Some(Ftrace::SchedWaking(w))
                            if threads
                                .get(&w.pid())
                                .is_some_and(|n| n == "client" || n == "server") =>
                        {
                            wakings += 1
                        }
                        _ => {}
                    }
                }
            }
            Some(Data::TrackEvent(te)) => flows += te.flow_ids.len(),
            _ => {}
        }
    }
    assert!(
        threads.values().any(|n| n == "client") && threads.keys().all(|&tid| tid > 0),
        "real tids: {threads:?}"
    );
    assert!(
        switches >= 200 && wakings >= 200,
        "the pair's switches {switches} and wakings {wakings}"
    );
    assert!(flows >= 200, "flows link wakes to switches: {flows}");
}

#[test]
fn suite_real_puts_real_medians_beside_simulated_ones_and_says_what_it_skips() {
    let v = json(&[
        "suite",
        "--real",
        "--rows",
        "hackbench.pipe.g1",
        "--rows",
        "ipc.reqrep.8",
        "--seeds",
        "2",
        "--json",
    ]);
    let rows = v["rows"].as_array().expect("rows");
    let hb = rows
        .iter()
        .find(|r| r["row"] == "hackbench.pipe.g1")
        .expect("the hackbench row");
    assert_eq!(
        hb["real"]["reps"].as_array().map(Vec::len),
        Some(2),
        "two real reps: {hb}"
    );
    assert!(
        hb["simulated"]["linux"]["median"].as_f64() > Some(0.0),
        "the simulated median beside it: {hb}"
    );
    let rr = rows
        .iter()
        .find(|r| r["row"] == "ipc.reqrep.8")
        .expect("the reqrep row");
    let machine_llcs = v["machine"]["llcs"].as_u64().unwrap_or(0);
    if machine_llcs < 2 {
        assert!(
            rr["skipped"].as_str().is_some_and(|w| w.contains("LLC")),
            "skipped, with why: {rr}"
        );
    }
}

#[test]
fn sweep_real_runs_each_value_for_real() {
    let v = json(&[
        "sweep",
        "reqrep",
        "--real",
        "--param",
        "bytes=8,4096",
        "--param",
        "rounds=50",
        "--seeds",
        "2",
        "--json",
    ]);
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2, "one row per value: {v}");
    for r in rows {
        assert_eq!(
            r["figures"]["rtt_us"]["runs_nonzero"], 2,
            "both reps measured a round trip: {r}"
        );
    }
}

/// A scenario file; `top` holds its top-level keys.
fn scenario_file(name: &str, top: &str, text: &str) -> Scratch {
    scratch_file(
        name,
        &format!("{top}[topology]\npreset = \"amd-2x8\"\n{text}"),
    )
}

#[test]
fn an_op_that_fails_ends_the_run_with_exit_4_naming_the_task() {
    let f = scenario_file(
        "fault.toml",
        "",
        "[[task]]\nname = \"lonely\"\ncpu = 0\nprogram = [{ reply = { bytes = 8 } }]\n[[task]]\nname = \"sleeper\"\ncpu = 1\nprogram = [{ sleep = 5000000000 }]\n",
    );
    let (code, _, err) = schedlab(&["run", &f, "--real"]);
    assert_eq!(code, 4, "a failed op is a failed real run: {err}");
    assert!(
        err.contains("lonely") && err.contains("reply with no request"),
        "names the task and the op: {err}"
    );
}

#[test]
fn ctrl_c_ends_every_process_restores_tracefs_and_exits_130() {
    let f = scenario_file(
        "long.toml",
        "run_ms = 60000\n",
        "[[task]]\nname = \"a\"\ncpu = 0\nprogram = [{ sleep = 50000000000 }]\n[[task]]\nname = \"b\"\ncpu = 1\nprogram = [{ loop = { n = 100000000, body = [{ run = 100000 }, { sleep = 100000 }] } }]\n",
    );
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_schedlab"))
        .args(["run", &f, "--real"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run schedlab");
    let pid = child.id();
    // Wait until the run's processes are there, then interrupt it.
    let started = std::time::Instant::now();
    while schedlab_real::sys::children(pid).is_empty() && started.elapsed().as_secs() < 20 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        !schedlab_real::sys::children(pid).is_empty(),
        "the run forked its processes"
    );
    std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .expect("kill -INT");
    let out = child.wait_with_output().expect("it ends");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "interrupted: {err}");
    assert!(err.contains("interrupted"), "says so: {err}");
    let ours = format!("schedlab-tracefs-{pid}");
    let left = std::fs::read_to_string("/proc/self/mounts").unwrap();
    assert!(
        !left.contains(&ours),
        "the run's tracefs mount is gone: {left}"
    );
    assert!(
        !std::path::Path::new(&std::env::temp_dir().join(&ours)).exists(),
        "and its directory"
    );
    let orphans: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("cmdline")).ok())
        .filter(|c| {
            c.contains("long.toml")
                && c.contains(&format!("schedlab-real-cli-{}", std::process::id()))
        })
        .collect();
    assert!(
        orphans.is_empty(),
        "no process of the run is left: {orphans:?}"
    );
}

/// A real run of an rt-app file keeps rt-app's log as the simulator does:
/// one line per loop, with the file's configured columns.
#[test]
fn a_real_rt_app_run_logs_each_loop() {
    let d_tmp = tempfile::tempdir().expect("a temp dir");
    let d = d_tmp.path().to_path_buf();
    let f = d.join("five.json");
    std::fs::write(
        &f,
        r#"{ "tasks": { "tick": { "loop": 5, "phases": { "p": { "run": 300, "timer": { "ref": "unique", "period": 2000 } } } } } }"#,
    )
    .unwrap();
    let v = json(&[
        "run",
        f.to_str().unwrap(),
        "--real",
        "--topology",
        "sysfs",
        "--json",
    ]);
    let tick = v["runs"][0]["rtapp_log"]["tick"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        tick.len(),
        5,
        "one line per loop: {}",
        v["runs"][0]["rtapp_log"]
    );
    for l in &tick {
        assert_eq!(
            (l["c_duration"].as_u64(), l["c_period"].as_u64()),
            (Some(300), Some(2000)),
            "{l}"
        );
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// A phase's `cpus` move the real thread too (`sched_setaffinity`): it
/// ends on the last phase's CPU.
#[test]
fn a_real_thread_follows_its_phases_cpus() {
    let d_tmp = tempfile::tempdir().expect("a temp dir");
    let d = d_tmp.path().to_path_buf();
    let f = d.join("phases.json");
    std::fs::write(
        &f,
        r#"{ "tasks": { "t": { "loop": 1, "phases": {
            "a": { "cpus": [1], "run": 2000 }, "b": { "cpus": [0], "run": 2000 } } } } }"#,
    )
    .unwrap();
    let v = json(&[
        "run",
        f.to_str().unwrap(),
        "--real",
        "--topology",
        "sysfs",
        "--json",
    ]);
    assert_eq!(
        v["runs"][0]["tasks"]["t"]["final_cpu"], 0,
        "last on phase b's cpu0: {}",
        v["runs"][0]["tasks"]
    );
    std::fs::remove_dir_all(&d).unwrap();
}

/// A real stall names the wake that was lost, as the simulator's report
/// does: rt-app's resume of a thread still running (a condition's signal
/// nobody waits for), and a futex wake that found nobody waiting (its
/// waker then waits for the next one, as in the simulator).
#[test]
fn a_real_stall_names_the_lost_signal_and_the_lost_futex_wake() {
    let d_tmp = tempfile::tempdir().expect("a temp dir");
    let d = d_tmp.path();
    let cond = d.join("lost.json");
    std::fs::write(
        &cond,
        r#"{ "tasks": {
            "a": { "loop": 1, "run": 100, "resume": "b" },
            "b": { "loop": 1, "run": 5000, "suspend": "b" } } }"#,
    )
    .unwrap();
    let (code, _, err) = schedlab(&["run", cond.to_str().unwrap(), "--real"]);
    assert_eq!(code, 3, "a lost resume stalls b: {err}");
    assert!(
        err.contains("b waits on a signal of condition \"b\"; its last wake, by a at ")
            && err.contains("found nobody waiting and was lost"),
        "{err}"
    );
    let futex = d.join("futex.toml");
    std::fs::write(
        &futex,
        "[[task]]\nname = \"w\"\ncpu = 0\nprogram = [{ futex_wake = { futex = \"f\", n = 1 } }, { futex_wait = { futex = \"f\" } }]\n",
    )
    .unwrap();
    let (code, _, err) = schedlab(&["run", futex.to_str().unwrap(), "--real"]);
    assert_eq!(code, 3, "w waits for a wake after its own: {err}");
    assert!(
        err.contains("w waits on a wake of futex \"f\"; its last wake, by w at ")
            && err.contains("found nobody waiting and was lost"),
        "{err}"
    );
}
