//! Figures: what a scenario reports, computed from a run's [`Outcome`].
//! The simulator knows no scenario; a scenario names its figures with these.

use schedlab_sched::fair::weight_of;
use schedlab_topology::Level;
use serde::Deserialize;

pub use crate::outcome::MoveReason;
use crate::outcome::{Outcome, TaskOutcome};

/// How near two tasks must end for [`Figure::SameAt`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Within {
    /// One SMT core.
    Core,
    /// One last-level cache.
    Llc,
}

impl Within {
    pub fn level(self) -> Level {
        match self {
            Within::Core => Level::Smt,
            Within::Llc => Level::Llc,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case", tag = "kind")]
pub enum Figure {
    /// The median lap of `metric`, µs.
    LapP50Us {
        metric: String,
    },
    /// The median lap of `metric`, ms (one lap: the lap).
    LapP50Ms {
        metric: String,
    },
    /// The 99th-percentile lap of `metric`, µs.
    LapP99Us {
        metric: String,
    },
    LapMeanUs {
        metric: String,
    },
    /// Moves (placements away from home) of the named tasks (all when
    /// empty) for the given reasons (all when empty).
    /// With `while_running`, only the moves made before the first of
    /// those tasks exited.
    Moves {
        #[serde(default)]
        tasks: Vec<String>,
        #[serde(default)]
        reasons: Vec<MoveReason>,
        #[serde(default)]
        while_running: Vec<String>,
    },
    /// Times the named tasks (all when empty) ran on another CPU than last.
    Migrations {
        #[serde(default)]
        tasks: Vec<String>,
    },
    /// 1 when tasks `a` and `b` end within `level` (`"llc"` or `"core"`)
    /// of each other, else 0.
    SameAt {
        a: String,
        b: String,
        level: Within,
    },
    /// 1 when `a` and `b` end on different cores of one LLC.
    TwoCoresOneLlc {
        a: String,
        b: String,
    },
    /// `metric`'s count per ns of the run (bytes per ns = GB/s).
    PerNs {
        metric: String,
    },
    /// `metric`'s count per second.
    PerSecond {
        metric: String,
    },
    /// A scheduler counter (`wakes.parked`, `moves.waker_rule`, ...).
    Counter {
        name: String,
    },
    /// A scheduler counter per CPU per second, over `cpus` CPUs (the
    /// machine's when absent).
    CounterPerCpuPerSecond {
        name: String,
        #[serde(default)]
        cpus: Option<u32>,
    },
    /// Bytes the named tasks (all when empty) read into LLCs where their
    /// own set or their process's shared data was cold, MiB.
    LlcRefillMib {
        #[serde(default)]
        tasks: Vec<String>,
    },
    /// Starts of the named tasks (all when empty) that found some of their
    /// data cold in the LLC.
    ColdStarts {
        #[serde(default)]
        tasks: Vec<String>,
    },
    /// CPU time of the named task, as a share of the run.
    CpuShare {
        task: String,
    },
    /// How many LLCs the tasks whose names start with `prefix` end in.
    EndLlcs {
        prefix: String,
    },
    /// How many LLCs the named tasks end in (an exited task: where it
    /// last ran): one process's threads, named one by one.
    EndLlcsOf {
        tasks: Vec<String>,
    },
    /// The most of the tasks whose names start with `prefix` that end in
    /// one LLC.
    EndLlcMost {
        prefix: String,
    },
    /// The `percentile` (0-100) of how late `metric`'s laps ran past
    /// `expected_ns` (a sleep's length), µs: timer-wake latency.
    LapLateUs {
        metric: String,
        expected_ns: u64,
        percentile: f64,
    },
    /// How far `a`'s CPU time over `b`'s is from their weights' ratio
    /// (Linux's `sched_prio_to_weight` at `nice_a` and `nice_b`), in percent
    /// of that ratio.
    ShareErrorPct {
        a: String,
        nice_a: i8,
        b: String,
        nice_b: i8,
    },
}

/// The nearest-rank `p` quantile of `v` (the element at index
/// `round((len - 1) * p)` in sorted order), found by selection in linear
/// time rather than by sorting a copy.
pub fn percentile(v: &[u64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    let i = ((s.len() as f64 - 1.0) * p).round() as usize;
    *s.select_nth_unstable(i).1 as f64
}

fn matches(names: &[String], task: &str) -> bool {
    names.is_empty()
        || names.iter().any(|n| {
            n == task || task.starts_with(&format!("{n}.")) || task.starts_with(&format!("{n}#"))
        })
}

/// `f` of the tasks named (all when none), summed (never -0).
fn sum_over(o: &Outcome, tasks: &[String], f: impl Fn(&TaskOutcome) -> u64) -> f64 {
    o.tasks
        .iter()
        .filter(|(n, _)| matches(tasks, n))
        .map(|(_, t)| f(t))
        .sum::<u64>() as f64
}

/// Moves of the tasks named (all when none) for the reasons named (all
/// when none), made before the first of `while_running` exited.
fn moves(o: &Outcome, tasks: &[String], reasons: &[MoveReason], while_running: &[String]) -> f64 {
    let until = while_running
        .iter()
        .filter_map(|n| o.tasks.get(n).and_then(|t| t.exited_at))
        .min()
        .unwrap_or(u64::MAX);
    o.tasks
        .iter()
        .filter(|(n, _)| matches(tasks, n))
        .flat_map(|(_, t)| t.moved_at.iter())
        .filter(|m| m.at() < until && (reasons.is_empty() || reasons.contains(&m.reason())))
        .count() as f64
}

/// The nearest level two tasks' final CPUs share, when both have one.
fn final_level(o: &Outcome, a: &str, b: &str) -> Option<Level> {
    let cpu = |n: &str| o.tasks.get(n).and_then(|t| t.final_cpu);
    let topo = o.topology.as_ref().expect("an outcome keeps its topology");
    Some(topo.level_between(cpu(a)?, cpu(b)?))
}

/// Per LLC (ordinal), how many of the tasks named `prefix*` end there.
fn end_llcs(o: &Outcome, prefix: &str) -> std::collections::BTreeMap<usize, u32> {
    end_llcs_where(o, |name| name.starts_with(prefix))
}

/// Per LLC (by ordinal), how many of the tasks `pick` names end there.
fn end_llcs_where(
    o: &Outcome,
    pick: impl Fn(&str) -> bool,
) -> std::collections::BTreeMap<usize, u32> {
    let topo = o.topology.as_ref().expect("an outcome keeps its topology");
    let mut per = std::collections::BTreeMap::new();
    for (name, t) in &o.tasks {
        if let (true, Some(c)) = (pick(name), t.final_cpu) {
            *per.entry(topo.llc_ordinal(c)).or_insert(0) += 1;
        }
    }
    per
}

impl Figure {
    pub fn compute(&self, o: &Outcome) -> f64 {
        let laps = |m: &str| o.laps.get(m).map(Vec::as_slice).unwrap_or(&[]);
        let topo = o.topology.as_ref().expect("an outcome keeps its topology");
        match self {
            Figure::LapP50Us { metric } => percentile(laps(metric), 0.5) / 1e3,
            Figure::LapP50Ms { metric } => percentile(laps(metric), 0.5) / 1e6,
            Figure::LapP99Us { metric } => percentile(laps(metric), 0.99) / 1e3,
            Figure::LapMeanUs { metric } => {
                let v = laps(metric);
                if v.is_empty() {
                    0.0
                } else {
                    v.iter().sum::<u64>() as f64 / v.len() as f64 / 1e3
                }
            }
            Figure::Moves {
                tasks,
                reasons,
                while_running,
            } => moves(o, tasks, reasons, while_running),
            Figure::Migrations { tasks } => sum_over(o, tasks, |t| t.migrations),
            Figure::SameAt { a, b, level } => {
                final_level(o, a, b).map_or(0.0, |l| (l <= level.level()) as u8 as f64)
            }
            Figure::TwoCoresOneLlc { a, b } => {
                final_level(o, a, b).map_or(0.0, |l| (l == Level::Llc) as u8 as f64)
            }
            Figure::PerNs { metric } => {
                o.counts.get(metric).copied().unwrap_or(0) as f64 / o.end_ns.max(1) as f64
            }
            Figure::PerSecond { metric } => {
                o.counts.get(metric).copied().unwrap_or(0) as f64 * 1e9 / o.end_ns.max(1) as f64
            }
            Figure::Counter { name } => o.counters.get(name).copied().unwrap_or(0) as f64,
            Figure::CounterPerCpuPerSecond { name, cpus } => {
                o.counters.get(name).copied().unwrap_or(0) as f64 * 1e9
                    / o.end_ns.max(1) as f64
                    / cpus.map_or(topo.num_cpus() as f64, |c| c as f64)
            }
            Figure::LlcRefillMib { tasks } => {
                sum_over(o, tasks, |t| t.llc_refill_bytes) / (1u64 << 20) as f64
            }
            Figure::ColdStarts { tasks } => sum_over(o, tasks, |t| t.cold_starts),
            Figure::CpuShare { task } => {
                o.tasks.get(task).map_or(0.0, |t| t.cpu_ns as f64) / o.end_ns.max(1) as f64
            }
            Figure::EndLlcs { prefix } => end_llcs(o, prefix).len() as f64,
            Figure::EndLlcsOf { tasks } => {
                end_llcs_where(o, |n| tasks.iter().any(|t| t == n)).len() as f64
            }
            Figure::EndLlcMost { prefix } => {
                end_llcs(o, prefix).values().copied().max().unwrap_or(0) as f64
            }
            Figure::LapLateUs {
                metric,
                expected_ns,
                percentile: p,
            } => {
                let late: Vec<u64> = laps(metric)
                    .iter()
                    .map(|l| l.saturating_sub(*expected_ns))
                    .collect();
                self::percentile(&late, p / 100.0) / 1e3
            }
            Figure::ShareErrorPct {
                a,
                nice_a,
                b,
                nice_b,
            } => {
                let ns = |t: &String| o.tasks.get(t).map_or(0.0, |t| t.cpu_ns as f64);
                let want = weight_of(*nice_a) as f64 / weight_of(*nice_b) as f64;
                let got = ns(a) / ns(b).max(1.0);
                100.0 * (got - want).abs() / want
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{percentile, Figure};
    use crate::{Outcome, TaskOutcome};
    use rand::{RngCore, SeedableRng};
    use schedlab_topology::CpuId;

    /// amd-2x8: cpus 0-7 share one LLC, 8-15 the other. Three named tasks
    /// end on cpu1, cpu9 and cpu3 (two LLCs); a fourth, unnamed, on cpu12
    /// is not counted.
    #[test]
    fn end_llcs_of_counts_the_llcs_its_named_tasks_end_in() {
        let mut o = Outcome {
            topology: schedlab_topology::preset("amd-2x8"),
            ..Outcome::default()
        };
        for (n, c) in [("a", 1), ("b", 9), ("c", 3), ("d", 12)] {
            o.tasks.insert(
                n.into(),
                TaskOutcome {
                    final_cpu: Some(CpuId::new(c)),
                    ..TaskOutcome::default()
                },
            );
        }
        let f = |t: &[&str]| {
            Figure::EndLlcsOf {
                tasks: t.iter().map(|s| s.to_string()).collect(),
            }
            .compute(&o)
        };
        assert_eq!(f(&["a", "b", "c"]), 2.0);
        assert_eq!(f(&["a", "c"]), 1.0);
        assert_eq!(f(&[]), 0.0, "no task: no LLC");
    }

    #[test]
    fn percentile_by_selection_is_the_sorted_nearest_rank() {
        let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        for len in [1usize, 2, 3, 10, 101, 1000] {
            let v: Vec<u64> = (0..len).map(|_| r.next_u64() % 50).collect();
            let mut sorted = v.clone();
            sorted.sort_unstable();
            for p in [0.0, 0.25, 0.5, 0.9, 0.99, 1.0] {
                let want = sorted[((len as f64 - 1.0) * p).round() as usize] as f64;
                assert_eq!(percentile(&v, p), want, "len {len}, p {p}: {v:?}");
            }
        }
        assert_eq!(percentile(&[], 0.5), 0.0, "no samples read 0");
    }
}
