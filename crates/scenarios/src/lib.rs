//! The scenario catalog and the scenario file format.
//!
//! A [`Scenario`] is a [`SimSpec`] plus the figures it reports. Built-in
//! scenarios are written with the same [`Builder`] that scenario files load
//! into, so `schedlab run FILE.toml` runs a file exactly as it runs a
//! built-in.
//!
//! Every scenario takes the common parameters (`--param k=v`):
//! `policy` (a name the registry knows: `home`, `waker-streak`,
//! `waker-streak:K`, or a user's own), `waker_run` (implies
//! `waker-streak:K`), `spawn` (`near` | `rotate` | `linux`), `balance` (`on` |
//! `off` | `seed` | `linux` | `linux-cas`: `on` is the policy's own balancer,
//! `linux`'s for `linux`),
//! `kernel` (the fair class: a release, `6.12` | `6.18` | `6.19` | `7.2` |
//! `base`, optionally `+FEATURE,NO_FEATURE`; `linux`'s default is `6.19`,
//! the others' `base`), `features` (`NAME,NO_NAME,...` over it, as
//! `/sys/kernel/debug/sched/features` spells them; `schedlab features`
//! lists them), `protect_on_repick` (`true` | `false`), `run_ms`, `idle_depth`, `cost`
//! (a cost preset: `default` | `guest`); and its
//! own, listed by `schedlab run --list`.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;

use schedlab_sim::sched::fair::FeatureSet;
use schedlab_sim::sched::{Balance, BalanceKind, Config, SpawnPolicy, TaskSpec, WAKER_RUN};
use schedlab_sim::{CostModel, Figure, Op, PolicyRef, Registry, SimSpec, TaskDef};
use schedlab_topology::{preset, CpuId, CpuSet, Topology};

pub mod catalog;
pub mod check;
mod field;
pub mod file;
mod locality;
pub mod ops;
pub mod pool;
pub mod rows;
pub mod rtapp;
pub mod suite;

pub use schedlab_sim as sim;

/// A runnable scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub spec: SimSpec,
    /// `(name, figure)` in report order.
    pub figures: Vec<(String, Figure)>,
    /// Every parameter with the value this build used.
    pub params: BTreeMap<String, String>,
    /// What the loader ignored or approximated, each with its place
    /// (`FILE:LINE:COL: ...`): shown before the run.
    pub notes: Vec<String>,
}

/// Why a scenario could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError(pub String);

impl std::fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ScenarioError {}

/// `--param` values, consumed as a scenario reads them, so that an unknown
/// one is an error; and the registry policy names resolve in. The two
/// travel together because a policy name means something only in a
/// registry (a user's binary adds its own policies to the built-ins), and a
/// run's inputs are both. A name is resolved where it is read: a scenario
/// file's `placement` by the file reader (so a wrong one is reported at its
/// line and column), `--param policy=` by [`Builder::decide`], the one
/// place that decides which of them the run uses, and its spawn rule and
/// balancer.
#[derive(Clone, Debug, Default)]
pub struct Params {
    given: BTreeMap<String, String>,
    used: BTreeMap<String, String>,
    registry: Registry,
}

impl Params {
    pub fn new(pairs: impl IntoIterator<Item = (String, String)>) -> Params {
        Params {
            given: pairs.into_iter().collect(),
            used: BTreeMap::new(),
            registry: Registry::builtin(),
        }
    }

