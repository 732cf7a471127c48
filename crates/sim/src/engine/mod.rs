//! The engine: one thread, virtual nanoseconds, an ordered event queue, and
//! the scheduler's own entry points on every CPU.
//!
//! ## Time and order
//!
//! Events are ordered by `(time, tie, seq)` ([`queue`]): `tie` is drawn
//! from the run's seeded RNG (so sweeping seeds explores the orderings of
//! simultaneous events), or 0 in fixed-order mode; `seq` is insertion
//! order. Nothing reads a wall clock; all maps are ordered. Several
//! simulations may run in one process.
//!
//! ## One host loop
//!
//! [`Engine::run`] pops one event at a time and handles it to the end
//! before the next: a kick runs the CPU's pass, a segment's end steps its
//! task's program (or calls `block` after a block path), a tick calls
//! `tick`, a timer runs the pass, a disk completion wakes from an
//! interrupt, a `Step` goes on with a program.
//!
//! **The rule: carrying out effects never runs a program.** What the
//! scheduler returns ([`Effects`]) is applied by `apply`, which only
//! records and queues; a program step that follows a switch (or a park
//! that returned at once) is an event of its own, `Step`, at the same
//! time. So no chain of wakes deepens the stack, and every program step
//! is one event. A program may make several calls into the scheduler in
//! one step (a futex wake of N waiters is N wakes), each applied in turn.
//!
//! `apply` carries out one call's effects in this order:
//!
//! 1. its traces, into the hash and the logs ([`Recorder`]);
//! 2. its kicks, each a `Kick` event after the IPI or wake-from-idle
//!    latency (one pending kick per CPU);
//! 3. its timer, a `Timer` event at the deadline (plus timer lateness);
//! 4. its switch: the segment cut short is accounted; the next task's
//!    switch costs start as a segment, or a `Step` is queued now;
//! 5. its reschedule request, a `Kick` of this CPU now;
//! 6. the run-queue length, into the event log.
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

use std::collections::BTreeMap;

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use schedlab_sched::{Balancer, Builtin};
use schedlab_sched::{
    CpuSched, Effects, KickKind, Park, Policy, Shared, Switch, TaskId, TaskSpec, TaskState,
};
use schedlab_topology::CpuId;

use crate::cost::CostModel;
use crate::events::PrevState;
use crate::objects::Objects;
use crate::outcome::{LapLog, Recorder, StallCause};
pub use crate::outcome::{Outcome, TaskOutcome};
pub use crate::spec::{SimSpec, TaskDef};

pub mod code;
mod family;
mod interp;
mod machine;
mod mutex;
mod queue;
mod stall;
pub use stall::{describe_wait, WaitState};
mod warmth;

use code::{Code, MetricId};
use interp::Tasks;
use machine::{HwCpu, SegKind};
use queue::Queue;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// A kick arrives: the CPU runs its pass.
    Kick { cpu: CpuId },
    /// A segment of work ends.
    SegDone { cpu: CpuId, token: u64 },
    /// The CPU's tick (one on its way per CPU: `HwCpu::tick_armed`).
    Tick { cpu: CpuId },
    /// A scheduler deadline is due.
    Timer { cpu: CpuId },
    /// The program of what the CPU runs goes on (after a switch that cost
    /// nothing, or a park that returned at once), unless the CPU has moved
    /// on since (`token`).
    Step { cpu: CpuId, token: u64 },
    /// A disk request completes.
    DiskDone { task: TaskId },
}

/// An engine event for the trace hash: its kind, CPU and task in a word.
fn event_word(kind: u64, cpu: CpuId, task: u32) -> u64 {
    kind | (cpu.index() as u64) << 8 | (task as u64) << 24
}

/// Stream `n` of the run's seed: the RNG tree's branches (0 tie-breaks,
/// 1 programs, 2 the machine's jitter, 3 where tasks boot, 4 the seed of
/// the balancer's own draws, `Balance::seed`).
fn stream(seed: u64, n: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    r.set_stream(n);
    r
}

