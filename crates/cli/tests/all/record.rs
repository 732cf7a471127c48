//! `schedlab record` end to end, as root (CI runs as root; the kernel's
//! record needs it): a small real program recorded, its three files
//! written, each recorded wake edge kept in the replay's programs (one
//! byte written by the waker and one read by the wakee per wake), and the
//! replay run to its end, and the kernel's picks held to the model's
//! (some compared; the share that agrees is this machine's, not asserted).
//! A failing command's exit code is passed on, its files still written.
//! Semantics only, never timings.

use crate::common::schedlab;
use serde_json::Value;

fn dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("schedlab-record-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// How many `op`s on `pipe` the program of task `task` in `toml` has.
fn ops(toml: &Value, task: &str, op: &str, pipe: &str) -> usize {
    toml["task"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["name"] == task))
        .and_then(|t| t["program"].as_array())
        .map_or(0, |p| p.iter().filter(|o| o[op]["pipe"] == pipe).count())
}

/// `--check` prints each figure held to its tolerance, and the preemptions
/// beside them (the verdicts depend on this machine's timing: not
/// asserted).
fn check_rows(stdout: &str) {
    for row in [
        "makespan_ms",
        "wakes between threads",
        "wake edges (pairs) kept",
        "threads with CPU time within 1.25x",
        "switches while runnable (preempted)",
        "feature set",
        "  model     ",
        "  fit       ",
    ] {
        assert!(stdout.contains(row), "--check prints {row:?}: {stdout}");
    }
}

/// The three files are in `d`: the summary, read.
fn written(d: &std::path::Path) -> Value {
    for f in ["trace.pftrace", "summary.json", "replay.toml"] {
        assert!(d.join(f).exists(), "{f} written");
    }
    serde_json::from_str(&std::fs::read_to_string(d.join("summary.json")).unwrap()).unwrap()
}

/// The kernel's picks, decided again by the model (`summary.json`'s
/// `shadow`): some were compared, and no more agree than were compared.
fn shadow_compared(summary: &Value) {
    let candidates = summary["shadow"]["candidates"]
        .as_array()
        .expect("shadow.candidates");
    assert!(candidates.len() > 4, "the fit's candidates: {candidates:?}");
    let rows = [&summary["shadow"]["model"], &summary["shadow"]["fit"]];
    for a in rows.into_iter().chain(candidates) {
        let rules = a["set"].as_str().expect("a set's name");
        let n = |k: &str| a[k].as_u64().expect("a count");
        assert!(
            n("picks") > 0,
            "{rules}: the pipeline's picks compared: {a}"
        );
        assert!(
            n("picks_same") + n("picks_tie") <= n("picks"),
            "{rules}: {a}"
        );
    }
}

