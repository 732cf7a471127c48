//! The program interpreter: a task's program counter, and one small
//! function per op. Programs arrive compiled ([`super::code`]); a task
//! steps through its code until it starts a segment of work, waits or
//! exits.
//!
//! **The syscall-first rule.** An op that enters the kernel to make a change
//! others see (a call, a reply, a pipe write, a futex wake, a spawn) first
//! charges its syscall cost as a segment of work, and only when that
//! segment ends does the change happen; `op_started` marks the op as past
//! that point. [`Engine::syscall_first`] is that rule, written once.

use std::collections::BTreeMap;
use std::rc::Rc;

use rand::RngCore;
use schedlab_sched::Balancer;
use schedlab_sched::{Policy, TaskId};
use schedlab_topology::{CpuId, Level};

use super::code::{Instr, MetricId};
use super::{Engine, Ev, SegKind};
use crate::objects::{
    Arrival, BarrierId, CondId, FutexId, LockId, PipeId, PipeStep, PortId, TimerId,
};
use crate::outcome::{LapLog, StallCause};

/// What a blocked task waits for, re-checked each time it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Waiting {
    No,
    /// Blocked on the op at `pc`.
    Op,
}

/// A simulated thread: its program counter and what its ops keep.
#[derive(Debug)]
pub(crate) struct SimTask {
    pub code: Rc<[Instr]>,
    pub pc: usize,
    pub loops: Vec<u64>,
    /// Work left of a `Run` or a charged cost, in solo ns.
    pub pending_work: u64,
    /// The op at `pc` started its syscall part already.
    pub op_started: bool,
    /// What the op at `pc` keeps between its steps: a barrier's
    /// generation, a `run_for`'s end, whether a `cond_wait` released its
    /// lock.
    pub op_mark: u64,
    /// When the last wake was posted to it (`wake_lap`).
    pub woken_at: Option<u64>,
    pub waiting: Waiting,
    pub last_cpu: Option<CpuId>,
    pub working_set: u64,
    /// Its process, by id (spawned threads join their parent's).
    pub process: u32,
    /// What it was created with, as an index into the engine's distinct
    /// specs (`Engine::specs`: tasks share a few, and a spec is 176
    /// bytes), its process left out (it is `process`).
    pub spec: u32,
    pub children: Vec<TaskId>,
    /// The task that spawned it, told of its exit (`join_any`).
    pub parent: Option<TaskId>,
    /// Children that exited and no `join_any` has reaped yet.
    pub zombies: Vec<TaskId>,
    /// A reply waiting for this client: (bytes, the CPU it was written on).
    pub reply: Option<(u64, CpuId)>,
    /// The request this server is serving: its client.
    pub serving: Option<TaskId>,
    /// Futex generations seen.
    pub futex_seen: BTreeMap<FutexId, u64>,
    pub io_done: bool,
    pub io_pending: bool,
    /// When each metric's lap last started.
    pub lap_at: Vec<(MetricId, u64)>,
    pub exited: bool,
    pub migrations: u64,
    pub cpu_ns: u64,
    pub llc_refill_bytes: u64,
    pub cold_starts: u64,
}

impl SimTask {
    pub fn new(code: Rc<[Instr]>, working_set: u64, spec: u32) -> SimTask {
        SimTask {
            code,
            pc: 0,
            loops: Vec::new(),
            pending_work: 0,
            op_started: false,
            op_mark: 0,
            woken_at: None,
            waiting: Waiting::No,
            last_cpu: None,
            working_set,
            process: 0,
            spec,
            children: Vec::new(),
            parent: None,
            zombies: Vec::new(),
            reply: None,
            serving: None,
            futex_seen: BTreeMap::new(),
            io_done: false,
            io_pending: false,
            lap_at: Vec::new(),
            exited: false,
            migrations: 0,
            cpu_ns: 0,
            llc_refill_bytes: 0,
            cold_starts: 0,
        }
    }

    /// Starts a lap of `m` now; the previous start, if any.
    fn lap(&mut self, m: MetricId, now: u64) -> Option<u64> {
        match self.lap_at.iter_mut().find(|(k, _)| *k == m) {
            Some((_, at)) => Some(std::mem::replace(at, now)),
            None => {
                self.lap_at.push((m, now));
                None
            }
        }
    }
}

/// Every simulated thread, by its task id (ids are dense slot numbers).
#[derive(Debug, Default)]
pub(crate) struct Tasks(Vec<Option<SimTask>>);

