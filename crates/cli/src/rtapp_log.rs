//! rt-app's per-thread log for a run of an rt-app file, simulated or real
//! (the columns and how each is derived: `schedlab_scenarios::rtapp::log`).
//! `run FILE.json` prints each thread's columns summed up, `--json` carries
//! every line under each thread's name, and `--rtapp-log DIR` writes the
//! files rt-app would (`<basename>-<thread>-<idx>.log`, its header and
//! fixed-width lines), so tools that read rt-app's logs read ours.

use std::collections::BTreeMap;
use std::path::Path;

use schedlab_scenarios::rtapp::log::{self, Line};
use schedlab_scenarios::suite::median;
use schedlab_scenarios::Scenario;
use schedlab_sim::figures::percentile;
use schedlab_sim::Outcome;
use serde_json::{json, Value};

use crate::Failure;

/// Each thread's log lines, by task name; threads without a logged loop
/// are left out. A thread's `idx` is its task's index (the file's order).
pub fn logs(o: &Outcome) -> BTreeMap<String, Vec<Line>> {
    o.task_names
        .iter()
        .filter_map(|(id, name)| {
            let t = o.tasks.get(name)?;
            let l = log::lines(*id, &t.stamps);
            (!l.is_empty()).then(|| (name.clone(), l))
        })
        .collect()
}

/// Every thread's lines, for `--json`: `null` when the run logged none.
pub fn json(o: &Outcome) -> Value {
    let l = logs(o);
    if l.is_empty() {
        Value::Null
    } else {
        json!(l)
    }
}

/// A column of a line, as a number.
pub type Column = fn(&Line) -> f64;

/// The columns compared and summed up: (name, value of a line).
pub const COLUMNS: &[(&str, Column)] = &[
    ("run", |l| l.run as f64),
    ("period", |l| l.period as f64),
    ("slack", |l| l.slack as f64),
    ("wu_lat", |l| l.wu_lat as f64),
    ("c_duration", |l| l.c_duration as f64),
    ("c_period", |l| l.c_period as f64),
];

/// The thread a task belongs to: an instance's name (`NAME-3`) without its
/// number when the file's thread `NAME` had several.
pub fn thread_of(task: &str, threads: &[String]) -> String {
    match task.rsplit_once('-') {
        Some((base, n)) if n.parse::<u32>().is_ok() && threads.iter().any(|t| t == base) => {
            base.to_string()
        }
        _ => task.to_string(),
    }
}

/// Prints each thread's columns over every run given: loops logged, then
/// each column's median (and wu_lat's p99), µs.
pub fn print_summary(outs: &[&Outcome]) {
    let mut per: BTreeMap<String, Vec<Line>> = BTreeMap::new();
    for o in outs {
        for (t, l) in logs(o) {
            per.entry(t).or_default().extend(l);
        }
    }
    if per.is_empty() {
        return;
    }
    say!(
        "rt-app's log, per thread over {} run(s) (medians, µs; --json has every line, --rtapp-log DIR writes rt-app's files):",
        outs.len()
    );
    say_part!("  {:20} {:>7}", "thread", "loops");
    for (c, _) in COLUMNS {
        say_part!(" {c:>10}");
    }
    say!(" {:>10}", "wu_lat p99");
    for (t, lines) in &per {
        say_part!("  {t:20} {:>7}", lines.len());
        for (_, f) in COLUMNS {
            let v: Vec<f64> = lines.iter().map(f).collect();
            say_part!(" {:>10}", crate::print::fmt(median(&v)));
        }
        let wu: Vec<u64> = lines.iter().map(|l| l.wu_lat).collect();
        say!(" {:>10}", crate::print::fmt(percentile(&wu, 0.99)));
    }
}

/// Writes rt-app's log files of run `o` into `dir`, named as rt-app names
/// them: `<basename>-<thread>-<idx>.log` (`threads`: the file's thread
/// names; an instance's number is dropped for its index, as in rt-app).
pub fn write(
    dir: &Path,
    basename: &str,
    o: &Outcome,
    threads: &[String],
) -> Result<usize, Failure> {
    std::fs::create_dir_all(dir).map_err(|e| Failure::Input(format!("{}: {e}", dir.display())))?;
    let l = logs(o);
    for (task, lines) in &l {
        let idx = lines.first().map_or(0, |x| x.idx);
        let thread = thread_of(task, threads);
        let path = dir.join(format!("{basename}-{thread}-{idx}.log"));
        let mut text = String::from("# Policy : as the run's\n");
        text.push_str(log::HEADER);
        text.push('\n');
        for x in lines {
            text.push_str(&log::format(x));
            text.push('\n');
        }
        std::fs::write(&path, text)
            .map_err(|e| Failure::Input(format!("{}: {e}", path.display())))?;
    }
    Ok(l.len())
}

/// Whether rt-app itself is installed (it prints its usage and exits 0).
pub fn installed() -> bool {
    std::process::Command::new("rt-app")
        .arg("--help")
        .output()
        .is_ok_and(|o| o.status.success())
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

/// A simulated or real run's lines by the file's thread name (`threads`:
/// the file's thread names).
pub fn by_thread(o: &Outcome, threads: &[String]) -> BTreeMap<String, Vec<Line>> {
    let mut out: BTreeMap<String, Vec<Line>> = BTreeMap::new();
    for (task, l) in logs(o) {
        out.entry(thread_of(&task, threads)).or_default().extend(l);
    }
    out
}

/// Writes each run's rt-app log files under `dir` (`--rtapp-log`).
pub(crate) fn write_rtapp_logs(dir: &Path, s: &Scenario, outs: &[&Outcome]) -> Result<(), Failure> {
    for o in outs {
        let d = if outs.len() == 1 {
            dir.to_path_buf()
        } else {
            dir.join(format!("seed-{}", o.seed))
        };
        let threads: Vec<String> = s.spec.programs.keys().cloned().collect();
        let n = crate::rtapp_log::write(&d, &s.name, o, &threads)?;
        say!("rt-app's log: {n} file(s) in {}", d.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_belongs_to_its_thread_and_a_dashed_name_to_itself() {
        let threads = vec!["video".to_string(), "a-b".to_string()];
        assert_eq!(thread_of("video-1", &threads), "video");
        assert_eq!(thread_of("a-b", &threads), "a-b");
        assert_eq!(
            thread_of("audio-2", &threads),
            "audio-2",
            "no thread audio: the name is the thread's own"
        );
    }
}
