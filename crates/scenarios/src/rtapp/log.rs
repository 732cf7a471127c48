//! rt-app's per-thread log, derived from a run's stamps: one line per loop
//! of a phase, with the columns rt-app writes (`log_timing()` in
//! `src/rt-app_utils.c`; filled in `thread_body()` and `run_event()` of
//! `src/rt-app.c`), all in µs:
//!
//! | column       | rt-app                                                   | here                                  |
//! |--------------|----------------------------------------------------------|---------------------------------------|
//! | `idx`        | the thread's index                                       | the same, in the file's order         |
//! | `perf`       | calibrated loops done (`exec / p_load`)                  | `c_duration`: work is simulated in ns |
//! | `run`        | wall time of the loop's `run`/`runtime` events           | the same                              |
//! | `period`     | wall time of the loop                                    | the same                              |
//! | `start`/`end`| `CLOCK_MONOTONIC` at the loop's start and end            | since the run began                   |
//! | `rel_st`     | the loop's start since rt-app started                    | since the run began                   |
//! | `slack`      | the last timer's expiry minus the time it was used       | the same                              |
//! | `c_duration` | the loop's `run`/`runtime` durations as configured       | the same                              |
//! | `c_period`   | the loop's timer periods as configured                   | the same                              |
//! | `wu_lat`     | time woken minus expiry, summed over the loop's timers; a timer already past sets it to 0 | the same |
//!
//! Each duration is rounded to the µs as rt-app's `timespec_to_usec()`
//! rounds it, event by event. A loop the run's end cut short is not
//! logged (rt-app logs only while `continue_running`).
//!
//! The reader ([`super`]) puts the stamps in each thread's program: one
//! at each loop's start, naming its configured sums ([`start`]), one at its
//! end, two around each `run`/`runtime` event, and for each `timer` the
//! time it was used, its expiry (the timer op's own stamp) and the time
//! the thread went on.

use std::collections::BTreeMap;

use schedlab_sim::Outcome;
use serde::Serialize;

/// A loop's start: `START:<c_duration µs>:<c_period µs>`.
pub const START: &str = "rt-app.start";
/// A loop's end.
pub const END: &str = "rt-app.end";
/// Before and after a `run` or `runtime` event.
pub const RUN: &str = "rt-app.run";
pub const RUN_END: &str = "rt-app.run.end";
/// Before a `timer` event, its expiry, and after it.
pub const TIMER: &str = "rt-app.timer";
pub const EXPIRY: &str = "rt-app.expiry";
pub const TIMER_END: &str = "rt-app.timer.end";

/// The stamp that starts a loop whose events configure `c_duration` and
/// `c_period` µs.
pub fn start(c_duration: u64, c_period: u64) -> String {
    format!("{START}:{c_duration}:{c_period}")
}

/// One line of rt-app's log (module doc), µs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Line {
    pub idx: u32,
    pub perf: u64,
    pub run: u64,
    pub period: u64,
    pub start: u64,
    pub end: u64,
    pub rel_st: u64,
    pub slack: i64,
    pub c_duration: u64,
    pub c_period: u64,
    pub wu_lat: u64,
}

/// rt-app's `timespec_to_usec()`: ns to µs, rounded.
fn us(ns: u64) -> u64 {
    (ns + 500) / 1000
}

/// The log lines of one thread (index `idx`) from its stamps, in order.
/// Stamps of other names are passed over.
pub fn lines(idx: u32, stamps: &[(String, u64)]) -> Vec<Line> {
    let mut out = Vec::new();
    let mut cur: Option<Line> = None;
    let (mut start_ns, mut run_at, mut used_at, mut expiry) = (0, 0, 0, None);
    for (what, ns) in stamps {
        let ns = *ns;
        if let Some(sums) = what.strip_prefix(START) {
            let mut c = sums.trim_start_matches(':').split(':');
            let mut next = || c.next().and_then(|x| x.parse().ok()).unwrap_or(0);
            let (c_duration, c_period) = (next(), next());
            start_ns = ns;
            cur = Some(Line {
                idx,
                perf: c_duration,
                start: us(ns),
                rel_st: us(ns),
                c_duration,
                c_period,
                ..Line::default()
            });
            continue;
        }
        let Some(l) = cur.as_mut() else { continue };
        match what.as_str() {
            RUN => run_at = ns,
            RUN_END => l.run += us(ns - run_at),
            TIMER => used_at = ns,
            EXPIRY => {
                // rt-app: slack = t_next - t_now, signed.
                l.slack = if ns >= used_at {
                    us(ns - used_at) as i64
                } else {
                    -(us(used_at - ns) as i64)
                };
                expiry = (used_at < ns).then_some(ns);
            }
            TIMER_END => match expiry.take() {
                Some(at) => l.wu_lat += us(ns.saturating_sub(at)),
                // A timer already past: rt-app sets wu_latency to 0.
                None => l.wu_lat = 0,
            },
            END => {
                l.end = us(ns);
                l.period = us(ns - start_ns);
                out.extend(cur.take());
            }
            _ => {}
        }
    }
    out
}

/// The log's header, as rt-app writes it.
pub const HEADER: &str = "#idx     perf      run   period           start             end          rel_st      slack c_duration   c_period     wu_lat";

/// One line as rt-app writes it (`"%4d %8lu %8lu %8lu %15llu %15llu
/// %15llu %10ld %10lu %10lu %10lu"`).
pub fn format(l: &Line) -> String {
    format!(
        "{:4} {:8} {:8} {:8} {:15} {:15} {:15} {:10} {:10} {:10} {:10}",
        l.idx,
        l.perf,
        l.run,
        l.period,
        l.start,
        l.end,
        l.rel_st,
        l.slack,
        l.c_duration,
        l.c_period,
        l.wu_lat
    )
}