impl Tasks {
    /// Room for `n` tasks (the ones a run starts with), so the table is
    /// not grown by doubling past them.
    pub fn with_capacity(n: usize) -> Tasks {
        Tasks(Vec::with_capacity(n))
    }

    pub fn get(&self, id: &TaskId) -> Option<&SimTask> {
        self.0.get(id.index()).and_then(Option::as_ref)
    }

    pub fn get_mut(&mut self, id: &TaskId) -> Option<&mut SimTask> {
        self.0.get_mut(id.index()).and_then(Option::as_mut)
    }

    pub fn insert(&mut self, id: TaskId, t: SimTask) {
        if self.0.len() <= id.index() {
            self.0.resize_with(id.index() + 1, || None);
        }
        self.0[id.index()] = Some(t);
    }

    /// In id order.
    pub fn iter(&self) -> impl Iterator<Item = (TaskId, &SimTask)> {
        self.0
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.as_ref().map(|t| (TaskId(i as u32), t)))
    }
}

/// The most instructions a task may run without spending time.
const STEP_LIMIT: usize = 10_000;

impl<P: Policy, B: Balancer> Engine<P, B> {
    pub(super) fn task(&mut self, task: TaskId) -> &mut SimTask {
        self.tasks.get_mut(&task).expect("a known task")
    }

    /// Runs `task`'s program on `cpu` until it starts a segment, blocks or
    /// exits.
    pub(super) fn step(&mut self, cpu: CpuId, task: TaskId) {
        for _ in 0..STEP_LIMIT {
            if self.hw[cpu.index()].current != Some(task) {
                return;
            }
            if self.sh.is_killed(task) {
                return self.do_exit(cpu, task);
            }
            let st = self.task(task);
            if st.pending_work > 0 {
                let w = std::mem::take(&mut st.pending_work);
                return self.start_seg(cpu, SegKind::Task, task, w);
            }
            let Some(&instr) = st.code.get(st.pc) else {
                return self.do_exit(cpu, task);
            };
            match instr {
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
                op => {
                    if !self.op(cpu, task, op) {
                        return;
                    }
                }
            }
        }
        // The watchdog: a program that takes no time would hold the
        // simulated clock still for ever. The run stops with a report.
        let st = self.task(task);
        let op = st
            .code
            .get(st.pc)
            .map_or("the end".into(), |i| format!("{i:?}"));
        self.halt = Some(StallCause::Watchdog {
            task: self.name(task).to_string(),
            instructions: STEP_LIMIT,
            op,
        });
    }

    pub(super) fn next_op(&mut self, task: TaskId) {
        let st = self.task(task);
        st.pc += 1;
        st.op_started = false;
        st.waiting = Waiting::No;
    }

