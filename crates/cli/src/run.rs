//! `schedlab run` and `schedlab sweep`: one scenario over seeds, or over the
//! values of one parameter.

use std::collections::BTreeMap;
use std::path::Path;

use clap::Args;
use schedlab_scenarios::{catalog, file, Params, Scenario};
use schedlab_sim::{first_divergence, Outcome, Sim};
use serde_json::{json, Value};

use crate::Failure;

#[derive(Args, Debug, Clone)]
pub struct Common {
    /// A built-in scenario (see --list) or a scenario file (.toml).
    #[arg(default_value = "")]
    scenario: String,
    /// The machine (a preset name); built-ins default to amd-2x8.
    #[arg(long, value_name = "T")]
    topology: Option<String>,
    /// The placement policy: home or waker-streak.
    #[arg(long, value_name = "POLICY")]
    policy: Option<String>,
    /// A parameter, name=value (repeatable).
    #[arg(long = "param", value_name = "K=V")]
    params: Vec<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Break ties among simultaneous events in insertion order.
    #[arg(long)]
    fixed_order: bool,
    /// Worker threads for several seeds (default: every core). The results
    /// do not depend on it.
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
}

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
}

#[derive(Args, Debug)]
pub struct SweepArgs {
    #[command(flatten)]
    common: Common,
    /// Seeds 1..=N per value.
    #[arg(long, default_value_t = 40)]
    seeds: u64,
}

pub fn build(c: &Common, params: &[String]) -> Result<Scenario, Failure> {
    let mut all = params.to_vec();
    if let Some(p) = &c.policy {
        all.push(format!("policy={p}"));
    }
    let p = Params::parse(&all).map_err(|e| Failure::Input(e.0))?;
    let mut s = if c.scenario.ends_with(".toml") {
        if c.topology.is_some() {
            return Err(Failure::Input(
                "--topology: a scenario file names its own topology".into(),
            ));
        }
        file::load(Path::new(&c.scenario), p).map_err(|e| Failure::Input(e.to_string()))?
    } else {
        catalog::build(&c.scenario, c.topology.as_deref(), p).map_err(|e| Failure::Input(e.0))?
    };
    s.spec.fixed_order = c.fixed_order;
    Ok(s)
}

/// Runs `s` for each seed, spread over `jobs` threads; results in seed order.
pub fn run_seeds(s: &Scenario, seeds: &[u64], jobs: usize) -> Vec<Outcome> {
    let jobs = jobs.max(1).min(seeds.len().max(1));
    let mut out: Vec<Option<Outcome>> = (0..seeds.len()).map(|_| None).collect();
    std::thread::scope(|scope| {
        let chunks: Vec<Vec<(usize, u64)>> = (0..jobs)
            .map(|j| {
                seeds
                    .iter()
                    .copied()
                    .enumerate()
                    .skip(j)
                    .step_by(jobs)
                    .collect()
            })
            .collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                scope.spawn(move || {
                    chunk
                        .into_iter()
                        .map(|(i, seed)| (i, Sim::new(&s.spec, seed).run()))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for h in handles {
            for (i, o) in h.join().expect("a simulation thread panicked") {
                out[i] = Some(o);
            }
        }
    });
    out.into_iter()
        .map(|o| o.expect("every seed ran"))
        .collect()
}

pub fn jobs(c: &Common) -> usize {
    c.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    })
}

pub fn figures(s: &Scenario, o: &Outcome) -> BTreeMap<String, f64> {
    s.figures
        .iter()
        .map(|(n, f)| (n.clone(), f.compute(o)))
        .collect()
}

fn num(v: f64) -> Value {
    if v.fract() == 0.0 && v.abs() < 9e15 {
        json!(v as i64)
    } else {
        json!((v * 1e4).round() / 1e4)
    }
}

