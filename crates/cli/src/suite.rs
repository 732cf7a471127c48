//! `schedlab suite`: the seed's benchmark rows on a base and a head
//! policy, N seeds (boots) per side, and per row the medians, head/base
//! and whether the row resolves (`schedlab_scenarios::suite`).

use std::path::PathBuf;

use clap::Args;
use schedlab_scenarios::rows::{Row, ROWS};
use schedlab_scenarios::suite::{range, summary, RowResult, ALPHA};
use schedlab_sim::{Registry, Sim};
use serde_json::{json, Value};
use wildmatch::WildMatch;

use crate::print::sig;
use crate::scenario::build_row as build;
use crate::Failure;

#[derive(Args, Debug)]
pub struct SuiteArgs {
    /// The machine: a preset (`topo --list`), `sysfs` (this one), `sysfs:ROOT`,
    /// `lscpu:FILE` or `FILE.toml`.
    #[arg(long, value_name = "T", default_value = "amd-2x8")]
    topology: String,
    /// The base side's placement policy (`schedlab policies` lists them).
    #[arg(long, value_name = "POLICY", default_value = "home")]
    base: String,
    /// The head side's placement.
    #[arg(long, value_name = "POLICY", default_value = "waker-streak")]
    head: String,
    /// Several policies side by side, the first the base (comma-separated:
    /// `home,linux,waker-streak`): per row each one's median, its ratio to
    /// the base and whether that resolves. Instead of --base/--head.
    #[arg(long, value_name = "P,P,...", value_delimiter = ',', conflicts_with_all = ["base", "head"])]
    policies: Vec<String>,
    /// The fair class of a kernel release for every side (6.12, 6.18, 6.19,
    /// 7.2, base); default: each policy's own (`schedlab features`).
    #[arg(long, value_name = "RELEASE")]
    kernel: Option<String>,
    /// Features over it, NAME or NO_NAME, comma-separated.
    #[arg(long, value_name = "NAME,NO_NAME,...")]
    features: Option<String>,
    /// Seeds 1..=N on each side (the same seeds on both).
    #[arg(long, value_name = "N", default_value_t = 10)]
    seeds: u64,
    /// Only rows whose name matches (`*` and `?`; repeatable).
    #[arg(long, value_name = "GLOB")]
    rows: Vec<String>,
    /// Print JSON instead of the table.
    #[arg(long)]
    json: bool,
    /// Also write the table as CSV.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Also plot head/base per row, with each side's range, as SVG.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// Worker threads (default: every core). The results do not depend on it.
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// Each row for real on this machine (--seeds reps, one at a time),
    /// its median beside the simulated median on this machine's topology
    /// under each policy (--policies; default linux).
    #[arg(long, conflicts_with_all = ["base", "head", "csv", "plot"])]
    real: bool,
    /// The cost model from a cost file (`schedlab calibrate --out FILE`).
    #[arg(long, value_name = "FILE")]
    costs: Option<PathBuf>,
    /// Use --costs though it was measured on a machine of another shape.
    #[arg(long, requires = "costs")]
    costs_any_shape: bool,
}

/// A policy name as `--param`s, checked against the registry.
fn policy_params(p: &str, reg: &Registry) -> Result<Vec<String>, Failure> {
    reg.resolve(p).map_err(Failure::Input)?;
    Ok(vec![format!("policy={p}")])
}

/// One side's parameters: its policy and the fair class asked for.
fn side_params(a: &SuiteArgs, p: &str, reg: &Registry) -> Result<Vec<String>, Failure> {
    let mut v = policy_params(p, reg)?;
    v.extend(crate::scenario::fair_params(
        a.kernel.as_deref(),
        a.features.as_deref(),
    ));
    Ok(v)
}

