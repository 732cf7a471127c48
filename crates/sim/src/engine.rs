//! The engine: one thread, virtual nanoseconds, an ordered event queue, and
//! the scheduler's own entry points on every CPU.
//!
//! ## Time and order
//!
//! Events are ordered by `(time, tie, seq)`: `tie` is drawn from the run's
//! seeded RNG (so sweeping seeds explores the orderings of simultaneous
//! events), or 0 in fixed-order mode; `seq` is insertion order. Nothing
//! reads a wall clock; all maps are ordered. Several simulations may run in
//! one process.
//!
//! ## The machine
//!
//! A CPU runs one *segment* of work at a time: a task's compute, a context
//! switch, a thread's block path. A segment's speed is fixed when it
//! starts: `smt_slowdown` slower if an SMT sibling is busy at that moment.
//! A kick becomes a `Kick` event after the IPI latency (awake CPU) or the
//! wake-from-idle latency of the depth it sleeps at; the CPU then runs its
//! scheduler pass (`pass_ns`). A move therefore costs two wakes in series:
//! the home CPU's wake, which handles the message and decides, then the
//! target's.
//!
//! ## Costs charged to tasks
//!
//! * a message consumed (request, reply, pipe data): `handoff_ns(level,
//!   bytes)` between the CPU it was written on and the reader's;
//! * the first run on a CPU other than its last: `refill_ns(level,
//!   working_set)`;
//! * switching to another task: `context_switch_ns`;
//! * blocking: `block_ns` of compute before the scheduler's `block`, so a
//!   wake in that window is a flag and the park returns at once.

use std::collections::{BTreeMap, VecDeque};

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use schedlab_sched::{
    Config, CpuSched, Effects, KickKind, Policy, Shared, Switch, TaskId, TaskSpec, TaskState, Trace,
};
use schedlab_topology::{CpuId, CpuSet, Level, Topology};

use crate::cost::CostModel;
use crate::events::PrevState;
use crate::outcome::Recorder;
pub use crate::outcome::{Outcome, TaskOutcome};
use crate::policy::PolicyRef;
use crate::program::{flatten, Instr, Op};

/// A task the simulation starts with.
#[derive(Clone, Debug)]
pub struct TaskDef {
    pub name: String,
    pub spec: TaskSpec,
    /// Where it starts (it may move later if its mask allows).
    pub start_cpu: CpuId,
    pub program: Vec<Op>,
    /// Bytes it re-reads after a migration.
    pub working_set: u64,
    /// It starts on a CPU of this set drawn from the run's seed, not on
    /// `start_cpu`: where earlier work left a benchmark's thread, a property
    /// of the boot.
    pub start_in: Option<CpuSet>,
}

/// Everything a simulation is built from.
#[derive(Clone, Debug)]
pub struct SimSpec {
    pub topology: Topology,
    pub config: Config,
    /// The placement policy every CPU runs.
    pub policy: PolicyRef,
    pub cost: CostModel,
    /// The idle depth a CPU sleeps at.
    pub idle_depth: u8,
    /// Programs `spawn` may start, by name.
    pub programs: BTreeMap<String, Vec<Op>>,
    pub tasks: Vec<TaskDef>,
    /// The run stops here, or when every task has exited.
    pub run_ns: u64,
    /// The CPU whose interrupt completes disk requests.
    pub disk_irq_cpu: CpuId,
    pub pipe_capacity: u64,
    /// Check the scheduler's invariants after every event.
    pub check_invariants: bool,
    /// Keep every event as text, to find where two runs diverge.
    pub keep_log: bool,
    /// Keep the event log ([`Event`]) the trace outputs are made from.
    pub keep_events: bool,
    /// Ties among simultaneous events in insertion order, not by the RNG.
    pub fixed_order: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// A kick arrives: the CPU runs its pass.
    Kick {
        cpu: CpuId,
    },
    /// A segment of work ends.
    SegDone {
        cpu: CpuId,
        token: u64,
    },
    Tick {
        cpu: CpuId,
        token: u64,
    },
    /// A scheduler deadline is due.
    Timer {
        cpu: CpuId,
    },
    /// A disk request completes.
    DiskDone {
        task: TaskId,
    },
}

/// What a CPU is doing, physically.
#[derive(Clone, Copy, Debug, PartialEq)]
enum SegKind {
    /// The running task's compute; at its end the program goes on.
    Task,
    /// The running task's block path; at its end it calls `block`.
    BlockPath,
    /// Switching to the running task.
    Switch,
}

#[derive(Clone, Copy, Debug)]
struct Segment {
    kind: SegKind,
    task: TaskId,
    start: u64,
    end: u64,
    /// Solo ns of work in the segment.
    work: u64,
}

#[derive(Debug)]
struct HwCpu {
    /// What the scheduler said this CPU runs.
    current: Option<TaskId>,
    seg: Option<Segment>,
    token: u64,
    tick_token: u64,
    /// The task that last ran here, for context-switch cost.
    last: Option<TaskId>,
    /// A kick event is on its way.
    kick_pending: bool,
    timer: Option<u64>,
    busy_ns: u64,
    /// Until then the CPU is still switching to idle (busy for its sibling).
    idle_switch_until: u64,
}

/// What a blocked task waits for, re-checked each time it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Waiting {
    No,
    /// Blocked on the op at `pc`.
    Op,
}