/// The lines of a log file rt-app wrote (`#` lines are its header).
pub fn parse(text: &str) -> Result<Vec<Line>, String> {
    let mut out = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let l = l.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = l.split_whitespace().collect();
        let n = |k: usize| -> Result<u64, String> {
            f[k].parse().map_err(|_| {
                format!(
                    "line {}: column {}: expected a number, found {:?}",
                    i + 1,
                    k + 1,
                    f[k]
                )
            })
        };
        if f.len() != 11 {
            return Err(format!(
                "line {}: expected rt-app's 11 columns, found {}",
                i + 1,
                f.len()
            ));
        }
        out.push(Line {
            idx: n(0)? as u32,
            perf: n(1)?,
            run: n(2)?,
            period: n(3)?,
            start: n(4)?,
            end: n(5)?,
            rel_st: n(6)?,
            slack: f[7].parse().map_err(|_| {
                format!(
                    "line {}: column 8: expected a number, found {:?}",
                    i + 1,
                    f[7]
                )
            })?,
            c_duration: n(8)?,
            c_period: n(9)?,
            wu_lat: n(10)?,
        });
    }
    Ok(out)
}

/// Each thread's log lines, by task name; threads without a logged loop
/// are left out. A thread's `idx` is its task's index (the file's order).
pub fn logs(o: &Outcome) -> BTreeMap<String, Vec<Line>> {
    o.task_names
        .iter()
        .filter_map(|(id, name)| {
            let t = o.tasks.get(name)?;
            let l = lines(*id, &t.stamps);
            (!l.is_empty()).then(|| (name.clone(), l))
        })
        .collect()
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

/// A simulated or real run's lines by the file's thread name (`threads`:
/// the file's thread names).
pub fn by_thread(o: &Outcome, threads: &[String]) -> BTreeMap<String, Vec<Line>> {
    let mut out: BTreeMap<String, Vec<Line>> = BTreeMap::new();
    for (task, l) in logs(o) {
        out.entry(thread_of(&task, threads)).or_default().extend(l);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(v: &[(&str, u64)]) -> Vec<(String, u64)> {
        v.iter().map(|(s, n)| (s.to_string(), *n)).collect()
    }

    #[test]
    fn a_loop_of_run_then_timer_gives_rt_apps_columns() {
        // Worked by hand from run_event(): a loop starts at 1,000 ns, runs
        // 2,000.4 µs (to 2,001,400), uses its timer at 2,001,400 with the
        // expiry at 10,001,000 (slack 7,999.6 -> 8,000 µs), wakes at
        // 10,051,000 (wu_lat 50 µs) and ends there.
        let s = st(&[
            (&start(2000, 10000), 1_000),
            (RUN, 1_000),
            (RUN_END, 2_001_400),
            (TIMER, 2_001_400),
            (EXPIRY, 10_001_000),
            (TIMER_END, 10_051_000),
            (END, 10_051_000),
        ]);
        let l = lines(3, &s);
        assert_eq!(
            l,
            vec![Line {
                idx: 3,
                perf: 2000,
                run: 2000,
                period: 10_050,
                start: 1,
                end: 10_051,
                rel_st: 1,
                slack: 8000,
                c_duration: 2000,
                c_period: 10000,
                wu_lat: 50,
            }],
            "one line, its columns as rt-app computes them"
        );
    }

    #[test]
    fn a_timer_already_past_has_negative_slack_and_zeroes_the_wakeup_latency() {
        let s = st(&[
            (&start(0, 1000), 0),
            (TIMER, 0),
            (EXPIRY, 1_000_000),
            (TIMER_END, 1_020_000),
            (TIMER, 1_500_000),
            (EXPIRY, 1_000_000 + 1_000_000 - 700_000),
            (TIMER_END, 1_500_000),
            (END, 1_500_000),
        ]);
        let l = lines(0, &s);
        assert_eq!(l.len(), 1, "one loop: {l:?}");
        assert_eq!(l[0].slack, -200, "expiry 1,300 µs used at 1,500 µs");
        assert_eq!(
            l[0].wu_lat, 0,
            "the late timer resets the loop's 20 µs of wakeup latency, as rt-app does"
        );
    }

    #[test]
    fn a_loop_cut_short_by_the_end_of_the_run_is_not_logged() {
        let s = st(&[
            (&start(5, 0), 0),
            (RUN, 0),
            (RUN_END, 5_000),
            (END, 5_000),
            (&start(5, 0), 5_000),
            (RUN, 5_000),
        ]);
        assert_eq!(lines(0, &s).len(), 1, "only the finished loop");
    }

    #[test]
    fn the_format_is_rt_apps_fixed_width_line() {
        let l = Line {
            idx: 0,
            perf: 133333,
            run: 3019,
            period: 10106,
            start: 4946862439,
            end: 4946872544,
            rel_st: 398,
            slack: 6940,
            c_duration: 2000,
            c_period: 10000,
            wu_lat: 133,
        };
        // A line rt-app 1.0 wrote on this machine.
        let text = "   0   133333     3019    10106      4946862439      4946872544             398       6940       2000      10000        133";
        assert_eq!(format(&l), text);
        let back = parse(&format!(
            "# Policy : SCHED_OTHER priority : 0\n{HEADER}\n{text}\n"
        ));
        assert_eq!(back, Ok(vec![l]), "a log read back gives its line");
        assert!(
            parse("1 2 3").unwrap_err().contains("11 columns"),
            "a short line is refused"
        );
    }

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
