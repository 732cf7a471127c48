//! A small deterministic host for the crate's tests and benchmarks (feature
//! `testhost`). It is not the simulator: it charges nothing, kicks take no
//! time, and it processes kicks in the order they were sent. Time moves only
//! through [`TestHost::advance`], one tick at a time.
//!
//! It checks the scheduler's invariants after every step
//! ([`TestHost::check`]): every live task is held by exactly one CPU or is in
//! flight, its park word agrees with where it is, and no task sits on a CPU
//! its mask does not name.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::string::String;
use alloc::vec::Vec;

use schedlab_topology::{CpuId, CpuSet, Topology};

use crate::balancer::Balancer;
use crate::balancers::Builtin;
use crate::config::Config;
use crate::cpu::{CpuSched, Holding};
use crate::doorbell::IdleDepth;
use crate::effects::{Counters, Effects, Switch, Trace};
use crate::policy::{Home, Policy};
use crate::shared::Shared;
use crate::task::{TaskId, TaskSpec};

/// The test host, generic over the placement policy and the balancer every
/// CPU runs.
pub struct TestHost<P: Policy = Home, B: Balancer = Builtin> {
    pub sh: Shared<P::TaskState>,
    pub cpus: Vec<CpuSched<P, B>>,
    pub now: u64,
    /// Every decision, with the time and the CPU that made it.
    pub trace: Vec<(u64, CpuId, Trace)>,
    /// What each CPU runs, as the last pass said.
    pub running: Vec<Option<TaskId>>,
    /// Wall ns each task has run, as the switches say.
    pub runtime: BTreeMap<TaskId, u64>,
    /// The idle depth every pass is given.
    pub idle_depth: IdleDepth,
    passes: VecDeque<CpuId>,
    since: Vec<u64>,
    timers: Vec<Option<u64>>,
}

impl TestHost<Home> {
    /// The preset `name` with the placement `home` and balancing off, so
    /// nothing moves unless a test says so; `f` adjusts the config.
    pub fn quiet(name: &str, f: impl FnOnce(&mut Config)) -> TestHost<Home> {
        TestHost::quiet_with(name, Home, f)
    }
}

impl<P: Policy> TestHost<P> {
    /// A machine with every CPU idle, running `policy` and the built-in
    /// balancer the config names.
    pub fn new(topo: Topology, config: Config, policy: P) -> TestHost<P> {
        TestHost::with_balancer(topo, config, policy)
    }

    /// The preset `name` running `policy` with balancing off, so nothing
    /// moves unless a test says so; `f` adjusts the config.
    pub fn quiet_with(name: &str, policy: P, f: impl FnOnce(&mut Config)) -> TestHost<P> {
        let topo = schedlab_topology::preset(name).expect("a preset");
        let mut cfg = Config::for_topology(&topo);
        cfg.balance = crate::config::Balance::OFF;
        f(&mut cfg);
        TestHost::new(topo, cfg, policy)
    }
}

impl<P: Policy, B: Balancer> TestHost<P, B> {
    /// A machine with every CPU idle, running `policy` and `B`.
    pub fn with_balancer(topo: Topology, config: Config, policy: P) -> TestHost<P, B> {
        let sh = Shared::new(topo, config, 4096);
        let cpus = CpuSched::for_machine(&sh, policy);
        let n = cpus.len();
        let mut h = TestHost {
            sh,
            cpus,
            now: 0,
            trace: Vec::new(),
            running: alloc::vec![None; n],
            runtime: BTreeMap::new(),
            idle_depth: 0,
            passes: VecDeque::new(),
            since: alloc::vec![0; n],
            timers: alloc::vec![None; n],
        };
        for c in 0..n {
            h.passes.push_back(CpuId::new(c));
        }
        h.settle();
        h
    }

    fn account(&mut self, cpu: CpuId, next: Option<TaskId>) {
        let c = cpu.index();
        if let Some(prev) = self.running[c] {
            *self.runtime.entry(prev).or_default() += self.now - self.since[c];
        }
        self.running[c] = next;
        self.since[c] = self.now;
    }

    /// Carries out `fx` for `cpu`.
    pub fn apply(&mut self, cpu: CpuId, fx: Effects) {
        for t in fx.trace {
            self.trace.push((self.now, cpu, t));
        }
        for k in fx.kicks {
            self.passes.push_back(k.cpu);
        }
        match fx.switch {
            Some(Switch::Run(t)) => self.account(cpu, Some(t)),
            Some(Switch::Idle { .. }) => self.account(cpu, None),
            None => {}
        }
        if fx.switch.is_some() {
            self.timers[cpu.index()] = fx.timer;
        }
        if fx.resched {
            self.passes.push_back(cpu);
        }
    }

    /// Runs passes until no kick or reschedule is outstanding.
    pub fn settle(&mut self) {
        let mut budget = 100_000;
        while let Some(cpu) = self.passes.pop_front() {
            budget -= 1;
            assert!(budget > 0, "the host did not settle: a kick loop");
            let fx = self.cpus[cpu.index()].pass(&self.sh, self.now, self.idle_depth);
            self.apply(cpu, fx);
            self.check();
        }
    }

