//! The real tools nobody here wrote, run beside our executor: rt-tests'
//! `hackbench` (its `Time`) and `cyclictest` (its average latency), perf's
//! `bench sched pipe` (µs per op) and `bench sched messaging` (its total
//! time), and rt-app itself (its logs). Each is run as its package
//! installs it; a missing one is `None` or a clear error, for the caller
//! to list as skipped with the package's name ([`PACKAGES`]).

use std::collections::BTreeMap;
use std::path::Path;

use schedlab_scenarios::rtapp::log::{self, Line};

/// rt-tests' `hackbench` with `args`, `reps` times: its Time, ms. `None`
/// when it is not installed.
pub fn hackbench_times(args: &[String], reps: u64) -> Option<Vec<f64>> {
    (0..reps)
        .map(|_| number_after(&output_on(None, "hackbench", args)?, "Time:").map(|s| s * 1e3))
        .collect()
}

/// The Debian package of each tool, for a skip's message.
pub const PACKAGES: [(&str, &str); 4] = [
    ("hackbench", "rt-tests"),
    ("cyclictest", "rt-tests"),
    ("perf", "linux-perf"),
    ("rt-app", "rt-app"),
];

/// Why `tool` is not here: "TOOL is not installed (Debian package P)".
pub fn missing(tool: &str) -> String {
    let package = PACKAGES
        .iter()
        .find(|(t, _)| *t == tool)
        .map_or(tool, |(_, p)| p);
    format!("{tool} is not installed (Debian package {package})")
}

/// `program args`, started from a thread pinned to `cpu` (when given; a
/// child inherits its parent thread's mask, as under `taskset -c CPU`):
/// its standard output, `None` when it cannot run or fails.
fn output_on(cpu: Option<usize>, program: &str, args: &[String]) -> Option<String> {
    std::thread::scope(|s| {
        s.spawn(|| {
            if let Some(c) = cpu {
                schedlab_real::sys::set_affinity(&[c]).ok()?;
            }
            let out = std::process::Command::new(program)
                .args(args)
                .output()
                .ok()?;
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
        })
        .join()
        .ok()
        .flatten()
    })
}

/// The number after `key` on the first line that has it.
fn number_after(text: &str, key: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        let rest = &l[l.find(key)? + key.len()..];
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// The number before `unit` on the first line that ends with it.
fn number_before(text: &str, unit: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        let rest = l.trim().strip_suffix(unit)?;
        rest.split_whitespace().last()?.parse().ok()
    })
}

/// `perf bench sched pipe -l LOOPS` (processes, its default), started on
/// `cpu` when given (`taskset -c CPU`): its µs per op. `None`: perf is
/// not installed or printed no figure.
pub fn perf_pipe_us(cpu: Option<usize>, loops: u64) -> Option<f64> {
    let args = ["bench", "sched", "pipe", "-l", &loops.to_string()].map(String::from);
    number_before(&output_on(cpu, "perf", &args)?, "usecs/op")
}

/// `perf bench sched messaging ARGS`, `reps` times: its total time, ms.
pub fn perf_messaging_ms(args: &[String], reps: u64) -> Option<Vec<f64>> {
    let mut all = vec!["bench".to_string(), "sched".into(), "messaging".into()];
    all.extend(args.iter().cloned());
    (0..reps)
        .map(|_| number_after(&output_on(None, "perf", &all)?, "Total time:").map(|s| s * 1e3))
        .collect()
}

/// `cyclictest -q -r -i 1000 -l LOOPS` on `cpu` (a relative 1 ms timer,
/// nice 0, one thread): its average latency, ns. cyclictest sets
/// `/dev/cpu_dma_latency` to 0 while it runs (no deep idle states).
pub fn cyclictest_avg_ns(cpu: usize, loops: u64) -> Option<f64> {
    let args = ["-q", "-r", "-N", "-i", "1000", "-l", &loops.to_string()].map(String::from);
    number_after(&output_on(Some(cpu), "cyclictest", &args)?, "Avg:")
}

