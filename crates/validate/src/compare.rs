//! `schedlab validate`: a fixed list of workloads run for real and
//! simulated on this machine, figure by figure, each with a verdict
//! against a tolerance fixed here before any measurement.
//!
//! The verdict rule: [`crate::verdict`].
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

use schedlab_real::{measurable, Options, RealOutcome};
use schedlab_scenarios::rtapp::log::{self, Line};
use schedlab_scenarios::suite::median;
use schedlab_scenarios::Scenario;
use schedlab_sim::{CostModel, Outcome, Registry, Sim};

use crate::clients::{hackbench_times, rtapp_installed, run_rtapp};
use crate::verdict::{verdict, Verdict};
use crate::workloads::{workloads, Client, Workload};
use crate::{Error, Progress};

/// What to validate, and how many times.
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// The cost model every workload runs under; `None`: the built-in
    /// estimates.
    pub costs: Option<CostModel>,
    /// Real runs per workload (at least 1).
    pub reps: u64,
    /// Simulated seeds per workload (at least 1).
    pub seeds: u64,
    /// Only workloads whose name matches one of these (`*` and `?`);
    /// empty: every workload.
    pub only: Vec<String>,
    /// Worker threads for the simulations.
    pub jobs: usize,
}

/// What validation found: every figure compared, and what was skipped.
#[derive(Debug)]
pub struct Report {
    pub rows: Vec<Row>,
    /// (what, why): workloads this machine cannot run, clients not
    /// installed, counters without the kernel's record.
    pub skipped: Vec<(String, String)>,
}

impl Report {
    /// Rows within tolerance.
    pub fn inside(&self) -> usize {
        self.rows.iter().filter(|r| r.verdict().inside).count()
    }
}

/// A workload's real runs: its name, scenario, reps, and the real
/// client's beside them.
struct Ran {
    name: String,
    scenario: Scenario,
    reps: Vec<RealOutcome>,
    client: Option<ClientRuns>,
}

/// What the real client measured, one entry per rep.
enum ClientRuns {
    /// hackbench's `Time`, ms.
    Times(Vec<f64>),
    /// rt-app's log lines by the file's thread name.
    Logs(Vec<BTreeMap<String, Vec<Line>>>),
}

/// One figure of one workload, real beside simulated.
#[derive(Clone, Debug)]
pub struct Row {
    pub workload: String,
    pub figure: String,
    /// One value per real rep (or per run of the real client).
    pub real: Vec<f64>,
    /// One value per simulated seed.
    pub sim: Vec<f64>,
}

impl Row {
    /// The verdict rule on this row's real runs and simulated median.
    pub fn verdict(&self) -> Verdict {
        verdict(&self.real, median(&self.sim))
    }
}