    /// Resolve policy names in `registry` (the built-ins by default).
    pub fn with_registry(mut self, registry: Registry) -> Params {
        self.registry = registry;
        self
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Parses `k=v` strings.
    pub fn parse(args: &[String]) -> Result<Params, ScenarioError> {
        let mut pairs = Vec::new();
        for a in args {
            let (k, v) = a
                .split_once('=')
                .ok_or_else(|| ScenarioError(format!("--param {a:?}: expected name=value")))?;
            pairs.push((k.trim().to_string(), v.trim().to_string()));
        }
        Ok(Params::new(pairs))
    }

    pub fn get<T: std::str::FromStr + std::fmt::Display>(
        &mut self,
        key: &str,
        default: T,
    ) -> Result<T, ScenarioError> {
        let v = match self.given.get(key) {
            Some(s) => s
                .parse::<T>()
                .map_err(|_| ScenarioError(format!("parameter {key}={s:?}: not a valid value")))?,
            None => default,
        };
        self.used.insert(key.to_string(), v.to_string());
        Ok(v)
    }

    pub fn get_bool(&mut self, key: &str, default: bool) -> Result<bool, ScenarioError> {
        let v = match self.given.get(key).map(String::as_str) {
            None => default,
            Some("true" | "on" | "1" | "yes") => true,
            Some("false" | "off" | "0" | "no") => false,
            Some(s) => {
                return Err(ScenarioError(format!(
                    "parameter {key}={s:?}: expected true/false or on/off"
                )))
            }
        };
        self.used.insert(key.to_string(), v.to_string());
        Ok(v)
    }

    /// Gives `key` the value `v` unless the user gave one: a row's own
    /// default for a scenario's parameter.
    pub fn set_default(&mut self, key: &str, v: String) {
        self.given.entry(key.to_string()).or_insert(v);
    }

    pub fn is_set(&self, key: &str) -> bool {
        self.given.contains_key(key)
    }

    /// Errors if a given parameter was never read.
    pub fn finish(self, scenario: &str) -> Result<BTreeMap<String, String>, ScenarioError> {
        if let Some(k) = self.given.keys().find(|k| !self.used.contains_key(*k)) {
            let known: Vec<&str> = self.used.keys().map(String::as_str).collect();
            return Err(ScenarioError(format!(
                "scenario {scenario} has no parameter {k:?}: expected one of {}",
                known.join(", ")
            )));
        }
        Ok(self.used)
    }
}

/// Builds a scenario: the catalog and the file loader both use it.
pub struct Builder {
    name: String,
    pub(crate) spec: SimSpec,
    figures: Vec<(String, Figure)>,
    /// The user named the spawn rule (a file's `spawn`): it wins over the
    /// policy's own.
    spawn_named: bool,
    /// The balancer the user named (a file's `balance`, as written): it
    /// wins over the policy's own, and is read against the policy the run
    /// ends with ([`Builder::decide`]).
    balance_named: Option<String>,
    /// The fair class the user named (a file's `kernel` and `features`): it
    /// wins over the policy's own.
    fair_named: Option<FeatureSet>,
}

/// `balance = ...`: `on` (the policy's balancer, else the machine's), `off`,
/// or a balancer by name: `seed`, `linux`, `linux-cas` (with the policy's
/// cache-aware tunables when it is `linux-cas`, else the defaults), or `own`
/// (the balancer a policy brings as a type of its own, when it does).
pub fn parse_balance(
    v: &str,
    on: BalanceKind,
    policy: Option<BalanceKind>,
) -> Result<Balance, String> {
    let kind = match v {
        "on" | "true" => policy.unwrap_or(on),
        "off" | "false" => return Ok(Balance::OFF),
        "seed" => BalanceKind::Seed,
        "linux" => BalanceKind::Linux,
        "linux-cas" => BalanceKind::LinuxCas(policy.and_then(|k| k.cas()).unwrap_or_default()),
        "own" if policy == Some(BalanceKind::Own) => BalanceKind::Own,
        "own" => {
            return Err(
                "balance \"own\": the policy brings no balancer of its own (expected on, off, seed, linux or linux-cas)"
                    .to_string(),
            )
        }
        v => {
            return Err(format!(
                "balance {v:?}: expected on, off, seed, linux, linux-cas or own"
            ))
        }
    };
    Ok(Balance::with(kind))
}

/// The name of a balancer setting (`off` or the balancer's).
pub fn balance_name(b: &Balance) -> &'static str {
    if b.is_on() {
        b.kind.name()
    } else {
        "off"
    }
}