    /// `on`'s running thread (or the idle CPU itself) spawns a task.
    pub fn spawn(&mut self, on: CpuId, spec: TaskSpec) -> TaskId {
        let s = self.cpus[on.index()]
            .spawn(&self.sh, spec, self.now)
            .expect("spawn");
        let id = s.task;
        self.apply(on, s.effects);
        self.settle();
        id
    }

    /// A task that may run on `cpu` alone, running there.
    pub fn spawn_pinned(&mut self, cpu: CpuId, spec: TaskSpec) -> TaskId {
        self.spawn(cpu, spec.with_mask(CpuSet::single(cpu)))
    }

    /// `from`'s running thread wakes `task`; the kicks are carried out.
    pub fn wake(&mut self, from: CpuId, task: TaskId) {
        self.post_wake(from, task);
        self.settle();
    }

    /// Like [`TestHost::wake`], but the kicks wait for the next `settle`.
    pub fn post_wake(&mut self, from: CpuId, task: TaskId) {
        let fx = self.cpus[from.index()].wake(&self.sh, task, self.now);
        self.apply(from, fx);
    }

    /// A device interrupt on `cpu` wakes `task`.
    pub fn irq_wake(&mut self, cpu: CpuId, task: TaskId) {
        let c = &mut self.cpus[cpu.index()];
        c.irq_enter();
        let fx = c.wake(&self.sh, task, self.now);
        c.irq_exit();
        self.apply(cpu, fx);
        self.settle();
    }

    /// `cpu`'s running task blocks.
    pub fn block(&mut self, cpu: CpuId) {
        let fx = self.cpus[cpu.index()].block(&self.sh, self.now, self.idle_depth);
        self.apply(cpu, fx);
        self.settle();
    }

    pub fn sleep_until(&mut self, cpu: CpuId, deadline: u64) {
        let fx = self.cpus[cpu.index()].sleep_until(&self.sh, deadline, self.now, self.idle_depth);
        self.apply(cpu, fx);
        self.settle();
    }

    pub fn yield_now(&mut self, cpu: CpuId) {
        let fx = self.cpus[cpu.index()].yield_now(&self.sh, self.now, self.idle_depth);
        self.apply(cpu, fx);
        self.settle();
    }

    pub fn exit(&mut self, cpu: CpuId) {
        let fx = self.cpus[cpu.index()].exit(&self.sh, self.now, self.idle_depth);
        self.apply(cpu, fx);
        self.settle();
    }

    pub fn begin_leaving(&mut self, cpu: CpuId) {
        self.cpus[cpu.index()].begin_leaving();
    }

    pub fn set_mask(&mut self, from: CpuId, task: TaskId, mask: CpuSet) {
        let fx = self.cpus[from.index()].set_mask(&self.sh, task, mask, self.now);
        self.apply(from, fx);
        self.settle();
    }

    /// Moves time on by `ns`, a tick at a time: busy CPUs tick, due timers
    /// fire, and every kick is carried out.
    pub fn advance(&mut self, ns: u64) {
        let tick = self.sh.config().fair.tick_ns;
        let end = self.now + ns;
        while self.now < end {
            self.now = (self.now + tick).min(end);
            for c in 0..self.cpus.len() {
                let cpu = CpuId::new(c);
                if self.running[c].is_some() {
                    let fx = self.cpus[c].tick(&self.sh, self.now);
                    self.apply(cpu, fx);
                }
                if self.timers[c].is_some_and(|t| t <= self.now) {
                    self.timers[c] = None;
                    self.passes.push_back(cpu);
                }
            }
            self.settle();
        }
        // Close the books at `now`.
        for c in 0..self.cpus.len() {
            let r = self.running[c];
            self.account(CpuId::new(c), r);
        }
    }

    /// Where `task` is: its holder and how, or `None` (in flight or gone).
    pub fn where_is(&self, task: TaskId) -> Option<(CpuId, Holding)> {
        self.cpus.iter().find_map(|c| {
            c.holdings(&self.sh)
                .into_iter()
                .find(|(t, _)| *t == task)
                .map(|(_, h)| (c.id(), h))
        })
    }

    pub fn cpu_of(&self, task: TaskId) -> CpuId {
        self.where_is(task)
            .map(|(c, _)| c)
            .unwrap_or_else(|| panic!("{task:?} is held by no CPU"))
    }

    /// The counters of every CPU, summed.
    pub fn counters(&self) -> Counters {
        let mut c = Counters::default();
        for cpu in &self.cpus {
            c.add(cpu.counters());
        }
        c
    }

    /// The invariants; panics with what broke.
    pub fn check(&self) {
        if let Err(e) = self.invariants() {
            panic!("invariant broken at t={}: {e}", self.now);
        }
    }

    pub fn invariants(&self) -> Result<(), String> {
        crate::invariants::check(&self.sh, &self.cpus)
    }
}