/// Each side's fair class, as its first row builds it: `(text, json)`.
fn fair_of(
    a: &SuiteArgs,
    rows: &[&'static Row],
    names: &[String],
    reg: &Registry,
) -> Result<Vec<(String, Value)>, Failure> {
    names
        .iter()
        .map(|p| {
            let sc = build(rows[0], &a.topology, &side_params(a, p, reg)?, reg)?;
            Ok((crate::print::fair_text(&sc), crate::print::fair_json(&sc)))
        })
        .collect()
}

pub fn run(a: &SuiteArgs, reg: &Registry) -> Result<(), Failure> {
    if a.seeds == 0 {
        return Err(Failure::Input("--seeds: expected at least 1".into()));
    }
    let rows = chosen_rows(a)?;
    if a.real {
        let policies = if a.policies.is_empty() {
            vec!["linux".to_string()]
        } else {
            a.policies.clone()
        };
        for p in &policies {
            policy_params(p, reg)?;
        }
        let jobs = a.jobs.unwrap_or_else(schedlab_scenarios::pool::all_cores);
        return crate::real::suite(&rows, &policies, a.seeds, jobs, a.json, reg);
    }
    let names: Vec<String> = if a.policies.is_empty() {
        vec![a.base.clone(), a.head.clone()]
    } else {
        a.policies.clone()
    };
    if names.len() < 2 {
        return Err(Failure::Input(format!(
            "--policies {}: expected at least two policies, the first the base",
            names.join(",")
        )));
    }
    let pairs = simulate(a, &rows, &names, reg)?;
    let fair = fair_of(a, &rows, &names, reg)?;
    if !a.policies.is_empty() {
        return several(a, &names, &pairs, &fair);
    }
    let results: Vec<RowResult> = pairs.into_iter().map(|mut v| v.remove(0)).collect();
    if let Some(path) = &a.csv {
        std::fs::write(path, csv(&results))
            .map_err(|e| Failure::Input(format!("{}: cannot write: {e}", path.display())))?;
    }
    if let Some(path) = &a.plot {
        crate::plot::suite_svg(path, &results, &a.base, &a.head, &a.topology)?;
    }
    if a.json {
        say!("{}", two_json(a, &results, &fair));
    } else {
        two_table(a, &results);
        say_fair(&names, &fair);
    }
    Ok(())
}

/// Each side's fair class, under the table.
fn say_fair(names: &[String], fair: &[(String, Value)]) {
    let each: Vec<String> = names
        .iter()
        .zip(fair)
        .map(|(n, (t, _))| format!("{n}: {t}"))
        .collect();
    say!("{}", each.join("; "));
}

/// Each side's fair class, for JSON: by policy.
fn fair_map(names: &[String], fair: &[(String, Value)]) -> Value {
    names
        .iter()
        .zip(fair)
        .map(|(n, (_, v))| (n.clone(), v.clone()))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// The rows `--rows` names (every row without it).
fn chosen_rows(a: &SuiteArgs) -> Result<Vec<&'static Row>, Failure> {
    let pats: Vec<WildMatch> = a.rows.iter().map(|g| WildMatch::new(g)).collect();
    let rows: Vec<&'static Row> = ROWS
        .iter()
        .filter(|r| pats.is_empty() || pats.iter().any(|p| p.matches(r.name)))
        .collect();
    if rows.is_empty() {
        return Err(Failure::Input(format!(
            "--rows {:?}: no row matches; the rows are {}",
            a.rows,
            ROWS.iter().map(|r| r.name).collect::<Vec<_>>().join(", ")
        )));
    }
    Ok(rows)
}

/// Every row under every policy, seeds 1..=N each; per row, the base (the
/// first policy) against each other.
fn simulate(
    a: &SuiteArgs,
    rows: &[&'static Row],
    names: &[String],
    reg: &Registry,
) -> Result<Vec<Vec<RowResult>>, Failure> {
    let sides: Vec<Vec<String>> = names
        .iter()
        .map(|p| side_params(a, p, reg))
        .collect::<Result<_, _>>()?;
    // One scenario per (row, side); one run per (row, side, seed).
    let mut scenarios = Vec::new();
    for r in rows {
        for side in &sides {
            let mut sc = build(r, &a.topology, side, reg)?;
            schedlab_validate::costs::apply(a.costs.as_deref(), a.costs_any_shape, &mut sc)?;
            scenarios.push(sc);
        }
    }
    let work: Vec<(usize, u64)> = (0..scenarios.len())
        .flat_map(|s| (1..=a.seeds).map(move |seed| (s, seed)))
        .collect();
    let bar = crate::pool::progress(work.len(), "suite");
    let values = schedlab_scenarios::pool::par_map(
        &work,
        a.jobs.unwrap_or_else(schedlab_scenarios::pool::all_cores),
        |&(s, seed)| {
            let sc = &scenarios[s];
            let o = Sim::new(&sc.spec, seed).run();
            (sc.figures[0].1.compute(&o), o.stall.is_some())
        },
        || bar.inc(1),
    );
    bar.finish_and_clear();
    let n = a.seeds as usize;
    let k = sides.len();
    let side = |i: usize| -> (Vec<f64>, Vec<u64>) {
        let runs = &values[i * n..(i + 1) * n];
        let stalled = (1..=a.seeds)
            .zip(runs)
            .filter(|(_, r)| r.1)
            .map(|(s, _)| s)
            .collect();
        (runs.iter().map(|r| r.0).collect(), stalled)
    };
    Ok(rows
        .iter()
        .enumerate()
        .map(|(i, &row)| {
            let (base, sb) = side(i * k);
            (1..k)
                .map(|j| {
                    let (head, sh) = side(i * k + j);
                    RowResult {
                        row,
                        base: base.clone(),
                        head,
                        stalled: [sb.clone(), sh],
                    }
                })
                .collect()
        })
        .collect())
}

/// The base against the head, as JSON.
fn two_json(a: &SuiteArgs, results: &[RowResult], fair: &[(String, Value)]) -> String {
    let (k, chance) = summary(results);
    let rows: Vec<Value> = results
        .iter()
        .map(|r| {
            json!({"row": r.row.name, "unit": r.row.unit, "direction": r.row.direction.name(),
                   "base_median": r.base_median(), "head_median": r.head_median(),
                   "ratio": r.ratio(), "resolves": r.resolves(), "p": r.p(),
                   "head_better": r.head_better(), "base": r.base, "head": r.head,
                   "stalled_seeds": {"base": r.stalled[0], "head": r.stalled[1]}})
        })
        .collect();
    let names = [a.base.clone(), a.head.clone()];
    let v = json!({"topology": a.topology, "base": a.base, "head": a.head, "seeds": a.seeds,
                   "fair": fair_map(&names, fair), "alpha": ALPHA, "rows": rows, "resolved": k,
                   "expected_by_chance": chance});
    serde_json::to_string_pretty(&v).expect("plain data")
}

/// The base against the head, as the table.
fn two_table(a: &SuiteArgs, results: &[RowResult]) {
    let (k, chance) = summary(results);
    say!(
        "schedlab suite on {}: base {}, head {}, seeds 1..={} on each side",
        a.topology,
        a.base,
        a.head,
        a.seeds
    );
    say!(
        "{:<26} {:>5} {:>6} {:>11} {:>11} {:>9}  resolves",
        "row",
        "unit",
        "better",
        "base p50",
        "head p50",
        "head/base"
    );
    for r in results {
        let verdict = match (r.resolves(), r.head_better()) {
            (false, _) => String::from("-"),
            (true, true) => format!("yes, head better (p={:.1e})", r.p()),
            (true, false) => format!("yes, head worse (p={:.1e})", r.p()),
        };
        say!(
            "{:<26} {:>5} {:>6} {:>11} {:>11} {:>9.3}  {verdict}",
            r.row.name,
            r.row.unit,
            r.row.direction.name(),
            sig(r.base_median()),
            sig(r.head_median()),
            r.ratio()
        );
    }
    for r in results
        .iter()
        .filter(|r| r.stalled.iter().any(|s| !s.is_empty()))
    {
        say!(
            "{}: stalled runs, base seeds {:?}, head seeds {:?} (`schedlab run {} --seed S` prints the report)",
            r.row.name,
            r.stalled[0],
            r.stalled[1],
            r.row.name
        );
    }
    say!(
        "{k} of {} rows resolve, about {chance:.1} expected by chance (two-sided Mann-Whitney, alpha = {ALPHA}; \
         rows the head's change never reaches read alike on the same seeds and cannot resolve)",
        results.len()
    );
}

fn csv(results: &[RowResult]) -> String {
    let mut out = String::from(
        "row,unit,direction,base_median,head_median,ratio,resolves,p,base_min,base_max,head_min,head_max\n",
    );
    for r in results {
        let (bl, bh) = range(&r.base);
        let (hl, hh) = range(&r.head);
        out += &format!(
            "{},{},{},{},{},{},{},{},{bl},{bh},{hl},{hh}\n",
            r.row.name,
            r.row.unit,
            r.row.direction.name(),
            r.base_median(),
            r.head_median(),
            r.ratio(),
            r.resolves(),
            r.p()
        );
    }
    out
}

/// The several-policy form: per row the base's median, then each other
/// policy's median, its ratio to the base, and a mark when that resolves
/// (`+` better, `-` worse).
fn several(
    a: &SuiteArgs,
    names: &[String],
    pairs: &[Vec<RowResult>],
    fair: &[(String, Value)],
) -> Result<(), Failure> {
    if let Some(path) = &a.plot {
        crate::plot::several_svg(path, pairs, names, &a.topology)?;
    }
    let resolved: Vec<usize> = (0..names.len() - 1)
        .map(|j| pairs.iter().filter(|p| p[j].resolves()).count())
        .collect();
    if a.json {
        say!("{}", several_json(a, names, pairs, &resolved, fair));
        return Ok(());
    }
    say!(
        "schedlab suite on {}: base {}; seeds 1..={} for each of {}",
        a.topology,
        names[0],
        a.seeds,
        names.join(", ")
    );
    say_part!(
        "{:<26} {:>5} {:>6} {:>11}",
        "row",
        "unit",
        "better",
        format!("{} p50", names[0])
    );
    let width: Vec<usize> = names[1..].iter().map(|n| (n.len() + 4).max(11)).collect();
    for (n, w) in names[1..].iter().zip(&width) {
        say_part!("  {:>w$} {:>7}", format!("{n} p50"), "/base");
    }
    say!("");
    for p in pairs {
        let r0 = &p[0];
        say_part!(
            "{:<26} {:>5} {:>6} {:>11}",
            r0.row.name,
            r0.row.unit,
            r0.row.direction.name(),
            sig(r0.base_median())
        );
        for (r, w) in p.iter().zip(&width) {
            let mark = match (r.resolves(), r.head_better()) {
                (false, _) => ' ',
                (true, true) => '+',
                (true, false) => '-',
            };
            say_part!("  {:>w$} {:>6.3}{mark}", sig(r.head_median()), r.ratio());
        }
        say!("");
        for (j, r) in p.iter().enumerate() {
            if !r.stalled[1].is_empty() {
                say!("  {}: stalled seeds {:?}", names[j + 1], r.stalled[1]);
            }
        }
    }
    for (n, k) in names[1..].iter().zip(&resolved) {
        say!(
            "{n}: {k} of {} rows resolve against {}",
            pairs.len(),
            names[0]
        );
    }
    say!(
        "(+ better, - worse, at alpha = {ALPHA} by a two-sided Mann-Whitney test; about {:.1} rows per policy by chance)",
        ALPHA * pairs.len() as f64
    );
    say_fair(names, fair);
    Ok(())
}

/// Several policies against the base, as JSON.
fn several_json(
    a: &SuiteArgs,
    names: &[String],
    pairs: &[Vec<RowResult>],
    resolved: &[usize],
    fair: &[(String, Value)],
) -> String {
    let rows: Vec<Value> = pairs
        .iter()
        .map(|p| {
            let r0 = &p[0];
            let mut per = serde_json::Map::new();
            per.insert(names[0].clone(), json!({"median": r0.base_median(), "values": r0.base,
                                                "stalled_seeds": r0.stalled[0]}));
            for (j, r) in p.iter().enumerate() {
                per.insert(names[j + 1].clone(), json!({"median": r.head_median(), "ratio": r.ratio(),
                    "resolves": r.resolves(), "p": r.p(), "better": r.head_better(), "values": r.head,
                    "stalled_seeds": r.stalled[1]}));
            }
            json!({"row": r0.row.name, "unit": r0.row.unit, "direction": r0.row.direction.name(),
                   "policies": per})
        })
        .collect();
    let res: serde_json::Map<String, Value> = names[1..]
        .iter()
        .zip(resolved)
        .map(|(n, k)| (n.clone(), json!(k)))
        .collect();
    let v = json!({"topology": a.topology, "policies": names, "base": names[0], "seeds": a.seeds,
                   "fair": fair_map(names, fair),
                   "alpha": ALPHA, "rows": rows, "resolved": res,
                   "expected_by_chance": ALPHA * pairs.len() as f64});
    serde_json::to_string_pretty(&v).expect("plain data")
}