impl Builder {
    pub fn new(name: &str, topology: Topology) -> Builder {
        let config = Config::for_topology(&topology);
        Builder {
            name: name.to_string(),
            spec: SimSpec {
                topology,
                config,
                policy: PolicyRef::default(),
                cost: CostModel::default(),
                idle_depth: 0,
                programs: BTreeMap::new(),
                processes: BTreeMap::new(),
                tasks: Vec::new(),
                run_ns: 1_000_000_000,
                disk_irq_cpu: CpuId::new(0),
                pipe_capacity: 65_536,
                check_invariants: cfg!(debug_assertions),
                keep_log: false,
                keep_events: false,
                count_wakers: false,
                fixed_order: false,
                max_tasks: 4096,
            },
            figures: Vec::new(),
            spawn_named: false,
            balance_named: None,
            fair_named: None,
        }
    }

    /// The fair class the user named (a file's `kernel`, with its
    /// `features`); `kernel` and `features` parameters still win.
    pub fn fair(&mut self, set: FeatureSet) -> &mut Self {
        self.fair_named = Some(set);
        self
    }

    /// The balancer the user named (`on`, `off`, or a balancer's name, as
    /// [`parse_balance`] reads it); a `balance` parameter still wins.
    pub fn balance(&mut self, setting: &str) -> &mut Self {
        self.balance_named = Some(setting.to_string());
        self
    }

    /// The spawn rule the user named; a `spawn` parameter still wins.
    pub fn spawn(&mut self, rule: SpawnPolicy) -> &mut Self {
        self.spec.config.spawn = rule;
        self.spawn_named = true;
        self
    }

    pub fn topology(&self) -> &Topology {
        &self.spec.topology
    }

    pub fn config(&mut self) -> &mut Config {
        &mut self.spec.config
    }

    /// The placement policy every CPU runs.
    pub fn policy(&mut self, p: PolicyRef) -> &mut Self {
        self.spec.policy = p;
        self
    }

    pub fn cost(&mut self, cost: CostModel) -> &mut Self {
        self.spec.cost = cost;
        self
    }

    pub fn run_ns(&mut self, ns: u64) -> &mut Self {
        self.spec.run_ns = ns;
        self
    }

    pub fn idle_depth(&mut self, d: u8) -> &mut Self {
        self.spec.idle_depth = d;
        self
    }

    pub fn disk_irq_cpu(&mut self, cpu: usize) -> &mut Self {
        self.spec.disk_irq_cpu = CpuId::new(cpu);
        self
    }

    pub fn program(&mut self, name: &str, ops: Vec<Op>) -> &mut Self {
        self.spec.programs.insert(name.to_string(), ops);
        self
    }

    /// A task starting on `cpu`, allowed on `mask` (all CPUs when `None`).
    pub fn task(
        &mut self,
        name: &str,
        cpu: usize,
        mask: Option<CpuSet>,
        spec: TaskSpec,
        program: Vec<Op>,
    ) -> &mut Self {
        let mut spec = spec;
        spec.mask = mask;
        self.spec.tasks.push(TaskDef {
            name: name.to_string(),
            spec,
            start_cpu: CpuId::new(cpu),
            program,
            working_set: 64 * 1024,
            start_in: None,
            process: String::new(),
        });
        self
    }

    /// The last task added belongs to process `name` (by default each task
    /// is a process of its own; spawned threads join their parent's).
    pub fn in_process(&mut self, name: &str) -> &mut Self {
        if let Some(t) = self.spec.tasks.last_mut() {
            t.process = name.to_string();
        }
        self
    }

    /// Process `name` shares `bytes` of data among its threads.
    pub fn process(&mut self, name: &str, shared_bytes: u64) -> &mut Self {
        self.spec.processes.insert(name.to_string(), shared_bytes);
        self
    }

