//! `schedlab validate`: a fixed list of workloads run for real and
//! simulated on this machine, figure by figure, each with a verdict
//! against a tolerance fixed here before any measurement.
//!
//! ## The verdict rule
//!
//! A simulated median is **within tolerance** when it lies in the real
//! runs' interquartile range widened by [`TOLERANCE`] on each side:
//! `p25 / 1.25 <= sim <= p75 * 1.25` (inclusive). A figure whose real
//! runs spread widely gets a wide band; one that repeats tightly must be
//! predicted tightly. The rule was written before the first validation
//! ran and is not tuned to its results.
//!
//! ## The workloads
//!
//! The suite's rows that fit this machine; rt-tests' hackbench in pipe
//! mode, in process and in thread mode at 1, 2 and 4 groups; schbench at
//! its defaults; the rt-app files under `scenarios/rt-app/`. Each reports
//! its scenario's figures that a real run measures and, with the kernel's
//! record (root), wakes and migrations per second. A workload this machine
//! cannot run is listed as skipped, with why. When rt-tests' `hackbench`
//! is installed, each hackbench workload also runs it, and its `Time` is
//! one more figure, beside our executor's and the simulator's: a check of
//! the executor itself.
//!
//! Real runs go one at a time with nothing else running; the simulations
//! come after them, on every core.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Args;
use schedlab_real::Options;
use schedlab_scenarios::rows::ROWS;
use schedlab_scenarios::rtapp::log::Line;
use schedlab_scenarios::suite::median;
use schedlab_scenarios::{catalog, Params, Scenario};
use schedlab_sim::{Outcome, Registry, Sim};
use serde_json::{json, Value};

use crate::print::num;
use crate::print::sig;
use crate::real::{measurable, Machine};
use crate::Failure;

/// The factor the real interquartile range is widened by, each side.
pub const TOLERANCE: f64 = 1.25;

#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// The cost model (`schedlab calibrate --out FILE`); default: the
    /// built-in estimates.
    #[arg(long, value_name = "FILE")]
    costs: Option<PathBuf>,
    /// Use --costs though it was measured on a machine of another shape.
    #[arg(long, requires = "costs")]
    costs_any_shape: bool,
    /// Real runs per workload.
    #[arg(long, value_name = "N", default_value_t = 5)]
    reps: u64,
    /// Simulated seeds per workload.
    #[arg(long, value_name = "N", default_value_t = 5)]
    seeds: u64,
    /// Only workloads whose name matches (`*` and `?`; repeatable).
    #[arg(long, value_name = "GLOB")]
    only: Vec<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Also plot sim/real per figure, with its band, as SVG.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// Worker threads for the simulations (default: every core).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
}

/// Where a simulated median stands against the real runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Verdict {
    /// The band: the real p25 / TOLERANCE to the real p75 * TOLERANCE.
    pub lo: f64,
    pub hi: f64,
    pub inside: bool,
}

/// The nearest-rank quantile `p` of `v`.
fn quantile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[((s.len() - 1) as f64 * p).round() as usize]
}

/// The verdict rule (module doc).
pub fn verdict(real: &[f64], sim: f64) -> Verdict {
    let (lo, hi) = (
        quantile(real, 0.25) / TOLERANCE,
        quantile(real, 0.75) * TOLERANCE,
    );
    Verdict {
        lo,
        hi,
        inside: lo <= sim && sim <= hi,
    }
}

/// How a workload is built on this machine.
type Build = Box<dyn Fn(&Registry) -> Result<Scenario, Failure>>;

/// A workload's real runs: its name, scenario, reps, and the real
/// client's beside them.
type Ran = (
    String,
    Scenario,
    Vec<schedlab_real::RealOutcome>,
    Option<ClientRuns>,
);

/// A real tool that runs the same workload.
enum Client {
    /// rt-tests' hackbench, with these arguments.
    Hackbench(Vec<String>),
    /// rt-app itself, on this file.
    RtApp(PathBuf),
}

/// What the real client measured, one entry per rep.
enum ClientRuns {
    /// hackbench's `Time`, ms.
    Times(Vec<f64>),
    /// rt-app's log lines by the file's thread name.
    Logs(Vec<BTreeMap<String, Vec<Line>>>),
}

