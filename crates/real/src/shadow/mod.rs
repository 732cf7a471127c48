//! The kernel's own schedule, decided again by the model's fair class.
//!
//! A replay ([`crate::replay`]) asks whether the model schedules a program
//! as the kernel did. This asks the question under it: from the state the
//! kernel was in, does the model's EEVDF make the kernel's decision? Each
//! CPU's fair queue is rebuilt from the kernel's record in the scheduler's
//! own queue ([`FairQueue`], the one the simulator's run queues hold: no
//! rule is written twice), and the model's rules fill in what the record
//! does not say:
//!
//! * `sched_wakeup` / `sched_wakeup_new` on CPU c: the woken thread is
//!   placed by its lag (`place_entity()`; a new one with half a slice) or,
//!   delayed there, put back where it waited (`requeue_delayed_entity()`);
//!   then c's running entity is charged and the wake-up check runs
//!   (`check_preempt_wakeup_fair()`: the next buddy, the protection);
//! * `sched_switch` on c: the previous entity is charged for the time it
//!   ran; it stays queued when it was preempted, and when it blocked it
//!   leaves with its lag or, not eligible under `DELAY_DEQUEUE`, stays
//!   delayed; the pick runs (finishing any delayed entity it lands on);
//!   the kernel's next thread is then the running one, protected afresh;
//! * `sched_migrate_task` of a queued entity: it leaves with its lag and
//!   its deadline kept relative (`PLACE_REL_DEADLINE`) and is placed on
//!   the destination; a delayed one is finished first.
//!
//! Held beside the kernel:
//!
//! * **picks**: at each `sched_switch` where the queue holds only the
//!   recording's threads, the model's pick from the rebuilt state against
//!   the thread the kernel ran. The same thread, or *a tie*: both
//!   eligible, deadlines within [`TIE_NS`] (the record's timestamps are
//!   not the kernel's task clock, which leaves out interrupt time and the
//!   tracing's own, so closer than that the order is not known);
//! * **wake-up preemption**: at each wake a thread posts on the CPU it
//!   enqueues to, while one of the recording's threads runs there, the
//!   model's decision against the kernel's: the need-resched flag of the
//!   `sched_wakeup` event, counted only when the `sched_waking` before it
//!   did not already carry it.
//!
//! The running entity is charged at each scheduler tick too (the kernel's
//! `TICK_NSEC`), and with `HRTICK` when its slice ends, since a reached
//! deadline is renewed from the `v` of the `update_curr()` that finds it.
//!
//! [`Report::of`] does this for the model's default feature set (what
//! `linux` runs) and for candidate sets: each release's defaults, one
//! feature flipped from the default at a time, at each common `CONFIG_HZ`.
//! The candidate that agrees with most of the kernel's decisions is its
//! **fit**: which fair class the recorded kernel runs, read from its
//! trace (debugfs, where `sched/features` lives, is often not mountable).
//!
//! Simplified: one level of queue per CPU (Linux nests a process group's
//! entities under its group's, which changes nothing among the recording's
//! threads when, as here, they share one group), weights from each event's
//! `prio`, RT tasks and threads outside the recording left out of the
//! queues; no wake is taken as sync (`WF_SYNC`: the record does not say
//! which call posted it), so `NEXT_BUDDY`'s `preempt_sync()` is never
//! asked. A recording filters its events to its own threads, so a
//! migration another context makes (a balancer pulling a thread from an
//! idle CPU) can be missing: the thread is moved when it next runs.

use std::collections::BTreeMap;

use schedlab_sim::sched::fair::{
    self, queue, Choice, Entity, FairConfig, FairQueue, Features, Queued, WakeFlags,
};
use schedlab_sim::PrevState;
use serde::Serialize;

pub mod balance;
mod events;
pub mod place;
mod report;
#[cfg(test)]
mod tests;

pub use events::{events, events_of_sim};
pub use place::on_queue_at_wakes;
pub use report::{candidate_sets, Report};

/// Deadlines closer than this are a tie (see the module doc).
pub const TIE_NS: i64 = 20_000;

/// The `CONFIG_HZ` values a kernel is commonly built with.
pub const HZ_CANDIDATES: [u64; 4] = [100, 250, 300, 1000];