#[test]
fn a_recorded_pipeline_replays_with_its_wake_edges() {
    let d = dir("pipe");
    let out = d.to_str().unwrap();
    let (code, stdout, err) = schedlab(&[
        "record",
        "--out",
        out,
        "--check",
        "--",
        "sh",
        "-c",
        "yes | head -c 4000000 | wc -c > /dev/null",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("wake edges kept"), "{stdout}");
    check_rows(&stdout);
    let summary = written(&d);
    let threads = summary["threads"].as_object().expect("threads");
    for comm in ["sh-", "yes-", "head-", "wc-"] {
        assert!(
            threads.keys().any(|k| k.starts_with(comm)),
            "{comm} recorded: {:?}",
            threads.keys()
        );
    }
    shadow_compared(&summary);
    let text = std::fs::read_to_string(d.join("replay.toml")).unwrap();
    let replay: Value = toml::from_str::<toml::Value>(&text)
        .map(|v| serde_json::to_value(v).unwrap())
        .expect("replay.toml is TOML");
    let edges = summary["replay"]["wake_edges"].as_array().expect("edges");
    assert!(!edges.is_empty(), "the pipeline's threads wake each other");
    // Each woken thread's inbox goes by its tid (`comm-TID`): every waker
    // writes a byte there per recorded wake, and the woken thread reads
    // one per wake from any of them.
    let tid = |n: &str| n.rsplit_once('-').map_or(n, |(_, t)| t).to_string();
    let mut woken: std::collections::BTreeMap<&str, usize> = Default::default();
    for e in edges {
        let (w, t, n) = (
            e["waker"].as_str().unwrap(),
            e["wakee"].as_str().unwrap(),
            e["wakes"].as_u64().unwrap() as usize,
        );
        let pipe = format!("to>{}", tid(t));
        assert_eq!(
            ops(&replay, w, "pipe_write", &pipe),
            n,
            "edge {w} -> {t}: {n} wakes recorded, one byte written per wake"
        );
        *woken.entry(t).or_default() += n;
    }
    for (t, n) in woken {
        let pipe = format!("to>{}", tid(t));
        assert_eq!(
            ops(&replay, t, "pipe_read", &pipe),
            n,
            "{t}: woken {n} times by recorded threads, one byte read per wake"
        );
    }
    let (code, out, err) = schedlab(&[
        "run",
        &format!("{out}/replay.toml"),
        "--topology",
        "sysfs",
        "--policy",
        "linux",
        "--json",
    ]);
    assert_eq!(code, 0, "the replay runs to its end: {err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(
        v["runs"][0]["figures"]["makespan_ms"].as_f64() > Some(0.0),
        "the first thread's program ran to its end: {}",
        v["runs"][0]["figures"]
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn edges_pair_gives_each_waker_and_woken_pair_its_own_pipe() {
    let d = dir("pair");
    let out = d.to_str().unwrap();
    let (code, _, err) = schedlab(&[
        "record",
        "--edges",
        "pair",
        "--out",
        out,
        "--",
        "sh",
        "-c",
        "yes | head -c 400000 | wc -c > /dev/null",
    ]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(d.join("replay.toml")).unwrap();
    let pipes: Vec<&str> = text
        .split("pipe=\"")
        .skip(1)
        .map(|p| p.split('"').next().unwrap())
        .filter(|p| !p.starts_with("fork>"))
        .collect();
    assert!(!pipes.is_empty(), "the pipeline's wakes are edges: {text}");
    for p in pipes {
        let (w, t) = p.split_once('>').expect("W>T");
        assert!(
            w != "to" && w.bytes().all(|b| b.is_ascii_digit()) && !t.is_empty(),
            "a pair's pipe is named by the waker's and the woken thread's tids: {p}"
        );
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_failing_command_passes_its_exit_code_on_and_is_still_written() {
    let d = dir("fail");
    let (code, _, err) = schedlab(&[
        "record",
        "--out",
        d.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "exit 3",
    ]);
    assert_eq!(code, 3, "the command's exit code: {err}");
    assert!(d.join("replay.toml").exists() && d.join("summary.json").exists());
    let (code, _, err) = schedlab(&[
        "record",
        "--out",
        d.to_str().unwrap(),
        "--duration",
        "0.2",
        "--",
        "sleep",
        "30",
    ]);
    assert_eq!(code, 137, "killed at --duration (SIGKILL: 128 + 9): {err}");
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["cut_short"], true);
    // A recording that would grow too large stops at --max-events.
    let (code, out, err) = schedlab(&[
        "record",
        "--out",
        d.to_str().unwrap(),
        "--max-events",
        "200",
        "--",
        "sh",
        "-c",
        "while :; do sleep 0.001; done",
    ]);
    assert_eq!(code, 137, "killed at --max-events: {err}");
    assert!(
        out.contains("stopped at --duration or --max-events"),
        "{out}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_running_process_is_recorded_for_its_duration_and_left_running() {
    let mut child = std::process::Command::new("sh")
        .args(["-c", "while :; do sleep 0.01; done"])
        .spawn()
        .expect("sh");
    let pid = child.id().to_string();
    let d = dir("pid");
    let (code, out, err) = schedlab(&[
        "record",
        "--pid",
        &pid,
        "--duration",
        "0.3",
        "--out",
        d.to_str().unwrap(),
    ]);
    let still = child.try_wait().expect("try_wait").is_none();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("recorded `pid {pid}`")), "{out}");
    assert!(still, "the process is not ours to stop");
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("summary.json")).unwrap()).unwrap();
    assert!(
        summary["threads"]
            .as_object()
            .is_some_and(|t| t.values().any(|v| v["tid"].as_u64() == pid.parse().ok())),
        "the process's own thread is recorded: {}",
        summary["threads"]
    );
    let (code, _, err) = schedlab(&["record", "--pid", "999999999", "--duration", "0.1"]);
    assert_eq!(code, 2, "no such process: {err}");
    std::fs::remove_dir_all(&d).unwrap();
}