/// One workload: a name and how to build it on this machine.
struct Workload {
    name: String,
    build: Build,
    client: Option<Client>,
}

fn params(pairs: &[(&str, String)], reg: &Registry) -> Params {
    Params::new(pairs.iter().map(|(k, v)| (k.to_string(), v.clone()))).with_registry(reg.clone())
}

/// The fixed list (module doc).
fn workloads() -> Vec<Workload> {
    let mut w: Vec<Workload> = ROWS
        .iter()
        .map(|r| Workload {
            name: r.name.to_string(),
            build: Box::new(move |reg| {
                catalog::build(
                    r.name,
                    Some("sysfs"),
                    params(&[("policy", "linux".into())], reg),
                )
                .map_err(|e| Failure::Input(e.0))
            }),
            client: None,
        })
        .collect();
    for mode in ["process", "thread"] {
        for groups in [1u64, 2, 4] {
            let loops = 50u64;
            let mut client = vec!["-p".to_string()];
            if mode == "thread" {
                client.push("-T".into());
            }
            client.extend(
                [
                    "-g",
                    &groups.to_string(),
                    "-f",
                    "20",
                    "-l",
                    &loops.to_string(),
                    "-s",
                    "100",
                ]
                .map(String::from),
            );
            w.push(Workload {
                name: format!("hackbench.{mode}.g{groups}"),
                build: Box::new(move |reg| {
                    let p = params(
                        &[
                            ("policy", "linux".into()),
                            ("mode", mode.into()),
                            ("groups", groups.to_string()),
                            ("loops", loops.to_string()),
                        ],
                        reg,
                    );
                    catalog::build("hackbench", Some("sysfs"), p).map_err(|e| Failure::Input(e.0))
                }),
                client: Some(Client::Hackbench(client)),
            });
        }
    }
    w.push(Workload {
        name: "schbench".into(),
        build: Box::new(|reg| {
            catalog::build(
                "schbench",
                Some("sysfs"),
                params(&[("policy", "linux".into())], reg),
            )
            .map_err(|e| Failure::Input(e.0))
        }),
        client: None,
    });
    for f in ["periodic", "producer_consumer", "barrier"] {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../scenarios/rt-app/{f}.json"));
        let path = if path.exists() {
            path
        } else {
            PathBuf::from(format!("scenarios/rt-app/{f}.json"))
        };
        let file = path.clone();
        w.push(Workload {
            name: format!("rt-app/{f}.json"),
            build: Box::new(move |reg| {
                let topo =
                    schedlab_scenarios::topology("sysfs").map_err(|e| Failure::Input(e.0))?;
                schedlab_scenarios::rtapp::load(
                    &path,
                    topo,
                    params(&[("policy", "linux".into())], reg),
                )
                .map_err(|e| Failure::Input(e.to_string()))
            }),
            client: Some(Client::RtApp(file)),
        });
    }
    w
}

/// One figure of one workload, real beside simulated.
struct Row {
    workload: String,
    figure: String,
    real: Vec<f64>,
    sim: Vec<f64>,
}

impl Row {
    fn verdict(&self) -> Verdict {
        verdict(&self.real, median(&self.sim))
    }
}

/// rt-app's columns compared, per thread of the file: rt-app's own log
/// (each rep's median over the thread's loops) against the simulated log
/// (each seed's median), every column of `rtapp_log::COLUMNS` but these.
/// `slack` and `wu_lat` only for a thread with a timer; `c_duration` is
/// what the file configures, so it checks that the two read the file alike
/// rather than predicting anything (`c_period` would only repeat that).
const RTAPP_LEFT_OUT: &[&str] = &["c_period"];

