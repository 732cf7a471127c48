//! `record --check`: a recording's replay held to the recording.
//!
//! Replayed on the machine it was recorded on (`record`: this one, as
//! `--topology sysfs`; `import`: the trace's, or `--topology`) under
//! `linux`, seeds 1 to 5, against what was recorded, each with a tolerance fixed here
//! before the programs below were measured:
//!
//! | figure | recorded | replayed | within when |
//! |---|---|---|---|
//! | makespan | the command's wall time | `makespan_ms` | replay / recording in [1/1.5, 1.5] |
//! | wakes | `sched_waking` of a recorded thread by another | parked wakes between recorded threads | ratio in [1/2, 2] |
//! | wake edges | pairs (waker, wakee) with a wake | pairs with a parked wake | at least 3/4 of the recorded pairs |
//! | CPU per thread | its time on a CPU | its `cpu_ns` | 3/4 of threads (with 100 µs or more) within a ratio of 1.25 |
//!
//! A fifth line is printed beside them and held to no tolerance: the
//! switches of a recorded thread away from its CPU while still runnable
//! (`kernel.switches.preempted` against the replay's `switches.preempted`),
//! the scheduling a replay redoes rather than copies: where the wakes come
//! out short, this is where the two schedulers part.
//!
//! The replayed figures are the median over the seeds. What falls outside
//! is what the replay cannot carry: control flow that depends on data or
//! on timing (a thread that found its pipe already full of bytes never
//! blocked in the recording, and one that would block on the replay's
//! machine does not know it), lock contention that changes order, and
//! interrupts replayed as sleeps.

use std::collections::BTreeSet;
use std::path::Path;

use schedlab_scenarios::suite::median;
use schedlab_sim::Outcome;

use crate::recording::Recording;
use crate::replay::Converted;
use crate::Error;

/// Seeds the replay runs on.
pub const SEEDS: u64 = 5;

/// One figure, recorded beside replayed, and whether it is within its
/// tolerance (module doc).
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub name: &'static str,
    pub recorded: f64,
    pub replayed: f64,
    pub within: bool,
}

/// What `--check` found.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    /// Recorded (waker, wakee) pairs with a wake between recorded threads.
    pub pairs: usize,
    /// The four figures of the module doc's table, in its order.
    pub rows: Vec<Row>,
    /// Switches while runnable: recorded (when the record counted them),
    /// replayed; held to no tolerance.
    pub preempted: (Option<u64>, f64),
    /// The first seed's stall, if the replay stalled.
    pub stall: Option<String>,
}