    /// The last task added starts on a CPU of `cpus` drawn from the run's
    /// seed (its mask is unchanged).
    pub fn start_in(&mut self, cpus: CpuSet) -> &mut Self {
        if let Some(t) = self.spec.tasks.last_mut() {
            t.start_in = Some(Box::new(cpus));
        }
        self
    }

    pub fn figure(&mut self, name: &str, f: Figure) -> &mut Self {
        self.figures.push((name.to_string(), f));
        self
    }

    /// Reads the common parameters into the config: the run's policy,
    /// spawn rule and balancer first ([`Builder::decide`]), then the rest.
    pub fn common(&mut self, p: &mut Params) -> Result<&mut Self, ScenarioError> {
        self.decide(p)?;
        let por = p.get_bool("protect_on_repick", self.spec.config.fair.protect_on_repick)?;
        self.spec.config.fair.protect_on_repick = por;
        // Linux's NI_RANDOM (its balancer's proportional newly idle balance).
        let ni = p.get_bool("ni_random", self.spec.config.balance.ni_random)?;
        self.spec.config.balance.ni_random = ni;
        let run_ms: u64 = p.get("run_ms", self.spec.run_ns / 1_000_000)?;
        self.spec.run_ns = run_ms * 1_000_000;
        let m: usize = p.get("max_tasks", self.spec.max_tasks)?;
        self.spec.max_tasks = m;
        let d: u8 = p.get("idle_depth", self.spec.idle_depth)?;
        self.spec.idle_depth = d;
        if p.is_set("cost") {
            let name: String = p.get("cost", String::new())?;
            self.spec.cost = CostModel::preset(&name).ok_or_else(|| {
                ScenarioError(format!(
                    "cost {name:?}: expected one of {}",
                    CostModel::PRESETS.join(", ")
                ))
            })?;
        }
        Ok(self)
    }

    /// The one place a run's policy, spawn rule and balancer are decided,
    /// each by the first that names it:
    ///
    /// * policy: `--param policy=` (with `waker_run=`), else the one the
    ///   scenario or file set;
    /// * spawn rule: `--param spawn=`, else the one the user named (a
    ///   file's `spawn`), else the policy's own (`linux`'s fork path), else
    ///   the scenario's;
    /// * balancer: `--param balance=`, else the one the user named (a
    ///   file's `balance`), else the policy's own where the scenario
    ///   balances at all, else the scenario's. `on` and `linux-cas` are read
    ///   against the policy decided above, whoever named them.
    pub fn decide(&mut self, p: &mut Params) -> Result<(), ScenarioError> {
        self.decide_policy(p)?;
        let spawn = match self.spec.policy.spawn_rule() {
            Some(own) if !self.spawn_named => own,
            _ => self.spec.config.spawn,
        };
        let spawn: String = p.get("spawn", spawn.to_string())?;
        self.spec.config.spawn = spawn
            .parse::<SpawnPolicy>()
            .map_err(|e| ScenarioError(e.0))?;
        let own = self.spec.policy.balance_rule();
        let mut bal = self.spec.config.balance;
        match &self.balance_named {
            Some(v) => bal = parse_balance(v, bal.kind, own).map_err(ScenarioError)?,
            None => {
                if let Some(own) = own.filter(|_| bal.is_on()) {
                    bal.kind = own;
                }
            }
        }
        let b: String = p.get("balance", balance_name(&bal).to_string())?;
        if b != balance_name(&bal) {
            bal = parse_balance(&b, bal.kind, own).map_err(ScenarioError)?;
        }
        self.spec.config.balance = bal;
        self.decide_fair(p)
    }