/// One event of the schedule, from the kernel's record or a simulated run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ev {
    /// `task` is enqueued on `target`, by a wake posted on `cpu`. `kernel_resched`:
    /// the kernel asked the running task to reschedule at this wake (`None`:
    /// not known, or already asked: `resched_before`). `by_task`: posted by
    /// a thread, not an interrupt.
    Wakeup {
        at: u64,
        cpu: usize,
        task: i32,
        prio: i32,
        target: usize,
        new: bool,
        by_task: bool,
        kernel_resched: Option<bool>,
        /// The `sched_waking` before it carried the need-resched flag.
        resched_before: bool,
    },
    /// `cpu` stops running `prev` (0: idle) and runs `next` (0: idle).
    Switch {
        at: u64,
        cpu: usize,
        prev: i32,
        prev_prio: i32,
        prev_state: PrevState,
        next: i32,
        next_prio: i32,
    },
    /// `task` is woken by a wake posted on `cpu` by thread `waker` (0: an
    /// interrupt), its last CPU `prev` (`sched_waking`, before the kernel
    /// chose where it goes).
    Waking {
        at: u64,
        cpu: usize,
        task: i32,
        waker: i32,
        prev: usize,
    },
    /// A queued `task` moves from CPU `from` to `to`.
    Migrate {
        at: u64,
        task: i32,
        from: usize,
        to: usize,
    },
}

/// How the model's decisions compare with the kernel's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Agreement {
    /// Picks compared, and of them the same thread or a tie.
    pub picks: u64,
    pub picks_same: u64,
    pub picks_tie: u64,
    /// Wakes compared: both preempted, only the kernel, only the model.
    pub wakes: u64,
    pub wakes_both: u64,
    pub wakes_kernel_only: u64,
    pub wakes_model_only: u64,
}

impl Agreement {
    /// The share of compared picks that agree (same or tie).
    pub fn pick_share(&self) -> f64 {
        (self.picks_same + self.picks_tie) as f64 / self.picks.max(1) as f64
    }

    /// The share of compared wakes decided alike.
    pub fn wake_share(&self) -> f64 {
        self.wakes_alike() as f64 / self.wakes.max(1) as f64
    }

    fn wakes_alike(&self) -> u64 {
        self.wakes - self.wakes_kernel_only - self.wakes_model_only
    }

    /// Decisions made alike, picks and wakes together: what a fit ranks.
    pub fn alike(&self) -> u64 {
        self.picks_same + self.picks_tie + self.wakes_alike()
    }
}

/// One fair class held to the recording: its feature set, its tick, and
/// how it agrees.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Row {
    /// The release and the features off its defaults (`6.19`,
    /// `6.19+NEXT_BUDDY`).
    pub set: String,
    pub hz: u64,
    #[serde(flatten)]
    pub agreement: Agreement,
}

/// One thread's entity in a queue.
#[derive(Clone, Copy, Debug)]
struct Th {
    tid: i32,
    e: Entity,
}

impl Queued for Th {
    fn key(&self) -> u32 {
        self.tid as u32
    }
    fn entity(&self) -> &Entity {
        &self.e
    }
    fn entity_mut(&mut self) -> &mut Entity {
        &mut self.e
    }
}

/// One CPU: its fair queue, the recording's thread running there (when
/// one is), and whether it runs anything at all.
#[derive(Clone, Debug, Default)]
struct Cpu {
    q: FairQueue<Th>,
    curr: Option<Th>,
    /// The kernel's running thread (0: idle; maybe not one of ours).
    running: i32,
}

/// Where one of the recording's threads is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum At {
    Running(usize),
    Queued(usize),
    Delayed(usize),
    Blocked,
}

struct Shadow<'a> {
    cfg: FairConfig,
    ours: &'a dyn Fn(i32) -> bool,
    /// Threads off every queue, with their lag.
    blocked: BTreeMap<i32, Entity>,
    cpus: Vec<Cpu>,
    out: Agreement,
}

/// The model's decisions beside the kernel's over `evs` (in time order),
/// with the fair class `cfg`.
pub fn compare(evs: &[Ev], ours: &dyn Fn(i32) -> bool, cfg: FairConfig) -> Agreement {
    let mut s = Shadow::new(cfg, ours);
    for ev in evs {
        s.step(ev);
    }
    s.out
}

/// A nice level from a kernel `prio` (120 is nice 0; below 100 is RT).
fn nice_of(prio: i32) -> Option<i8> {
    (100..140).contains(&prio).then(|| (prio - 120) as i8)
}

