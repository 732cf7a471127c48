//! `--real` end to end through the binary: the JSON of a real run, the
//! exit code and report of a real deadlock, and a real trace that decodes
//! with the kernel's thread ids in it. Semantics only, never timings.
//! CI runs as root, so the kernel's record is there.

mod common;

use common::schedlab;
use prost::Message;
use schedlab::perfetto::{Data, Ftrace, Trace};
use serde_json::Value;

fn root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

#[test]
fn a_real_reqrep_prints_real_figures_and_names_every_waker() {
    let (code, out, err) =
        schedlab(&["run", "reqrep", "--real", "--param", "rounds=200", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("JSON: {e}: {out}"));
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
    if root() {
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
    let d = std::env::temp_dir().join(format!("schedlab-real-cli-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let f = d.join("deadlock.toml");
    std::fs::write(
        &f,
        "[topology]\npreset = \"amd-2x8\"\n[[task]]\nname = \"a\"\ncpu = 0\nprogram = [{ lock = { lock = \"x\" } }, { sleep = 1000000 }, { lock = { lock = \"y\" } }]\n[[task]]\nname = \"b\"\ncpu = 1\nprogram = [{ lock = { lock = \"y\" } }, { sleep = 1000000 }, { lock = { lock = \"x\" } }]\n",
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
    if !root() {
        let (code, _, err) = schedlab(&["trace", "reqrep", "--real", "--param", "rounds=20"]);
        assert_eq!(code, 2, "a real trace needs root: {err}");
        return;
    }
    let path = std::env::temp_dir().join(format!("schedlab-real-{}.pftrace", std::process::id()));
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
    let t = Trace::decode(std::fs::read(&path).unwrap().as_slice())
        .expect("a Perfetto trace that decodes");
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
