//! `schedlab run` and `schedlab sweep`: one scenario over seeds, or over the
//! values of one parameter.

use std::path::PathBuf;

use clap::Args;
use schedlab_scenarios::{catalog, Scenario};
use schedlab_sim::{first_divergence, Outcome, Registry, Sim};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::print::{fair_json, fair_text, fmt, num, params_text, stalled, stalls_json};
use crate::rtapp_log::write_rtapp_logs;
use crate::scenario::{build, figures, jobs, run_seeds, Common};
use crate::Failure;

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    common: Common,
    /// Run one seed.
    #[arg(long, conflicts_with = "seeds")]
    seed: Option<u64>,
    /// Run seeds 1..=N.
    #[arg(long)]
    seeds: Option<u64>,
    /// Run twice per seed and name the first event where the runs differ.
    #[arg(long)]
    check_determinism: bool,
    /// Name the built-in scenarios.
    #[arg(long)]
    list: bool,
    /// Exit 0 though a run stalled (its report still prints).
    #[arg(long)]
    allow_stall: bool,
    /// With --real: runs 1..=N (a rep plays a seed's role).
    #[arg(long, value_name = "N", requires = "real")]
    reps: Option<u64>,
    /// With --real: leave the kernel's sched events unrecorded (the
    /// figures that need the record print as not measured), to see what
    /// the recording itself costs.
    #[arg(long, requires = "real")]
    no_capture: bool,
    /// For an rt-app file: write rt-app's per-thread log files into DIR
    /// (`DIR/seed-N/` per run when there are several).
    #[arg(long, value_name = "DIR")]
    rtapp_log: Option<PathBuf>,
    /// Run under each of these policies (comma-separated) and print their
    /// figures side by side: one row per policy, medians over the seeds.
    #[arg(long, value_name = "P,P,...", conflicts_with_all = ["policy", "real", "json"])]
    policies: Option<String>,
}