#[derive(Debug)]
struct SimTask {
    name: String,
    code: std::rc::Rc<Vec<Instr>>,
    pc: usize,
    loops: Vec<u64>,
    /// Work left of a `Run` or a charged cost, in solo ns.
    pending_work: u64,
    /// The op at `pc` started its syscall part already.
    op_started: bool,
    waiting: Waiting,
    last_cpu: Option<CpuId>,
    working_set: u64,
    spec: TaskSpec,
    children: Vec<TaskId>,
    /// The task that spawned it, told of its exit (`join_any`).
    parent: Option<TaskId>,
    /// Children that exited and no `join_any` has reaped yet.
    zombies: Vec<TaskId>,
    /// A reply waiting for this client: (bytes, the CPU it was written on).
    reply: Option<(u64, CpuId)>,
    /// The request this server is serving: its client.
    serving: Option<TaskId>,
    /// Futex generations seen.
    futex_seen: BTreeMap<usize, u64>,
    io_done: bool,
    io_pending: bool,
    lap_at: BTreeMap<String, u64>,
    exited: bool,
    migrations: u64,
    cpu_ns: u64,
}

#[derive(Debug, Default)]
struct Port {
    requests: VecDeque<(TaskId, u64, CpuId)>,
    /// The thread that serves the port: every request posts it a wake, as
    /// a watched port does (a flag when it is running, counted by no one).
    watcher: Option<TaskId>,
}

#[derive(Debug, Default)]
struct Pipe {
    bytes: u64,
    written_on: Option<CpuId>,
    readers: VecDeque<TaskId>,
    writers: VecDeque<TaskId>,
}

#[derive(Debug, Default)]
struct Futex {
    seq: u64,
    waiters: VecDeque<TaskId>,
}

#[derive(Debug, Default)]
struct Lock {
    owner: Option<TaskId>,
    waiters: VecDeque<TaskId>,
}

/// One simulation of a machine whose CPUs run the policy `P`.
pub struct Engine<P: Policy> {
    sh: Shared<P::TaskState>,
    sched: Vec<CpuSched<P>>,
    hw: Vec<HwCpu>,
    /// Each CPU's tick phase within a tick period.
    tick_phase: Vec<u64>,
    /// Each CPU's SMT siblings, itself excluded.
    siblings: Vec<Vec<CpuId>>,
    /// Per SMT core, the task that last ran on it.
    core_last: Vec<Option<TaskId>>,
    tasks: BTreeMap<TaskId, SimTask>,
    names: BTreeMap<String, usize>,
    ports: Vec<Port>,
    pipes: Vec<Pipe>,
    futexes: Vec<Futex>,
    locks: Vec<Lock>,
    obj: [BTreeMap<String, usize>; 4],
    queue: std::collections::BinaryHeap<std::cmp::Reverse<(u64, u64, u64, Ev)>>,
    seq: u64,
    /// Tie-breaks among simultaneous events.
    rng: ChaCha8Rng,
    /// Programs' own randomness (`RandomSleep`): a second stream of the
    /// same seed, so a program's draws do not shift the tie-breaks.
    prog_rng: ChaCha8Rng,
    /// The machine's jitter: a third stream.
    hw_rng: ChaCha8Rng,
    now: u64,
    spec_cost: CostModel,
    idle_depth: u8,
    programs: BTreeMap<String, Vec<Op>>,
    run_ns: u64,
    disk_irq_cpu: CpuId,
    pipe_capacity: u64,
    check: bool,
    fixed_order: bool,
    rec: Recorder,
    live: usize,
}

impl<P: Policy> Engine<P> {
    /// Builds a simulation running `policy`; its RNG tree is rooted at
    /// `seed`. (`Sim::new` runs the policy `spec` names.)
    pub fn new(spec: &SimSpec, seed: u64, policy: P) -> Engine<P> {
        let n = spec.topology.num_cpus();
        let max_tasks = spec.tasks.len() + 4096;
        let sh = Shared::new(spec.topology.clone(), spec.config, max_tasks);
        let sched = CpuSched::for_machine(&sh, policy);
        let hw = (0..n)
            .map(|_| HwCpu {
                current: None,
                seg: None,
                token: 0,
                tick_token: 0,
                last: None,
                kick_pending: false,
                timer: None,
                busy_ns: 0,
                idle_switch_until: 0,
            })
            .collect();
        let mut sim = Engine {
            sh,
            sched,
            hw,
            core_last: vec![None; spec.topology.cores().len()],
            tick_phase: vec![0; n],
            siblings: spec
                .topology
                .cpu_ids()
                .map(|c| {
                    spec.topology
                        .core_cpus(c)
                        .iter()
                        .filter(|&s| s != c)
                        .collect()
                })
                .collect(),
            tasks: BTreeMap::new(),
            names: BTreeMap::new(),
            ports: Vec::new(),
            pipes: Vec::new(),
            futexes: Vec::new(),
            locks: Vec::new(),
            obj: Default::default(),
            queue: std::collections::BinaryHeap::new(),
            seq: 0,
            rng: ChaCha8Rng::seed_from_u64(seed),
            prog_rng: {
                let mut r = ChaCha8Rng::seed_from_u64(seed);
                r.set_stream(1);
                r
            },
            hw_rng: {
                let mut r = ChaCha8Rng::seed_from_u64(seed);
                r.set_stream(2);
                r
            },
            now: 0,
            spec_cost: spec.cost,
            idle_depth: spec.idle_depth,
            programs: spec.programs.clone(),
            run_ns: spec.run_ns,
            disk_irq_cpu: spec.disk_irq_cpu,
            pipe_capacity: spec.pipe_capacity,
            check: spec.check_invariants,
            fixed_order: spec.fixed_order,
            rec: Recorder::new(seed, &spec.topology, spec.keep_log, spec.keep_events),
            live: 0,
        };
        if sim.spec_cost.tick_skew {
            let tick = sim.sh.config().fair.tick_ns.max(1);
            for p in sim.tick_phase.iter_mut() {
                *p = sim.hw_rng.next_u64() % tick;
            }
        }
        // Every CPU starts idle: one pass each.
        for c in 0..n {
            let fx = sim.sched[c].pass(&sim.sh, 0, sim.idle_depth);
            sim.apply(CpuId::new(c), fx);
        }
        // Where `start_in` tasks begin: a fourth stream of the seed.
        let mut boot = ChaCha8Rng::seed_from_u64(seed);
        boot.set_stream(3);
        for def in &spec.tasks {
            let mut def = def.clone();
            if let Some(set) = def.start_in {
                let cpus: Vec<CpuId> = set.iter().collect();
                if !cpus.is_empty() {
                    def.start_cpu = cpus[(boot.next_u64() % cpus.len() as u64) as usize];
                }
            }
            sim.start_task(&def);
        }
        sim
    }

