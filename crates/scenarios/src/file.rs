//! Scenario files (TOML). Every error names the file, the line and column,
//! and what was expected; no input makes the loader panic (a property test
//! feeds it arbitrary text).
//!
//! ```toml
//! name = "my-pair"               # default: the file's stem
//! run_ms = 100                   # default 1000
//! idle_depth = 0                 # the idle state CPUs sleep in
//!
//! [topology]                     # optional; schedlab_topology::read's format
//! preset = "amd-2x8"             # or [topology.shape] / [[topology.node]]
//!
//! [policy]                       # all optional
//! placement = "waker-streak"     # any policy name: "home", "waker-streak:4", ...
//! waker_run = 8                  # with waker-streak: its run
//! spawn = "near"                 # or "rotate", "linux"
//! balance = true                 # or false, "seed", "linux", "linux-cas" (true: the policy's own)
//! kernel = "6.18"                # the fair class: a release (default: the policy's own)
//! features = "NO_DELAY_DEQUEUE"  # features.h's names over it; NO_ turns one off
//! protect_on_repick = true
//!
//! [cost]                         # any CostModel field; the rest default
//! context_switch_ns = 1300
//!
//! [programs]                     # for spawn = { program = "child" }
//! child = [{ run = 5000 }, "exit"]
//!
//! [[task]]
//! name = "client"
//! cpu = 0                        # where it starts
//! mask = "0-7"                   # cpulist; default every CPU
//! start_in = "0-7"               # optional: start on one of these, drawn from the seed
//! nice = 0                       # or rt = 10 (priority 1-99)
//! working_set = 65536            # bytes re-read after a migration
//! cookie = 1                     # core scheduling: siblings run one cookie at a time
//! program = [{ loop = { n = 100, body = [{ call = { port = "p", bytes = 8 } }, { lap = { metric = "rtt" } }] } }]
//!
//! process = "server"           # a [[process]] below; default: its own
//!
//! [[process]]                    # threads of one process share its data
//! name = "server"
//! shared_bytes = 4194304         # touched by all its threads (LLC warmth)
//!
//! [[figure]]
//! name = "rtt_us"
//! kind = "lap_p50_us"            # see schedlab_sim::Figure
//! metric = "rtt"
//! ```
//!
//! Ops: `{ run = NS }`, `{ call = { port, bytes } }`, `{ serve = { port } }`,
//! `{ reply = { bytes } }`, `{ pipe_write = { pipe, bytes } }`,
//! `{ pipe_read = { pipe, bytes } }`, `{ futex_wait = { futex } }`,
//! `{ futex_wake = { futex, n } }`, `{ lock = { lock } }`,
//! `{ unlock = { lock } }`, `{ cond_wait = { cond, lock } }` (`lock`
//! optional), `{ cond_signal = { cond } }`, `{ cond_broadcast = { cond } }`,
//! `{ barrier = { barrier, n } }`,
//! `{ timer = { timer, period, absolute, stamp } }` (`absolute` and
//! `stamp` optional),
//! `{ run_for = NS }`, `{ wake_lap = { metric } }`, `{ sleep = NS }`,
//! `{ random_sleep = { min, max } }`, `{ exp_sleep = { mean } }`, `{ io = NS }`,
//! `{ spawn = { program } }` (a thread), `{ fork = { program } }` (a
//! process of its own, as `fork(2)`), `"join"`, `"join_any"`, `"exit"`, `"yield"`, `"leave"`,
//! `{ loop = { n, body = [...] } }`, `{ lap = { metric } }`,
//! `{ lap_start = { metric } }`,
//! `{ count = { metric, n } }`, `{ stamp = { metric } }` (the time now,
//! in the task's own sequence of stamps, which `--json` does not print;
//! rt-app's log is made from them).

use std::collections::BTreeMap;
use std::path::Path;

use schedlab_sim::sched::fair::FeatureSet;
use schedlab_sim::sched::{SpawnPolicy, TaskSpec};
use schedlab_sim::{CostModel, Figure, Op};
use schedlab_topology::read::{read_text, toml_error, ReadError, TopologySpec};
use schedlab_topology::{parse_cpulist, CpuSet, Topology};
use serde::Deserialize;
use toml::Spanned;