/// rt-app's columns compared, per thread of the file: rt-app's own log
/// (each rep's median over the thread's loops) against the simulated log
/// (each seed's median), every column of `log::COLUMNS` but these.
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
    let sim: Vec<BTreeMap<String, Vec<Line>>> =
        sim.iter().map(|o| log::by_thread(o, &threads)).collect();
    let medians = |runs: &[BTreeMap<String, Vec<Line>>], t: &str, f: log::Column| -> Vec<f64> {
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
        for &(c, f) in log::COLUMNS {
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

/// Wakes per second: the kernel's record of a real run, the parked
/// wakes of a simulated one.
fn wakes_per_s(o: &Outcome, real: bool) -> f64 {
    let key = if real { "kernel.wakes" } else { "wakes.parked" };
    per_s(o.counters.get(key).copied().unwrap_or(0), o)
}

/// Migrations per second, over every task.
fn migrations_per_s(o: &Outcome) -> f64 {
    per_s(o.tasks.values().map(|t| t.migrations).sum(), o)
}

/// Runs the workloads `req` names for real, one at a time, then simulates
/// each on every seed, and compares them figure by figure.
pub fn validate(req: &Request, reg: &Registry, progress: &dyn Progress) -> Result<Report, Error> {
    let pats: Vec<wildmatch::WildMatch> = req
        .only
        .iter()
        .map(|g| wildmatch::WildMatch::new(g))
        .collect();
    let list: Vec<Workload> = workloads()
        .into_iter()
        .filter(|w| pats.is_empty() || pats.iter().any(|p| p.matches(&w.name)))
        .collect();
    if list.is_empty() {
        return Err(Error::Input(format!(
            "--only {:?}: no workload matches",
            req.only
        )));
    }
    let mut skipped = Vec::new();
    let ran = run_real(&list, req, reg, progress, &mut skipped)?;
    let sims = simulate(&ran, req, progress);
    let mut rows = Vec::new();
    let mut no_record = None;
    for (r, sim) in ran.iter().zip(&sims) {
        let sim: Vec<&Outcome> = sim.iter().collect();
        if r.reps.iter().any(|o| o.kernel.is_none()) {
            no_record = r.reps.iter().find_map(|o| o.no_record.clone());
        }
        rows.extend(rows_of(r, &sim));
    }
    if let Some(why) = no_record {
        skipped.push(("counters (wakes, migrations per second)".into(), why));
    }
    Ok(Report { rows, skipped })
}

/// Every workload of `list` run for real `req.reps` times, with its real
/// client; what cannot run goes to `skipped` with why.
fn run_real(
    list: &[Workload],
    req: &Request,
    reg: &Registry,
    progress: &dyn Progress,
    skipped: &mut Vec<(String, String)>,
) -> Result<Vec<Ran>, Error> {
    let reps = req.reps.max(1);
    let (mut hackbench_missing, mut rtapp_missing) = (false, false);
    let rtapp = rtapp_installed();
    let mut ran = Vec::new();
    progress.begin("validate: real runs", list.len());
    for w in list {
        progress.tick();
        let mut s = match (w.build)(reg) {
            Ok(s) => s,
            Err(Error::Input(why)) => {
                skipped.push((w.name.clone(), why));
                continue;
            }
            Err(e) => return Err(e),
        };
        if let Some(c) = req.costs {
            s.spec.cost = c;
        }
        let outs = match real_reps(&s, reps)? {
            Ok(outs) => outs,
            Err(why) => {
                skipped.push((w.name.clone(), why));
                continue;
            }
        };
        let client = match &w.client {
            Some(Client::Hackbench(args)) => {
                let t = hackbench_times(args, reps);
                hackbench_missing |= t.is_none();
                t.map(ClientRuns::Times)
            }
            Some(Client::RtApp(file)) if rtapp => {
                // As long as our executor's longest rep: a file whose
                // loops end (or stall) keeps rt-app waiting to its
                // duration.
                let wall = outs.iter().map(|r| r.outcome.end_ns).max().unwrap_or(0);
                let secs = wall.div_ceil(1_000_000_000).max(1);
                match (1..=reps).map(|rep| run_rtapp(file, secs, rep)).collect() {
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
        ran.push(Ran {
            name: w.name.clone(),
            scenario: s,
            reps: outs,
            client,
        });
    }
    progress.end();
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
    Ok(ran)
}

/// `reps` real runs of `s` with the kernel's record; the inner error says
/// why the workload cannot run here (it is skipped), the outer one ends
/// validation (Ctrl-C).
fn real_reps(s: &Scenario, reps: u64) -> Result<Result<Vec<RealOutcome>, String>, Error> {
    let opts = Options {
        capture: true,
        keep_events: false,
    };
    let mut outs = Vec::new();
    for rep in 1..=reps {
        match schedlab_real::run(&s.spec, rep, &opts) {
            Ok(r) => outs.push(r),
            Err(schedlab_real::Error::Interrupted) => return Err(Error::Interrupted),
            Err(e) => return Ok(Err(e.to_string())),
        }
    }
    Ok(Ok(outs))
}

/// Each workload simulated on seeds `1..=req.seeds`, over `req.jobs`
/// threads, after every real run: per workload, its outcomes in seed order.
fn simulate(ran: &[Ran], req: &Request, progress: &dyn Progress) -> Vec<Vec<Outcome>> {
    let work: Vec<(usize, u64)> = (0..ran.len())
        .flat_map(|i| (1..=req.seeds.max(1)).map(move |s| (i, s)))
        .collect();
    progress.begin("validate: simulations", work.len());
    let sims = schedlab_scenarios::pool::par_map(
        &work,
        req.jobs,
        |&(i, seed)| Sim::new(&ran[i].scenario.spec, seed).run(),
        || progress.tick(),
    );
    progress.end();
    let mut per: Vec<Vec<Outcome>> = ran.iter().map(|_| Vec::new()).collect();
    for ((i, _), o) in work.into_iter().zip(sims) {
        per[i].push(o);
    }
    per
}

/// One workload's rows: each figure a real run measures, the real
/// client's, and (with the kernel's record) wakes and migrations per
/// second.
fn rows_of(r: &Ran, sim: &[&Outcome]) -> Vec<Row> {
    let kernel = r.reps.iter().all(|o| o.kernel.is_some());
    let row = |figure: String, real: Vec<f64>, sim: Vec<f64>| Row {
        workload: r.name.clone(),
        figure,
        real,
        sim,
    };
    let mut rows = Vec::new();
    for (fname, f) in &r.scenario.figures {
        if measurable(f, kernel) {
            rows.push(row(
                fname.clone(),
                r.reps.iter().map(|o| f.compute(&o.outcome)).collect(),
                sim.iter().map(|o| f.compute(o)).collect(),
            ));
        }
    }
    match &r.client {
        Some(ClientRuns::Times(t)) => {
            if let Some((fname, f)) = r.scenario.figures.first() {
                rows.push(row(
                    format!("{fname} (rt-tests hackbench)"),
                    t.clone(),
                    sim.iter().map(|o| f.compute(o)).collect(),
                ));
            }
        }
        Some(ClientRuns::Logs(logs)) => rows.extend(rtapp_rows(&r.name, &r.scenario, logs, sim)),
        None => {}
    }
    if kernel {
        rows.push(row(
            "wakes_per_s".into(),
            r.reps
                .iter()
                .map(|o| wakes_per_s(&o.outcome, true))
                .collect(),
            sim.iter().map(|o| wakes_per_s(o, false)).collect(),
        ));
        rows.push(row(
            "migrations_per_s".into(),
            r.reps
                .iter()
                .map(|o| migrations_per_s(&o.outcome))
                .collect(),
            sim.iter().map(|o| migrations_per_s(o)).collect(),
        ));
    }
    rows
}
