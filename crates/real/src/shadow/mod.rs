//! The kernel's own schedule, decided again by the model's fair class.
//!
//! A replay ([`crate::replay`]) asks whether the model schedules a program
//! as the kernel did. This asks the question under it: from the state the
//! kernel was in, does the model's EEVDF make the kernel's decision? Each
//! CPU's fair queue is rebuilt from the kernel's record, and the model's
//! own rules (`schedlab_sched::fair`) fill in what the record does not
//! say:
//!
//! * `sched_wakeup` / `sched_wakeup_new` on CPU c: c's running entity is
//!   charged (`update_curr`), then the woken one is placed by its lag
//!   (`place_entity`; a new task with half a slice);
//! * `sched_switch` on c: the previous entity is charged for the time it
//!   ran; it stays queued when it was preempted and leaves with its lag
//!   (`update_lag`) when it blocked or exited; the next one, a fresh pick,
//!   gets its protection (`set_protect`);
//! * `sched_migrate_task` of a queued entity: it leaves with its lag and
//!   its deadline kept relative (`PLACE_REL_DEADLINE`) and is placed on the
//!   destination.
//!
//! Held beside the kernel:
//!
//! * **picks**: at each `sched_switch` where the queue holds only the
//!   recording's threads, the model's `pick_eevdf` from the rebuilt state
//!   against the thread the kernel ran. The same thread, or *a tie*: both
//!   eligible, deadlines within [`TIE_NS`] (the record's timestamps are
//!   not the kernel's task clock, which leaves out interrupt time and the
//!   tracing's own, so closer than that the order is not known);
//! * **wake-up preemption**: at each wake a thread posts on the CPU it
//!   enqueues to, while one of the recording's threads runs there, the
//!   model's decision (its pick is now the woken one) against the
//!   kernel's: the need-resched flag of the `sched_wakeup` event, counted
//!   only when the `sched_waking` before it did not already carry it.
//!
//! The running entity is charged at each scheduler tick too (the kernel's
//! `TICK_NSEC`, read from its `CONFIG_HZ`: [`kernel_hz`]), since a reached
//! deadline is renewed from the `v` of the `update_curr()` that finds it.
//!
//! Two of Linux's rules the model does not have can be added, to see which
//! of the kernel's decisions they explain:
//!
//! * [`Rules::delay_dequeue`]: `DELAY_DEQUEUE` and `DELAY_ZERO` (on by
//!   default since 6.12): an entity that blocks while ineligible stays
//!   queued and counted in `V` until it is picked (then it leaves, a
//!   positive lag dropped) or woken (then it stays where it is, placed
//!   again at zero lag only if its lag became positive:
//!   `requeue_delayed_entity()`), in `kernel/sched/fair.c`'s
//!   `dequeue_entity()` and `pick_next_entity()`;
//! * [`Rules::next_buddy`]: `NEXT_BUDDY` as commit e837456fdca8 ("sched/
//!   fair: Reimplement NEXT_BUDDY to align with EEVDF goals", 6.19, also
//!   taken into 6.18's stable series) has it: a wake makes the woken entity
//!   the next buddy unless the buddy already set has an earlier deadline,
//!   and `__pick_eevdf()` returns an eligible buddy before anything else
//!   (`PICK_BUDDY`), so an eligible woken entity preempts. Mainline turned
//!   the feature off again in 6.19 (commit 4f70f106bca1); a kernel's
//!   features cannot be read without debugfs. Simplified: the `WF_SYNC`
//!   branch (`preempt_sync()`, which holds a sync wake back until the waker
//!   has run a while) is not taken, as the record does not say which wakes
//!   were sync.
//!
//! Simplified: one level of queue per CPU (Linux nests a process group's
//! entities under its group's, which changes nothing among the recording's
//! threads when, as here, they share one group), weights from each event's
//! `prio`, RT tasks and threads outside the recording left out of the
//! queues. A recording filters its events to its own threads, so a
//! migration another context makes (a balancer pulling a thread from an
//! idle CPU) can be missing: the thread is moved when it next runs.

use std::collections::BTreeMap;

use schedlab_sim::sched::fair::{self, Avg, Entity, FairConfig, Pick};
use schedlab_sim::PrevState;
use serde::Serialize;

mod events;
#[cfg(test)]
mod tests;

pub use events::{events, events_of_sim, kernel_hz};

/// Deadlines closer than this are a tie (see the module doc).
pub const TIE_NS: i64 = 20_000;

