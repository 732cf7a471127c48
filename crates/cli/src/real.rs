//! `--real`: a scenario run on this machine's kernel (`schedlab-real`),
//! printed in the same table and JSON as a simulated run, with the
//! kernel's record beside the figures and a list of what a real run
//! cannot measure.

use std::path::Path;

use schedlab_real::{Error, Options, RealOutcome, MISSING};
use schedlab_scenarios::{catalog, file, Params, Scenario};
use schedlab_sim::figures::percentile;
use schedlab_sim::Figure;
use serde_json::{json, Value};

use crate::run::{fmt, num, stalls_json, Common};
use crate::Failure;

/// The machine a real run ran on, read from sysfs and procfs.
pub struct Machine {
    pub cpus: usize,
    pub llcs: usize,
    pub model: String,
    pub kernel: String,
}

impl Machine {
    pub fn read(topo: &schedlab_topology::Topology) -> Machine {
        let model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        Machine {
            cpus: topo.num_cpus(),
            llcs: topo.llcs().len(),
            model,
            kernel,
        }
    }

    pub fn json(&self) -> Value {
        json!({"cpus": self.cpus, "llcs": self.llcs, "cpu_model": self.model, "kernel": self.kernel})
    }
}

/// The scenario, built for this machine (a real run always runs here).
pub fn build(c: &Common, p: Params) -> Result<Scenario, Failure> {
    let machine = schedlab_scenarios::topology("sysfs").map_err(|e| Failure::Input(e.0))?;
    if let Some(t) = c.topology.as_deref().filter(|t| !t.starts_with("sysfs")) {
        eprintln!(
            "note: --topology {t} is not used: a real run runs on this machine ({} CPUs, from sysfs)",
            machine.num_cpus()
        );
    }
    let s = if c.scenario.ends_with(".toml") {
        file::load_on(Path::new(&c.scenario), p, machine)
            .map_err(|e| Failure::Input(e.to_string()))?
    } else if c.scenario.ends_with(".json") {
        schedlab_scenarios::rtapp::load(Path::new(&c.scenario), machine, p)
            .map_err(|e| Failure::Input(e.to_string()))?
    } else {
        catalog::build(&c.scenario, Some("sysfs"), p).map_err(|e| Failure::Input(e.0))?
    };
    for n in &s.notes {
        eprintln!("note: {n}");
    }
    Ok(s)
}

/// Whether a real run measures figure `f` (with the kernel's record or
/// without it).
pub fn measurable(f: &Figure, kernel: bool) -> bool {
    match f {
        Figure::Moves { .. } | Figure::LlcRefillMib { .. } | Figure::ColdStarts { .. } => false,
        Figure::Counter { name } | Figure::CounterPerCpuPerSecond { name, .. } => {
            kernel && name.starts_with("kernel.")
        }
        Figure::Migrations { .. } => kernel,
        _ => true,
    }
}

fn failure(e: Error) -> Failure {
    match e {
        Error::Input(m) => Failure::Input(m),
        Error::Fault(m) => Failure::Real(m),
        Error::Interrupted => Failure::Interrupted,
    }
}

/// Runs `s` for real `reps` times, one after another.
pub fn run_reps(s: &Scenario, reps: u64, keep_events: bool) -> Result<Vec<RealOutcome>, Failure> {
    let opts = Options {
        capture: true,
        keep_events,
    };
    (1..=reps)
        .map(|rep| schedlab_real::run(&s.spec, rep, &opts).map_err(failure))
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
pub fn run(s: &Scenario, reps: u64, json_out: bool, allow_stall: bool) -> Result<(), Failure> {
    let outs = run_reps(s, reps, false)?;
    let machine = Machine::read(&s.spec.topology);
    let missing: Vec<Value> = MISSING
        .iter()
        .map(|(k, why)| json!({"figure": k, "why": why}))
        .collect();
    if json_out {
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
                json!({"rep": o.seed, "wall_ns": o.end_ns, "figures": f, "tasks": tasks, "kernel": kernel})
            })
            .collect();
        let stalls = stalls_json(outs.iter().map(|r| &r.outcome), "rep");
        let v = json!({"scenario": s.name, "real": true, "topology": s.spec.topology.name(),
            "machine": machine.json(), "policy": "this machine's kernel",
            "params": s.params, "runs": runs, "not_measured": missing, "stalls": stalls});
        say!("{}", serde_json::to_string_pretty(&v).expect("plain data"));
        return stalled(&outs, allow_stall);
    }
    say!(
        "{} for real on this machine ({} CPUs, {} LLC(s), {}; Linux {}), params: {}",
        s.name,
        machine.cpus,
        machine.llcs,
        machine.model,
        machine.kernel,
        s.params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
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
    for r in &outs {
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
    if let Some(why) = outs.iter().find_map(|r| r.no_record.as_ref()) {
        say!("kernel counters: none ({why})");
    } else if let Some(k) = outs.last().and_then(|r| r.kernel.as_ref()) {
        say!(
            "wakes by waker (rep {}), as the kernel's sched_waking names them:",
            outs.len()
        );
        const SHOWN: usize = 12;
        for (wakee, by) in k.wakes_by.iter().take(SHOWN) {
            let mut by: Vec<(&String, &u64)> = by.iter().collect();
            by.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            let mut list: Vec<String> =
                by.iter().take(4).map(|(w, n)| format!("{w} {n}")).collect();
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
    say!(
        "not measured in a real run: {}",
        MISSING
            .iter()
            .map(|(k, _)| *k)
            .collect::<Vec<_>>()
            .join(", ")
    );
    stalled(&outs, allow_stall)
}

fn stalled(outs: &[RealOutcome], allow: bool) -> Result<(), Failure> {
    crate::run::stalled(outs.iter().map(|r| &r.outcome), "rep", allow)
}
