//! `schedlab import` end to end: a trace made by a tool nobody here wrote
//! becomes `record`'s three files, its replay runs under every policy on
//! the trace's machine shape and on another, `--check` prints the replay's
//! figures and the shadow's rows, and a topology without the trace's CPUs
//! is refused. Then the claim `import` rests on: `trace-cmd record` of a
//! program nobody here wrote, taken while `schedlab record` records the
//! same run, imports to `record`'s own counts (root, trace-cmd and perf
//! installed). Semantics only, never timings.

use std::path::{Path, PathBuf};

use crate::common::{is_root, schedlab, scratch_file, tracefs_root};
use serde_json::Value;

/// The fixture `name` of crates/real (gzipped), unpacked into `dir`.
fn fixture(name: &str, dir: &Path) -> PathBuf {
    let gz = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../real/tests/fixtures/import")
        .join(format!("{name}.gz"));
    let out = dir.join(name);
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("gzip -dc '{}' > '{}'", gz.display(), out.display()))
        .status()
        .expect("gzip");
    assert!(status.success(), "gzip -dc {}", gz.display());
    out
}

/// The 2-CPU, one-LLC machine the fixtures were recorded on.
const TWO: &str = "[[node]]\n[[node.llc]]\ncores = [\"0\", \"1\"]\n";

fn policies() -> Vec<String> {
    let (code, out, err) = schedlab(&["policies"]);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect()
}

#[test]
fn an_imported_trace_writes_record_s_files_and_replays_under_every_policy() {
    let tmp = tempfile::tempdir().unwrap();
    let dat = fixture("pipe-v7.dat", tmp.path());
    let topo = scratch_file("two.toml", TWO);
    let out = tmp.path().join("out");
    let (code, stdout, err) = schedlab(&[
        "import",
        dat.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--comm",
        "sched-pipe",
        "--topology",
        &topo,
        "--check",
    ]);
    assert_eq!(code, 0, "import --check: {stdout}{err}");
    for f in ["trace.pftrace", "summary.json", "replay.toml"] {
        assert!(out.join(f).exists(), "{f} written: {stdout}");
    }
    for row in [
        "(trace-cmd trace.dat v7)",
        "kept 2 threads",
        "67 wakes",
        "makespan_ms",
        "wakes between threads",
        "  model     ",
        "  fit       ",
        "the kernel's wake placement",
        "the kernel's migrations outside a wake",
    ] {
        assert!(
            stdout.contains(row),
            "import --check prints {row:?}: {stdout}"
        );
    }
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert!(
        summary["shadow"]["placement"]["wakes"].as_u64() > Some(0),
        "summary.json's shadow has the placement row: {}",
        summary["shadow"]
    );
    let replay = out.join("replay.toml");
    for policy in policies() {
        for t in [&*topo, "amd-2x8"] {
            let (code, o, e) = schedlab(&[
                "run",
                replay.to_str().unwrap(),
                "--topology",
                t,
                "--policy",
                &policy,
            ]);
            assert_eq!(code, 0, "the replay under {policy} on {t}: {o}{e}");
        }
    }
}

#[test]
fn a_topology_without_the_trace_s_cpus_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dat = fixture("pipe.perf.data", tmp.path());
    let one = scratch_file("one.toml", "[[node]]\n[[node.llc]]\ncores = [\"0\"]\n");
    let out = tmp.path().join("out");
    let (code, stdout, err) = schedlab(&[
        "import",
        dat.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--topology",
        &one,
    ]);
    assert_eq!(code, 2, "bad input: {stdout}{err}");
    assert!(
        err.contains("names CPU 1") && err.contains("lacks"),
        "the CPU named: {err}"
    );
    assert!(!out.exists(), "nothing written");
}

/// The top-level tracefs settings trace-cmd touches, to put back after it.
fn tracefs_settings() -> Vec<(PathBuf, String)> {
    let root = tracefs_root();
    [
        "tracing_on",
        "buffer_size_kb",
        "trace_clock",
        "set_event",
        "current_tracer",
    ]
    .into_iter()
    .map(|f| {
        let p = root.join(f);
        let v = std::fs::read_to_string(&p).unwrap_or_default();
        (p, v)
    })
    .collect()
}