/// One event of the schedule, from the kernel's record or a simulated run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ev {
    /// `task` is enqueued on `target`, by a wake posted on `cpu`. `kernel_resched`:
    /// the kernel asked the running task to reschedule at this wake (`None`:
    /// not known). `by_task`: posted by a thread, not an interrupt.
    Wakeup {
        at: u64,
        cpu: usize,
        task: i32,
        prio: i32,
        target: usize,
        new: bool,
        by_task: bool,
        kernel_resched: Option<bool>,
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
        let differ = self.wakes_kernel_only + self.wakes_model_only;
        (self.wakes - differ) as f64 / self.wakes.max(1) as f64
    }
}

/// The model's rules, and what may be added to them.
#[derive(Clone, Copy, Debug)]
pub struct Rules {
    pub fair: FairConfig,
    /// Linux's `DELAY_DEQUEUE` and `DELAY_ZERO` (see the module doc).
    pub delay_dequeue: bool,
    /// `NEXT_BUDDY` as Linux 6.19 reimplemented it (see the module doc).
    pub next_buddy: bool,
}

/// The model's rules, and the same with Linux's rules it lacks added one
/// by one, side by side.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Report {
    /// The scheduler tick the shadow charged the running entity at, ns
    /// (the kernel's `TICK_NSEC`: where a reached deadline is renewed).
    pub tick_ns: u64,
    pub model: Agreement,
    pub with_delay_dequeue: Agreement,
    pub with_delay_dequeue_and_next_buddy: Agreement,
}

impl Report {
    /// The comparisons over `evs`, with the fair band of `ncpus` CPUs and
    /// the kernel's tick `tick_ns`.
    pub fn of(evs: &[Ev], ours: &dyn Fn(i32) -> bool, ncpus: usize, tick_ns: u64) -> Report {
        let mut fair = FairConfig::for_cpus(ncpus);
        fair.tick_ns = tick_ns;
        let run = |delay_dequeue, next_buddy| {
            compare(
                evs,
                ours,
                Rules {
                    fair,
                    delay_dequeue,
                    next_buddy,
                },
            )
        };
        Report {
            tick_ns,
            model: run(false, false),
            with_delay_dequeue: run(true, false),
            with_delay_dequeue_and_next_buddy: run(true, true),
        }
    }
}

/// One thread's entity and where it is.
#[derive(Clone, Copy, Debug)]
struct Ent {
    e: Entity,
    cpu: usize,
    queued: bool,
    delayed: bool,
}

/// One CPU's queue: the entities queued there (the running one among them
/// while it is runnable) and the running thread.
#[derive(Clone, Debug, Default)]
struct Queue {
    tids: Vec<i32>,
    curr: i32,
    zero_v: i64,
    /// The next buddy (`cfs_rq->next`), with [`Rules::next_buddy`].
    next: Option<i32>,
}

struct Shadow<'a> {
    rules: Rules,
    ours: &'a dyn Fn(i32) -> bool,
    ents: BTreeMap<i32, Ent>,
    cpus: Vec<Queue>,
    out: Agreement,
}

/// The model's decisions beside the kernel's over `evs` (in time order).
pub fn compare(evs: &[Ev], ours: &dyn Fn(i32) -> bool, rules: Rules) -> Agreement {
    let mut s = Shadow {
        rules,
        ours,
        ents: BTreeMap::new(),
        cpus: Vec::new(),
        out: Agreement::default(),
    };
    for ev in evs {
        match *ev {
            Ev::Wakeup { .. } => s.wakeup(ev),
            Ev::Switch { .. } => s.switch(ev),
            Ev::Migrate { at, task, from, to } => s.migrate(at, task, from, to),
        }
    }
    s.out
}

/// A nice level from a kernel `prio` (120 is nice 0; below 100 is RT).
fn nice_of(prio: i32) -> Option<i8> {
    (100..140).contains(&prio).then(|| (prio - 120) as i8)
}

