//! A scenario from the options every running command shares: the
//! scenario's name or file, the machine, the policy, the fair class, the
//! parameters and the costs, built simulated or for a real run here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Args;
use schedlab_scenarios::rows::Row;
use schedlab_scenarios::{catalog, file, Params, Scenario};
use schedlab_sim::{Outcome, Registry, Sim};

use crate::Failure;

#[derive(Args, Debug, Clone)]
pub struct Common {
    /// A built-in scenario (see --list), a scenario file (.toml), or an
    /// rt-app workload (.json, run on --topology).
    #[arg(default_value = "")]
    pub(crate) scenario: String,
    /// The machine: a preset (`topo --list`), `sysfs` (this one), `sysfs:ROOT`,
    /// `lscpu:FILE` or `FILE.toml`; built-ins, rt-app files and scenario
    /// files without a [topology] default to amd-2x8; over a file's own
    /// [topology], it wins (with a note).
    #[arg(long, value_name = "T")]
    pub(crate) topology: Option<String>,
    /// The placement policy: home, waker-streak, waker-streak:K, or any
    /// name `schedlab policies` lists.
    #[arg(long, value_name = "POLICY")]
    pub(crate) policy: Option<String>,
    /// A parameter, name=value (repeatable).
    #[arg(long = "param", value_name = "K=V")]
    pub(crate) params: Vec<String>,
    /// The fair class of a kernel release: 6.12, 6.18, 6.19, 7.2 or base
    /// (the model's own); default: the policy's (`linux`: 6.19; the
    /// others: base). `schedlab features` lists what each turns on.
    #[arg(long, value_name = "RELEASE")]
    pub(crate) kernel: Option<String>,
    /// Features over the kernel's defaults, as
    /// /sys/kernel/debug/sched/features spells them: NAME turns one on,
    /// NO_NAME off (comma-separated).
    #[arg(long, value_name = "NAME,NO_NAME,...")]
    pub(crate) features: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
    /// Break ties among simultaneous events in insertion order.
    #[arg(long)]
    pub(crate) fixed_order: bool,
    /// Worker threads for several seeds (default: every core). The results
    /// do not depend on it.
    #[arg(long, value_name = "N")]
    pub(crate) jobs: Option<usize>,
    /// Run for real: the scenario's programs as threads and processes on
    /// this machine, under its kernel, with the kernel's record (root).
    #[arg(long)]
    pub(crate) real: bool,
    /// The cost model from a cost file (`schedlab calibrate --out FILE`)
    /// instead of the scenario's.
    #[arg(long, value_name = "FILE")]
    pub(crate) costs: Option<PathBuf>,
    /// Use --costs though it was measured on a machine of another shape.
    #[arg(long, requires = "costs")]
    pub(crate) costs_any_shape: bool,
}

pub fn build(c: &Common, params: &[String], reg: &Registry) -> Result<Scenario, Failure> {
    let mut all = params.to_vec();
    if let Some(p) = &c.policy {
        all.push(format!("policy={p}"));
    }
    all.extend(fair_params(c.kernel.as_deref(), c.features.as_deref()));
    let p = Params::parse(&all)
        .map_err(|e| Failure::Input(e.0))?
        .with_registry(reg.clone());
    if c.real {
        return build_real(c, p);
    }
    let mut s = if c.scenario.ends_with(".toml") {
        // --topology wins over the file's [topology] (with a note).
        let path = Path::new(&c.scenario);
        match &c.topology {
            Some(t) => {
                let topo = schedlab_scenarios::topology(t).map_err(|e| Failure::Input(e.0))?;
                file::load_on(path, p, topo)
            }
            None => file::load(path, p),
        }
        .map_err(|e| Failure::Input(e.to_string()))?
    } else if c.scenario.ends_with(".json") {
        let topo = schedlab_scenarios::topology(c.topology.as_deref().unwrap_or("amd-2x8"))
            .map_err(|e| Failure::Input(e.0))?;
        schedlab_scenarios::rtapp::load(Path::new(&c.scenario), topo, p)
            .map_err(|e| Failure::Input(e.to_string()))?
    } else {
        catalog::build(&c.scenario, c.topology.as_deref(), p).map_err(|e| Failure::Input(e.0))?
    };
    for n in &s.notes {
        eprintln!("note: {n}");
    }
    s.spec.fixed_order = c.fixed_order;
    schedlab_validate::costs::apply(c.costs.as_deref(), c.costs_any_shape, &mut s)?;
    Ok(s)
}

/// `--kernel` and `--features` as the parameters every scenario reads.
pub(crate) fn fair_params(kernel: Option<&str>, features: Option<&str>) -> Vec<String> {
    let k = kernel.map(|k| format!("kernel={k}"));
    let f = features.map(|f| format!("features={f}"));
    k.into_iter().chain(f).collect()
}

/// Runs `s` for each seed, spread over `jobs` threads; results in seed order.
pub fn run_seeds(s: &Scenario, seeds: &[u64], jobs: usize) -> Vec<Outcome> {
    schedlab_scenarios::pool::par_map(seeds, jobs, |&seed| Sim::new(&s.spec, seed).run(), || {})
}

pub fn jobs(c: &Common) -> usize {
    c.jobs.unwrap_or_else(schedlab_scenarios::pool::all_cores)
}

pub fn figures(s: &Scenario, o: &Outcome) -> BTreeMap<String, f64> {
    s.figures
        .iter()
        .map(|(n, f)| (n.clone(), f.compute(o)))
        .collect()
}

/// The scenario, built for this machine (a real run always runs here).
pub(crate) fn build_real(c: &Common, p: Params) -> Result<Scenario, Failure> {
    let machine = schedlab_scenarios::topology("sysfs").map_err(|e| Failure::Input(e.0))?;
    if c.costs.is_some() {
        eprintln!("note: --costs is not used: a real run measures, it does not model");
    }
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

pub(crate) fn build_row(
    row: &Row,
    topology: &str,
    policy: &[String],
    reg: &Registry,
) -> Result<Scenario, Failure> {
    let p = Params::parse(policy)
        .map_err(|e| Failure::Input(e.0))?
        .with_registry(reg.clone());
    catalog::build(row.name, Some(topology), p).map_err(|e| Failure::Input(e.0))
}