/// One simulation of a machine whose CPUs run the policy `P` and the
/// balancer `B` (by default the built-in one the config names).
pub struct Engine<P: Policy, B: Balancer = Builtin> {
    sh: Shared<P::TaskState>,
    sched: Vec<CpuSched<P, B>>,
    hw: Vec<HwCpu>,
    /// Each CPU's tick phase within a tick period.
    tick_phase: Vec<u64>,
    /// Each CPU's SMT siblings, itself excluded.
    siblings: Vec<Vec<CpuId>>,
    /// Per SMT core, the task that last ran on it.
    core_last: Vec<Option<TaskId>>,
    tasks: Tasks,
    names: BTreeMap<String, usize>,
    objects: Objects,
    /// The spawnable programs, compiled, and the metric names.
    code: Code,
    /// Laps and counts by metric id (`None`: none recorded).
    laps: Vec<Option<LapLog>>,
    counts: Vec<Option<u64>>,
    /// Stamps by task id, in program order ([`crate::Op::Stamp`]).
    stamps: BTreeMap<u32, Vec<(MetricId, u64)>>,
    /// Pending events, earliest first.
    queue: Queue,
    /// Programs' own randomness (`RandomSleep`): a second stream of the
    /// same seed, so a program's draws do not shift the tie-breaks.
    prog_rng: ChaCha8Rng,
    /// The machine's jitter: a third stream.
    hw_rng: ChaCha8Rng,
    now: u64,
    cost: CostModel,
    idle_depth: u8,
    run_ns: u64,
    disk_irq_cpu: CpuId,
    pipe_capacity: u64,
    check: bool,
    rec: Recorder,
    live: usize,
    /// Set when the run cannot go on (the watchdog, a full task table).
    halt: Option<StallCause>,
    max_tasks: usize,
    warmth: warmth::Warmth,
    /// The distinct specs tasks were created with ([`SimTask::spec`]),
    /// and each one's index there (a lookup in a map, not a scan: a run
    /// may start thousands of tasks).
    specs: Vec<TaskSpec>,
    spec_ids: BTreeMap<TaskSpec, u32>,
    /// Each process's shared bytes, by process id, and the ids by name
    /// (while the scenario's tasks start; empty after).
    procs: Vec<u64>,
    proc_ids: BTreeMap<String, u32>,
    /// Each process's name, by id.
    proc_names: Vec<String>,
    shared_of: BTreeMap<String, u64>,
}

impl<P: Policy> Engine<P> {
    /// Builds a simulation running `policy` and the built-in balancer the
    /// config names; its RNG tree is rooted at `seed`. (`Sim::new` runs the
    /// policy `spec` names.)
    pub fn new(spec: &SimSpec, seed: u64, policy: P) -> Engine<P> {
        Engine::with_balancer(spec, seed, policy)
    }
}

impl<P: Policy, B: Balancer> Engine<P, B> {
    /// Builds a simulation running `policy` and the balancer `B`.
    pub fn with_balancer(spec: &SimSpec, seed: u64, policy: P) -> Engine<P, B> {
        let n = spec.topology.num_cpus();
        let max_tasks = spec.tasks.len() + spec.max_tasks;
        let mut config = spec.config;
        config.balance.seed = stream(seed, 4).next_u64();
        let sh = Shared::new(spec.topology.clone(), config, max_tasks);
        let sched = CpuSched::for_machine(&sh, policy);
        let hw = (0..n).map(|_| HwCpu::default()).collect();
        let mut objects = Objects::default();
        let code = Code::new(&spec.programs, &mut objects);
        let mut sim = Engine {
            sh,
            sched,
            hw,
            core_last: vec![None; spec.topology.cores().len()],
            tick_phase: vec![0; n],
            siblings: machine::siblings(&spec.topology),
            tasks: Tasks::with_capacity(spec.tasks.len()),
            names: BTreeMap::new(),
            objects,
            code,
            laps: Vec::new(),
            counts: Vec::new(),
            stamps: BTreeMap::new(),
            queue: Queue::new((!spec.fixed_order).then(|| ChaCha8Rng::seed_from_u64(seed))),
            prog_rng: stream(seed, 1),
            hw_rng: stream(seed, 2),
            now: 0,
            cost: spec.cost,
            idle_depth: spec.idle_depth,
            run_ns: spec.run_ns,
            disk_irq_cpu: spec.disk_irq_cpu,
            pipe_capacity: spec.pipe_capacity,
            check: spec.check_invariants,
            rec: Recorder::new(
                seed,
                &spec.topology,
                spec.keep_log,
                spec.keep_events,
                spec.count_wakers,
            ),
            live: 0,
            halt: None,
            max_tasks: spec.max_tasks,
            warmth: warmth::Warmth::new(&spec.topology),
            specs: Vec::new(),
            spec_ids: BTreeMap::new(),
            procs: Vec::new(),
            proc_ids: BTreeMap::new(),
            proc_names: Vec::new(),
            shared_of: spec.processes.clone(),
        };
        sim.rec.fold_fair(&spec.config.fair);
        sim.boot(spec, seed);
        sim
    }