impl Shadow<'_> {
    fn queue(&mut self, cpu: usize) -> &mut Queue {
        if self.cpus.len() <= cpu {
            self.cpus.resize_with(cpu + 1, Queue::default);
        }
        &mut self.cpus[cpu]
    }

    /// `tid`'s entity: one of the recording's threads, in the fair class.
    fn ent(&mut self, tid: i32, prio: i32) -> Option<&mut Ent> {
        let nice = nice_of(prio).filter(|_| (self.ours)(tid))?;
        let slice = self.rules.fair.base_slice_ns;
        let ent = self.ents.entry(tid).or_insert_with(|| Ent {
            e: Entity::new(nice, slice),
            cpu: 0,
            queued: false,
            delayed: false,
        });
        ent.e.weight = fair::weight_of(nice);
        Some(ent)
    }

    /// `V`'s sums over `cpu`'s queue.
    fn avg(&mut self, cpu: usize) -> Avg {
        self.queue(cpu);
        let (q, ents) = (&self.cpus[cpu], &self.ents);
        Avg::of(q.tids.iter().map(|t| &ents[t].e), q.zero_v)
    }

    /// Charges `cpu`'s running entity up to `at` (`update_curr`), at each
    /// tick on the way: a deadline reached is renewed from the `v` of the
    /// call that finds it, so where the calls fall matters.
    fn charge(&mut self, cpu: usize, at: u64) {
        let curr = self.queue(cpu).curr;
        let tick = self.rules.fair.tick_ns.max(1);
        if let Some(c) = self.ents.get_mut(&curr).filter(|c| c.queued) {
            let mut t = (c.e.exec_start / tick + 1) * tick;
            while t < at {
                c.e.update_curr(t);
                t += tick;
            }
            c.e.update_curr(at);
        }
    }

    /// Takes `tid` off its queue, with its lag (`update_lag`).
    fn dequeue(&mut self, tid: i32) {
        let Some(&ent) = self.ents.get(&tid) else {
            return;
        };
        if !ent.queued {
            return;
        }
        let v = self.avg(ent.cpu).v();
        let q = self.queue(ent.cpu);
        q.tids.retain(|&t| t != tid);
        q.zero_v = v;
        if q.next == Some(tid) {
            q.next = None;
        }
        let tick = self.rules.fair.tick_ns;
        let ent = self.ents.get_mut(&tid).expect("looked up");
        ent.e.update_lag(v, tick);
        ent.queued = false;
        ent.delayed = false;
    }

    /// Puts `tid` on `cpu`'s queue where its lag says (`place_entity`);
    /// `rel_deadline`: its deadline kept relative, as a migration does.
    fn enqueue(&mut self, tid: i32, cpu: usize, initial: bool, rel_deadline: Option<i64>) {
        self.queue(cpu);
        let (q, ents) = (&self.cpus[cpu], &self.ents);
        let mut e = ents[&tid].e;
        fair::place_entity(&mut e, q.tids.iter().map(|t| &ents[t].e), q.zero_v, initial);
        if let Some(rel) = rel_deadline {
            e.deadline = e.vruntime + rel;
        }
        let ent = self.ents.get_mut(&tid).expect("created before");
        (ent.e, ent.cpu, ent.queued) = (e, cpu, true);
        self.queue(cpu).tids.push(tid);
    }

    /// `pick_eevdf()` on `cpu`: over the queue, with the running entity
    /// when it is queued. A delayed entity may be the pick.
    fn pick_once(&mut self, cpu: usize) -> Option<i32> {
        let q = &*self.queue(cpu);
        // `PICK_BUDDY`: the next buddy first, when it is eligible.
        let buddy = q.next.filter(|b| q.tids.len() > 1 && q.tids.contains(b));
        if let Some(b) = buddy.filter(|&b| self.eligible(b)) {
            return Some(b);
        }
        let (q, ents) = (&self.cpus[cpu], &self.ents);
        let curr = ents.get(&q.curr).filter(|c| c.queued && c.cpu == cpu);
        let rest: Vec<i32> = q.tids.iter().copied().filter(|&t| t != q.curr).collect();
        let pick = fair::pick_eevdf(
            rest.iter().map(|t| &ents[t].e),
            curr.map(|c| &c.e),
            &self.rules.fair,
            q.zero_v,
        );
        match pick {
            Pick::Current => Some(q.curr),
            Pick::Queued(i) => Some(rest[i]),
            Pick::Nothing => None,
        }
    }

    /// The pick `schedule()` makes on `cpu` (`pick_next_entity()`): a
    /// delayed entity picked leaves (its positive lag dropped: `DELAY_ZERO`)
    /// and the pick is made again.
    fn pick(&mut self, cpu: usize) -> Option<i32> {
        loop {
            let tid = self.pick_once(cpu)?;
            if !self.ents[&tid].delayed {
                return Some(tid);
            }
            self.finish_delayed(tid);
        }
    }

    /// A delayed entity leaves for good: its lag taken, a positive one
    /// dropped (`DELAY_ZERO`).
    fn finish_delayed(&mut self, tid: i32) {
        self.dequeue(tid);
        let e = &mut self.ents.get_mut(&tid).expect("was queued").e;
        e.vlag = e.vlag.min(0);
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
        } = *ev
        else {
            return;
        };
        self.charge(target, at);
        let Some(ent) = self.ent(task, prio).copied() else {
            return;
        };
        if ent.queued && ent.cpu == target {
            // Queued already (`ttwu_runnable()`): a delayed entity stays
            // where it is, placed again at zero lag only if its lag became
            // positive (`requeue_delayed_entity()`).
            if ent.delayed {
                let v = self.avg(target).v();
                let tick = self.rules.fair.tick_ns;
                let e = self.ents.get_mut(&task).expect("looked up");
                e.delayed = false;
                e.e.update_lag(v, tick);
                if e.e.vlag > 0 {
                    e.e.vlag = 0;
                    e.queued = false;
                    self.queue(target).tids.retain(|&t| t != task);
                    self.enqueue(task, target, false, None);
                }
            }
        } else {
            // Queued elsewhere means a switch the record lost: start over.
            self.dequeue(task);
            self.enqueue(task, target, new, None);
        }
        if self.rules.next_buddy && !new {
            // `set_preempt_buddy()`: an earlier-deadline buddy stays.
            let keep = self.queue(target).next.is_some_and(|b| {
                self.ents
                    .get(&b)
                    .is_some_and(|b| b.queued && b.e.deadline < self.ents[&task].e.deadline)
            });
            if !keep {
                self.queue(target).next = Some(task);
            }
        }
        let curr = self.queue(target).curr;
        let compared = by_task && cpu == target && !new;
        let (Some(kernel), true) = (kernel_resched, compared) else {
            return;
        };
        if !self.ents.get(&curr).is_some_and(|c| c.queued) {
            return;
        }
        // `wakeup_preempt_fair()`: the pick, delayed entities and all.
        let model = self.pick_once(target) == Some(task);
        let o = &mut self.out;
        o.wakes += 1;
        match (kernel, model) {
            (true, true) => o.wakes_both += 1,
            (true, false) => o.wakes_kernel_only += 1,
            (false, true) => o.wakes_model_only += 1,
            (false, false) => {}
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
        self.charge(cpu, at);
        if prev != 0 && self.ent(prev, prev_prio).is_some() {
            self.seat(prev, cpu, at);
            match prev_state {
                PrevState::Runnable => {}
                PrevState::Blocked if self.rules.delay_dequeue && !self.eligible(prev) => {
                    self.ents.get_mut(&prev).expect("seated").delayed = true;
                }
                PrevState::Blocked | PrevState::Exited => self.dequeue(prev),
            }
        }
        let queued = !self.queue(cpu).tids.is_empty();
        let model = self.pick(cpu);
        if queued && (next == 0 || (self.ours)(next) && nice_of(next_prio).is_some()) {
            self.judge(model, next);
        }
        let q = self.queue(cpu);
        q.curr = next;
        if q.next == Some(next) {
            q.next = None;
        }
        if next == 0 || self.ent(next, next_prio).is_none() {
            return;
        }
        self.seat(next, cpu, at);
        let min_slice = self.rules.fair.base_slice_ns;
        let e = &mut self.ents.get_mut(&next).expect("seated").e;
        e.exec_start = at;
        if next != prev {
            e.set_protect(min_slice);
        }
    }

    /// Makes sure `tid`, seen on `cpu`, is queued there (a record that
    /// starts mid-run, or a wake it did not keep).
    fn seat(&mut self, tid: i32, cpu: usize, at: u64) {
        let ent = self.ents[&tid];
        if ent.queued && ent.cpu == cpu {
            return;
        }
        self.dequeue(tid);
        self.enqueue(tid, cpu, false, None);
        self.ents.get_mut(&tid).expect("seated").e.exec_start = at;
    }

    fn eligible(&mut self, tid: i32) -> bool {
        let cpu = self.ents[&tid].cpu;
        let v = self.ents[&tid].e.vruntime;
        self.avg(cpu).eligible(v)
    }

    /// Counts the model's pick `model` against the kernel's `next`.
    fn judge(&mut self, model: Option<i32>, next: i32) {
        let next = (next != 0).then_some(next);
        self.out.picks += 1;
        if model == next {
            self.out.picks_same += 1;
            return;
        }
        let (Some(m), Some(k)) = (model, next) else {
            return;
        };
        let (me, ke) = (self.ents[&m], self.ents.get(&k).copied());
        let Some(ke) = ke.filter(|k| k.queued && k.cpu == me.cpu) else {
            return;
        };
        if self.eligible(k) && (ke.e.deadline - me.e.deadline).abs() <= TIE_NS {
            self.out.picks_tie += 1;
        }
    }

    fn migrate(&mut self, at: u64, task: i32, from: usize, to: usize) {
        let Some(ent) = self.ents.get(&task).copied() else {
            return;
        };
        if !ent.queued || ent.cpu != from || self.queue(from).curr == task {
            return;
        }
        self.charge(from, at);
        if ent.delayed {
            // A delayed entity leaves for good before it moves.
            self.finish_delayed(task);
            return;
        }
        let rel = ent.e.deadline - ent.e.vruntime;
        self.dequeue(task);
        self.charge(to, at);
        self.enqueue(task, to, false, Some(rel));
    }
}