fn restore(settings: &[(PathBuf, String)]) {
    for (p, v) in settings {
        let v = match p.file_name().and_then(|n| n.to_str()) {
            // The clock in use is the one in brackets.
            Some("trace_clock") => v
                .split_whitespace()
                .find(|c| c.starts_with('['))
                .map(|c| c.trim_matches(['[', ']']).to_string())
                .unwrap_or_default(),
            // An empty set_event clears it (a newline clears it too).
            _ => v.clone(),
        };
        let _ = std::fs::write(p, if v.is_empty() { "\n".into() } else { v });
    }
}

/// trace-cmd's record of the machine (`scripts/trace-cmd-here`) while
/// `schedlab record` records perf's `sched pipe`, in `dir`: trace-cmd's
/// file and record's directory. The tracefs settings trace-cmd changes are
/// put back.
fn record_under_trace_cmd(dir: &Path) -> (PathBuf, PathBuf) {
    let dat = dir.join("trace.dat");
    let rec_dir = dir.join("record");
    let wrapper = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/trace-cmd-here");
    let settings = tracefs_settings();
    let out = std::process::Command::new(&wrapper)
        .args([
            "record",
            "-q",
            "-e",
            "sched",
            "-e",
            "task:task_newtask",
            "-o",
        ])
        .arg(&dat)
        .arg(env!("CARGO_BIN_EXE_schedlab"))
        .args(["record", "--out"])
        .arg(&rec_dir)
        .args(["--", "perf", "bench", "sched", "pipe", "-l", "2000"])
        .output()
        .expect("trace-cmd");
    restore(&settings);
    assert!(
        dat.exists() && rec_dir.join("summary.json").exists(),
        "trace-cmd and record both wrote: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (dat, rec_dir)
}

/// `trace-cmd record -e sched` of the machine while `schedlab record`
/// records perf's `sched pipe` (a program nobody here wrote): the import
/// of trace-cmd's file, kept to the threads `record` kept, gives `record`'s
/// counts. The two read the kernel's one record from different buffers,
/// and may differ only where one was recording and the other not: the
/// command's start, before `record`'s capture began (its fork's wake-up,
/// its wait at the start gate, a move of it then), at most two of each.
/// (This test found `record` losing the migrations a balancer made: the
/// pid filter keeps a `sched_migrate_task` only when the thread running
/// as it fires is the run's; `schedlab_real::tracefs` says how it is
/// recorded now.)
#[test]
fn trace_cmd_s_record_of_a_run_imports_to_record_s_own_counts() {
    let have = |p: &str| {
        std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("command -v {p}"))
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !have("trace-cmd") || !have("perf") {
        eprintln!("skipped: trace-cmd or perf is not installed (Debian: trace-cmd, linux-perf)");
        return;
    }
    assert!(is_root(), "the kernel's record needs root, as CI runs this");
    let tmp = tempfile::tempdir().unwrap();
    let (dat, rec_dir) = record_under_trace_cmd(tmp.path());
    let imp_dir = tmp.path().join("import");
    let rec: Value =
        serde_json::from_str(&std::fs::read_to_string(rec_dir.join("summary.json")).unwrap())
            .unwrap();
    let threads = rec["threads"].as_object().expect("record's threads");
    let mut args: Vec<String> = vec![
        "import".into(),
        dat.to_string_lossy().into(),
        "--out".into(),
        imp_dir.to_string_lossy().into(),
    ];
    for name in threads.keys() {
        let tid = name.rsplit('-').next().unwrap();
        args.extend(["--pid".into(), tid.into()]);
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, stdout, err) = schedlab(&argv);
    assert_eq!(code, 0, "import: {stdout}{err}");
    let imp: Value =
        serde_json::from_str(&std::fs::read_to_string(imp_dir.join("summary.json")).unwrap())
            .unwrap();
    let k = |v: &Value, key: &str| {
        v["counters"][key]
            .as_u64()
            .unwrap_or_else(|| panic!("{key} in {}", v["counters"]))
    };
    let (r, i) = (&rec, &imp);
    assert_eq!(
        imp["threads"].as_object().map(|t| t.len()),
        Some(threads.len()),
        "the same threads: {} / {}",
        imp["threads"],
        rec["threads"]
    );
    for key in [
        "kernel.wakes",
        "kernel.wakes.by_task",
        "kernel.switches",
        "kernel.migrations",
    ] {
        let (a, b) = (k(r, key), k(i, key));
        assert!(
            b >= a && b - a <= 2,
            "{key}: record {a}, the import of trace-cmd's file {b} (at most the start's two more)"
        );
    }
}