fn rtapp_rows(
    workload: &str,
    s: &Scenario,
    real: &[BTreeMap<String, Vec<Line>>],
    sim: &[&Outcome],
) -> Vec<Row> {
    let threads: Vec<String> = s.spec.programs.keys().cloned().collect();
    let sim: Vec<BTreeMap<String, Vec<Line>>> = sim
        .iter()
        .map(|o| crate::rtapp_log::by_thread(o, &threads))
        .collect();
    let medians =
        |runs: &[BTreeMap<String, Vec<Line>>], t: &str, f: crate::rtapp_log::Column| -> Vec<f64> {
            runs.iter()
                .filter_map(|r| r.get(t))
                .map(|l| median(&l.iter().map(f).collect::<Vec<_>>()))
                .collect()
        };
    let mut rows = Vec::new();
    for t in &threads {
        // slack and wu_lat are a timer's: a thread without one has 0s.
        let timed = real
            .iter()
            .filter_map(|r| r.get(t))
            .flatten()
            .any(|l| l.c_period > 0);
        for &(c, f) in crate::rtapp_log::COLUMNS {
            if RTAPP_LEFT_OUT.contains(&c) || (!timed && matches!(c, "slack" | "wu_lat")) {
                continue;
            }
            let (r, m) = (medians(real, t, f), medians(&sim, t, f));
            if !r.is_empty() && !m.is_empty() {
                rows.push(Row {
                    workload: workload.to_string(),
                    figure: format!("{t}.{c} (rt-app's log)"),
                    real: r,
                    sim: m,
                });
            }
        }
    }
    rows
}

/// Per second of the run, a counter.
fn per_s(n: u64, o: &Outcome) -> f64 {
    n as f64 * 1e9 / o.end_ns.max(1) as f64
}

/// The counter figures: (name, real value, simulated value).
fn wakes_per_s(o: &Outcome, real: bool) -> f64 {
    let key = if real { "kernel.wakes" } else { "wakes.parked" };
    per_s(o.counters.get(key).copied().unwrap_or(0), o)
}

fn migrations_per_s(o: &Outcome) -> f64 {
    per_s(o.tasks.values().map(|t| t.migrations).sum(), o)
}

/// rt-tests' `hackbench` with `args`, `reps` times: its Time, ms. `None`
/// when it is not installed.
fn client_times(args: &[String], reps: u64) -> Option<Vec<f64>> {
    (0..reps)
        .map(|_| {
            let out = std::process::Command::new("hackbench")
                .args(args)
                .output()
                .ok()?;
            let text = String::from_utf8_lossy(&out.stdout);
            text.lines()
                .find_map(|l| l.strip_prefix("Time:"))
                .and_then(|t| t.trim().parse::<f64>().ok())
                .map(|s| s * 1e3)
        })
        .collect()
}