/// The replay at `replay` (the `replay.toml` written from `rec` and
/// `conv`) run on the recording's machine under `linux`, seeds 1 to [`SEEDS`], held
/// to the recording (module doc).
pub fn check(rec: &Recording, conv: &Converted, replay: &Path) -> Result<Check, Error> {
    let Some(topo) = rec.topology.clone() else {
        return Err(Error::Input(
            "--check: the machine's shape is not known: give its --topology".into(),
        ));
    };
    let params = schedlab_scenarios::Params::parse(&["policy=linux".to_string()])
        .map_err(|e| Error::Input(e.0))?;
    let mut s = schedlab_scenarios::file::load_on(replay, params, topo)
        .map_err(|e| Error::Input(e.to_string()))?;
    s.spec.count_wakers = true;
    let outs: Vec<Outcome> = (1..=SEEDS)
        .map(|seed| schedlab_sim::Sim::new(&s.spec, seed).run())
        .collect();
    let med = |f: &dyn Fn(&Outcome) -> f64| median(&outs.iter().map(f).collect::<Vec<_>>());
    let ours: BTreeSet<&str> = rec.threads.values().map(|t| t.name.as_str()).collect();
    let pairs = recorded_pairs(rec, &ours);
    let rec_wakes: u64 = pairs.iter().map(|(w, t)| rec.record.wakes_by[*t][*w]).sum();
    let makespan = med(&|o| {
        s.figures
            .iter()
            .find(|(n, _)| n == "makespan_ms")
            .map_or(0.0, |(_, f)| f.compute(o))
    });
    let rec_ms = rec.wall_ns as f64 / 1e6;
    let wakes = med(&|o| wakes_between(o, &ours));
    let kept = med(&|o| pairs_kept(o, &pairs));
    let cpu = med(&|o| cpu_within(o, rec, conv));
    let ratio_in = |r: f64, k: f64| (1.0 / k..=k).contains(&r);
    // With nothing recorded, the replay is within when it has none either.
    let wakes_ok = match rec_wakes {
        0 => wakes == 0.0,
        n => ratio_in(wakes / n as f64, 2.0),
    };
    let row = |name, recorded, replayed, within| Row {
        name,
        recorded,
        replayed,
        within,
    };
    let rows = vec![
        row(
            "makespan_ms",
            rec_ms,
            makespan,
            ratio_in(makespan / rec_ms, 1.5),
        ),
        row("wakes between threads", rec_wakes as f64, wakes, wakes_ok),
        row(
            "wake edges (pairs) kept",
            1.0,
            kept,
            pairs.is_empty() || kept >= 0.75,
        ),
        row("threads with CPU time within 1.25x", 1.0, cpu, cpu >= 0.75),
    ];
    // Not held to a tolerance: how often a thread lost its CPU while still
    // runnable, the scheduling the replay does not copy but redoes.
    let preempted = (
        rec.record
            .counters
            .get("kernel.switches.preempted")
            .copied(),
        med(&|o| o.counters.get("switches.preempted").copied().unwrap_or(0) as f64),
    );
    Ok(Check {
        pairs: pairs.len(),
        rows,
        preempted,
        stall: outs
            .iter()
            .find_map(|o| o.stall.as_ref())
            .map(|s| s.to_string()),
    })
}

/// The recorded (waker, wakee) pairs with a wake, both recorded threads.
fn recorded_pairs<'r>(rec: &'r Recording, ours: &BTreeSet<&str>) -> Vec<(&'r str, &'r str)> {
    rec.record
        .wakes_by
        .iter()
        .flat_map(|(t, by)| by.keys().map(move |w| (w.as_str(), t.as_str())))
        .filter(|(w, t)| ours.contains(w) && ours.contains(t) && w != t)
        .collect()
}

/// A replay's parked wakes between recorded threads.
fn wakes_between(o: &Outcome, ours: &BTreeSet<&str>) -> f64 {
    o.wakes_by
        .iter()
        .flat_map(|(t, by)| by.iter().map(move |(w, n)| (w, t, n)))
        .filter(|(w, t, _)| ours.contains(w.as_str()) && w != t)
        .map(|(_, _, n)| *n as f64)
        .sum::<f64>()
        // An empty sum is -0.0.
        + 0.0
}

/// The share of recorded pairs the replay woke at least once.
fn pairs_kept(o: &Outcome, pairs: &[(&str, &str)]) -> f64 {
    let n = pairs
        .iter()
        .filter(|(w, t)| o.wakes_by.get(*t).is_some_and(|by| by.contains_key(*w)))
        .count();
    n as f64 / pairs.len().max(1) as f64
}

/// The share of threads with 100 µs or more on a CPU whose replayed CPU
/// time is within 1.25x of the recorded.
fn cpu_within(o: &Outcome, rec: &Recording, conv: &Converted) -> f64 {
    let big: Vec<(&String, u64)> = rec
        .threads
        .iter()
        .map(|(id, t)| (&t.name, conv.threads[id].cpu_ns))
        .filter(|(_, ns)| *ns >= 100_000)
        .collect();
    let ok = big
        .iter()
        .filter(|(n, ns)| {
            let r = o.tasks.get(*n).map_or(0, |t| t.cpu_ns) as f64 / *ns as f64;
            (1.0 / 1.25..=1.25).contains(&r)
        })
        .count();
    ok as f64 / big.len().max(1) as f64
}