impl<'a> Shadow<'a> {
    fn new(cfg: FairConfig, ours: &'a dyn Fn(i32) -> bool) -> Shadow<'a> {
        Shadow {
            cfg,
            ours,
            blocked: BTreeMap::new(),
            cpus: Vec::new(),
            out: Agreement::default(),
        }
    }

    /// One event of the schedule.
    fn step(&mut self, ev: &Ev) {
        match *ev {
            Ev::Wakeup { .. } => self.wakeup(ev),
            Ev::Switch { .. } => self.switch(ev),
            Ev::Migrate { at, task, from, to } => self.migrate(at, task, from, to),
            Ev::Waking { .. } => {}
        }
    }

    fn cpu(&mut self, cpu: usize) -> &mut Cpu {
        if self.cpus.len() <= cpu {
            self.cpus.resize_with(cpu + 1, Cpu::default);
        }
        &mut self.cpus[cpu]
    }

    /// Whether `tid` is one of the recording's fair threads.
    fn fair(&self, tid: i32, prio: i32) -> bool {
        tid != 0 && (self.ours)(tid) && nice_of(prio).is_some()
    }

    /// Where `tid` is.
    fn at(&self, tid: i32) -> At {
        for (i, c) in self.cpus.iter().enumerate() {
            if c.curr.is_some_and(|t| t.tid == tid) {
                return At::Running(i);
            }
            if c.q.queued.iter().any(|t| t.tid == tid) {
                return At::Queued(i);
            }
            if c.q.delayed.iter().any(|t| t.tid == tid) {
                return At::Delayed(i);
            }
        }
        At::Blocked
    }

    /// `tid`, taken off whatever queue holds it, as a blocked thread would
    /// be (a record that lost events: it starts over where it is seen).
    fn take(&mut self, tid: i32, prio: i32) -> Th {
        let cfg = self.cfg;
        let mut th = match self.at(tid) {
            At::Running(c) => self.cpus[c].curr.take().expect("running"),
            At::Queued(c) => {
                let cpu = &mut self.cpus[c];
                let curr = cpu.curr.as_ref().map(|t| &t.e);
                cpu.q.dequeue(tid as u32, curr, &cfg, true).expect("queued")
            }
            At::Delayed(c) => {
                let cpu = &mut self.cpus[c];
                let i = cpu.q.delayed_at(tid as u32).expect("delayed");
                let curr = cpu.curr.as_ref().map(|t| &t.e);
                cpu.q.finish_delayed(i, curr, &cfg)
            }
            At::Blocked => Th {
                tid,
                e: self
                    .blocked
                    .remove(&tid)
                    .unwrap_or_else(|| Entity::new(0, cfg.base_slice_ns)),
            },
        };
        let nice = nice_of(prio).unwrap_or(0);
        th.e.weight = fair::weight_of(nice);
        th
    }

    /// Charges `cpu`'s running entity up to `at` (`update_curr()`), at each
    /// tick on the way and, with `HRTICK`, when its slice ends: a deadline
    /// reached is renewed from the `v` of the call that finds it, so where
    /// the calls fall matters.
    /// Whether the last call, at `at`, asks for a reschedule (off the
    /// tick: [`queue::update_curr_off_tick`]).
    fn charge(&mut self, cpu: usize, at: u64) -> bool {
        self.charge_ticks(cpu, at);
        let cfg = self.cfg;
        let c = self.cpu(cpu);
        let others = c.q.others();
        c.curr
            .as_mut()
            .is_some_and(|t| queue::update_curr_off_tick(&mut t.e, at, others, &cfg))
    }

    /// The charges the kernel made before `at`: at each tick (and slice
    /// end, with `HRTICK`) strictly before it. What a wake that charges
    /// nothing first reads (`requeue_delayed_entity()`).
    fn charge_ticks(&mut self, cpu: usize, at: u64) {
        let tick = self.cfg.tick_ns.max(1);
        let hrtick = self.cfg.has(Features::HRTICK);
        let Some(c) = self.cpu(cpu).curr.as_mut() else {
            return;
        };
        let e = &mut c.e;
        let mut t = (e.exec_start / tick + 1) * tick;
        let mut slice_end = hrtick.then(|| {
            let ran = e.sum_exec - e.prev_sum_exec;
            e.exec_start + e.slice.saturating_sub(ran)
        });
        while t < at {
            if let Some(s) = slice_end.filter(|&s| s < t) {
                e.update_curr(s);
                slice_end = None;
            }
            e.update_curr(t);
            t += tick;
        }
        if let Some(s) = slice_end.filter(|&s| s < at) {
            e.update_curr(s);
        }
    }

    fn wakeup(&mut self, ev: &Ev) {
        let Ev::Wakeup {
            at,
            cpu,
            task,
            prio,
            target,
            new,
            by_task,
            kernel_resched,
            resched_before,
        } = *ev
        else {
            return;
        };
        if !self.fair(task, prio) {
            self.charge(target, at);
            return;
        }
        let cfg = self.cfg;
        let Some((q, asks)) = self.enqueue_woken(task, prio, target, new, at) else {
            return;
        };
        let t = self.cpu(target);
        let Some(curr) = t.curr.as_mut() else {
            return;
        };
        let w = WakeFlags {
            fork: new,
            in_task: by_task && cpu == target,
            selected: true,
            resched_set: resched_before,
            ..WakeFlags::default()
        };
        let w = WakeFlags {
            resched_set: w.resched_set || asks,
            ..w
        };
        let model = t.q.wakeup_preempt(q, &mut curr.e, &cfg, at, w) || asks;
        let compared = by_task && cpu == target && !new;
        let (Some(kernel), true) = (kernel_resched, compared) else {
            return;
        };
        let o = &mut self.out;
        o.wakes += 1;
        match (kernel, model) {
            (true, true) => o.wakes_both += 1,
            (true, false) => o.wakes_kernel_only += 1,
            (false, true) => o.wakes_model_only += 1,
            (false, false) => {}
        }
    }

    /// Puts woken `task` on `target`'s queue (placed, or put back where it
    /// waited delayed) and charges the running entity: the queue index the
    /// wake-up check is for and whether charging asked for a reschedule;
    /// `None` when no check runs.
    fn enqueue_woken(
        &mut self,
        task: i32,
        prio: i32,
        target: usize,
        new: bool,
        at: u64,
    ) -> Option<(usize, bool)> {
        let cfg = self.cfg;
        match self.at(task) {
            At::Delayed(c) if c == target => {
                // Delayed there (`ttwu_runnable()`): back among the
                // runnable where it waited, against the running entity as
                // last charged; the wake-up check then charges it.
                self.charge_ticks(target, at);
                let t = self.cpu(target);
                let i = t.q.delayed_at(task as u32).expect("delayed");
                let curr = t.curr.as_ref().map(|c| &c.e);
                let q = t.q.requeue_delayed(i, curr, &cfg);
                Some((q, self.charge(target, at)))
            }
            // Preempted there (`ttwu_runnable()`): the check runs too.
            At::Queued(c) if c == target => {
                let asks = self.charge(target, at);
                let q = self.cpus[c].q.queued.iter().position(|t| t.tid == task);
                q.map(|q| (q, asks))
            }
            // Running there: no check (`task_on_cpu()`).
            At::Running(c) if c == target => None,
            _ => {
                let mut th = self.take(task, prio);
                let asks = self.charge(target, at);
                th.e.rel_deadline = false;
                let t = self.cpu(target);
                let curr = t.curr.as_ref().map(|c| &c.e);
                t.q.enqueue(th, curr, &cfg, new);
                Some((t.q.queued.len() - 1, asks))
            }
        }
    }

    fn switch(&mut self, ev: &Ev) {
        let Ev::Switch {
            at,
            cpu,
            prev,
            prev_prio,
            prev_state,
            next,
            next_prio,
        } = *ev
        else {
            return;
        };
        let cfg = self.cfg;
        self.charge(cpu, at);
        if self.fair(prev, prev_prio) {
            self.seat(prev, prev_prio, cpu, at);
            let c = self.cpu(cpu);
            let th = c.curr.take().expect("seated");
            match prev_state {
                // Preempted: it competes in the pick as the running one.
                PrevState::Runnable => c.curr = Some(th),
                PrevState::Blocked => {
                    if let Some(left) = c.q.block(th, &cfg) {
                        self.blocked.insert(left.tid, left.e);
                    }
                }
                PrevState::Exited => {
                    let mut th = th;
                    c.q.leave(&mut th, &cfg, false);
                }
            }
        } else {
            // Not one of ours: whatever it was, ours are not running.
            if let Some(th) = self.cpu(cpu).curr.take() {
                self.cpu(cpu).q.queued.push(th);
            }
        }
        let compared = self.cpus[cpu].q.others() || self.cpus[cpu].curr.is_some();
        let model = self.pick(cpu);
        if compared && (next == 0 || self.fair(next, next_prio)) {
            self.judge(cpu, model, next);
        }
        // The kernel's next runs; the model's running one (if not it)
        // goes back to the queue.
        let c = self.cpu(cpu);
        if let Some(th) = c.curr.take() {
            c.q.queued.push(th);
        }
        c.running = next;
        if !self.fair(next, next_prio) {
            return;
        }
        self.seat(next, next_prio, cpu, at);
        let c = self.cpu(cpu);
        let th = c.curr.as_mut().expect("seated");
        th.e.exec_start = at;
        if next != prev {
            th.e.prev_sum_exec = th.e.sum_exec;
            let mut e = th.e;
            c.q.arm_protection(&mut e, &cfg);
            c.curr.as_mut().expect("seated").e = e;
        }
    }

    /// The model's pick on `cpu` (`pick_task_fair()`): a delayed entity
    /// it lands on leaves, its lag taken (`DELAY_ZERO`), and it picks again.
    /// `0`: idle.
    fn pick(&mut self, cpu: usize) -> i32 {
        let cfg = self.cfg;
        loop {
            let c = &mut self.cpus[cpu];
            let curr = c.curr.as_ref().map(|t| &t.e);
            match c.q.pick(curr, &cfg) {
                Choice::Current => return c.curr.expect("picked").tid,
                Choice::Queued(i) => return c.q.queued[i].tid,
                Choice::Nothing => return 0,
                Choice::Delayed(i) => {
                    let curr = c.curr.as_ref().map(|t| &t.e);
                    let th = c.q.finish_delayed(i, curr, &cfg);
                    self.blocked.insert(th.tid, th.e);
                }
            }
        }
    }

    /// Makes `tid`, seen running on `cpu`, the running entity there: taken
    /// from its queue (a record that starts mid-run, or a wake it did not
    /// keep, places it first).
    fn seat(&mut self, tid: i32, prio: i32, cpu: usize, at: u64) {
        let cfg = self.cfg;
        if self.cpu(cpu).curr.is_some_and(|t| t.tid == tid) {
            return;
        }
        if let Some(th) = self.cpu(cpu).curr.take() {
            self.cpu(cpu).q.queued.push(th);
        }
        let th = match self.at(tid) {
            At::Queued(c) if c == cpu => {
                let q = &mut self.cpus[cpu].q;
                let i = q.queued.iter().position(|t| t.tid == tid).expect("queued");
                q.take(i)
            }
            _ => {
                let mut th = self.take(tid, prio);
                th.e.rel_deadline = false;
                let q = &mut self.cpus[cpu].q;
                q.place(&mut th.e, None, &cfg, false);
                th.e.exec_start = at;
                th
            }
        };
        self.cpus[cpu].curr = Some(th);
    }

    /// Counts the model's pick `model` against the kernel's `next` (both 0
    /// for idle).
    fn judge(&mut self, cpu: usize, model: i32, next: i32) {
        self.out.picks += 1;
        if model == next {
            self.out.picks_same += 1;
            return;
        }
        if model == 0 || next == 0 {
            return;
        }
        let c = &self.cpus[cpu];
        let curr = c.curr.as_ref().map(|t| &t.e);
        let find = |tid: i32| {
            c.curr
                .iter()
                .chain(c.q.queued.iter())
                .find(|t| t.tid == tid)
                .map(|t| t.e)
        };
        let (Some(m), Some(k)) = (find(model), find(next)) else {
            return;
        };
        let avg = c.q.avg(curr);
        if avg.eligible(k.vruntime) && (k.deadline - m.deadline).abs() <= TIE_NS {
            self.out.picks_tie += 1;
        }
    }

    fn migrate(&mut self, at: u64, task: i32, from: usize, to: usize) {
        let cfg = self.cfg;
        match self.at(task) {
            At::Queued(c) if c == from => {
                self.charge(from, at);
                let f = self.cpu(from);
                let curr = f.curr.as_ref().map(|t| &t.e);
                let th = f.q.dequeue(task as u32, curr, &cfg, true).expect("queued");
                self.charge(to, at);
                let t = self.cpu(to);
                let curr = t.curr.as_ref().map(|t| &t.e);
                t.q.enqueue(th, curr, &cfg, false);
            }
            At::Delayed(c) if c == from => {
                // A delayed entity leaves for good before it moves.
                let th = self.take(task, 120);
                self.blocked.insert(th.tid, th.e);
            }
            _ => {}
        }
    }
}