    fn obj_index(&mut self, kind: u8, name: &str) -> usize {
        if let Some(&i) = self.obj[kind as usize].get(name) {
            return i;
        }
        let i = match kind {
            0 => {
                self.ports.push(Port::default());
                self.ports.len() - 1
            }
            1 => {
                self.pipes.push(Pipe::default());
                self.pipes.len() - 1
            }
            2 => {
                self.futexes.push(Futex::default());
                self.futexes.len() - 1
            }
            _ => {
                self.locks.push(Lock::default());
                self.locks.len() - 1
            }
        };
        self.obj[kind as usize].insert(name.to_string(), i);
        i
    }

    /// Starts a task on its start CPU, then widens its mask to its own.
    fn start_task(&mut self, def: &TaskDef) {
        let c = def.start_cpu;
        let mut spec = def.spec;
        let mask = spec.mask.unwrap_or(*self.sh.topology().cpus());
        spec.mask = Some(CpuSet::single(c));
        let s = self.sched[c.index()]
            .spawn(&self.sh, spec, self.now)
            .expect("start a task");
        let (id, fx) = (s.task, s.effects);
        self.apply(c, fx);
        if mask != CpuSet::single(c) {
            let fx = self.sched[c.index()].set_mask(&self.sh, id, mask, self.now);
            self.apply(c, fx);
        }
        let mut code = Vec::new();
        flatten(&def.program, &mut code);
        let mut real = def.spec;
        real.mask = Some(mask);
        self.add_task(id, &def.name, code, def.working_set, real);
    }

    fn add_task(
        &mut self,
        id: TaskId,
        name: &str,
        code: Vec<Instr>,
        working_set: u64,
        spec: TaskSpec,
    ) {
        let k = self.names.entry(name.to_string()).or_insert(0);
        let name = if *k == 0 {
            name.to_string()
        } else {
            format!("{name}#{k}")
        };
        *self.names.get_mut(name.split('#').next().unwrap()).unwrap() += 1;
        self.rec.out.task_names.insert(id.0, name.clone());
        self.tasks.insert(
            id,
            SimTask {
                name,
                code: std::rc::Rc::new(code),
                pc: 0,
                loops: Vec::new(),
                pending_work: 0,
                op_started: false,
                waiting: Waiting::No,
                last_cpu: None,
                working_set,
                spec,
                children: Vec::new(),
                parent: None,
                zombies: Vec::new(),
                reply: None,
                serving: None,
                futex_seen: BTreeMap::new(),
                io_done: false,
                io_pending: false,
                lap_at: BTreeMap::new(),
                exited: false,
                migrations: 0,
                cpu_ns: 0,
            },
        );
        self.live += 1;
    }

    fn push(&mut self, at: u64, ev: Ev) {
        let tie = if self.fixed_order {
            0
        } else {
            self.rng.next_u64()
        };
        self.seq += 1;
        self.queue.push(std::cmp::Reverse((at, tie, self.seq, ev)));
    }

    fn record(&mut self, text: impl FnOnce() -> String, bytes: &[u8]) {
        self.rec.record(self.now, text, bytes);
    }

    /// Runs to the end; returns what it measured.
    pub fn run(mut self) -> Outcome {
        while let Some(std::cmp::Reverse((at, _, _, ev))) = self.queue.pop() {
            if at > self.run_ns || self.live == 0 {
                break;
            }
            self.now = at;
            self.rec.events += 1;
            self.event(ev);
            if self.check {
                if let Err(e) = schedlab_sched::invariants::check(&self.sh, &self.sched) {
                    panic!(
                        "invariant broken at t={} after {ev:?}: {e} (seed {})",
                        self.now, self.rec.out.seed
                    );
                }
            }
        }
        self.finish()
    }

    fn finish(mut self) -> Outcome {
        let end = self.now.min(self.run_ns);
        let mut c = schedlab_sched::Counters::default();
        for s in &self.sched {
            c.add(s.counters());
            self.rec.out.cpu_counters.push(*s.counters());
        }
        for (name, v) in c.named() {
            self.rec.out.counters.insert(name.to_string(), v);
        }
        for (id, t) in &self.tasks {
            let o = self.rec.out.tasks.entry(t.name.clone()).or_default();
            o.migrations = t.migrations;
            o.cpu_ns = t.cpu_ns;
            o.final_cpu = self
                .sched
                .iter()
                .find(|s| s.task(&self.sh, *id).is_some())
                .map(|s| s.id())
                .or(t.last_cpu);
        }
        self.rec.out.busy_ns = self.hw.iter().map(|h| h.busy_ns).collect();
        self.rec.finish(end)
    }