/// `--policies`: one row per policy, each figure's median over the seeds.
fn side_by_side(a: &RunArgs, list: &str, seeds: &[u64], reg: &Registry) -> Result<(), Failure> {
    let mut rows = Vec::new();
    let mut names: Vec<String> = Vec::new();
    let mut title = String::new();
    for p in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let mut c = a.common.clone();
        c.policy = Some(p.to_string());
        let s = build(&c, &c.params, reg)?;
        let outs = run_seeds(&s, seeds, jobs(&c));
        names = s.figures.iter().map(|(n, _)| n.clone()).collect();
        title = format!("{} on {}", s.name, s.spec.topology.name());
        // Each run's figures once, then each column's median.
        let per_run: Vec<Vec<f64>> = outs
            .iter()
            .map(|o| {
                let mut v: Vec<f64> = s.figures.iter().map(|(_, f)| f.compute(o)).collect();
                v.push(o.counters["wakes.parked"] as f64);
                v.push(o.end_ns as f64 / 1e6);
                v
            })
            .collect();
        let row: Vec<f64> = (0..names.len() + 2)
            .map(|i| {
                schedlab_scenarios::suite::median(&per_run.iter().map(|v| v[i]).collect::<Vec<_>>())
            })
            .collect();
        let stalled = outs.iter().filter(|o| o.stall.is_some()).count();
        rows.push((p.to_string(), row, stalled));
    }
    say!("{title}: medians over {} seed(s)", seeds.len());
    say_part!("{:>16}", "policy");
    for n in names
        .iter()
        .chain(["wakes", "sim_ms"].map(String::from).iter())
    {
        say_part!(" {n:>18}");
    }
    say!("");
    for (p, row, stalled) in &rows {
        say_part!("{p:>16}");
        for v in row {
            say_part!(" {:>18}", fmt(*v));
        }
        if *stalled > 0 {
            say_part!("  ({stalled} run(s) stalled)");
        }
        say!("");
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct SweepArgs {
    #[command(flatten)]
    common: Common,
    /// Seeds 1..=N per value.
    #[arg(long, default_value_t = 40)]
    seeds: u64,
    /// Run only shard I of N (1-based) of the sweep's (value, seed) runs,
    /// and write them to --out for `schedlab merge`.
    #[arg(long, value_name = "I/N", requires = "out")]
    shard: Option<String>,
    /// Where a shard's results go (JSON).
    #[arg(long, value_name = "FILE", requires = "shard")]
    out: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The shard files `schedlab sweep --shard I/N --out FILE` wrote.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// One shard's results, as `sweep --shard` writes them. Floats are written
/// in their shortest exact form, so a merge sums what the sweep would.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
struct ShardFile {
    format: String,
    scenario: String,
    param: String,
    values: Vec<String>,
    /// Every parameter besides the swept one, and the flags that change runs.
    fixed: Vec<String>,
    seeds: u64,
    /// Figure names in report order.
    figures: Vec<String>,
    shard: (usize, usize),
    results: Vec<ShardResult>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
struct ShardResult {
    value: String,
    seed: u64,
    figures: Vec<f64>,
    /// The run stalled (its figures are what it measured until then).
    #[serde(default)]
    stalled: bool,
}

const SHARD_FORMAT: &str = "schedlab-sweep-shard/1";

pub fn run(a: &RunArgs, reg: &Registry) -> Result<(), Failure> {
    if a.list || a.common.scenario.is_empty() {
        print_list();
        return Ok(());
    }
    let seeds: Vec<u64> = match (a.seed, a.seeds) {
        (Some(s), _) => vec![s],
        (None, Some(n)) => (1..=n).collect(),
        (None, None) => vec![1],
    };
    if let Some(list) = &a.policies {
        return side_by_side(a, list, &seeds, reg);
    }
    let mut s = build(&a.common, &a.common.params, reg)?;
    if a.common.real {
        let reps = a.reps.or(a.seeds).unwrap_or(1);
        return crate::real::run(
            &s,
            reps,
            !a.no_capture,
            a.common.json,
            a.allow_stall,
            a.rtapp_log.as_deref(),
        );
    }
    if a.check_determinism {
        check_determinism(&s, &seeds)?;
    }
    // `--json` names who woke whom, as a real run's kernel record does.
    s.spec.count_wakers = a.common.json;
    let outs = run_seeds(&s, &seeds, jobs(&a.common));
    let all: Vec<&Outcome> = outs.iter().collect();
    if a.common.json {
        say!(
            "{}",
            serde_json::to_string_pretty(&run_json(&s, &outs)).expect("plain data")
        );
    } else {
        print_seeds(&s, &outs);
        crate::rtapp_log::print_summary(&all);
    }
    if let Some(d) = &a.rtapp_log {
        write_rtapp_logs(d, &s, &all)?;
    }
    stalled(&outs, "seed", a.allow_stall)
}

/// `run --list`: the catalog, then the suite's rows.
fn print_list() {
    for catalog::Builtin { name: n, what, .. } in catalog::CATALOG {
        say!("{n:16} {what}");
    }
    say!("\nThe suite's rows (`schedlab suite`), each a scenario too:");
    for r in schedlab_scenarios::rows::ROWS {
        say!(
            "{:26} {:>5} {:>6}  {}",
            r.name,
            r.unit,
            r.direction.name(),
            r.what
        );
    }
}

/// `--check-determinism`: each seed run twice, the event streams equal.
fn check_determinism(s: &Scenario, seeds: &[u64]) -> Result<(), Failure> {
    for &seed in seeds {
        if let Some((i, x, y)) = first_divergence(&s.spec, seed) {
            return Err(Failure::Check(format!(
                "seed {seed}: the two runs diverge at event {i}:\n  first:  {x}\n  second: {y}"
            )));
        }
    }
    say!(
        "deterministic: {} seed(s), each run twice, identical event streams",
        seeds.len()
    );
    Ok(())
}

/// `run --json`: every seed's figures, counters, warmth and wakers.
fn run_json(s: &Scenario, outs: &[Outcome]) -> Value {
    let runs: Vec<Value> = outs
        .iter()
        .map(|o| {
            let f: serde_json::Map<String, Value> = figures(s, o).into_iter().map(|(k, v)| (k, num(v))).collect();
            let c: serde_json::Map<String, Value> = o.counters.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
            let per_cpu: Vec<Value> = o.cpu_counters.iter().map(|cc| {
                cc.named().filter(|(_, v)| *v > 0).map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>().into()
            }).collect();
            let refill: u64 = o.tasks.values().map(|t| t.llc_refill_bytes).sum();
            let cold: u64 = o.tasks.values().map(|t| t.cold_starts).sum();
            let per_task: serde_json::Map<String, Value> = o.tasks.iter()
                .map(|(n, t)| (n.clone(), json!({"llc_refill_bytes": t.llc_refill_bytes, "cold_starts": t.cold_starts})))
                .collect();
            let warmth = json!({"llc_refill_bytes": refill, "cold_starts": cold, "llcs": o.llcs, "tasks": per_task});
            let tasks: serde_json::Map<String, Value> = o.tasks.iter()
                .map(|(n, t)| (n.clone(), json!({"cpu_ns": t.cpu_ns, "migrations": t.migrations, "exited_at_ns": t.exited_at})))
                .collect();
            json!({"seed": o.seed, "trace_hash": format!("{:016x}", o.trace_hash), "events": o.events, "tasks": tasks,
                   "sim_ns": o.end_ns, "figures": f, "counters": c, "per_cpu": per_cpu, "warmth": warmth,
                   "wakes_by": o.wakes_by, "rtapp_log": crate::rtapp_log::json(o)})
        })
        .collect();
    let stalls = stalls_json(outs, "seed");
    json!({"scenario": s.name, "topology": s.spec.topology.name(), "policy": s.spec.policy.name(),
           "fair": fair_json(s), "params": s.params, "runs": runs, "stalls": stalls})
}

/// `run`'s table: a line per seed, its hash, figures and wake counters.
fn print_seeds(s: &Scenario, outs: &[Outcome]) {
    let policy = s.spec.policy.name();
    say!(
        "{} on {} ({policy}, {}), params: {}",
        s.name,
        s.spec.topology.name(),
        fair_text(s),
        params_text(s)
    );
    let names: Vec<&String> = s.figures.iter().map(|(n, _)| n).collect();
    say_part!("{:>6} {:>16}", "seed", "trace_hash");
    for n in &names {
        say_part!(" {n:>14}");
    }
    say!(" {:>10} {:>10} {:>8}", "wakes", "flagged", "ipi");
    for o in outs {
        let f = figures(s, o);
        say_part!("{:>6} {:016x}", o.seed, o.trace_hash);
        for n in &names {
            say_part!(" {:>14}", fmt(f[*n]));
        }
        say!(
            " {:>10} {:>10} {:>8}",
            o.counters["wakes.parked"],
            o.counters["wakes.flagged"],
            o.counters["ipi.kick"]
        );
    }
}

/// One swept value's aggregate: per figure (in `names` order), total, most
/// in a run, runs with a nonzero value; `runs` are per seed, in seed order.
pub fn aggregate(runs: &[Vec<f64>], names: &[String]) -> Vec<(f64, f64, u64)> {
    (0..names.len())
        .map(|i| {
            runs.iter().fold((0.0, f64::MIN, 0), |(t, m, nz), r| {
                (t + r[i], m.max(r[i]), nz + (r[i] != 0.0) as u64)
            })
        })
        .collect()
}

/// The sweep's swept parameter and its values, and the fixed ones.
fn swept(params: &[String]) -> Result<(String, Vec<String>, Vec<String>), Failure> {
    let swept: Vec<&String> = params.iter().filter(|p| p.contains(',')).collect();
    let [sw] = swept.as_slice() else {
        return Err(Failure::Input(
            "sweep: expected exactly one --param name=v1,v2,...".into(),
        ));
    };
    let (key, values) = sw
        .split_once('=')
        .ok_or_else(|| Failure::Input(format!("--param {sw:?}: expected name=v1,v2,...")))?;
    let fixed = params
        .iter()
        .filter(|p| !p.contains(','))
        .cloned()
        .collect();
    Ok((
        key.to_string(),
        values.split(',').map(str::to_string).collect(),
        fixed,
    ))
}

/// `I/N` with 1 <= I <= N.
fn parse_shard(s: &str) -> Result<(usize, usize), Failure> {
    let bad = || Failure::Input(format!("--shard {s:?}: expected I/N with 1 <= I <= N"));
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    let (i, n): (usize, usize) = (
        i.trim().parse().map_err(|_| bad())?,
        n.trim().parse().map_err(|_| bad())?,
    );
    if i == 0 || i > n {
        return Err(bad());
    }
    Ok((i, n))
}

pub fn sweep(a: &SweepArgs, reg: &Registry) -> Result<(), Failure> {
    let (key, values, fixed) = swept(&a.common.params)?;
    let scenarios: Vec<Scenario> = values
        .iter()
        .map(|v| {
            let mut ps = fixed.clone();
            ps.push(format!("{key}={v}"));
            build(&a.common, &ps, reg)
        })
        .collect::<Result<_, _>>()?;
    // A real sweep reports only the figures a real run measures.
    let kernel = schedlab_real::tracefs::Capture::unavailable().is_none();
    let keep: Vec<bool> = scenarios[0]
        .figures
        .iter()
        .map(|(_, f)| !a.common.real || schedlab_real::measurable(f, kernel))
        .collect();
    let names: Vec<String> = scenarios[0]
        .figures
        .iter()
        .zip(&keep)
        .filter(|(_, k)| **k)
        .map(|((n, _), _)| n.clone())
        .collect();
    let shard = a.shard.as_deref().map(parse_shard).transpose()?;
    let work = sweep_work(values.len(), a.seeds, shard);
    let results = sweep_runs(a, &scenarios, &work, &keep, kernel)?;
    let file = ShardFile {
        format: SHARD_FORMAT.into(),
        scenario: scenarios[0].name.clone(),
        param: key,
        values: values.clone(),
        fixed: sweep_flags(a, &fixed),
        seeds: a.seeds,
        figures: names,
        shard: shard.unwrap_or((1, 1)),
        results: work
            .iter()
            .zip(results)
            .map(|(&(v, seed), (figures, stalled))| ShardResult {
                value: values[v].clone(),
                seed,
                figures,
                stalled,
            })
            .collect(),
    };
    match &a.out {
        Some(path) => {
            let text = serde_json::to_string(&file).expect("plain data");
            std::fs::write(path, text).map_err(|e| {
                Failure::Input(format!("{}: cannot write the shard: {e}", path.display()))
            })?;
            say!(
                "shard {}/{}: {} runs written to {}",
                file.shard.0,
                file.shard.1,
                file.results.len(),
                path.display()
            );
            Ok(())
        }
        None => print_sweep(&file, a.common.json),
    }
}

/// Every (value, seed) run, in table order; shard `(i, n)` takes every
/// n-th from the i-th.
fn sweep_work(values: usize, seeds: u64, shard: Option<(usize, usize)>) -> Vec<(usize, u64)> {
    let work = (0..values).flat_map(|v| (1..=seeds).map(move |seed| (v, seed)));
    match shard {
        Some((i, n)) => work
            .enumerate()
            .filter(|(k, _)| k % n == i - 1)
            .map(|(_, w)| w)
            .collect(),
        None => work.collect(),
    }
}

/// Each run of `work`: its kept figures and whether it stalled. Real runs
/// go one at a time (each has the machine to itself; a rep plays a
/// seed's role), simulations over every job.
fn sweep_runs(
    a: &SweepArgs,
    scenarios: &[Scenario],
    work: &[(usize, u64)],
    keep: &[bool],
    kernel: bool,
) -> Result<Vec<(Vec<f64>, bool)>, Failure> {
    let bar = crate::pool::progress(work.len(), "sweep");
    let figures_of = |s: &Scenario, o: &Outcome| -> Vec<f64> {
        s.figures
            .iter()
            .zip(keep)
            .filter(|(_, k)| **k)
            .map(|((_, f), _)| f.compute(o))
            .collect()
    };
    let results = if a.common.real {
        let mut out = Vec::new();
        for &(v, rep) in work {
            let s = &scenarios[v];
            let r = crate::real::run_reps(s, rep..=rep, true, false)?
                .pop()
                .expect("one rep");
            if kernel && r.kernel.is_none() {
                return Err(Failure::Real(format!(
                    "the kernel's record went missing: {}",
                    r.no_record.unwrap_or_default()
                )));
            }
            out.push((figures_of(s, &r.outcome), r.outcome.stall.is_some()));
            bar.inc(1);
        }
        out
    } else {
        schedlab_scenarios::pool::par_map(
            work,
            jobs(&a.common),
            |&(v, seed)| {
                let s = &scenarios[v];
                let o = Sim::new(&s.spec, seed).run();
                (figures_of(s, &o), o.stall.is_some())
            },
            || bar.inc(1),
        )
    };
    bar.finish_and_clear();
    Ok(results)
}

/// The flags a shard records, so its merge can check they agree.
fn sweep_flags(a: &SweepArgs, fixed: &[String]) -> Vec<String> {
    let mut flags = fixed.to_vec();
    flags.extend(a.common.topology.iter().map(|t| format!("--topology={t}")));
    flags.extend(a.common.policy.iter().map(|p| format!("--policy={p}")));
    if a.common.fixed_order {
        flags.push("--fixed-order".into());
    }
    if a.common.real {
        flags.push("--real".into());
    }
    flags
}

/// `schedlab merge`: the shards of one sweep, joined into its table.
pub fn merge(a: &MergeArgs) -> Result<(), Failure> {
    let mut files = Vec::new();
    for path in &a.files {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Failure::Input(format!("{}: cannot read: {e}", path.display())))?;
        let f: ShardFile = serde_json::from_str(&text).map_err(|e| {
            Failure::Input(format!(
                "{}:{}:{}: expected a shard file from `schedlab sweep --shard I/N --out FILE`: {e}",
                path.display(),
                e.line(),
                e.column()
            ))
        })?;
        if f.format != SHARD_FORMAT {
            return Err(Failure::Input(format!(
                "{}: expected format {SHARD_FORMAT:?}, found {:?}",
                path.display(),
                f.format
            )));
        }
        files.push((path, f));
    }
    let (first_path, first) = &files[0];
    let mut all = ShardFile {
        results: Vec::new(),
        shard: (1, 1),
        ..first.clone()
    };
    let mut seen = vec![false; first.shard.1];
    for (path, f) in &files {
        let same = f.scenario == first.scenario
            && f.param == first.param
            && f.values == first.values
            && f.fixed == first.fixed
            && f.seeds == first.seeds
            && f.figures == first.figures
            && f.shard.1 == first.shard.1;
        if !same {
            return Err(Failure::Input(format!(
                "{}: a shard of another sweep than {} (scenario, parameters, seeds or shard count differ)",
                path.display(),
                first_path.display()
            )));
        }
        if std::mem::replace(&mut seen[f.shard.0 - 1], true) {
            return Err(Failure::Input(format!(
                "{}: shard {}/{} given twice",
                path.display(),
                f.shard.0,
                f.shard.1
            )));
        }
        all.results.extend(f.results.iter().cloned());
    }
    let missing: Vec<String> = (1..=first.shard.1)
        .filter(|i| !seen[i - 1])
        .map(|i| format!("{i}/{}", first.shard.1))
        .collect();
    if !missing.is_empty() {
        return Err(Failure::Input(format!(
            "missing shards: {}",
            missing.join(", ")
        )));
    }
    print_sweep(&all, a.json)
}

/// The sweep's table (or JSON) from every (value, seed) result.
fn print_sweep(f: &ShardFile, json: bool) -> Result<(), Failure> {
    let mut rows = Vec::new();
    for v in &f.values {
        let mut runs: Vec<&ShardResult> = f.results.iter().filter(|r| &r.value == v).collect();
        runs.sort_by_key(|r| r.seed);
        if runs.len() as u64 != f.seeds {
            return Err(Failure::Input(format!(
                "value {v}: {} of {} seeds present",
                runs.len(),
                f.seeds
            )));
        }
        let per_seed: Vec<Vec<f64>> = runs.iter().map(|r| r.figures.clone()).collect();
        let stalled: Vec<u64> = runs.iter().filter(|r| r.stalled).map(|r| r.seed).collect();
        rows.push((v, aggregate(&per_seed, &f.figures), stalled));
    }
    let key = &f.param;
    if json {
        let out: Vec<Value> = rows
            .iter()
            .map(|(v, agg, stalled)| {
                let figs: serde_json::Map<String, Value> = f
                    .figures
                    .iter()
                    .zip(agg)
                    .map(|(k, (t, m, nz))| {
                        (
                            k.clone(),
                            json!({"total": num(*t), "max": num(*m), "runs_nonzero": nz}),
                        )
                    })
                    .collect();
                json!({"value": v, "figures": figs, "stalled_seeds": stalled})
            })
            .collect();
        let v = json!({"scenario": f.scenario, "param": key, "seeds": f.seeds, "rows": out});
        say!("{}", serde_json::to_string_pretty(&v).expect("plain data"));
        return Ok(());
    }
    let each = if f.fixed.iter().any(|x| x == "--real") {
        "real runs (reps) on this machine"
    } else {
        "seeds"
    };
    say!(
        "{}: {key} swept, {} {each} each; per figure: total / most in a run / runs nonzero",
        f.scenario,
        f.seeds
    );
    say_part!("{key:>10}");
    for n in &f.figures {
        say_part!(" {n:>24}");
    }
    say!("");
    for (v, agg, _) in &rows {
        say_part!("{v:>10}");
        for (t, m, nz) in agg {
            say_part!(" {:>24}", format!("{} / {} / {nz}", fmt(*t), fmt(*m)));
        }
        say!("");
    }
    for (v, _, stalled) in rows.iter().filter(|r| !r.2.is_empty()) {
        say!(
            "{key}={v}: {} of {} runs stalled (seeds {}); `schedlab run {} --seed S` prints the report",
            stalled.len(),
            f.seeds,
            stalled.iter().map(u64::to_string).collect::<Vec<_>>().join(", "),
            f.scenario
        );
    }
    Ok(())
}
