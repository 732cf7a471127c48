//! `--real`: a scenario run on this machine's kernel (`schedlab-real`),
//! printed in the same table and JSON as a simulated run, with the
//! kernel's record beside the figures and a list of what a real run
//! cannot measure.

use std::path::Path;

use schedlab_real::{measurable, Machine, Options, RealOutcome, MISSING};
use schedlab_scenarios::rows::Row;
use schedlab_scenarios::suite::{median, range};
use schedlab_scenarios::Scenario;
use schedlab_sim::figures::percentile;
use schedlab_sim::{Outcome, Registry, Sim};
use serde_json::{json, Value};

use crate::print::{fmt, num, sig, stalls_json};
use crate::Failure;

/// Runs `s` for real as each rep of `reps`, one after another, with the
/// kernel's record (`capture`), its events kept or not.
pub fn run_reps(
    s: &Scenario,
    reps: std::ops::RangeInclusive<u64>,
    capture: bool,
    keep_events: bool,
) -> Result<Vec<RealOutcome>, Failure> {
    let opts = Options {
        capture,
        keep_events,
    };
    reps.map(|rep| schedlab_real::run(&s.spec, rep, &opts).map_err(Failure::from))
        .collect()
}

/// A rep's figures: `None` where a real run has no value.
pub fn figures(s: &Scenario, r: &RealOutcome) -> Vec<(String, Option<f64>)> {
    s.figures
        .iter()
        .map(|(n, f)| {
            let v = measurable(f, r.kernel.is_some()).then(|| f.compute(&r.outcome));
            (n.clone(), v)
        })
        .collect()
}

fn quantiles_us(v: &[u64]) -> Value {
    let q = |p| percentile(v, p) / 1e3;
    json!({"n": v.len(), "p50": num(q(0.5)), "p90": num(q(0.9)), "p99": num(q(0.99))})
}