    /// The machine at t = 0: tick phases, every CPU's first pass, the
    /// scenario's tasks started; then the tables sized to every metric.
    fn boot(&mut self, spec: &SimSpec, seed: u64) {
        let n = spec.topology.num_cpus();
        if self.cost.tick_skew {
            let tick = self.sh.config().fair.tick_ns.max(1);
            for p in self.tick_phase.iter_mut() {
                *p = self.hw_rng.next_u64() % tick;
            }
        }
        // Every CPU starts idle: one pass each.
        for c in 0..n {
            let fx = self.sched[c].pass(&self.sh, 0, self.idle_depth);
            self.apply(CpuId::new(c), &fx);
        }
        // Where `start_in` tasks begin: a fourth stream of the seed.
        let mut boot = stream(seed, 3);
        for def in &spec.tasks {
            let mut cpu = def.start_cpu;
            if let Some(set) = def.start_in.as_deref() {
                let n = set.weight();
                if n > 0 {
                    let k = (boot.next_u64() % n as u64) as usize;
                    cpu = set.iter().nth(k).expect("k < the set's size");
                }
            }
            self.start_task(def, cpu);
        }
        // Processes are found by name only at boot (a spawned thread
        // inherits its parent's id): the names go.
        self.proc_ids = BTreeMap::new();
        // Every program is compiled: every metric is known.
        let m = self.code.metrics.len();
        self.laps.resize_with(m, || None);
        self.counts.resize(m, None);
    }

    /// A task's name (kept once, in the outcome's table of names).
    fn name(&self, task: TaskId) -> &str {
        self.rec
            .out
            .task_names
            .get(&task.0)
            .map_or("?", String::as_str)
    }

    /// Queues `ev` at `at` ([`Queue::push`]).
    fn push(&mut self, at: u64, ev: Ev) {
        self.queue.push(at, ev);
    }

    fn record(&mut self, text: impl FnOnce() -> String, word: u64) {
        self.rec.record(self.now, text, &[word]);
    }