    /// The fair class: `--param kernel=` (a release, `6.18`, or a release
    /// with overrides, `6.18+NO_NEXT_BUDDY`), then `--param features=`
    /// over it; else the one the user named (a file's `kernel`,
    /// `features`), else the policy's own (`linux`'s release), else the
    /// machine's (the model's base set). Read once, so the run's
    /// parameters show the set it runs (`kernel=6.19`).
    fn decide_fair(&mut self, p: &mut Params) -> Result<(), ScenarioError> {
        let own = self.fair_named.or(self.spec.policy.fair_features());
        let set = own.unwrap_or(self.spec.config.fair.features);
        let k: String = p.get("kernel", set.to_string())?;
        let mut set: FeatureSet = k
            .parse()
            .map_err(|e: String| ScenarioError(format!("kernel {k:?}: {e}")))?;
        if p.is_set("features") {
            let f: String = p.get("features", String::new())?;
            set = set
                .parse(&f)
                .map_err(|e| ScenarioError(format!("features {f:?}: {e}")))?;
        }
        self.spec.config.fair.features = set;
        Ok(())
    }

    /// The policy: `--param policy=` (and `waker_run=`), else the current.
    fn decide_policy(&mut self, p: &mut Params) -> Result<(), ScenarioError> {
        let current = self.spec.policy.name().to_string();
        let policy: String = p.get("policy", current.clone())?;
        // The run of the chosen policy when it is waker-streak[+lb]:K.
        let (family, k) = policy.split_once(':').unwrap_or((&policy, ""));
        let family = family.to_string();
        let default_k = match family.as_str() {
            "waker-streak" | "waker-streak+lb" => k.parse().unwrap_or(WAKER_RUN),
            _ => WAKER_RUN,
        };
        let k: u8 = p.get("waker_run", default_k)?;
        let name = match family.as_str() {
            _ if !p.is_set("waker_run") => policy,
            "waker-streak+lb" => format!("waker-streak+lb:{k}"),
            _ => format!("waker-streak:{k}"),
        };
        if name != current {
            self.spec.policy = p.registry().resolve(&name).map_err(ScenarioError)?;
        }
        Ok(())
    }

    pub fn build(&mut self, params: BTreeMap<String, String>) -> Scenario {
        Scenario {
            name: self.name.clone(),
            spec: self.spec.clone(),
            figures: self.figures.clone(),
            params,
            notes: Vec::new(),
        }
    }
}

/// A topology by preset name, or a clear error.
/// The machine `spec` names, for every command's `--topology`:
///
/// * a preset name (`schedlab topo --list`);
/// * `sysfs` (this machine, `/`) or `sysfs:ROOT` (a tree holding `sys/`);
/// * `lscpu:FILE` (the output of `lscpu -p`);
/// * `FILE.toml` (the `schedlab_topology::read` format).
///
/// The readers are `schedlab topo`'s, with their positioned errors; the
/// machine is named `spec`, as given, in every output.
pub fn topology(spec: &str) -> Result<Topology, ScenarioError> {
    use schedlab_topology::read::{from_lscpu_file, from_sysfs, from_toml_file};
    let read = |r: Result<Topology, schedlab_topology::read::ReadError>| {
        r.map(|t| t.renamed(spec))
            .map_err(|e| ScenarioError(format!("--topology {spec}: {e}")))
    };
    if let Some(t) = preset(spec) {
        return Ok(t);
    }
    if spec == "sysfs" {
        return read(from_sysfs(std::path::Path::new("/")));
    }
    if let Some(root) = spec.strip_prefix("sysfs:") {
        return read(from_sysfs(std::path::Path::new(root)));
    }
    if let Some(file) = spec.strip_prefix("lscpu:") {
        return read(from_lscpu_file(std::path::Path::new(file)));
    }
    if spec.ends_with(".toml") {
        return read(from_toml_file(std::path::Path::new(spec)));
    }
    let names: Vec<&str> = schedlab_topology::PRESETS.iter().map(|p| p.name).collect();
    Err(ScenarioError(format!(
        "unknown topology {spec:?}: expected a preset ({}), sysfs, sysfs:ROOT, lscpu:FILE or FILE.toml",
        names.join(", ")
    )))
}