use crate::{check, Builder, Params, Scenario};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSpec {
    name: Option<String>,
    run_ms: Option<Spanned<u64>>,
    idle_depth: Option<u8>,
    topology: Option<TopologySpec>,
    #[serde(default)]
    policy: PolicySpec,
    cost: Option<CostModel>,
    #[serde(default)]
    programs: BTreeMap<String, Spanned<Vec<Op>>>,
    #[serde(default)]
    task: Vec<TaskFile>,
    #[serde(default)]
    process: Vec<ProcessFile>,
    #[serde(default)]
    figure: Vec<FigureFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProcessFile {
    name: Spanned<String>,
    /// Data all its threads touch, bytes (beside each one's working set).
    #[serde(default)]
    shared_bytes: u64,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct PolicySpec {
    placement: Option<Spanned<String>>,
    waker_run: Option<u8>,
    spawn: Option<Spanned<String>>,
    balance: Option<Spanned<BalanceSpec>>,
    kernel: Option<Spanned<String>>,
    features: Option<Spanned<String>>,
    protect_on_repick: Option<bool>,
}

/// `balance = true | false | "seed" | "linux" | "linux-cas" | "on" | "off"`.
#[derive(Deserialize, Clone)]
#[serde(untagged)]
enum BalanceSpec {
    On(bool),
    Named(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskFile {
    name: String,
    cpu: Spanned<usize>,
    mask: Option<Spanned<String>>,
    /// A cpulist: start on one of these CPUs, drawn from the run's seed.
    start_in: Option<Spanned<String>>,
    nice: Option<Spanned<i8>>,
    rt: Option<u8>,
    slice_ns: Option<Spanned<u64>>,
    /// Core-scheduling cookie; any nonzero cookie turns core scheduling on.
    cookie: Option<u64>,
    working_set: Option<u64>,
    /// The process it belongs to (a `[[process]]`'s name); default: one
    /// of its own.
    process: Option<Spanned<String>>,
    program: Spanned<Vec<Op>>,
}

// No deny_unknown_fields here: serde cannot combine it with `flatten`;
// `Figure` itself refuses unknown fields.
#[derive(Deserialize)]
struct FigureFile {
    name: String,
    #[serde(flatten)]
    figure: Figure,
}

/// Loads a scenario file; `params` are the common `--param`s.
pub fn load(path: &Path, params: Params) -> Result<Scenario, ReadError> {
    load_str(&read_text(path)?, path, params)
}

/// The machine a scenario file without `[topology]` runs on, unless told.
pub const DEFAULT_TOPOLOGY: &str = "amd-2x8";

/// Loads a scenario file to run on `machine` instead of the topology it
/// names (a real run: it runs on the machine it runs on). A task on a CPU
/// the machine lacks is refused at its place in the file.
pub fn load_on(path: &Path, params: Params, machine: Topology) -> Result<Scenario, ReadError> {
    load_str_on(&read_text(path)?, path, params, Some(machine))
}

/// Loads a scenario from `text`; `file` names it in errors.
pub fn load_str(text: &str, file: &Path, params: Params) -> Result<Scenario, ReadError> {
    load_str_on(text, file, params, None)
}

/// Loads a scenario from `text` to run on `machine` (when given) instead
/// of the topology it names; `file` names it in errors.
pub fn load_str_on(
    text: &str,
    file: &Path,
    mut params: Params,
    machine: Option<Topology>,
) -> Result<Scenario, ReadError> {
    let src = Src {
        text,
        file,
        on_machine: machine.is_some(),
    };
    let spec: FileSpec = toml::from_str(text).map_err(|e| toml_error(text, file, &e))?;
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "scenario".into());
    let (topo, replaced) = src.machine(&spec, machine, &stem)?;
    let n = topo.num_cpus();
    let name = spec.name.clone().unwrap_or(stem);
    let mut b = Builder::new(&name, topo);
    if let Some(ms) = &spec.run_ms {
        if *ms.get_ref() == 0 {
            return Err(src.at(
                ms.span().start,
                "expected run_ms of 1 or more, found 0".into(),
            ));
        }
        b.run_ns(ms.get_ref().saturating_mul(1_000_000));
    }
    if let Some(d) = spec.idle_depth {
        b.idle_depth(d);
    }
    if let Some(c) = spec.cost {
        b.cost(c);
    }
    src.policy(&spec.policy, &mut b, &params)?;
    let programs = src.programs(&spec, &mut b)?;
    if spec.task.is_empty() {
        return Err(src.whole("expected at least one [[task]], found none".into()));
    }
    for t in &spec.task {
        src.task(t, n, &programs, &mut b)?;
    }
    for f in &spec.figure {
        b.figure(&f.name, f.figure.clone());
    }
    b.common(&mut params).map_err(|e| src.whole(e.0))?;
    let used = params.finish(&name).map_err(|e| src.whole(e.0))?;
    let mut notes = src.warnings(&spec, &programs);
    notes.extend(replaced);
    let mut s = b.build(used);
    s.notes = notes;
    Ok(s)
}

/// The file being read, for positioned errors.
struct Src<'a> {
    text: &'a str,
    file: &'a Path,
    /// A real run's machine replaces the file's topology.
    on_machine: bool,
}

impl Src<'_> {
    /// An error at byte `offset` of the text.
    fn at(&self, offset: usize, message: String) -> ReadError {
        ReadError::at(self.file, self.text, offset, message)
    }

    /// An error of the file as a whole.
    fn whole(&self, message: String) -> ReadError {
        ReadError::whole(self.file, message)
    }

    /// The machine: the one given (`--topology`, a real run's) wins over
    /// the file's [topology], with a note; a file without one runs on
    /// amd-2x8, as the built-in scenarios do.
    fn machine(
        &self,
        spec: &FileSpec,
        machine: Option<Topology>,
        stem: &str,
    ) -> Result<(Topology, Option<String>), ReadError> {
        Ok(match (machine, &spec.topology) {
            (Some(t), Some(_)) => {
                let note = format!(
                    "{}: runs on {}, not on the [topology] it names",
                    self.file.display(),
                    t.name()
                );
                (t, Some(note))
            }
            (Some(t), None) => (t, None),
            (None, Some(named)) => (named.build(self.text, self.file, stem)?, None),
            (None, None) => (
                schedlab_topology::preset(DEFAULT_TOPOLOGY).expect("a preset"),
                None,
            ),
        })
    }

    /// `[policy]`: placement, spawn rule, balancer, repick protection.
    fn policy(&self, pol: &PolicySpec, b: &mut Builder, params: &Params) -> Result<(), ReadError> {
        let (name, off) = match &pol.placement {
            Some(s) => (s.get_ref().clone(), s.span().start),
            None => ("waker-streak".to_string(), 0),
        };
        let name = match pol.waker_run {
            Some(k) if name == "waker-streak" => format!("waker-streak:{k}"),
            _ => name,
        };
        b.policy(
            params
                .registry()
                .resolve(&name)
                .map_err(|e| self.at(off, format!("placement: {e}")))?,
        );
        if let Some(s) = &pol.spawn {
            b.spawn(
                s.get_ref()
                    .parse::<SpawnPolicy>()
                    .map_err(|e| self.at(s.span().start, e.0))?,
            );
        }
        if let Some(bal) = &pol.balance {
            let v = match bal.get_ref() {
                BalanceSpec::On(true) => "on".to_string(),
                BalanceSpec::On(false) => "off".to_string(),
                BalanceSpec::Named(n) => n.clone(),
            };
            // Checked here for its position; decided with the rest.
            let own = b.spec.policy.balance_rule();
            crate::parse_balance(&v, b.spec.config.balance.kind, own)
                .map_err(|e| self.at(bal.span().start, e))?;
            b.balance(&v);
        }
        if pol.kernel.is_some() || pol.features.is_some() {
            let set = match &pol.kernel {
                Some(k) => k
                    .get_ref()
                    .parse::<FeatureSet>()
                    .map_err(|e| self.at(k.span().start, format!("kernel: {e}")))?,
                None => b.spec.policy.fair_features().unwrap_or_default(),
            };
            let set = match &pol.features {
                Some(f) => set
                    .parse(f.get_ref())
                    .map_err(|e| self.at(f.span().start, format!("features: {e}")))?,
                None => set,
            };
            b.fair(set);
        }
        if let Some(p) = pol.protect_on_repick {
            b.config().fair.protect_on_repick = p;
        }
        Ok(())
    }

    /// `[programs]` (checked, with no unbounded spawn recursion) and
    /// `[[process]]`; the programs by name.
    fn programs(
        &self,
        spec: &FileSpec,
        b: &mut Builder,
    ) -> Result<BTreeMap<String, Vec<Op>>, ReadError> {
        let programs: BTreeMap<String, Vec<Op>> = spec
            .programs
            .iter()
            .map(|(k, v)| (k.clone(), v.get_ref().clone()))
            .collect();
        for (pname, ops) in &spec.programs {
            check::check_ops(ops.get_ref(), &programs)
                .map_err(|m| self.at(ops.span().start, format!("program {pname:?}: {m}")))?;
            b.program(pname, ops.get_ref().clone());
        }
        if let Some(cycle) = check::spawn_cycle(&programs) {
            let off = spec.programs[&cycle[0]].span().start;
            return Err(self.at(
                off,
                format!(
                    "spawn recursion with no bound: {} spawns {:?} again; no spawn is conditional, so it would never end",
                    cycle.join(" -> "),
                    cycle[0]
                ),
            ));
        }
        for pr in &spec.process {
            if b.spec.processes.contains_key(pr.name.get_ref()) {
                return Err(self.at(
                    pr.name.span().start,
                    format!("process {:?} is declared twice", pr.name.get_ref()),
                ));
            }
            b.process(pr.name.get_ref(), pr.shared_bytes);
        }
        Ok(programs)
    }

    /// One `[[task]]` on a machine of `n` CPUs.
    fn task(
        &self,
        t: &TaskFile,
        n: usize,
        programs: &BTreeMap<String, Vec<Op>>,
        b: &mut Builder,
    ) -> Result<(), ReadError> {
        let cpu = *t.cpu.get_ref();
        if cpu >= n {
            return Err(self.at(
                t.cpu.span().start,
                if self.on_machine {
                    format!("expected a CPU below {n} (this machine has {n}; a real run runs here), found {cpu}")
                } else {
                    format!("expected a CPU below {n}, found {cpu}")
                },
            ));
        }
        let start_in = t
            .start_in
            .as_ref()
            .map(|m| self.cpulist(m, "a start_in list", n))
            .transpose()?;
        let mask: Option<CpuSet> = match &t.mask {
            None => None,
            Some(m) => {
                let set = self.cpulist(m, "a mask", n)?;
                if !set.contains(schedlab_topology::CpuId::new(cpu)) {
                    return Err(self.at(
                        t.cpu.span().start,
                        format!("expected the start CPU inside the mask {set}, found cpu{cpu}"),
                    ));
                }
                Some(set)
            }
        };
        let ts = self.task_spec(t)?;
        if ts.cookie != 0 {
            b.config().core_sched = true;
        }
        check::check_ops(t.program.get_ref(), programs)
            .map_err(|m| self.at(t.program.span().start, format!("task {:?}: {m}", t.name)))?;
        b.task(&t.name, cpu, mask, ts, t.program.get_ref().clone());
        if let Some(ws) = t.working_set {
            b.spec.tasks.last_mut().expect("just added").working_set = ws;
        }
        if let Some(set) = start_in {
            b.start_in(set);
        }
        if let Some(p) = &t.process {
            if !b.spec.processes.contains_key(p.get_ref()) {
                return Err(self.at(
                    p.span().start,
                    format!("task {:?}: process {:?} is not declared: expected a [[process]] of that name", t.name, p.get_ref()),
                ));
            }
            b.in_process(p.get_ref());
        }
        Ok(())
    }

    /// A cpulist of the file, cut to the machine's `n` CPUs and not empty.
    fn cpulist(&self, m: &Spanned<String>, what: &str, n: usize) -> Result<CpuSet, ReadError> {
        let set = parse_cpulist(m.get_ref()).map_err(|e| {
            self.at(
                m.span().start + e.column,
                format!("expected {}, found {}", e.expected, e.found),
            )
        })?;
        let set = set & CpuSet::first_n(n);
        if set.is_empty() {
            return Err(self.at(
                m.span().start,
                format!(
                    "expected {what} naming some CPU of the {n}, found {:?}",
                    m.get_ref()
                ),
            ));
        }
        Ok(set)
    }

    /// A task's band (nice or rt), slice and cookie.
    fn task_spec(&self, t: &TaskFile) -> Result<TaskSpec, ReadError> {
        let mut ts = match (t.rt, &t.nice) {
            (Some(_), Some(_)) => {
                return Err(self.whole(format!(
                    "task {:?}: expected nice or rt, found both",
                    t.name
                )))
            }
            (Some(p), None) if (1..=99).contains(&p) => TaskSpec::rt(p),
            (Some(p), None) => {
                return Err(self.whole(format!(
                    "task {:?}: expected an rt priority 1-99, found {p}",
                    t.name
                )))
            }
            (None, None) => TaskSpec::fair(0),
            (None, Some(nice)) => {
                let v = *nice.get_ref();
                if !(-20..=19).contains(&v) {
                    return Err(self.at(
                        nice.span().start,
                        format!("expected nice in -20..19, found {v}"),
                    ));
                }
                TaskSpec::fair(v)
            }
        };
        if let Some(sl) = &t.slice_ns {
            if *sl.get_ref() == 0 {
                return Err(self.at(
                    sl.span().start,
                    "expected slice_ns of 1 or more, found 0".into(),
                ));
            }
            ts.slice_ns = Some(*sl.get_ref());
        }
        ts.cookie = t.cookie.unwrap_or(0);
        Ok(ts)
    }

    /// Warnings about waits nothing can end: ports no program serves,
    /// futexes no program wakes.
    fn warnings(&self, spec: &FileSpec, programs: &BTreeMap<String, Vec<Op>>) -> Vec<String> {
        let file = self.file.display();
        let all: Vec<&[Op]> = spec
            .task
            .iter()
            .map(|t| t.program.get_ref().as_slice())
            .chain(programs.values().map(Vec::as_slice))
            .collect();
        let mut notes: Vec<String> = check::unserved_ports(all.iter().copied())
            .into_iter()
            .map(|p| format!("{file}: warning: port {p:?} is called and served by no program: each call waits for ever"))
            .collect();
        notes.extend(check::never_woken(all.iter().copied()).into_iter().map(|w| {
            format!("{file}: warning: {w} is waited on and woken by no program: each wait lasts for ever")
        }));
        notes
    }
}