    /// Runs to the end; returns what it measured.
    pub fn run(mut self) -> Outcome {
        let mut drained = true;
        while let Some(q) = self.queue.pop() {
            let (at, ev) = (q.at(), q.ev);
            if at > self.run_ns || self.live == 0 || self.halt.is_some() {
                drained = false;
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
        // Nothing left to happen, and tasks have not exited: they never
        // will.
        if drained && self.live > 0 && self.halt.is_none() {
            self.halt = Some(StallCause::Blocked { at_ns: self.now });
        }
        // The laps are joined once the engine's tables are gone, so the
        // join's copy does not add to the run's peak.
        let (mut out, laps) = self.finish();
        for (name, log) in laps {
            out.laps.insert(name, log.into_vec());
        }
        out
    }

    /// The outcome, with each metric's laps still in their log.
    fn finish(mut self) -> (Outcome, Vec<(String, LapLog)>) {
        let end = self.now.min(self.run_ns);
        let stall = self.halt.take().map(|c| self.stall_report(c));
        self.close_accounts(end);
        let mut c = schedlab_sched::Counters::default();
        for s in &self.sched {
            c.add(s.counters());
            self.rec.out.cpu_counters.push(*s.counters());
        }
        for (name, v) in c.named() {
            self.rec.out.counters.insert(name.to_string(), v);
        }
        for (id, t) in self.tasks.iter() {
            let moved_at = self.rec.take_moves(id);
            let name = self.rec.out.task_names[&id.0].clone();
            let process = self.proc_names[t.process as usize].clone();
            let o = self.rec.out.tasks.entry(name).or_default();
            o.moved_at = moved_at;
            o.process = process;
            o.migrations = t.migrations;
            o.cpu_ns = t.cpu_ns;
            o.llc_refill_bytes = t.llc_refill_bytes;
            o.cold_starts = t.cold_starts;
            if let Some(st) = self.stamps.remove(&id.0) {
                o.stamps = st
                    .into_iter()
                    .map(|(m, ns)| (self.code.metrics[m.0 as usize].clone(), ns))
                    .collect();
            }
            // The CPU that holds it (its owner, asked first; an exited
            // task is held nowhere), else where it last ran.
            let word = self.sh.task_word(id);
            let holds = |s: &CpuSched<P, B>| s.task(&self.sh, id).is_some();
            o.final_cpu = if word.state == TaskState::Dead {
                None
            } else if holds(&self.sched[word.owner.index()]) {
                Some(word.owner)
            } else {
                self.sched.iter().find(|s| holds(s)).map(|s| s.id())
            }
            .or(t.last_cpu);
        }
        self.rec.out.busy_ns = self.hw.iter().map(|h| h.busy_ns).collect();
        self.rec.out.idle_ns = self.hw.iter().map(|h| h.idle_ns).collect();
        self.rec.out.llcs = self.warmth.outcome();
        for (i, name) in self.code.metrics.iter().enumerate() {
            if let Some(c) = self.counts[i] {
                self.rec.out.counts.insert(name.clone(), c);
            }
        }
        let laps = self
            .code
            .metrics
            .iter()
            .cloned()
            .zip(std::mem::take(&mut self.laps))
            .filter_map(|(name, log)| Some((name, log?)))
            .collect();
        let mut out = self.rec.finish(end);
        out.stall = stall;
        (out, laps)
    }

    fn event(&mut self, ev: Ev) {
        match ev {
            Ev::Kick { cpu } => {
                self.record(|| format!("kick {cpu:?}"), event_word(1, cpu, 0));
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
                    event_word(2, cpu, seg.task.0),
                );
                self.account(cpu, &seg, seg.end);
                match seg.kind {
                    SegKind::Task | SegKind::Switch => self.step(cpu, seg.task),
                    SegKind::BlockPath => self.do_block(cpu, seg.task),
                }
            }
            Ev::Step { cpu, token } => {
                let h = &self.hw[cpu.index()];
                let Some(task) = h.current.filter(|_| h.token == token && h.seg.is_none()) else {
                    return;
                };
                self.record(
                    || format!("step {cpu:?} {task:?}"),
                    event_word(6, cpu, task.0),
                );
                self.step(cpu, task);
            }
            Ev::Tick { cpu } => {
                let h = &mut self.hw[cpu.index()];
                h.tick_armed = false;
                let idle = h.current.is_none();
                if idle && !self.sched[cpu.index()].keeps_idle_tick(&self.sh) {
                    // Idle with its tick stopped (the next switch to a task
                    // arms one); Linux's balancer keeps the tick through
                    // short idles.
                    return;
                }
                self.record(|| format!("tick {cpu:?}"), event_word(3, cpu, 0));
                let fx = self.sched[cpu.index()].tick(&self.sh, self.now);
                self.apply(cpu, &fx);
                self.arm_tick(cpu);
            }
            Ev::Timer { cpu } => {
                let due = self.hw[cpu.index()].timer.is_some_and(|t| t <= self.now);
                if due {
                    self.record(|| format!("timer {cpu:?}"), event_word(4, cpu, 0));
                    self.hw[cpu.index()].timer = None;
                    self.pass(cpu, false);
                }
            }
            Ev::DiskDone { task } => {
                let cpu = self.disk_irq_cpu;
                self.record(
                    || format!("disk {task:?} on {cpu:?}"),
                    event_word(5, cpu, task.0),
                );
                if let Some(t) = self.tasks.get_mut(&task) {
                    t.io_done = true;
                    t.io_pending = false;
                }
                self.extend_current(cpu, self.cost.irq_ns);
                let s = &mut self.sched[cpu.index()];
                s.irq_enter();
                let fx = s.wake(&self.sh, task, self.now);
                s.irq_exit();
                self.apply(cpu, &fx);
            }
        }
    }

    /// The scheduler pass on `cpu`.
    fn pass(&mut self, cpu: CpuId, charged: bool) {
        if charged {
            self.extend_current(cpu, self.cost.pass_ns);
        }
        let fx = self.sched[cpu.index()].pass(&self.sh, self.now, self.idle_depth);
        self.apply(cpu, &fx);
    }

    /// Carries out a scheduler decision for `cpu`.
    fn apply(&mut self, cpu: CpuId, fx: &Effects) {
        for t in &fx.trace {
            let sh = &self.sh;
            self.rec
                .trace(self.now, cpu, t, |task| sh.task_word(task).owner);
        }
        for k in &fx.kicks {
            self.rec.kick(self.now, cpu, k);
            let lat = match k.kind {
                KickKind::Ipi => self.cost.ipi_ns,
                KickKind::WakeFromIdle { depth } => self.cost.wake_from_idle(depth),
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
                    self.hw[c].idle_switch_until = self.now + self.cost.context_switch_ns;
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
                let cost = self.switch_cost(cpu, t);
                if cost > 0 {
                    self.start_seg(cpu, SegKind::Switch, t, cost);
                } else {
                    self.step_later(cpu);
                }
            }
        }
    }

    fn do_block(&mut self, cpu: CpuId, task: TaskId) {
        let fx = self.sched[cpu.index()].block(&self.sh, self.now, self.idle_depth);
        if self.apply_returning(cpu, task, &fx) {
            // The park returned at once: re-check the op.
            self.hw[cpu.index()].current = Some(task);
            self.step_later(cpu);
        }
    }

    /// The program of what `cpu` runs goes on, as an event of its own now:
    /// carrying out effects never runs a program.
    fn step_later(&mut self, cpu: CpuId) {
        let token = self.hw[cpu.index()].token;
        self.push(self.now, Ev::Step { cpu, token });
    }

    /// Carries out a decision of `task`'s own call that may park it
    /// (block, sleep, join: the scheduler says which, [`Park`]) or give up
    /// its CPU (yield: it runs on when the pass picked it again); `true`
    /// when the task runs on.
    fn apply_returning(&mut self, cpu: CpuId, task: TaskId, fx: &Effects) -> bool {
        let runs_on = match fx.park {
            Park::Returned => true,
            Park::Parked => false,
            Park::NotAsked => fx.switch == Some(Switch::Run(task)),
        };
        self.apply(cpu, fx);
        runs_on
    }

    fn wake(&mut self, cpu: CpuId, target: TaskId) {
        self.posted(target);
        let fx = self.sched[cpu.index()].wake(&self.sh, target, self.now);
        self.apply(cpu, &fx);
    }

    /// A program posted a wake to `target` now (`wake_lap` measures from
    /// here).
    fn posted(&mut self, target: TaskId) {
        if let Some(t) = self.tasks.get_mut(&target) {
            t.woken_at = Some(self.now);
        }
    }

    /// A wake from a thread that blocks right after: a request or reply on
    /// a port (a socket's `sock_def_readable()`), a pipe read or write
    /// (`pipe_write()`/`pipe_read()`): Linux wakes these with
    /// `wake_up_interruptible_sync_poll()`, `WF_SYNC`.
    fn wake_sync(&mut self, cpu: CpuId, target: TaskId) {
        self.posted(target);
        let fx = self.sched[cpu.index()].wake_sync(&self.sh, target, self.now);
        self.apply(cpu, &fx);
    }
}