    /// Goes on to the next op: `true`, the program goes straight on.
    pub(super) fn done(&mut self, task: TaskId) -> bool {
        self.next_op(task);
        true
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

    /// The syscall-first rule: the first time through, charge `ns` and
    /// come back to the op (at once when `ns` is 0); `true` once past it.
    pub(super) fn syscall_first(
        &mut self,
        cpu: CpuId,
        task: TaskId,
        ns: u64,
        op: Instr,
    ) -> Option<bool> {
        let st = self.task(task);
        if st.op_started {
            return None;
        }
        st.op_started = true;
        Some(self.charge(cpu, task, ns) && self.op(cpu, task, op))
    }

    /// Waits: the block path, then the scheduler's `block`.
    pub(super) fn wait(&mut self, cpu: CpuId, task: TaskId) -> bool {
        self.task(task).waiting = Waiting::Op;
        self.start_seg(cpu, SegKind::BlockPath, task, self.cost.block_ns);
        false
    }

    fn level(&self, a: CpuId, b: CpuId) -> Level {
        self.sh.topology().level_between(a, b)
    }

    /// One op; `true` when the program goes straight on.
    fn op(&mut self, cpu: CpuId, task: TaskId, op: Instr) -> bool {
        match op {
            Instr::Run(ns) => self.op_run(cpu, task, ns),
            Instr::LapStart(_)
            | Instr::Lap(_)
            | Instr::Count { .. }
            | Instr::WakeLap(_)
            | Instr::Stamp(_) => self.op_metric(task, op),
            Instr::Call { port, bytes } => self.op_call(cpu, task, op, port, bytes),
            Instr::Serve(port) => self.op_serve(cpu, task, port),
            Instr::Reply { bytes } => self.op_reply(cpu, task, op, bytes),
            Instr::PipeWrite { pipe, bytes } => self.op_pipe_write(cpu, task, op, pipe, bytes),
            Instr::PipeRead { pipe, bytes } => self.op_pipe_read(cpu, task, pipe, bytes),
            Instr::FutexWait(f) => self.op_futex_wait(cpu, task, f),
            Instr::FutexWake { futex, n } => self.op_futex_wake(cpu, task, op, futex, n),
            Instr::CondWait { cond, lock } => self.op_cond_wait(cpu, task, cond, lock),
            Instr::CondSignal(c) => self.op_cond_wake(cpu, task, op, c, false),
            Instr::CondBroadcast(c) => self.op_cond_wake(cpu, task, op, c, true),
            Instr::Barrier { barrier, n } => self.op_barrier(cpu, task, op, barrier, n),
            Instr::Timer {
                timer,
                period,
                absolute,
                stamp,
            } => self.op_timer(cpu, task, timer, period, absolute, stamp),
            Instr::RunFor(ns) => self.op_run_for(cpu, task, ns),
            Instr::Lock(l) => self.op_lock(cpu, task, l),
            Instr::Unlock(l) => self.op_unlock(cpu, task, l),
            Instr::RandomSleep { .. } | Instr::ExpSleep { .. } => {
                self.op_random_sleep(cpu, task, op)
            }
            Instr::Leave => {
                self.sched[cpu.index()].begin_leaving();
                self.done(task)
            }
            Instr::Sleep(ns) => self.op_sleep(cpu, task, ns),
            Instr::Io(ns) => self.op_io(cpu, task, ns),
            Instr::Spawn(prog) => self.op_spawn(cpu, task, op, prog, false),
            Instr::Fork(prog) => self.op_spawn(cpu, task, op, prog, true),
            Instr::Join => self.op_join(cpu, task),
            Instr::JoinAny => self.op_join_any(cpu, task),
            Instr::Exit => {
                self.do_exit(cpu, task);
                false
            }
            Instr::Affinity(m) => self.op_affinity(cpu, task, m),
            Instr::Yield => {
                self.next_op(task);
                let fx = self.sched[cpu.index()].yield_now(&self.sh, self.now, self.idle_depth);
                self.apply_returning(cpu, task, &fx)
            }
            Instr::LoopStart { .. } | Instr::LoopEnd { .. } => unreachable!("stepped, not run"),
        }
    }

    /// The metric ops: a lap's start, a lap, a count, a wake's latency.
    fn op_metric(&mut self, task: TaskId, op: Instr) -> bool {
        let now = self.now;
        match op {
            Instr::LapStart(m) => {
                self.task(task).lap(m, now);
            }
            Instr::Lap(m) => {
                if let Some(prev) = self.task(task).lap(m, now) {
                    self.push_lap(m, now - prev);
                }
            }
            Instr::Count { metric, n } => {
                *self.counts[metric.0 as usize].get_or_insert(0) += n;
            }
            Instr::WakeLap(m) => {
                if let Some(at) = self.task(task).woken_at.take() {
                    self.push_lap(m, now - at);
                }
            }
            Instr::Stamp(m) => self.stamp(task, m, now),
            _ => unreachable!("not a metric op"),
        }
        self.done(task)
    }

    /// A sleep of a length drawn from the program stream: uniform in
    /// `min..=max`, or exponential of mean `mean`.
    fn op_random_sleep(&mut self, cpu: CpuId, task: TaskId, op: Instr) -> bool {
        if self.task(task).op_started {
            return self.done(task);
        }
        let ns = match op {
            Instr::RandomSleep { min, max } => {
                let span = max.saturating_sub(min) + 1;
                min + self.prog_rng.next_u64() % span
            }
            Instr::ExpSleep { mean } => {
                let u = ((self.prog_rng.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
                (-(u.ln()) * mean as f64) as u64 + 1
            }
            _ => unreachable!("not a random sleep"),
        };
        self.op_sleep(cpu, task, ns)
    }

    fn push_lap(&mut self, m: MetricId, ns: u64) {
        self.laps[m.0 as usize]
            .get_or_insert_with(LapLog::default)
            .push(ns);
    }

    /// rt-app's timer: sleep until its next expiry, or go on when that is
    /// past ([`crate::objects::Timer::next`]).
    fn op_timer(
        &mut self,
        cpu: CpuId,
        task: TaskId,
        t: TimerId,
        period: u64,
        absolute: bool,
        stamp: Option<MetricId>,
    ) -> bool {
        if self.task(task).op_started {
            return self.done(task);
        }
        let next = self.objects.timers[t.index()].next(self.now, period, absolute);
        if let Some(m) = stamp {
            let (Ok(at) | Err(at)) = next;
            self.stamp(task, m, at);
        }
        match next {
            Ok(at) => self.op_sleep_until(cpu, task, at),
            Err(_) => self.done(task),
        }
    }

    /// Records `ns` as a stamp of `m` in `task`'s sequence.
    fn stamp(&mut self, task: TaskId, m: MetricId, ns: u64) {
        self.stamps.entry(task.0).or_default().push((m, ns));
    }

    fn op_run(&mut self, cpu: CpuId, task: TaskId, ns: u64) -> bool {
        let st = self.task(task);
        if st.op_started {
            return self.done(task);
        }
        st.op_started = true;
        st.pending_work = 0;
        self.charge(cpu, task, ns)
    }

    fn op_call(&mut self, cpu: CpuId, task: TaskId, op: Instr, port: PortId, bytes: u64) -> bool {
        if !self.task(task).op_started {
            self.task(task).reply = None;
        }
        if let Some(r) = self.syscall_first(cpu, task, self.cost.syscall_ns, op) {
            return r;
        }
        let st = self.task(task);
        if st.waiting == Waiting::No && st.reply.is_none() {
            // The syscall is done: post the request, wake a server.
            if let Some(s) = self.objects.ports[port.index()].request(task, bytes, cpu) {
                self.wake_sync(cpu, s);
            }
            return self.wait(cpu, task);
        }
        match self.task(task).reply.take() {
            Some((b, from)) => {
                self.next_op(task);
                let ns = self.cost.handoff_ns(self.level(from, cpu), b);
                self.charge(cpu, task, ns)
            }
            None => self.wait(cpu, task),
        }
    }

    fn op_serve(&mut self, cpu: CpuId, task: TaskId, port: PortId) -> bool {
        match self.objects.ports[port.index()].serve(task) {
            Some((client, b, from)) => {
                self.task(task).serving = Some(client);
                self.next_op(task);
                let ns = self.cost.handoff_ns(self.level(from, cpu), b);
                self.charge(cpu, task, ns)
            }
            None => self.wait(cpu, task),
        }
    }

    fn op_reply(&mut self, cpu: CpuId, task: TaskId, op: Instr, bytes: u64) -> bool {
        if let Some(r) = self.syscall_first(cpu, task, self.cost.syscall_ns, op) {
            return r;
        }
        if let Some(client) = self.task(task).serving.take() {
            if let Some(c) = self.tasks.get_mut(&client) {
                c.reply = Some((bytes, cpu));
            }
            self.wake_sync(cpu, client);
        }
        self.done(task)
    }

    fn op_pipe_write(
        &mut self,
        cpu: CpuId,
        task: TaskId,
        op: Instr,
        p: PipeId,
        bytes: u64,
    ) -> bool {
        if !self.objects.pipes[p.index()].room(task, bytes, self.pipe_capacity) {
            return self.wait(cpu, task);
        }
        // Copying in: the syscall and the bytes at local speed.
        let w = self.cost.syscall_ns + self.cost.handoff_ns(Level::Same, bytes);
        if let Some(r) = self.syscall_first(cpu, task, w, op) {
            return r;
        }
        if let Some(r) = self.objects.pipes[p.index()].write(task, bytes, cpu) {
            self.wake_sync(cpu, r);
        }
        self.done(task)
    }

    fn op_pipe_read(&mut self, cpu: CpuId, task: TaskId, p: PipeId, bytes: u64) -> bool {
        let PipeStep::Done { wake, from } = self.objects.pipes[p.index()].read(task, bytes) else {
            return self.wait(cpu, task);
        };
        if let Some(w) = wake {
            self.wake_sync(cpu, w);
        }
        self.next_op(task);
        let l = self.level(from.unwrap_or(cpu), cpu);
        let ns = self.cost.syscall_ns + self.cost.handoff_ns(l, bytes);
        self.charge(cpu, task, ns)
    }

    fn op_futex_wait(&mut self, cpu: CpuId, task: TaskId, f: FutexId) -> bool {
        let seen = *self.task(task).futex_seen.entry(f).or_insert(0);
        match self.objects.futexes[f.index()].wait(task, seen) {
            Some(seq) => {
                self.task(task).futex_seen.insert(f, seq);
                self.done(task)
            }
            None => self.wait(cpu, task),
        }
    }

    fn op_futex_wake(&mut self, cpu: CpuId, task: TaskId, op: Instr, f: FutexId, n: u32) -> bool {
        if let Some(r) = self.syscall_first(cpu, task, self.cost.syscall_ns, op) {
            return r;
        }
        let seq = self.objects.futexes[f.index()].bump();
        self.task(task).futex_seen.insert(f, seq);
        for _ in 0..n {
            let Some(w) = self.objects.futexes[f.index()].next_waiter() else {
                break;
            };
            self.wake(cpu, w);
        }
        self.done(task)
    }

    fn op_sleep(&mut self, cpu: CpuId, task: TaskId, ns: u64) -> bool {
        self.op_sleep_until(cpu, task, self.now + ns)
    }

    fn op_sleep_until(&mut self, cpu: CpuId, task: TaskId, at: u64) -> bool {
        let st = self.task(task);
        if st.op_started {
            return self.done(task);
        }
        st.op_started = true;
        let c = &mut self.sched[cpu.index()];
        let fx = c.sleep_until(&self.sh, at, self.now, self.idle_depth);
        if self.apply_returning(cpu, task, &fx) {
            return self.done(task);
        }
        false
    }

    /// `pthread_cond_wait`: joining the waiters and releasing the lock
    /// are one step (no wake can fall between them); `op_mark` says the
    /// lock was released, so it is taken again after the wake.
    fn op_cond_wait(&mut self, cpu: CpuId, task: TaskId, c: CondId, lock: Option<LockId>) -> bool {
        if !self.task(task).op_started {
            self.objects.conds[c.index()].enter(task);
            let held = lock.filter(|l| self.objects.locks[l.index()].owner() == Some(task));
            let st = self.task(task);
            st.op_started = true;
            st.op_mark = held.is_some() as u64;
            if let Some(w) = held.and_then(|l| self.objects.locks[l.index()].release()) {
                self.wake(cpu, w);
            }
            return self.wait(cpu, task);
        }
        if self.objects.conds[c.index()].is_waiting(task) {
            return self.wait(cpu, task);
        }
        if let Some(l) = lock.filter(|_| self.task(task).op_mark == 1) {
            if !self.objects.locks[l.index()].acquire(task) {
                return self.wait(cpu, task);
            }
        }
        self.done(task)
    }

    fn op_cond_wake(&mut self, cpu: CpuId, task: TaskId, op: Instr, c: CondId, all: bool) -> bool {
        if let Some(r) = self.syscall_first(cpu, task, self.cost.syscall_ns, op) {
            return r;
        }
        let cond = &mut self.objects.conds[c.index()];
        let woken: Vec<TaskId> = if all {
            cond.broadcast()
        } else {
            cond.signal().into_iter().collect()
        };
        if woken.is_empty() {
            cond.lose(self.now, task);
        }
        for w in woken {
            self.wake(cpu, w);
        }
        self.done(task)
    }

    /// A barrier: the arrival is counted after its syscall; the last
    /// arrival wakes the others, who go on once the generation moved.
    fn op_barrier(&mut self, cpu: CpuId, task: TaskId, op: Instr, b: BarrierId, n: u32) -> bool {
        if let Some(r) = self.syscall_first(cpu, task, self.cost.syscall_ns, op) {
            return r;
        }
        if self.task(task).waiting == Waiting::No {
            return match self.objects.barriers[b.index()].arrive(task, n) {
                Arrival::Last(waiters) => {
                    for w in waiters {
                        self.wake(cpu, w);
                    }
                    self.done(task)
                }
                Arrival::Wait(generation) => {
                    self.task(task).op_mark = generation;
                    self.wait(cpu, task)
                }
            };
        }
        if self.objects.barriers[b.index()].generation() != self.task(task).op_mark {
            return self.done(task);
        }
        self.wait(cpu, task)
    }

    /// rt-app's `runtime`: work in pieces of 32 µs until `ns` of wall time
    /// has passed since the op began (rt-app's loop of `loadwait(32)`
    /// checking `CLOCK_MONOTONIC`).
    fn op_run_for(&mut self, cpu: CpuId, task: TaskId, ns: u64) -> bool {
        const PIECE_NS: u64 = 32_000;
        let now = self.now;
        let st = self.task(task);
        if !st.op_started {
            st.op_started = true;
            st.op_mark = now + ns;
        }
        if now >= st.op_mark {
            return self.done(task);
        }
        let left = st.op_mark - now;
        self.charge(cpu, task, left.min(PIECE_NS))
    }

    fn op_io(&mut self, cpu: CpuId, task: TaskId, ns: u64) -> bool {
        let st = self.task(task);
        if st.io_done {
            st.io_done = false;
            return self.done(task);
        }
        if !st.io_pending {
            st.io_pending = true;
            let at = self.now + self.cost.syscall_ns + ns;
            self.push(at, Ev::DiskDone { task });
        }
        self.wait(cpu, task)
    }
}