pub fn run(a: &RunArgs) -> Result<(), Failure> {
    if a.list || a.common.scenario.is_empty() {
        for (n, what) in catalog::CATALOG {
            say!("{n:16} {what}");
        }
        return Ok(());
    }
    let s = build(&a.common, &a.common.params)?;
    let seeds: Vec<u64> = match (a.seed, a.seeds) {
        (Some(s), _) => vec![s],
        (None, Some(n)) => (1..=n).collect(),
        (None, None) => vec![1],
    };
    if a.check_determinism {
        for &seed in &seeds {
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
    }
    let outs = run_seeds(&s, &seeds, jobs(&a.common));
    let policy = s.spec.config.placement.name();
    if a.common.json {
        let runs: Vec<Value> = outs
            .iter()
            .map(|o| {
                let f: serde_json::Map<String, Value> = figures(&s, o).into_iter().map(|(k, v)| (k, num(v))).collect();
                let c: serde_json::Map<String, Value> = o.counters.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
                let per_cpu: Vec<Value> = o.cpu_counters.iter().map(|cc| {
                    cc.named().filter(|(_, v)| *v > 0).map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>().into()
                }).collect();
                json!({"seed": o.seed, "trace_hash": format!("{:016x}", o.trace_hash), "events": o.events,
                       "sim_ns": o.end_ns, "figures": f, "counters": c, "per_cpu": per_cpu})
            })
            .collect();
        let v = json!({"scenario": s.name, "topology": s.spec.topology.name(), "policy": policy,
                       "params": s.params, "runs": runs});
        say!("{}", serde_json::to_string_pretty(&v).expect("plain data"));
        return Ok(());
    }
    say!(
        "{} on {} ({policy}), params: {}",
        s.name,
        s.spec.topology.name(),
        s.params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let names: Vec<&String> = s.figures.iter().map(|(n, _)| n).collect();
    say_part!("{:>6} {:>16}", "seed", "trace_hash");
    for n in &names {
        say_part!(" {n:>14}");
    }
    say!(" {:>10} {:>10} {:>8}", "wakes", "flagged", "ipi");
    for o in &outs {
        let f = figures(&s, o);
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
    Ok(())
}

fn fmt(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// One swept value's aggregate: per figure, total, most in a run, runs
/// with a nonzero value.
pub fn aggregate(s: &Scenario, outs: &[Outcome]) -> BTreeMap<String, (f64, f64, u64)> {
    let mut agg: BTreeMap<String, (f64, f64, u64)> = BTreeMap::new();
    for o in outs {
        for (n, v) in figures(s, o) {
            let e = agg.entry(n).or_insert((0.0, f64::MIN, 0));
            e.0 += v;
            e.1 = e.1.max(v);
            e.2 += (v != 0.0) as u64;
        }
    }
    agg
}

pub fn sweep(a: &SweepArgs) -> Result<(), Failure> {
    let swept: Vec<&String> = a.common.params.iter().filter(|p| p.contains(',')).collect();
    let [sw] = swept.as_slice() else {
        return Err(Failure::Input(
            "sweep: expected exactly one --param name=v1,v2,...".into(),
        ));
    };
    let (key, values) = sw
        .split_once('=')
        .ok_or_else(|| Failure::Input(format!("--param {sw:?}: expected name=v1,v2,...")))?;
    let fixed: Vec<String> = a
        .common
        .params
        .iter()
        .filter(|p| !p.contains(','))
        .cloned()
        .collect();
    let seeds: Vec<u64> = (1..=a.seeds).collect();
    let mut rows = Vec::new();
    let mut scenario_name = String::new();
    for v in values.split(',') {
        let mut ps = fixed.clone();
        ps.push(format!("{key}={v}"));
        let s = build(&a.common, &ps)?;
        scenario_name = s.name.clone();
        let outs = run_seeds(&s, &seeds, jobs(&a.common));
        rows.push((
            v.to_string(),
            aggregate(&s, &outs),
            s.figures.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
        ));
    }
    if a.common.json {
        let out: Vec<Value> = rows
            .iter()
            .map(|(v, agg, _)| {
                let f: serde_json::Map<String, Value> = agg
                    .iter()
                    .map(|(k, (t, m, nz))| {
                        (
                            k.clone(),
                            json!({"total": num(*t), "max": num(*m), "runs_nonzero": nz}),
                        )
                    })
                    .collect();
                json!({"value": v, "figures": f})
            })
            .collect();
        let v = json!({"scenario": scenario_name, "param": key, "seeds": a.seeds, "rows": out});
        say!("{}", serde_json::to_string_pretty(&v).expect("plain data"));
        return Ok(());
    }
    say!("{scenario_name}: {key} swept, {} seeds each; per figure: total / most in a run / runs nonzero", a.seeds);
    let names = &rows[0].2;
    say_part!("{key:>10}");
    for n in names {
        say_part!(" {n:>24}");
    }
    say!("");
    for (v, agg, _) in &rows {
        say_part!("{v:>10}");
        for n in names {
            let (t, m, nz) = agg[n];
            say_part!(" {:>24}", format!("{} / {} / {nz}", fmt(t), fmt(m)));
        }
        say!("");
    }
    Ok(())
}