/// Whether rt-app itself is installed (it prints its usage and exits 0),
/// asked once per process.
pub fn rtapp_installed() -> bool {
    static ONCE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ONCE.get_or_init(|| {
        std::process::Command::new("rt-app")
            .arg("--help")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// rt-app's calibration on this machine, once per process: its ns per loop
/// (`pLoad`), read from what rt-app prints when it calibrates CPU0 for a
/// one-thread file.
fn ns_per_loop() -> Result<u64, String> {
    static ONCE: std::sync::OnceLock<Result<u64, String>> = std::sync::OnceLock::new();
    ONCE.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("schedlab-rtapp-{}-calib", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let conf = dir.join("calibrate.json");
        let text = format!(
            r#"{{"tasks": {{"t": {{"loop": 1, "run": 100}}}}, "global": {{"duration": 1, "calibration": "CPU0", "logdir": "{}"}}}}"#,
            dir.display()
        );
        let out = std::fs::write(&conf, text)
            .map_err(|e| format!("{}: {e}", conf.display()))
            .and_then(|()| {
                std::process::Command::new("rt-app")
                    .arg(&conf)
                    .current_dir(&dir)
                    .output()
                    .map_err(|e| format!("rt-app: {e}"))
            });
        let _ = std::fs::remove_dir_all(&dir);
        let out = out?;
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        all.split("pLoad = ")
            .nth(1)
            .and_then(|r| r.split("ns").next())
            .and_then(|n| n.trim().parse().ok())
            .ok_or_else(|| "rt-app printed no pLoad when calibrating".to_string())
    })
    .clone()
}

/// Runs rt-app itself on `file` for `duration_s` (the file's `global`
/// rewritten by `rtapp::for_rtapp`, in a directory of its own that is
/// removed after) and reads its logs: each thread's lines by the file's
/// thread name (rt-app names an instance `NAME-<idx>`, its log
/// `<basename>-NAME-<idx>.log`).
pub fn run_rtapp(
    file: &Path,
    duration_s: u64,
    rep: u64,
) -> Result<BTreeMap<String, Vec<Line>>, String> {
    let dir = std::env::temp_dir().join(format!("schedlab-rtapp-{}-{rep}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let out = run_in(&dir, file, duration_s);
    let _ = std::fs::remove_dir_all(&dir);
    out
}

fn run_in(dir: &Path, file: &Path, duration_s: u64) -> Result<BTreeMap<String, Vec<Line>>, String> {
    const BASE: &str = "rtapp";
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let json = schedlab_scenarios::rtapp::for_rtapp(
        &text,
        file,
        dir,
        BASE,
        duration_s,
        Some(ns_per_loop()?),
    )
    .map_err(|e| e.to_string())?;
    let conf = dir.join("taskset.json");
    std::fs::write(&conf, json).map_err(|e| format!("{}: {e}", conf.display()))?;
    let out = std::process::Command::new("rt-app")
        .arg(&conf)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("rt-app: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "rt-app exited with {}: {}",
            out.status,
            err.lines().last().unwrap_or("")
        ));
    }
    let mut logs: BTreeMap<String, Vec<Line>> = BTreeMap::new();
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(unique) = name
            .strip_prefix(&format!("{BASE}-"))
            .and_then(|n| n.strip_suffix(".log"))
        else {
            continue;
        };
        let thread = unique.rsplit_once('-').map_or(unique, |(t, _)| t);
        let text = std::fs::read_to_string(e.path()).map_err(|e| format!("{name}: {e}"))?;
        let lines = log::parse(&text).map_err(|e| format!("{name}: {e}"))?;
        logs.entry(thread.to_string()).or_default().extend(lines);
    }
    if logs.is_empty() {
        return Err("rt-app wrote no log".into());
    }
    Ok(logs)
}