    fn event(&mut self, ev: Ev) {
        match ev {
            Ev::Kick { cpu } => {
                self.record(
                    || format!("kick {cpu:?}"),
                    &[1, cpu.index() as u8, (cpu.index() >> 8) as u8],
                );
                self.hw[cpu.index()].kick_pending = false;
                self.pass(cpu, true);
            }
            Ev::SegDone { cpu, token } => {
                if self.hw[cpu.index()].token != token {
                    return;
                }
                let seg = self.hw[cpu.index()].seg.take().expect("a live segment");
                self.record(
                    || format!("seg {cpu:?} {:?} {:?}", seg.kind, seg.task),
                    &[2, cpu.index() as u8, seg.task.0 as u8],
                );
                self.account(cpu, &seg, seg.end);
                match seg.kind {
                    SegKind::Task | SegKind::Switch => self.step(cpu, seg.task),
                    SegKind::BlockPath => self.do_block(cpu, seg.task),
                }
            }
            Ev::Tick { cpu, token } => {
                if self.hw[cpu.index()].tick_token != token
                    || self.hw[cpu.index()].current.is_none()
                {
                    return;
                }
                self.record(|| format!("tick {cpu:?}"), &[3, cpu.index() as u8]);
                let fx = self.sched[cpu.index()].tick(&self.sh, self.now);
                self.apply(cpu, fx);
                self.arm_tick(cpu);
            }
            Ev::Timer { cpu } => {
                let due = self.hw[cpu.index()].timer.is_some_and(|t| t <= self.now);
                if due {
                    self.record(|| format!("timer {cpu:?}"), &[4, cpu.index() as u8]);
                    self.hw[cpu.index()].timer = None;
                    self.pass(cpu, false);
                }
            }
            Ev::DiskDone { task } => {
                let cpu = self.disk_irq_cpu;
                self.record(|| format!("disk {task:?} on {cpu:?}"), &[5, task.0 as u8]);
                if let Some(t) = self.tasks.get_mut(&task) {
                    t.io_done = true;
                    t.io_pending = false;
                }
                self.extend_current(cpu, self.spec_cost.irq_ns);
                let s = &mut self.sched[cpu.index()];
                s.irq_enter();
                let fx = s.wake(&self.sh, task, self.now);
                s.irq_exit();
                self.apply(cpu, fx);
            }
        }
    }

    /// An interrupt or a pass on a busy CPU delays what it runs.
    fn extend_current(&mut self, cpu: CpuId, ns: u64) {
        let h = &mut self.hw[cpu.index()];
        if let Some(seg) = h.seg.as_mut() {
            seg.end += ns;
            h.token += 1;
            let (end, token) = (seg.end, h.token);
            self.push(end, Ev::SegDone { cpu, token });
        }
    }

    fn account(&mut self, cpu: CpuId, seg: &Segment, until: u64) {
        let ns = until.saturating_sub(seg.start);
        self.hw[cpu.index()].busy_ns += ns;
        if let Some(t) = self.tasks.get_mut(&seg.task) {
            t.cpu_ns += ns;
        }
    }

    /// The scheduler pass on `cpu`.
    fn pass(&mut self, cpu: CpuId, charged: bool) {
        if charged {
            self.extend_current(cpu, self.spec_cost.pass_ns);
        }
        let fx = self.sched[cpu.index()].pass(&self.sh, self.now, self.idle_depth);
        self.apply(cpu, fx);
    }

    /// Carries out a scheduler decision for `cpu`.
    fn apply(&mut self, cpu: CpuId, fx: Effects) {
        for t in &fx.trace {
            let name = match *t {
                Trace::Place { task, .. } => self.tasks.get(&task).map(|st| st.name.as_str()),
                _ => None,
            };
            let sh = &self.sh;
            self.rec
                .trace(self.now, cpu, t, name, |task| sh.task_word(task).owner);
        }
        for k in &fx.kicks {
            self.rec.kick(self.now, cpu, k);
            let lat = match k.kind {
                KickKind::Ipi => self.spec_cost.ipi_ns,
                KickKind::WakeFromIdle { depth } => self.spec_cost.wake_from_idle(depth),
            };
            let lat = self.jittered(lat);
            self.kick_at(k.cpu, self.now + lat);
        }
        if let Some(t) = fx.timer {
            if self.hw[cpu.index()].timer != Some(t) {
                self.hw[cpu.index()].timer = Some(t);
                let late = self.timer_late();
                self.push(t.max(self.now) + late, Ev::Timer { cpu });
            }
        }
        if let Some(sw) = fx.switch {
            self.switch(cpu, sw);
        }
        if fx.resched {
            self.kick_at(cpu, self.now);
        }
        if self.rec.keeps_events() {
            let s = &self.sched[cpu.index()];
            let len = s.current().is_some() as u32 + s.queued() as u32;
            self.rec.run_queue(self.now, cpu, len);
        }
    }