pub fn run(a: &ValidateArgs, reg: &Registry) -> Result<(), Failure> {
    let machine = schedlab_scenarios::topology("sysfs").map_err(|e| Failure::Input(e.0))?;
    let costs = match &a.costs {
        Some(p) => {
            let f = crate::costs::CostsFile::load(p)?;
            f.check_shape(p, &machine, a.costs_any_shape)?;
            Some(f.cost)
        }
        None => None,
    };
    let pats: Vec<wildmatch::WildMatch> = a
        .only
        .iter()
        .map(|g| wildmatch::WildMatch::new(g))
        .collect();
    let list: Vec<Workload> = workloads()
        .into_iter()
        .filter(|w| pats.is_empty() || pats.iter().any(|p| p.matches(&w.name)))
        .collect();
    if list.is_empty() {
        return Err(Failure::Input(format!(
            "--only {:?}: no workload matches",
            a.only
        )));
    }
    let reps = a.reps.max(1);
    let mut skipped: Vec<(String, String)> = Vec::new();
    let mut built: Vec<Ran> = Vec::new();
    let bar = crate::pool::progress(list.len(), "validate: real runs");
    let (mut hackbench_missing, mut rtapp_missing) = (false, false);
    let rtapp_installed = crate::rtapp_log::installed();
    for w in &list {
        bar.inc(1);
        let mut s = match (w.build)(reg) {
            Ok(s) => s,
            Err(Failure::Input(why)) => {
                skipped.push((w.name.clone(), why));
                continue;
            }
            Err(e) => return Err(e),
        };
        if let Some(c) = costs {
            s.spec.cost = c;
        }
        let opts = Options {
            capture: true,
            keep_events: false,
        };
        let mut outs = Vec::new();
        let mut why = None;
        for rep in 1..=reps {
            match schedlab_real::run(&s.spec, rep, &opts) {
                Ok(r) => outs.push(r),
                Err(schedlab_real::Error::Interrupted) => return Err(Failure::Interrupted),
                Err(e) => {
                    why = Some(e.to_string());
                    break;
                }
            }
        }
        if let Some(why) = why {
            skipped.push((w.name.clone(), why));
            continue;
        }
        let client = match &w.client {
            Some(Client::Hackbench(args)) => {
                let t = client_times(args, reps);
                hackbench_missing |= t.is_none();
                t.map(ClientRuns::Times)
            }
            Some(Client::RtApp(file)) if rtapp_installed => {
                // As long as our executor's longest rep: a file whose
                // loops end (or stall) keeps rt-app waiting to its
                // duration.
                let wall = outs.iter().map(|r| r.outcome.end_ns).max().unwrap_or(0);
                let secs = wall.div_ceil(1_000_000_000).max(1);
                let logs: Result<Vec<_>, String> = (1..=reps)
                    .map(|rep| crate::rtapp_log::run_rtapp(file, secs, rep))
                    .collect();
                match logs {
                    Ok(l) => Some(ClientRuns::Logs(l)),
                    Err(why) => {
                        skipped.push((format!("{} (rt-app itself)", w.name), why));
                        None
                    }
                }
            }
            Some(Client::RtApp(_)) => {
                rtapp_missing = true;
                None
            }
            None => None,
        };
        built.push((w.name.clone(), s, outs, client));
    }
    bar.finish_and_clear();
    // The simulations, after every real run.
    let jobs = a.jobs.unwrap_or_else(crate::pool::all_cores);
    let work: Vec<(usize, u64)> = (0..built.len())
        .flat_map(|i| (1..=a.seeds.max(1)).map(move |s| (i, s)))
        .collect();
    let bar = crate::pool::progress(work.len(), "validate: simulations");
    let sims = crate::pool::par_map(
        &work,
        jobs,
        |&(i, seed)| Sim::new(&built[i].1.spec, seed).run(),
        || bar.inc(1),
    );
    bar.finish_and_clear();
    let mut rows = Vec::new();
    let mut no_record = None;
    for (i, (name, s, outs, client)) in built.iter().enumerate() {
        let sim: Vec<&Outcome> = work
            .iter()
            .zip(&sims)
            .filter(|((k, _), _)| *k == i)
            .map(|(_, o)| o)
            .collect();
        let kernel = outs.iter().all(|r| r.kernel.is_some());
        if !kernel {
            no_record = outs.iter().find_map(|r| r.no_record.clone());
        }
        for (fname, f) in &s.figures {
            if !measurable(f, kernel) {
                continue;
            }
            rows.push(Row {
                workload: name.clone(),
                figure: fname.clone(),
                real: outs.iter().map(|r| f.compute(&r.outcome)).collect(),
                sim: sim.iter().map(|o| f.compute(o)).collect(),
            });
        }
        match client {
            Some(ClientRuns::Times(t)) => {
                if let Some((fname, f)) = s.figures.first() {
                    rows.push(Row {
                        workload: name.clone(),
                        figure: format!("{fname} (rt-tests hackbench)"),
                        real: t.clone(),
                        sim: sim.iter().map(|o| f.compute(o)).collect(),
                    });
                }
            }
            Some(ClientRuns::Logs(logs)) => rows.extend(rtapp_rows(name, s, logs, &sim)),
            None => {}
        }
        if kernel {
            rows.push(Row {
                workload: name.clone(),
                figure: "wakes_per_s".into(),
                real: outs.iter().map(|r| wakes_per_s(&r.outcome, true)).collect(),
                sim: sim.iter().map(|o| wakes_per_s(o, false)).collect(),
            });
            rows.push(Row {
                workload: name.clone(),
                figure: "migrations_per_s".into(),
                real: outs.iter().map(|r| migrations_per_s(&r.outcome)).collect(),
                sim: sim.iter().map(|o| migrations_per_s(o)).collect(),
            });
        }
    }
    if let Some(why) = &no_record {
        skipped.push((
            "counters (wakes, migrations per second)".into(),
            why.clone(),
        ));
    }
    if hackbench_missing {
        skipped.push((
            "rt-tests' hackbench beside ours".into(),
            "hackbench is not installed (Debian package rt-tests)".into(),
        ));
    }
    if rtapp_missing {
        skipped.push((
            "rt-app itself beside the rt-app files".into(),
            "rt-app is not installed (Debian package rt-app)".into(),
        ));
    }
    let info = Machine::read(&machine);
    let inside = rows.iter().filter(|r| r.verdict().inside).count();
    let costs_name = a
        .costs
        .as_ref()
        .map_or("the built-in estimates (default)".to_string(), |p| {
            p.display().to_string()
        });
    if let Some(path) = &a.plot {
        // A figure whose real median is 0 has no ratio: left out.
        let dots: Vec<(String, f64, f64, f64)> = rows
            .iter()
            .filter(|r| median(&r.real) > 0.0)
            .map(|r| {
                let m = median(&r.real);
                let v = r.verdict();
                (
                    format!("{} {}", r.workload, r.figure),
                    median(&r.sim) / m,
                    v.lo / m,
                    v.hi / m,
                )
            })
            .collect();
        crate::plot::validate_svg(
            path,
            &dots,
            &format!("sim / real on this machine, costs: {costs_name}"),
        )?;
    }
    if a.json {
        let out: Vec<Value> = rows
            .iter()
            .map(|r| {
                let v = r.verdict();
                let (m, s) = (median(&r.real), median(&r.sim));
                json!({"workload": r.workload, "figure": r.figure, "real": {"median": num(m),
                    "p25": num(quantile(&r.real, 0.25)), "p75": num(quantile(&r.real, 0.75)), "reps": r.real},
                    "sim": {"median": num(s), "seeds": r.sim}, "sim_over_real": num(s / m),
                    "band": [num(v.lo), num(v.hi)], "inside": v.inside})
            })
            .collect();
        let skipped: Vec<Value> = skipped
            .iter()
            .map(|(w, why)| json!({"workload": w, "why": why}))
            .collect();
        let v = json!({"machine": info.json(), "costs": costs_name, "reps": reps, "seeds": a.seeds,
            "tolerance": TOLERANCE, "rows": out, "inside": inside, "figures": rows.len(), "skipped": skipped});
        say!("{}", serde_json::to_string_pretty(&v).expect("plain data"));
        return Ok(());
    }
    say!(
        "schedlab validate on this machine ({} CPUs, {} LLC(s), {}; Linux {}), costs: {costs_name}; {reps} real reps, {} seeds simulated under linux",
        info.cpus, info.llcs, info.model, info.kernel, a.seeds
    );
    say!(
        "{:28} {:34} {:>10} {:>21} {:>10} {:>8}  verdict",
        "workload",
        "figure",
        "real p50",
        "real p25-p75",
        "sim p50",
        "sim/real"
    );
    for r in &rows {
        let v = r.verdict();
        let (m, s) = (median(&r.real), median(&r.sim));
        say!(
            "{:28} {:34} {:>10} {:>21} {:>10} {:>8}  {}",
            r.workload,
            r.figure,
            sig(m),
            format!(
                "{}-{}",
                sig(quantile(&r.real, 0.25)),
                sig(quantile(&r.real, 0.75))
            ),
            sig(s),
            format!("{:.3}", s / m),
            if v.inside { "within" } else { "outside" }
        );
    }
    say!(
        "{inside} of {} figures within tolerance (the real p25 / {TOLERANCE} to p75 * {TOLERANCE})",
        rows.len()
    );
    if !skipped.is_empty() {
        say!("skipped:");
        for (w, why) in &skipped {
            say!("  {w:28} {why}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_band_is_the_interquartile_range_widened_by_the_tolerance() {
        let real = [8.0, 9.0, 10.0, 11.0, 12.0];
        // p25 = 9, p75 = 11 (nearest rank): the band is 7.2 to 13.75.
        let v = verdict(&real, 10.0);
        assert!(
            (v.lo - 7.2).abs() < 1e-9 && (v.hi - 13.75).abs() < 1e-9,
            "{v:?}"
        );
        assert!(v.inside, "the median is inside");
        assert!(!verdict(&real, 7.1).inside, "below the band");
        assert!(!verdict(&real, 13.8).inside, "above the band");
        assert!(verdict(&real, 7.2).inside, "the lower edge is inside");
        assert!(verdict(&real, 13.75).inside, "the upper edge is inside");
    }
}
