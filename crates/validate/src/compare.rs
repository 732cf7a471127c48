//! `schedlab validate`: a fixed list of workloads run for real and
//! simulated on this machine, figure by figure, each with a verdict
//! against a tolerance fixed here before any measurement.
//!
//! The verdict rule: [`crate::verdict`].
//!
//! ## The workloads
//!
//! The suite's rows that fit this machine; perf's `sched pipe` on one CPU
//! and anywhere; rt-tests' hackbench in pipe mode, in process and in
//! thread mode at 1 to 4 groups; schbench at
//! its defaults; the rt-app files under `scenarios/rt-app/`. Each reports
//! its scenario's figures that a real run measures and, with the kernel's
//! record (root), wakes and migrations per second. A workload this machine
//! cannot run is listed as skipped, with why. Each real tool that runs
//! the same workload ([`crate::workloads::Client`]: rt-tests' `hackbench`
//! and perf's `sched messaging` for hackbench, perf's `sched pipe` for
//! `sched_pipe`, rt-app for its files) runs too when installed, and its
//! own figure is one more row, beside our executor's and the simulator's:
//! a check of the executor itself. A tool not installed is listed once
//! as skipped, with its Debian package.
//!
//! Real runs go one at a time with nothing else running; the simulations
//! come after them, on every core.

use std::collections::BTreeMap;

use schedlab_real::{measurable, Options, RealOutcome};
use schedlab_scenarios::rtapp::log::{self, Line};
use schedlab_scenarios::suite::median;
use schedlab_scenarios::Scenario;
use schedlab_sim::{CostModel, Outcome, Registry, Sim};

use crate::clients::{
    hackbench_times, missing as missing_tool, perf_messaging_ms, perf_pipe_us, rtapp_installed,
    run_rtapp,
};
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
    /// Each real client's runs, by the label its figure gets.
    clients: Vec<(&'static str, ClientRuns)>,
}

/// What the real client measured, one entry per rep.
enum ClientRuns {
    /// The tool's own figure, in the unit of the workload's first figure
    /// (hackbench's `Time` and perf's total time, ms; perf's µs per op).
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
    let mut missing = std::collections::BTreeSet::new();
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
        let mut clients = Vec::new();
        for c in &w.clients {
            match run_client(c, reps, &outs) {
                Ok(runs) => clients.push(runs),
                Err(Missing::Tool(tool)) => {
                    missing.insert(tool);
                }
                Err(Missing::Failed(label, why)) => {
                    skipped.push((format!("{} ({label})", w.name), why));
                }
            }
        }
        ran.push(Ran {
            name: w.name.clone(),
            scenario: s,
            reps: outs,
            clients,
        });
    }
    progress.end();
    for tool in missing {
        skipped.push((format!("{tool} beside ours"), missing_tool(tool)));
    }
    Ok(ran)
}

/// Why a client has no figure: its tool is not installed, or it ran and
/// failed (its label, why).
enum Missing {
    Tool(&'static str),
    Failed(&'static str, String),
}

/// Real client `c`, `reps` times, beside our executor's runs `outs`: its
/// figure's label and what it measured.
fn run_client(
    c: &Client,
    reps: u64,
    outs: &[RealOutcome],
) -> Result<(&'static str, ClientRuns), Missing> {
    let times = |label: &'static str, tool: &'static str, t: Option<Vec<f64>>| {
        t.map(|t| (label, ClientRuns::Times(t)))
            .ok_or(Missing::Tool(tool))
    };
    match c {
        Client::Hackbench(args) => times(
            "rt-tests hackbench",
            "hackbench",
            hackbench_times(args, reps),
        ),
        Client::PerfMessaging(args) => times(
            "perf sched messaging",
            "perf",
            perf_messaging_ms(args, reps),
        ),
        Client::PerfPipe { cpu, loops } => times(
            "perf sched pipe",
            "perf",
            (0..reps).map(|_| perf_pipe_us(*cpu, *loops)).collect(),
        ),
        Client::RtApp(_) if !rtapp_installed() => Err(Missing::Tool("rt-app")),
        Client::RtApp(file) => {
            // As long as our executor's longest rep: a file whose loops
            // end (or stall) keeps rt-app waiting to its duration.
            let wall = outs.iter().map(|r| r.outcome.end_ns).max().unwrap_or(0);
            let secs = wall.div_ceil(1_000_000_000).max(1);
            (1..=reps)
                .map(|rep| run_rtapp(file, secs, rep))
                .collect::<Result<_, _>>()
                .map(|l| ("rt-app itself", ClientRuns::Logs(l)))
                .map_err(|why| Missing::Failed("rt-app itself", why))
        }
    }
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
    for (label, runs) in &r.clients {
        match runs {
            ClientRuns::Times(t) => {
                if let Some((fname, f)) = r.scenario.figures.first() {
                    rows.push(row(
                        format!("{fname} ({label})"),
                        t.clone(),
                        sim.iter().map(|o| f.compute(o)).collect(),
                    ));
                }
            }
            ClientRuns::Logs(logs) => rows.extend(rtapp_rows(&r.name, &r.scenario, logs, sim)),
        }
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
