//! `schedlab validate`: the workloads run for real and simulated on this
//! machine (`schedlab_validate::compare`, whose doc has the list, and
//! `schedlab_validate::verdict`, the rule), then the table, JSON or plot.

use std::path::PathBuf;

use clap::Args;
use schedlab_real::Machine;
use schedlab_scenarios::suite::median;
use schedlab_sim::Registry;
use schedlab_validate::{quantile, Report, Request, TOLERANCE};
use serde_json::{json, Value};

use crate::pool::Bar;
use crate::print::{num, sig};
use crate::Failure;

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

pub fn run(a: &ValidateArgs, reg: &Registry) -> Result<(), Failure> {
    let machine = schedlab_scenarios::topology("sysfs").map_err(|e| Failure::Input(e.0))?;
    let costs = match &a.costs {
        Some(p) => {
            let f = schedlab_validate::CostsFile::load(p)?;
            f.check_shape(p, &machine, a.costs_any_shape)?;
            Some(f.cost)
        }
        None => None,
    };
    let req = Request {
        costs,
        reps: a.reps.max(1),
        seeds: a.seeds.max(1),
        only: a.only.clone(),
        jobs: a.jobs.unwrap_or_else(schedlab_scenarios::pool::all_cores),
    };
    let report = schedlab_validate::validate(&req, reg, &Bar::default())?;
    let info = Machine::read(&machine);
    let costs_name = a
        .costs
        .as_ref()
        .map_or("the built-in estimates (default)".to_string(), |p| {
            p.display().to_string()
        });
    if let Some(path) = &a.plot {
        plot(path, &report, &costs_name)?;
    }
    if a.json {
        say!(
            "{}",
            serde_json::to_string_pretty(&report_json(&report, &req, &info, &costs_name))
                .expect("plain data")
        );
    } else {
        print_table(&report, &req, &info, &costs_name);
    }
    Ok(())
}

/// sim/real per figure with its band, as SVG. A figure whose real median
/// is 0 has no ratio: left out.
fn plot(path: &std::path::Path, report: &Report, costs_name: &str) -> Result<(), Failure> {
    let dots: Vec<(String, f64, f64, f64)> = report
        .rows
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
    )
}

fn report_json(report: &Report, req: &Request, info: &Machine, costs_name: &str) -> Value {
    let rows: Vec<Value> = report
        .rows
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
    let skipped: Vec<Value> = report
        .skipped
        .iter()
        .map(|(w, why)| json!({"workload": w, "why": why}))
        .collect();
    json!({"machine": info.json(), "costs": costs_name, "reps": req.reps, "seeds": req.seeds,
        "tolerance": TOLERANCE, "rows": rows, "inside": report.inside(), "figures": report.rows.len(),
        "skipped": skipped})
}

fn print_table(report: &Report, req: &Request, info: &Machine, costs_name: &str) {
    say!(
        "schedlab validate on this machine ({} CPUs, {} LLC(s), {}; Linux {}), costs: {costs_name}; {} real reps, {} seeds simulated under linux",
        info.cpus, info.llcs, info.model, info.kernel, req.reps, req.seeds
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
    for r in &report.rows {
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
        "{} of {} figures within tolerance (the real p25 / {TOLERANCE} to p75 * {TOLERANCE})",
        report.inside(),
        report.rows.len()
    );
    if !report.skipped.is_empty() {
        say!("skipped:");
        for (w, why) in &report.skipped {
            say!("  {w:28} {why}");
        }
    }
}
