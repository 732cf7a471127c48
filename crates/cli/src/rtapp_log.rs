//! rt-app's per-thread log for a run of an rt-app file, simulated or real
//! (the columns and how each is derived: `schedlab_scenarios::rtapp::log`).
//! `run FILE.json` prints each thread's columns summed up, `--json` carries
//! every line under each thread's name, and `--rtapp-log DIR` writes the
//! files rt-app would (`<basename>-<thread>-<idx>.log`, its header and
//! fixed-width lines), so tools that read rt-app's logs read ours.

use std::collections::BTreeMap;
use std::path::Path;

use schedlab_scenarios::rtapp::log::{self, logs, thread_of, Line, COLUMNS};
use schedlab_scenarios::suite::median;
use schedlab_scenarios::Scenario;
use schedlab_sim::figures::percentile;
use schedlab_sim::Outcome;
use serde_json::{json, Value};

use crate::Failure;

/// Every thread's lines, for `--json`: `null` when the run logged none.
pub fn json(o: &Outcome) -> Value {
    let l = logs(o);
    if l.is_empty() {
        Value::Null
    } else {
        json!(l)
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