    /// How late this timer expiry fires (`CostModel::timer_late`), from the
    /// machine's RNG stream; nothing is drawn when there is none.
    fn timer_late(&mut self) -> u64 {
        let l = self.spec_cost.timer_late;
        if l.is_none() {
            return 0;
        }
        let u = (self.hw_rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        l.at(u)
    }

    fn jittered(&mut self, ns: u64) -> u64 {
        let j = self.spec_cost.jitter;
        if j <= 0.0 {
            return ns;
        }
        let u = (self.hw_rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        (ns as f64 * (1.0 + j * (2.0 * u - 1.0))) as u64
    }

    fn kick_at(&mut self, cpu: CpuId, at: u64) {
        if self.hw[cpu.index()].kick_pending && at > self.now {
            return;
        }
        self.hw[cpu.index()].kick_pending = true;
        self.push(at, Ev::Kick { cpu });
    }

    /// The scheduler says `cpu` runs `sw` now.
    fn switch(&mut self, cpu: CpuId, sw: Switch) {
        let c = cpu.index();
        let next = match sw {
            Switch::Run(t) => Some(t),
            Switch::Idle { .. } => None,
        };
        let sh = &self.sh;
        self.rec
            .switch(self.now, cpu, next, |p| match sh.task_word(p).state {
                TaskState::Dead => PrevState::Exited,
                TaskState::Committing | TaskState::Parked | TaskState::Waking => PrevState::Blocked,
                _ => PrevState::Runnable,
            });
        match sw {
            Switch::Idle { .. } => {
                if let Some(seg) = self.hw[c].seg.take() {
                    self.preempt(cpu, seg);
                }
                let was = self.hw[c].current.take();
                self.hw[c].token += 1;
                self.hw[c].last = None;
                if was.is_some() {
                    // Switching to the idle task keeps the core busy a while.
                    self.hw[c].idle_switch_until = self.now + self.spec_cost.context_switch_ns;
                }
            }
            Switch::Run(t) => {
                if self.hw[c].current == Some(t) {
                    // It keeps running: its segment, or whoever is stepping
                    // its program right now, goes on.
                    return;
                }
                if let Some(seg) = self.hw[c].seg.take() {
                    self.preempt(cpu, seg);
                }
                self.hw[c].current = Some(t);
                self.hw[c].token += 1;
                self.arm_tick(cpu);
                // Migration and switch costs come before it goes on.
                let mut cost = 0;
                if self.hw[c].last != Some(t) {
                    cost += self.jittered(self.spec_cost.context_switch_ns);
                }
                self.hw[c].last = Some(t);
                let topo = self.sh.topology();
                let st = self.tasks.get_mut(&t).expect("a known task");
                if let Some(prev) = st.last_cpu {
                    if prev != cpu {
                        st.migrations += 1;
                        cost += self
                            .spec_cost
                            .refill_ns(topo.level_between(prev, cpu), st.working_set);
                    }
                }
                st.last_cpu = Some(cpu);
                let core = topo.place(cpu).core as usize;
                if self.core_last[core].is_some_and(|o| o != t) {
                    // Another task used this core's private caches since.
                    cost += self.spec_cost.refill_ns(
                        Level::Llc,
                        self.spec_cost.core_footprint_bytes.min(st.working_set),
                    );
                }
                self.core_last[core] = Some(t);
                if cost > 0 {
                    self.start_seg(cpu, SegKind::Switch, t, cost);
                } else {
                    self.step(cpu, t);
                }
            }
        }
    }

    /// A segment cut short: its task keeps the work it has left.
    fn preempt(&mut self, cpu: CpuId, seg: Segment) {
        self.account(cpu, &seg, self.now);
        let left = if seg.end > seg.start {
            (seg.work as u128 * (seg.end - self.now.min(seg.end)) as u128
                / (seg.end - seg.start) as u128) as u64
        } else {
            0
        };
        if let Some(t) = self.tasks.get_mut(&seg.task) {
            match seg.kind {
                SegKind::Task => t.pending_work += left,
                // A block path cut short is redone; a switch is paid again.
                SegKind::BlockPath => t.op_started = true,
                SegKind::Switch => {}
            }
        }
    }

    fn start_seg(&mut self, cpu: CpuId, kind: SegKind, task: TaskId, work: u64) {
        // The segment runs `smt_slowdown` slower while a sibling is busy,
        // up to the known end of what that sibling does now; after that at
        // full speed. (A sibling that starts work later is slowed by this
        // segment in turn.)
        let busy_until = self.siblings[cpu.index()]
            .iter()
            .map(|s| {
                let h = &self.hw[s.index()];
                h.seg.map_or(0, |g| g.end).max(h.idle_switch_until)
            })
            .max()
            .unwrap_or(0);
        let slow = self.spec_cost.smt_slowdown;
        let window = busy_until.saturating_sub(self.now) as f64;
        let wall = if window <= 0.0 {
            work
        } else if work as f64 * slow <= window {
            (work as f64 * slow) as u64
        } else {
            (window + (work as f64 - window / slow)) as u64
        };
        let h = &mut self.hw[cpu.index()];
        h.token += 1;
        let token = h.token;
        h.seg = Some(Segment {
            kind,
            task,
            start: self.now,
            end: self.now + wall,
            work,
        });
        self.push(self.now + wall, Ev::SegDone { cpu, token });
    }

    fn arm_tick(&mut self, cpu: CpuId) {
        let tick = self.sh.config().fair.tick_ns;
        let phase = self.tick_phase[cpu.index()];
        let next = ((self.now + tick - phase) / tick) * tick + phase;
        let next = if next <= self.now { next + tick } else { next };
        // Late against its grid, never drifting: the next one is armed on
        // the grid again.
        let next = next + self.timer_late();
        let h = &mut self.hw[cpu.index()];
        h.tick_token += 1;
        let token = h.tick_token;
        self.push(next, Ev::Tick { cpu, token });
    }

    /// Runs `task`'s program on `cpu` until it starts a segment, blocks or
    /// exits.
    fn step(&mut self, cpu: CpuId, task: TaskId) {
        for _ in 0..10_000 {
            if self.hw[cpu.index()].current != Some(task) {
                return;
            }
            if self.sh.is_killed(task) {
                return self.do_exit(cpu, task);
            }
            let st = self.tasks.get_mut(&task).expect("known");
            if st.pending_work > 0 {
                let w = std::mem::take(&mut st.pending_work);
                return self.start_seg(cpu, SegKind::Task, task, w);
            }
            let code = std::rc::Rc::clone(&st.code);
            let Some(instr) = code.get(st.pc) else {
                return self.do_exit(cpu, task);
            };
            match *instr {
                Instr::LoopStart { n, end } => {
                    if n == 0 {
                        st.pc = end + 1;
                    } else {
                        st.loops.push(n);
                        st.pc += 1;
                    }
                }
                Instr::LoopEnd { start } => {
                    let left = st.loops.last_mut().expect("inside a loop");
                    *left -= 1;
                    if *left == 0 {
                        st.loops.pop();
                        st.pc += 1;
                    } else {
                        st.pc = start + 1;
                    }
                }
                Instr::Op(ref op) => {
                    if !self.op(cpu, task, op) {
                        return;
                    }
                }
            }
        }
        panic!(
            "{task:?} ran 10000 instructions without spending time: a program with an empty loop?"
        );
    }

    fn next_op(&mut self, task: TaskId) {
        let st = self.tasks.get_mut(&task).expect("known");
        st.pc += 1;
        st.op_started = false;
        st.waiting = Waiting::No;
    }

    /// Charges `ns` of work to the task before its op goes on; `false`
    /// (the caller returns) when a segment started.
    fn charge(&mut self, cpu: CpuId, task: TaskId, ns: u64) -> bool {
        if ns == 0 {
            return true;
        }
        self.start_seg(cpu, SegKind::Task, task, ns);
        false
    }

    /// Waits: the block path, then the scheduler's `block`.
    fn wait(&mut self, cpu: CpuId, task: TaskId) -> bool {
        self.tasks.get_mut(&task).expect("known").waiting = Waiting::Op;
        self.start_seg(cpu, SegKind::BlockPath, task, self.spec_cost.block_ns);
        false
    }

    fn do_block(&mut self, cpu: CpuId, task: TaskId) {
        let fx = self.sched[cpu.index()].block(&self.sh, self.now, self.idle_depth);
        let returned = fx.switch == Some(Switch::Run(task));
        self.apply(cpu, fx);
        if returned {
            // The park returned at once: re-check the op.
            self.hw[cpu.index()].current = Some(task);
            self.step(cpu, task);
        }
    }

    fn wake(&mut self, cpu: CpuId, target: TaskId) {
        let fx = self.sched[cpu.index()].wake(&self.sh, target, self.now);
        self.apply(cpu, fx);
    }

    /// A wake from a thread that blocks right after: a request or reply on
    /// a port (a socket's `sock_def_readable()`), a pipe read or write
    /// (`pipe_write()`/`pipe_read()`): Linux wakes these with
    /// `wake_up_interruptible_sync_poll()`, `WF_SYNC`.
    fn wake_sync(&mut self, cpu: CpuId, target: TaskId) {
        let fx = self.sched[cpu.index()].wake_sync(&self.sh, target, self.now);
        self.apply(cpu, fx);
    }

    /// One op; `true` when the program goes straight on.
    fn op(&mut self, cpu: CpuId, task: TaskId, op: &Op) -> bool {
        let cost = self.spec_cost;
        let topo_level = |sim: &Self, a: CpuId, b: CpuId| sim.sh.topology().level_between(a, b);
        match op {
            Op::Run(ns) => {
                let st = self.tasks.get_mut(&task).expect("known");
                if !st.op_started {
                    st.op_started = true;
                    st.pending_work = *ns;
                    return self.charge_pending(cpu, task);
                }
                self.next_op(task);
                true
            }
            Op::LapStart { metric } => {
                let now = self.now;
                let st = self.tasks.get_mut(&task).expect("known");
                st.lap_at.insert(metric.clone(), now);
                self.next_op(task);
                true
            }
            Op::Lap { metric } => {
                let now = self.now;
                let st = self.tasks.get_mut(&task).expect("known");
                if let Some(prev) = st.lap_at.insert(metric.clone(), now) {
                    self.rec
                        .out
                        .laps
                        .entry(metric.clone())
                        .or_default()
                        .push(now - prev);
                }
                self.next_op(task);
                true
            }
            Op::Count { metric, n } => {
                *self.rec.out.counts.entry(metric.clone()).or_default() += n;
                self.next_op(task);
                true
            }
            Op::Call { port, bytes } => {
                let p = self.obj_index(0, port);
                let st = self.tasks.get_mut(&task).expect("known");
                if !st.op_started {
                    st.op_started = true;
                    st.reply = None;
                    return self.charge(cpu, task, cost.syscall_ns) && self.op(cpu, task, op);
                }
                if st.waiting == Waiting::No && st.reply.is_none() {
                    // The syscall is done: post the request, wake a server.
                    self.ports[p].requests.push_back((task, *bytes, cpu));
                    if let Some(s) = self.ports[p].watcher {
                        self.wake_sync(cpu, s);
                    }
                    return self.wait(cpu, task);
                }
                match self.tasks.get_mut(&task).expect("known").reply.take() {
                    Some((b, from)) => {
                        self.next_op(task);
                        let l = topo_level(self, from, cpu);
                        self.charge(cpu, task, cost.handoff_ns(l, b))
                    }
                    None => self.wait(cpu, task),
                }
            }
            Op::Serve { port } => {
                let p = self.obj_index(0, port);
                self.ports[p].watcher = Some(task);
                match self.ports[p].requests.pop_front() {
                    Some((client, b, from)) => {
                        self.tasks.get_mut(&task).expect("known").serving = Some(client);
                        self.next_op(task);
                        let l = topo_level(self, from, cpu);
                        self.charge(cpu, task, cost.handoff_ns(l, b))
                    }
                    None => self.wait(cpu, task),
                }
            }
            Op::Reply { bytes } => {
                let st = self.tasks.get_mut(&task).expect("known");
                if !st.op_started {
                    st.op_started = true;
                    return self.charge(cpu, task, cost.syscall_ns) && self.op(cpu, task, op);
                }
                if let Some(client) = st.serving.take() {
                    if let Some(c) = self.tasks.get_mut(&client) {
                        c.reply = Some((*bytes, cpu));
                    }
                    self.wake_sync(cpu, client);
                }
                self.next_op(task);
                true
            }
            Op::PipeWrite { pipe, bytes } => {
                let p = self.obj_index(1, pipe);
                let cap = self.pipe_capacity.max(*bytes);
                if self.pipes[p].bytes + bytes > cap {
                    if !self.pipes[p].writers.contains(&task) {
                        self.pipes[p].writers.push_back(task);
                    }
                    return self.wait(cpu, task);
                }
                let st = self.tasks.get_mut(&task).expect("known");
                if !st.op_started {
                    st.op_started = true;
                    // Copying in: the syscall and the bytes at local speed.
                    let w = cost.syscall_ns + cost.handoff_ns(Level::Same, *bytes);
                    return self.charge(cpu, task, w) && self.op(cpu, task, op);
                }
                self.pipes[p].bytes += bytes;
                self.pipes[p].written_on = Some(cpu);
                self.pipes[p].writers.retain(|&w| w != task);
                if let Some(r) = self.pipes[p].readers.pop_front() {
                    self.wake_sync(cpu, r);
                }
                self.next_op(task);
                true
            }
            Op::PipeRead { pipe, bytes } => {
                let p = self.obj_index(1, pipe);
                if self.pipes[p].bytes < *bytes {
                    if !self.pipes[p].readers.contains(&task) {
                        self.pipes[p].readers.push_back(task);
                    }
                    return self.wait(cpu, task);
                }
                self.pipes[p].bytes -= bytes;
                self.pipes[p].readers.retain(|&r| r != task);
                let from = self.pipes[p].written_on.unwrap_or(cpu);
                if let Some(w) = self.pipes[p].writers.pop_front() {
                    self.wake_sync(cpu, w);
                }
                self.next_op(task);
                let l = topo_level(self, from, cpu);
                self.charge(cpu, task, cost.syscall_ns + cost.handoff_ns(l, *bytes))
            }
            Op::FutexWait { futex } => {
                let f = self.obj_index(2, futex);
                let seq = self.futexes[f].seq;
                let st = self.tasks.get_mut(&task).expect("known");
                let seen = *st.futex_seen.entry(f).or_insert(0);
                if seen != seq {
                    st.futex_seen.insert(f, seq);
                    self.futexes[f].waiters.retain(|&w| w != task);
                    self.next_op(task);
                    return true;
                }
                if !self.futexes[f].waiters.contains(&task) {
                    self.futexes[f].waiters.push_back(task);
                }
                self.wait(cpu, task)
            }
            Op::FutexWake { futex, n } => {
                let f = self.obj_index(2, futex);
                let st = self.tasks.get_mut(&task).expect("known");
                if !st.op_started {
                    st.op_started = true;
                    return self.charge(cpu, task, cost.syscall_ns) && self.op(cpu, task, op);
                }
                self.futexes[f].seq += 1;
                let seq = self.futexes[f].seq;
                self.tasks
                    .get_mut(&task)
                    .expect("known")
                    .futex_seen
                    .insert(f, seq);
                for _ in 0..*n {
                    let Some(w) = self.futexes[f].waiters.pop_front() else {
                        break;
                    };
                    self.wake(cpu, w);
                }
                self.next_op(task);
                true
            }
            Op::Lock { lock } => {
                let l = self.obj_index(3, lock);
                match self.locks[l].owner {
                    None => {
                        self.locks[l].owner = Some(task);
                        self.next_op(task);
                        true
                    }
                    Some(o) if o == task => {
                        self.locks[l].waiters.retain(|&w| w != task);
                        self.next_op(task);
                        true
                    }
                    Some(_) => {
                        if !self.locks[l].waiters.contains(&task) {
                            self.locks[l].waiters.push_back(task);
                        }
                        self.wait(cpu, task)
                    }
                }
            }
            Op::Unlock { lock } => {
                let l = self.obj_index(3, lock);
                // Hand-off: the first waiter owns it now.
                let next = self.locks[l].waiters.pop_front();
                self.locks[l].owner = next;
                if let Some(w) = next {
                    self.wake(cpu, w);
                }
                self.next_op(task);
                true
            }
            Op::RandomSleep { min, max } => {
                let st = self.tasks.get_mut(&task).expect("known");
                if st.op_started {
                    self.next_op(task);
                    return true;
                }
                let span = max.saturating_sub(*min) + 1;
                let ns = min + self.prog_rng.next_u64() % span;
                self.op(cpu, task, &Op::Sleep(ns))
            }
            Op::ExpSleep { mean } => {
                let st = self.tasks.get_mut(&task).expect("known");
                if st.op_started {
                    self.next_op(task);
                    return true;
                }
                let u = ((self.prog_rng.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
                let ns = (-(u.ln()) * *mean as f64) as u64 + 1;
                self.op(cpu, task, &Op::Sleep(ns))
            }
            Op::Leave => {
                self.sched[cpu.index()].begin_leaving();
                self.next_op(task);
                true
            }
            Op::Sleep(ns) => {
                let st = self.tasks.get_mut(&task).expect("known");
                if st.op_started {
                    self.next_op(task);
                    return true;
                }
                st.op_started = true;
                let fx = self.sched[cpu.index()].sleep_until(
                    &self.sh,
                    self.now + ns,
                    self.now,
                    self.idle_depth,
                );
                let returned = fx.switch == Some(Switch::Run(task));
                self.apply(cpu, fx);
                if returned {
                    self.next_op(task);
                    return true;
                }
                false
            }
            Op::Io(ns) => {
                let st = self.tasks.get_mut(&task).expect("known");
                if st.io_done {
                    st.io_done = false;
                    self.next_op(task);
                    return true;
                }
                if !st.io_pending {
                    st.io_pending = true;
                    let at = self.now + cost.syscall_ns + ns;
                    self.push(at, Ev::DiskDone { task });
                }
                self.wait(cpu, task)
            }
            Op::Spawn { program } => {
                let st = self.tasks.get_mut(&task).expect("known");
                if !st.op_started {
                    st.op_started = true;
                    return self.charge(cpu, task, cost.spawn_ns) && self.op(cpu, task, op);
                }
                let spec = st.spec;
                let ws = st.working_set;
                let parent = st.name.clone();
                let body = self.programs.get(program).cloned().unwrap_or_default();
                let s = self.sched[cpu.index()]
                    .spawn(&self.sh, spec, self.now)
                    .expect("spawn");
                let (child, fx) = (s.task, s.effects);
                let mut code = Vec::new();
                flatten(&body, &mut code);
                self.add_task(child, &format!("{parent}.{program}"), code, ws, spec);
                self.tasks.get_mut(&child).expect("just added").parent = Some(task);
                self.tasks
                    .get_mut(&task)
                    .expect("known")
                    .children
                    .push(child);
                self.apply(cpu, fx);
                self.next_op(task);
                true
            }
            Op::Join => {
                let st = self.tasks.get_mut(&task).expect("known");
                let Some(&child) = st.children.first() else {
                    self.next_op(task);
                    return true;
                };
                if self.sh.task_word(child).state == TaskState::Dead {
                    let st = self.tasks.get_mut(&task).expect("known");
                    st.children.remove(0);
                    st.zombies.retain(|&z| z != child);
                    self.next_op(task);
                    return true;
                }
                let fx = self.sched[cpu.index()].join(&self.sh, child, self.now, self.idle_depth);
                let returned = fx.switch == Some(Switch::Run(task));
                self.apply(cpu, fx);
                returned
            }
            Op::JoinAny => {
                let st = self.tasks.get_mut(&task).expect("known");
                if let Some(z) = st.zombies.pop() {
                    st.children.retain(|&c| c != z);
                    self.next_op(task);
                    return true;
                }
                if st.children.is_empty() {
                    self.next_op(task);
                    return true;
                }
                self.wait(cpu, task)
            }
            Op::Exit => {
                self.do_exit(cpu, task);
                false
            }
            Op::Yield => {
                self.next_op(task);
                let fx = self.sched[cpu.index()].yield_now(&self.sh, self.now, self.idle_depth);
                let returned = fx.switch == Some(Switch::Run(task));
                self.apply(cpu, fx);
                returned
            }
            Op::Loop { .. } => unreachable!("loops are flattened"),
        }
    }

    fn charge_pending(&mut self, cpu: CpuId, task: TaskId) -> bool {
        let w = std::mem::take(&mut self.tasks.get_mut(&task).expect("known").pending_work);
        if w == 0 {
            return true;
        }
        self.start_seg(cpu, SegKind::Task, task, w);
        false
    }

    fn do_exit(&mut self, cpu: CpuId, task: TaskId) {
        if let Some(st) = self.tasks.get_mut(&task) {
            if st.exited {
                return;
            }
            st.exited = true;
            self.rec
                .out
                .tasks
                .entry(st.name.clone())
                .or_default()
                .exited_at = Some(self.now);
        }
        self.live -= 1;
        // Its parent hears of the exit (a `join_any` waits for that): as
        // Linux's exit does, after the thread has begun leaving, so the wake
        // names no waker.
        let parent = self.tasks.get(&task).and_then(|t| t.parent);
        if let Some(p) = parent.filter(|p| self.tasks.get(p).is_some_and(|t| !t.exited)) {
            self.sched[cpu.index()].begin_leaving();
            self.tasks.get_mut(&p).expect("checked").zombies.push(task);
            self.wake(cpu, p);
        }
        let fx = self.sched[cpu.index()].exit(&self.sh, self.now, self.idle_depth);
        self.hw[cpu.index()].current = None;
        self.apply(cpu, fx);
    }
}
