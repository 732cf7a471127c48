//! `schedlab record` end to end, as root (CI runs as root; the kernel's
//! record needs it): a small real program recorded, its three files
//! written, each recorded wake edge kept in the replay's programs (one
//! byte written by the waker and one read by the wakee per wake), and the
//! replay run to its end, and the kernel's picks held to the model's
//! (some compared; the share that agrees is this machine's, not asserted).
//! A failing command's exit code is passed on, its files still written.
//! Semantics only, never timings.

use crate::common::{schedlab, tracefs_root};
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

/// `pid`'s instances under `root`.
fn instances_of(root: &std::path::Path, pid: u32) -> Vec<String> {
    let prefix = format!("schedlab-{pid}-");
    std::fs::read_dir(root.join("instances"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// Polls `f` every 20 ms for up to 20 s: its first answer.
fn until<T>(mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let t0 = std::time::Instant::now();
    loop {
        let v = f();
        if v.is_some() || t0.elapsed() > std::time::Duration::from_secs(20) {
            return v;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A child of `parent` running `comm`, from `/proc`.
fn child_named(parent: u32, comm: &str) -> Option<i32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let p: i32 = e.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
        let ppid: u32 = stat
            .rsplit(')')
            .next()?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        (ppid == parent && stat.contains(&format!("({comm})"))).then_some(p)
    })
}

/// A tracefs mount as a run killed on a machine without tracefs mounted
/// leaves it: on `TMP/schedlab-tracefs-PID`, PID a process that is gone.
fn dead_runs_mount() -> std::path::PathBuf {
    let mut gone = std::process::Command::new("true").spawn().expect("true");
    let dead = gone.id();
    gone.wait().expect("reap true");
    let mnt = std::env::temp_dir().join(format!("schedlab-tracefs-{dead}"));
    std::fs::create_dir_all(&mnt).expect("mount point");
    let st = std::process::Command::new("mount")
        .args(["-t", "tracefs", "nodev", mnt.to_str().unwrap()])
        .status()
        .expect("mount");
    assert!(st.success(), "mount -t tracefs on {}", mnt.display());
    mnt
}

/// A recording killed with SIGKILL runs none of its undo steps: its
/// instance stays (recording every switch of the machine), and so would a
/// tracefs mount of its own. Its command dies with it (`PR_SET_PDEATHSIG`);
/// the next run removes the instance and a mount a dead run left (one made
/// here by hand, as a killed run whose machine had no tracefs mounted
/// leaves it) and says so. Other tests' runs may sweep first: what is
/// asserted is that nothing is left, and that a sweep line names only
/// leftovers.
#[test]
fn a_recording_killed_outright_leaves_nothing_the_next_run_does_not_remove() {
    let root = tracefs_root();
    let out = dir("killed");
    let mut rec = std::process::Command::new(env!("CARGO_BIN_EXE_schedlab"))
        .args([
            "record",
            "--out",
            out.to_str().unwrap(),
            "--",
            "sleep",
            "30",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start schedlab record");
    let pid = rec.id();
    until(|| (!instances_of(&root, pid).is_empty()).then_some(()));
    assert!(
        !instances_of(&root, pid).is_empty(),
        "the recording made its instance in {}",
        root.display()
    );
    // Its command, once it runs (the gate opens after the instance).
    let cmd = until(|| child_named(pid, "sleep")).expect("the recorded command started");
    rec.kill().expect("SIGKILL the recording");
    rec.wait().expect("reap it");
    until(|| (!std::path::Path::new(&format!("/proc/{cmd}")).exists()).then_some(()));
    assert!(
        !std::path::Path::new(&format!("/proc/{cmd}")).exists(),
        "the recorded command (pid {cmd}) died with its recorder"
    );
    let mnt = dead_runs_mount();
    let out2 = dir("after-kill");
    let (code, _, stderr) = schedlab(&["record", "--out", out2.to_str().unwrap(), "--", "true"]);
    assert_eq!(code, 0, "the next recording runs: {stderr}");
    assert!(
        instances_of(&root, pid).is_empty(),
        "the killed run's instance was removed: {stderr}"
    );
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    assert!(
        !mounts.contains(mnt.to_str().unwrap()),
        "the dead run's mount was removed: {stderr}"
    );
    assert!(!mnt.exists(), "and its directory");
    if let Some(line) = stderr.lines().find(|l| l.contains("removed what runs")) {
        assert!(
            line.contains(&format!("schedlab-{pid}-")) || line.contains("schedlab-tracefs-"),
            "the sweep line names leftovers: {line}"
        );
    }
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_dir_all(&out2);
}