/// `schedlab run SCENARIO --real`.
pub fn run(
    s: &Scenario,
    reps: u64,
    capture: bool,
    json_out: bool,
    allow_stall: bool,
    rtapp_log: Option<&Path>,
) -> Result<(), Failure> {
    let outs = run_reps(s, 1..=reps, capture, false)?;
    let machine = Machine::read(&s.spec.topology);
    let all: Vec<&Outcome> = outs.iter().map(|r| &r.outcome).collect();
    if json_out {
        say!(
            "{}",
            serde_json::to_string_pretty(&run_json(s, &outs, &machine)).expect("plain data")
        );
    } else {
        print_reps(s, &outs, &machine);
        if let Some(why) = outs.iter().find_map(|r| r.no_record.as_ref()) {
            say!("kernel counters: none ({why})");
        } else if let Some(k) = outs.last().and_then(|r| r.kernel.as_ref()) {
            print_wakes_by(k, outs.len());
        }
        crate::rtapp_log::print_summary(&all);
    }
    if let Some(d) = rtapp_log {
        crate::rtapp_log::write_rtapp_logs(d, s, &all)?;
    }
    if !json_out {
        say!(
            "not measured in a real run: {}",
            MISSING
                .iter()
                .map(|(k, _)| *k)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    stalled(&outs, allow_stall)
}

/// `run --real --json`: every rep's figures, tasks and kernel record.
fn run_json(s: &Scenario, outs: &[RealOutcome], machine: &Machine) -> Value {
    let missing: Vec<Value> = MISSING
        .iter()
        .map(|(k, why)| json!({"figure": k, "why": why}))
        .collect();
    let runs: Vec<Value> = outs
        .iter()
        .map(|r| {
            let o = &r.outcome;
            let f: serde_json::Map<String, Value> = figures(s, r)
                .into_iter()
                .map(|(k, v)| (k, v.map_or(Value::Null, num)))
                .collect();
            let tasks: serde_json::Map<String, Value> = o
                .tasks
                .iter()
                .map(|(n, t)| {
                    let (tid, pid) = r.threads.get(n).copied().unwrap_or_default();
                    (n.clone(), json!({"tid": tid, "pid": pid, "cpu_ns": t.cpu_ns,
                        "final_cpu": t.final_cpu.map(|c| c.index()), "exited_at_ns": t.exited_at,
                        "migrations": r.kernel.as_ref().map(|_| t.migrations)}))
                })
                .collect();
            let kernel = match &r.kernel {
                Some(k) => json!({"counters": k.counters, "wakes_by": k.wakes_by,
                    "wake_to_run_us": quantiles_us(&k.wake_to_run), "lost_pages": k.lost_pages}),
                None => json!({"missing": r.no_record}),
            };
            json!({"rep": o.seed, "wall_ns": o.end_ns, "figures": f, "tasks": tasks, "kernel": kernel,
                "rtapp_log": crate::rtapp_log::json(o)})
        })
        .collect();
    let stalls = stalls_json(outs.iter().map(|r| &r.outcome), "rep");
    json!({"scenario": s.name, "real": true, "topology": s.spec.topology.name(),
        "machine": machine.json(), "policy": "this machine's kernel",
        "params": s.params, "runs": runs, "not_measured": missing, "stalls": stalls})
}

/// `run --real`'s table: a line per rep, its figures and kernel counters.
fn print_reps(s: &Scenario, outs: &[RealOutcome], machine: &Machine) {
    say!(
        "{} for real on this machine ({} CPUs, {} LLC(s), {}; Linux {}), params: {}",
        s.name,
        machine.cpus,
        machine.llcs,
        machine.model,
        machine.kernel,
        crate::print::params_text(s)
    );
    let names: Vec<&String> = s.figures.iter().map(|(n, _)| n).collect();
    say_part!("{:>4} {:>10}", "rep", "wall_ms");
    for n in &names {
        say_part!(" {n:>14}");
    }
    say!(
        " {:>8} {:>8} {:>8} {:>10} {:>12}",
        "wakes",
        "by_task",
        "migr",
        "switches",
        "wake2run_p50"
    );
    for r in outs {
        say_part!(
            "{:>4} {:>10.3}",
            r.outcome.seed,
            r.outcome.end_ns as f64 / 1e6
        );
        for (_, v) in figures(s, r) {
            say_part!(" {:>14}", v.map_or("-".into(), fmt));
        }
        match &r.kernel {
            Some(k) => say!(
                " {:>8} {:>8} {:>8} {:>10} {:>10.1}us",
                k.counters["kernel.wakes"],
                k.counters["kernel.wakes.by_task"],
                k.counters["kernel.migrations"],
                k.counters["kernel.switches"],
                percentile(&k.wake_to_run, 0.5) / 1e3
            ),
            None => say!(" {:>8} {:>8} {:>8} {:>10} {:>12}", "-", "-", "-", "-", "-"),
        }
    }
}

/// The last rep's wakes by waker, as the kernel's `sched_waking` names
/// them: the first few woken tasks, each with its top wakers.
fn print_wakes_by(k: &schedlab_real::KernelRecord, rep: usize) {
    say!(
        "wakes by waker (rep {}), as the kernel's sched_waking names them:",
        rep
    );
    const SHOWN: usize = 12;
    for (wakee, by) in k.wakes_by.iter().take(SHOWN) {
        let mut by: Vec<(&String, &u64)> = by.iter().collect();
        by.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let mut list: Vec<String> = by.iter().take(4).map(|(w, n)| format!("{w} {n}")).collect();
        if by.len() > 4 {
            list.push(format!("{} more", by.len() - 4));
        }
        say!("  {wakee} <- {}", list.join(", "));
    }
    if k.wakes_by.len() > SHOWN {
        say!(
            "  ... and {} more woken tasks (--json lists all)",
            k.wakes_by.len() - SHOWN
        );
    }
}

fn stalled(outs: &[RealOutcome], allow: bool) -> Result<(), Failure> {
    crate::print::stalled(outs.iter().map(|r| &r.outcome), "rep", allow)
}

/// One suite row, real and simulated.
struct RealRow {
    row: &'static Row,
    /// Why it did not run for real, when it did not.
    skipped: Option<String>,
    real: Vec<f64>,
    /// Reps that stalled.
    stalled: Vec<u64>,
    /// Per policy, the simulated values over seeds 1..=reps.
    sim: Vec<Vec<f64>>,
}

/// `schedlab suite --real`: each row run for real `reps` times (one at a
/// time, nothing else running), then simulated on this machine's topology
/// under each of `policies` with seeds 1..=reps; per row the real median
/// and range beside each policy's simulated median and its ratio to the
/// real one. A row that cannot run here (more CPUs or LLCs than this
/// machine has, a figure a real run does not measure) is listed as skipped
/// with why.
pub fn suite(
    rows: &[&'static Row],
    policies: &[String],
    reps: u64,
    jobs: usize,
    json_out: bool,
    reg: &Registry,
) -> Result<(), Failure> {
    let mut results = real_rows(rows, reps, reg)?;
    simulate(&mut results, policies, reps, jobs, reg)?;
    let machine =
        Machine::read(&schedlab_scenarios::topology("sysfs").map_err(|e| Failure::Input(e.0))?);
    if json_out {
        let v = suite_json(&results, policies, reps, &machine);
        say!("{}", serde_json::to_string_pretty(&v).expect("plain data"));
    } else {
        print_suite(&results, policies, reps, &machine);
    }
    Ok(())
}

/// Each row run for real `reps` times, one at a time, nothing else
/// running; a row that cannot run here keeps why.
fn real_rows(rows: &[&'static Row], reps: u64, reg: &Registry) -> Result<Vec<RealRow>, Failure> {
    let bar = crate::pool::progress(rows.len(), "suite --real");
    let mut results = Vec::new();
    for &row in rows {
        bar.inc(1);
        let mut r = RealRow {
            row,
            skipped: None,
            real: Vec::new(),
            stalled: Vec::new(),
            sim: Vec::new(),
        };
        match real_row(row, reps, reg)? {
            Ok((v, stalled)) => (r.real, r.stalled) = (v, stalled),
            Err(why) => r.skipped = Some(why),
        }
        results.push(r);
    }
    bar.finish_and_clear();
    Ok(results)
}

/// Each row that ran for real simulated under each policy, seeds
/// 1..=reps, after every real run, so they never share the CPUs.
fn simulate(
    results: &mut [RealRow],
    policies: &[String],
    reps: u64,
    jobs: usize,
    reg: &Registry,
) -> Result<(), Failure> {
    for r in results.iter_mut().filter(|r| r.skipped.is_none()) {
        for p in policies {
            let sc = crate::scenario::build_row(r.row, "sysfs", &[format!("policy={p}")], reg)?;
            let seeds: Vec<u64> = (1..=reps).collect();
            r.sim.push(schedlab_scenarios::pool::par_map(
                &seeds,
                jobs,
                |&seed| sc.figures[0].1.compute(&Sim::new(&sc.spec, seed).run()),
                || {},
            ));
        }
    }
    Ok(())
}

fn suite_json(results: &[RealRow], policies: &[String], reps: u64, machine: &Machine) -> Value {
    let rows: Vec<Value> = results
        .iter()
        .map(|r| {
            let sim: serde_json::Map<String, Value> = policies
                .iter()
                .zip(&r.sim)
                .map(|(p, v)| {
                    let m = median(v);
                    (
                        p.clone(),
                        json!({"median": num(m), "sim_over_real": num(m / median(&r.real))}),
                    )
                })
                .collect();
            let (lo, hi) = range(&r.real);
            json!({"row": r.row.name, "unit": r.row.unit, "direction": r.row.direction.name(),
                   "skipped": r.skipped, "real": (r.skipped.is_none()).then(|| json!({
                       "median": num(median(&r.real)), "min": num(lo), "max": num(hi),
                       "reps": r.real, "stalled_reps": r.stalled})),
                   "simulated": sim})
        })
        .collect();
    json!({"real": true, "machine": machine.json(), "topology": "sysfs",
           "policies": policies, "reps": reps, "rows": rows})
}

fn print_suite(results: &[RealRow], policies: &[String], reps: u64, machine: &Machine) {
    say!(
        "schedlab suite --real on this machine ({} CPUs, {} LLC(s), {}; Linux {}): {reps} real reps per row, \
         then {reps} seeds simulated on its topology (sysfs) per policy",
        machine.cpus, machine.llcs, machine.model, machine.kernel
    );
    say_part!(
        "{:26} {:>5} {:>6} {:>10} {:>21}",
        "row",
        "unit",
        "better",
        "real p50",
        "real range"
    );
    for p in policies {
        say_part!(" {:>12} {:>9}", format!("{p} p50"), "sim/real");
    }
    say!("");
    for r in results.iter().filter(|r| r.skipped.is_none()) {
        let (lo, hi) = range(&r.real);
        let m = median(&r.real);
        say_part!(
            "{:26} {:>5} {:>6} {:>10} {:>21}",
            r.row.name,
            r.row.unit,
            r.row.direction.name(),
            sig(m),
            format!("{}-{}", sig(lo), sig(hi))
        );
        for v in &r.sim {
            let s = median(v);
            say_part!(" {:>12} {:>9}", sig(s), format!("{:.3}", s / m));
        }
        say!("");
    }
    for r in results.iter().filter(|r| !r.stalled.is_empty()) {
        say!(
            "{}: reps {:?} stalled (their figures are what they measured until then)",
            r.row.name,
            r.stalled
        );
    }
    let skipped: Vec<&RealRow> = results.iter().filter(|r| r.skipped.is_some()).collect();
    if !skipped.is_empty() {
        say!("skipped on this machine:");
        for r in skipped {
            say!(
                "  {:26} {}",
                r.row.name,
                r.skipped.as_deref().unwrap_or_default()
            );
        }
    }
}

/// A row's figure per real rep, and the reps that stalled.
type RowReps = (Vec<f64>, Vec<u64>);

/// A row's figure over `reps` real runs, and the reps that stalled; or
/// why it cannot run here (`Ok(Err(why))`). Ctrl-C ends the suite.
fn real_row(
    row: &'static Row,
    reps: u64,
    reg: &Registry,
) -> Result<Result<RowReps, String>, Failure> {
    let why = |e: Failure| match e {
        Failure::Interrupted => Err(Failure::Interrupted),
        Failure::Exit(c) => Ok(Err(format!("exit {c}"))),
        Failure::Input(m) | Failure::Real(m) | Failure::Check(m) | Failure::Stall(m) => Ok(Err(m)),
    };
    let sc = match crate::scenario::build_row(row, "sysfs", &[], reg) {
        Ok(sc) => sc,
        Err(e) => return why(e),
    };
    let (name, fig) = &sc.figures[0];
    if !measurable(fig, true) {
        return Ok(Err(format!(
            "its figure ({name}) is not one a real run measures"
        )));
    }
    let outs = match run_reps(&sc, 1..=reps, true, false) {
        Ok(o) => o,
        Err(e) => return why(e),
    };
    if let Some(r) = outs.iter().find(|r| !measurable(fig, r.kernel.is_some())) {
        return Ok(Err(format!(
            "its figure ({name}) needs the kernel's record: {}",
            r.no_record.as_deref().unwrap_or_default()
        )));
    }
    let stalled = outs
        .iter()
        .filter(|r| r.outcome.stall.is_some())
        .map(|r| r.outcome.seed)
        .collect();
    Ok(Ok((
        outs.iter().map(|r| fig.compute(&r.outcome)).collect(),
        stalled,
    )))
}
