//! One CPU's scheduler: the state it owns and the entry points a host calls
//! on its behalf.
//!
//! ## Ownership
//!
//! A `CpuSched` is owned by its CPU (`&mut self`): its running task, its run
//! queues, its parked and stopped tasks, its deadline heap. Another CPU can
//! reach it only through [`Shared`]: a message in its mailbox, a ring of its
//! doorbell, a task's park word. Every entry point runs on behalf of this
//! CPU, takes `now`, and returns [`Effects`] for the host to carry out.
//!
//! ## The pass
//!
//! The host runs [`CpuSched::pass`] when the CPU is kicked, and the entry
//! points that stop the current task (block, yield, exit) end in one:
//!
//! 1. answer the doorbell (awake, kick answered);
//! 2. drain the mailbox: `Wake` → [`CpuSched::handle_wake`], `Adopt` → take
//!    ownership, and the lifecycle messages;
//! 3. fire due deadlines (a wake with no waker, through delivery);
//! 4. loop while the mailbox refilled;
//! 5. pick: RT first, then EEVDF, the running task included; under core
//!    scheduling the pick is core-wide (`coresched`);
//! 6. nothing to run: ask for a steal (newly idle balance), set the doorbell
//!    asleep, look at the mailbox once more (see `doorbell`), and idle at the
//!    depth the host named.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::vec::Vec;

use schedlab_topology::{CpuId, CpuSet, Level};

use crate::coresched::{CorePick, CoreState, RqView, View};
use crate::doorbell::IdleDepth;
use crate::effects::{Counters, Effects, Kick, PlaceReason, Switch, Trace, WakeCause};
use crate::fair::{calc_delta_fair, pick_eevdf, place_entity, Avg, Entity, FairConfig, Pick};
use crate::park::{Delivery, TaskState};
use crate::policy::{nearest_in_mask, spawn_target, AnyPolicy, Decision, WakeCx, WakePolicy};
use crate::shared::{Msg, Shared, SpawnError};
use crate::streak::WakerStreak;
use crate::task::{pick_task, Band, Pickable, Task, TaskId, TaskSpec};

/// Where a task sits on its owner, for hosts and invariant checks.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Holding {
    Running,
    Queued,
    Parked,
    /// Runnable but stopped.
    Held,
}

/// What a pick chose.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Next {
    /// The running task, again (a re-pick).
    Again,
    /// This waiting task.
    Take(TaskId),
    Idle,
}

/// One CPU's scheduler state.
pub struct CpuSched {
    id: CpuId,
    policy: AnyPolicy,
    current: Option<Task>,
    /// Fair tasks waiting to run (the running one is not here).
    fair: Vec<Task>,
    /// RT tasks waiting, highest priority first, FIFO within one.
    rt: Vec<Task>,
    parked: BTreeMap<TaskId, Task>,
    held: BTreeMap<TaskId, Task>,
    deadlines: BTreeSet<(u64, TaskId)>,
    /// `V` when the queue last had weight: where an empty queue places.
    zero_v: i64,
    need_resched: bool,
    irq_depth: u32,
    spawn_cursor: usize,
    seq: u64,
    steal_pending: bool,
    last_balance: u64,
    fair_cfg: FairConfig,
    /// The core-wide selection this CPU last ran (`rq->core_sched_seq`).
    sched_seq: u64,
    /// Its runnable set changed since it last told its core (Linux bumps
    /// `core_task_seq` in `sched_core_enqueue/dequeue()`).
    core_dirty: bool,
    core_sched: bool,
    counters: Counters,
}

impl CpuSched {
    /// The schedulers of every CPU of `sh`'s machine, one per CPU, for the
    /// host to hand out.
    pub fn for_machine(sh: &Shared) -> Vec<CpuSched> {
        sh.topology()
            .cpu_ids()
            .map(|id| CpuSched {
                id,
                policy: AnyPolicy::of(&sh.config().placement),
                current: None,
                fair: Vec::new(),
                rt: Vec::new(),
                parked: BTreeMap::new(),
                held: BTreeMap::new(),
                deadlines: BTreeSet::new(),
                zero_v: 0,
                need_resched: false,
                irq_depth: 0,
                spawn_cursor: id.index() + 1,
                seq: 0,
                steal_pending: false,
                last_balance: 0,
                fair_cfg: sh.config().fair,
                sched_seq: 0,
                core_dirty: false,
                core_sched: sh.config().core_sched && sh.topology().core_cpus(id).weight() > 1,
                counters: Counters::default(),
            })
            .collect()
    }

    pub fn id(&self) -> CpuId {
        self.id
    }

    pub fn policy_name(&self) -> &'static str {
        self.policy.name()
    }

    pub fn current(&self) -> Option<TaskId> {
        self.current.as_ref().map(|t| t.id)
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Runnable tasks waiting here (not the running one).
    pub fn queued(&self) -> usize {
        self.fair.len() + self.rt.len()
    }

    /// Every task this CPU holds, and how.
    pub fn holdings(&self) -> impl Iterator<Item = (TaskId, Holding)> + '_ {
        let cur = self.current.iter().map(|t| (t.id, Holding::Running));
        let q = self
            .fair
            .iter()
            .chain(self.rt.iter())
            .map(|t| (t.id, Holding::Queued));
        let p = self.parked.keys().map(|&id| (id, Holding::Parked));
        let h = self.held.keys().map(|&id| (id, Holding::Held));
        cur.chain(q).chain(p).chain(h)
    }

    /// A task this CPU owns.
    pub fn task(&self, id: TaskId) -> Option<&Task> {
        self.current
            .iter()
            .chain(self.fair.iter())
            .chain(self.rt.iter())
            .find(|t| t.id == id)
            .or_else(|| self.parked.get(&id))
            .or_else(|| self.held.get(&id))
    }

    pub fn streak_of(&self, id: TaskId) -> Option<WakerStreak> {
        self.task(id).map(|t| t.streak)
    }

    pub fn entity_of(&self, id: TaskId) -> Option<&Entity> {
        self.task(id).map(|t| &t.fair)
    }

    /// The earliest deadline this CPU holds.
    pub fn next_deadline(&self) -> Option<u64> {
        self.deadlines.first().map(|&(t, _)| t)
    }

    // ----------------------------------------------------------------------
    // Attribution

    /// A device interrupt begins on this CPU: wakes it posts name no waker.
    pub fn irq_enter(&mut self) {
        self.irq_depth += 1;
    }

    pub fn irq_exit(&mut self) {
        debug_assert!(self.irq_depth > 0, "irq_exit without irq_enter");
        self.irq_depth = self.irq_depth.saturating_sub(1);
    }

    /// The waker a wake posted now names (DESIGN.md 3.1): this CPU, when a
    /// thread that has not begun leaving runs here outside an interrupt.
    pub fn waker(&self) -> Option<CpuId> {
        if self.irq_depth > 0 {
            return None;
        }
        match &self.current {
            Some(t) if !t.leaving || cfg!(feature = "mutant-leaving-ignored") => Some(self.id),
            _ => None,
        }
    }

    // ----------------------------------------------------------------------
    // Entry points: the running thread's calls

    /// Creates a task and places it (spawn placement). The new task is
    /// runnable at once.
    pub fn spawn(
        &mut self,
        sh: &Shared,
        spec: TaskSpec,
        now: u64,
    ) -> Result<(TaskId, Effects), SpawnError> {
        let topo = sh.topology();
        let mask = spec.mask.map_or(*topo.cpus(), |m| m & *topo.cpus());
        if mask.is_empty() {
            return Err(SpawnError::EmptyMask);
        }
        let target = spawn_target(
            sh,
            sh.config().spawn,
            self.id,
            &mut self.spawn_cursor,
            &mask,
        )
        .ok_or(SpawnError::EmptyMask)?;
        let state = if target == self.id {
            TaskState::Queued
        } else {
            TaskState::Moving
        };
        let id = sh.alloc_task(state, target)?;
        let slice = spec.slice_ns.unwrap_or(sh.config().fair.base_slice_ns);
        let nice = match spec.band {
            Band::Fair { nice } => nice,
            Band::Rt { .. } => 0,
        };
        let task = Task {
            id,
            band: spec.band,
            mask,
            cookie: spec.cookie,
            streak: WakerStreak::default(),
            fair: Entity::new(nice, slice),
            leaving: false,
            stopped: false,
            killed: false,
            last_ran: 0,
            sleep_deadline: None,
            seq: 0,
        };
        let mut fx = Effects::default();
        fx.trace.push(Trace::Place {
            task: id,
            from: self.id,
            cpu: target,
            reason: PlaceReason::Spawn,
        });
        if target == self.id {
            self.enqueue(sh, task, now, true, &mut fx);
        } else {
            self.counters.count_move(PlaceReason::Spawn);
            let k = sh.post(
                Some(self.id),
                target,
                Msg::Adopt {
                    task,
                    reason: PlaceReason::Spawn,
                    from: self.id,
                },
            );
            self.kick(k, &mut fx);
        }
        Ok((id, fx))
    }

    /// The running thread (or a device interrupt, between `irq_enter` and
    /// `irq_exit`) wakes `task`. Goes through delivery; attribution is
    /// [`CpuSched::waker`].
    pub fn wake(&mut self, sh: &Shared, task: TaskId, _now: u64) -> Effects {
        let cause = WakeCause {
            waker: self.waker(),
        };
        let mut fx = Effects::default();
        self.deliver(sh, task, cause, &mut fx);
        fx
    }

    fn deliver(&mut self, sh: &Shared, task: TaskId, cause: WakeCause, fx: &mut Effects) {
        let (delivery, kick) = sh.deliver(task, cause, Some(self.id));
        match delivery {
            Delivery::Flagged => self.counters.wakes_flagged += 1,
            // A wake for a task parked here waits in this CPU's own mailbox:
            // the host must run a pass.
            Delivery::Post { owner } if owner == self.id => fx.resched = true,
            _ => {}
        }
        fx.trace.push(Trace::Wake {
            task,
            cause,
            delivery,
        });
        self.kick(kick, fx);
    }

    /// The running task blocks. If a wake is pending the park returns at
    /// once (`switch` is the same task); else it parks and the CPU passes.
    pub fn block(&mut self, sh: &Shared, now: u64, idle: IdleDepth) -> Effects {
        self.park_current(sh, now, None, idle)
    }

    /// The running task sleeps until `deadline`; the owner's deadline heap
    /// wakes it with no waker.
    pub fn sleep_until(
        &mut self,
        sh: &Shared,
        deadline: u64,
        now: u64,
        idle: IdleDepth,
    ) -> Effects {
        if deadline <= now {
            return self.keep_running();
        }
        self.park_current(sh, now, Some(deadline), idle)
    }

    fn keep_running(&self) -> Effects {
        Effects {
            switch: self.current.as_ref().map(|t| Switch::Run(t.id)),
            ..Effects::default()
        }
    }

    fn park_current(
        &mut self,
        sh: &Shared,
        now: u64,
        deadline: Option<u64>,
        idle: IdleDepth,
    ) -> Effects {
        let mut task = self.current.take().expect("block with no running task");
        let park = &sh.slot(task.id).park;
        park.commit();
        if !park.finish_park() {
            let mut fx = Effects::default();
            fx.trace.push(Trace::ParkReturned { task: task.id });
            self.current = Some(task);
            fx.switch = self.current.as_ref().map(|t| Switch::Run(t.id));
            return fx;
        }
        self.dequeue_running(&mut task, now);
        task.sleep_deadline = deadline;
        if let Some(d) = deadline {
            self.deadlines.insert((d, task.id));
        }
        let mut fx = Effects::default();
        fx.trace.push(Trace::Parked { task: task.id });
        self.parked.insert(task.id, task);
        fx.merge(self.pass(sh, now, idle));
        fx
    }

    /// Charges the running task and records its lag as it leaves the CPU.
    fn dequeue_running(&mut self, task: &mut Task, now: u64) {
        task.last_ran = now;
        self.core_dirty = true;
        if task.is_rt() {
            return;
        }
        task.fair.update_curr(now);
        let v = self.avg_with(Some(&task.fair));
        task.fair.update_lag(v, self.fair_cfg.tick_ns);
        self.zero_v = v;
    }

    /// The running task yields: fair moves its deadline a slice on
    /// (`yield_task_fair`), RT goes to the back of its priority.
    pub fn yield_now(&mut self, sh: &Shared, now: u64, idle: IdleDepth) -> Effects {
        if let Some(t) = self.current.as_mut() {
            if t.is_rt() {
                let mut t = self.current.take().expect("checked");
                self.seq += 1;
                t.seq = self.seq;
                t.last_ran = now;
                sh.slot(t.id)
                    .park
                    .set(TaskState::Running, TaskState::Queued);
                self.insert_rt(t);
            } else {
                t.fair.update_curr(now);
                t.fair.deadline += t.fair.vslice();
                t.fair.vprot = t.fair.vruntime;
            }
        }
        self.need_resched = true;
        self.pass(sh, now, idle)
    }

    /// The running thread begins leaving its process: from now on its wakes
    /// name no waker. Set once, never cleared.
    pub fn begin_leaving(&mut self) {
        if let Some(t) = self.current.as_mut() {
            t.leaving = true;
        }
    }

    /// The running task exits: leaving is set, joiners are woken (with no
    /// waker), the task is gone, and the CPU passes.
    pub fn exit(&mut self, sh: &Shared, now: u64, idle: IdleDepth) -> Effects {
        self.begin_leaving();
        let mut fx = Effects::default();
        let task = self.current.as_ref().expect("exit with no running task").id;
        let joiners = {
            let mut j = sh.slot(task).join.lock();
            j.exited = true;
            core::mem::take(&mut j.joiners)
        };
        for j in joiners {
            let cause = WakeCause {
                waker: self.waker(),
            };
            self.deliver(sh, j, cause, &mut fx);
        }
        let mut t = self.current.take().expect("checked");
        self.dequeue_running(&mut t, now);
        sh.slot(task).park.set(TaskState::Running, TaskState::Dead);
        fx.trace.push(Trace::Exited { task });
        fx.merge(self.pass(sh, now, idle));
        fx
    }

    /// The running task waits for `target` to exit.
    pub fn join(&mut self, sh: &Shared, target: TaskId, now: u64, idle: IdleDepth) -> Effects {
        let me = self.current.as_ref().expect("join with no running task").id;
        {
            let mut j = sh.slot(target).join.lock();
            if j.exited {
                return self.keep_running();
            }
            j.joiners.push(me);
        }
        // An exit between the push and the park is a flag: the park returns.
        self.block(sh, now, idle)
    }

    /// Kills `target`: it runs only to its exit (the host checks
    /// [`Shared::is_killed`] before each of its steps).
    pub fn kill(&mut self, sh: &Shared, target: TaskId, now: u64) -> Effects {
        let old = sh.slot(target).park.kill();
        let mut fx = Effects::default();
        if old.state != TaskState::Dead {
            self.send_to_owner(sh, Msg::Kill { task: target }, now, &mut fx);
        }
        fx
    }

    pub fn stop(&mut self, sh: &Shared, target: TaskId, now: u64) -> Effects {
        let mut fx = Effects::default();
        self.send_to_owner(sh, Msg::Stop { task: target }, now, &mut fx);
        fx
    }

    pub fn cont(&mut self, sh: &Shared, target: TaskId, now: u64) -> Effects {
        let mut fx = Effects::default();
        self.send_to_owner(sh, Msg::Continue { task: target }, now, &mut fx);
        fx
    }

    /// Changes `target`'s mask; its owner corrects its place.
    pub fn set_mask(&mut self, sh: &Shared, target: TaskId, mask: CpuSet, now: u64) -> Effects {
        let mut fx = Effects::default();
        self.send_to_owner(sh, Msg::SetMask { task: target, mask }, now, &mut fx);
        fx
    }

    /// Sends a lifecycle message to the task's owner, or acts on it here.
    fn send_to_owner(&mut self, sh: &Shared, msg: Msg, now: u64, fx: &mut Effects) {
        let task = msg.task().expect("lifecycle messages name a task");
        let owner = sh.task_word(task).owner;
        if owner == self.id {
            self.handle(sh, msg, now, fx);
        } else {
            let k = sh.post(Some(self.id), owner, msg);
            self.kick(k, fx);
        }
    }

    /// The scheduler tick: charge the running task, ask for a reschedule
    /// per `update_curr()`, and balance periodically.
    pub fn tick(&mut self, sh: &Shared, now: u64) -> Effects {
        let mut fx = Effects::default();
        let others = !self.fair.is_empty();
        let asks = self
            .current
            .as_mut()
            .filter(|t| !t.is_rt())
            .is_some_and(|t| t.fair.update_curr_asks(now, others));
        let b = sh.config().balance;
        if b.periodic && now.saturating_sub(self.last_balance) >= b.interval_ns {
            self.last_balance = now;
            self.push_balance(sh, now, &mut fx);
        }
        // `task_tick_core()`: alone beside a forced-idle sibling, give way
        // once half the slice is used (MIN_NR_TASKS_DURING_FORCEIDLE = 2).
        let forceidle = self.publish_core(sh) > 0;
        let give_way = forceidle
            && !cfg!(feature = "mutant-no-forceidle-turn")
            && !others
            && self
                .current
                .as_ref()
                .is_some_and(|t| !t.is_rt() && t.fair.slice_used(2));
        if asks || give_way {
            let id = self.current().expect("a running task asked");
            self.resched(id, &mut fx);
        }
        fx.resched = self.need_resched;
        fx
    }

    fn resched(&mut self, task: TaskId, fx: &mut Effects) {
        if !self.need_resched {
            fx.trace.push(Trace::Resched { task });
        }
        self.need_resched = true;
        fx.resched = true;
    }

    // ----------------------------------------------------------------------
    // The pass

    /// Drains the mailbox, fires deadlines, and picks (see the module doc).
    pub fn pass(&mut self, sh: &Shared, now: u64, idle: IdleDepth) -> Effects {
        let mut fx = Effects::default();
        loop {
            sh.doorbell(self.id).answer();
            if sh.take_resched(self.id) {
                self.need_resched = true;
            }
            self.steal_pending = false;
            for msg in sh.take_mail(self.id) {
                self.handle(sh, msg, now, &mut fx);
            }
            self.fire_deadlines(sh, now, &mut fx);
            if sh.has_mail(self.id) {
                continue;
            }
            if let Some(next) = self.schedule(sh, now, &mut fx) {
                fx.switch = Some(Switch::Run(next));
                break;
            }
            if self.queued() > 0 {
                // Forced idle: the core runs another cookie than the work
                // waiting here (`queue_core_balance()`).
                self.steal_cookie(sh, &mut fx);
            } else if sh.config().balance.newidle {
                self.try_steal(sh, &mut fx);
            }
            sh.doorbell(self.id).sleep(idle);
            if sh.has_mail(self.id) {
                sh.doorbell(self.id).wake_self();
                continue;
            }
            fx.switch = Some(Switch::Idle { depth: idle });
            break;
        }
        fx.resched = false;
        fx.timer = self.next_deadline();
        self.publish(sh);
        fx
    }

    fn handle(&mut self, sh: &Shared, msg: Msg, now: u64, fx: &mut Effects) {
        match msg {
            Msg::Wake { task, cause } => self.handle_wake(sh, task, cause, now, fx),
            Msg::Adopt { task, reason, from } => self.adopt(sh, task, reason, from, now, fx),
            Msg::StealRequest { thief, cookie } => self.give_to(sh, thief, cookie, now, fx),
            Msg::Kill { task } => {
                if !self.owns(task) {
                    return self.forward(sh, Msg::Kill { task }, fx);
                }
                if let Some(t) = self.parked.get_mut(&task) {
                    t.killed = true;
                    // The scheduler's own wake: it lands in this mailbox.
                    let (_, k) = sh.deliver(task, WakeCause::NONE, Some(self.id));
                    self.kick(k, fx);
                    fx.resched = true;
                } else if let Some(mut t) = self.held.remove(&task) {
                    t.killed = true;
                    t.stopped = false;
                    self.release(sh, t, now, fx);
                } else if let Some(t) = self.runnable_mut(task) {
                    t.killed = true;
                }
            }
            Msg::Stop { task } => {
                if !self.owns(task) {
                    return self.forward(sh, Msg::Stop { task }, fx);
                }
                if let Some(mut t) = self.take_queued(task, now) {
                    t.stopped = true;
                    self.held.insert(task, t);
                } else if self.current() == Some(task) {
                    self.current.as_mut().expect("checked").stopped = true;
                    self.resched(task, fx);
                } else if let Some(t) = self.parked.get_mut(&task) {
                    t.stopped = true;
                }
            }
            Msg::Continue { task } => {
                if !self.owns(task) {
                    return self.forward(sh, Msg::Continue { task }, fx);
                }
                if let Some(mut t) = self.held.remove(&task) {
                    t.stopped = false;
                    self.release(sh, t, now, fx);
                } else if let Some(t) = self.parked.get_mut(&task) {
                    t.stopped = false;
                } else if let Some(t) = self.runnable_mut(task) {
                    t.stopped = false;
                }
            }
            Msg::SetMask { task, mask } => {
                if !self.owns(task) {
                    return self.forward(sh, Msg::SetMask { task, mask }, fx);
                }
                let mask = mask & *sh.topology().cpus();
                if mask.is_empty() {
                    return;
                }
                let here = mask.contains(self.id);
                if let Some(t) = self
                    .parked
                    .get_mut(&task)
                    .or_else(|| self.held.get_mut(&task))
                {
                    // Corrected at its next wake or continue.
                    t.mask = mask;
                } else if self.current() == Some(task) {
                    self.current.as_mut().expect("checked").mask = mask;
                    if !here {
                        self.resched(task, fx);
                    }
                } else if let Some(mut t) = self.take_queued(task, now) {
                    t.mask = mask;
                    if here {
                        self.put_back(t);
                    } else {
                        self.relocate(sh, t, TaskState::Queued, now, fx);
                    }
                }
            }
            #[cfg(feature = "mutant-flags-counted")]
            Msg::CountOnly { task, cause } => {
                let topo = sh.topology();
                if let (Some(w), Some(t)) = (cause.waker, self.runnable_mut(task)) {
                    t.streak.observe(topo.llc_id(w));
                }
            }
        }
    }

    /// A held task runs again: here, or inside a mask changed meanwhile.
    fn release(&mut self, sh: &Shared, t: Task, now: u64, fx: &mut Effects) {
        if t.mask.contains(self.id) {
            self.enqueue(sh, t, now, false, fx);
        } else {
            self.relocate(sh, t, TaskState::Queued, now, fx);
        }
    }

    fn owns(&self, task: TaskId) -> bool {
        self.task(task).is_some()
    }

    fn runnable_mut(&mut self, task: TaskId) -> Option<&mut Task> {
        self.current
            .iter_mut()
            .chain(self.fair.iter_mut())
            .chain(self.rt.iter_mut())
            .find(|t| t.id == task)
    }

    /// A message for a task that left: to its owner now.
    fn forward(&mut self, sh: &Shared, msg: Msg, fx: &mut Effects) {
        let Some(task) = msg.task() else { return };
        let w = sh.task_word(task);
        if w.state == TaskState::Dead || w.owner == self.id {
            return;
        }
        let k = sh.post(Some(self.id), w.owner, msg);
        self.kick(k, fx);
    }

    /// The owner's half of a parked wake (DESIGN.md 3.3): refresh affinity,
    /// count, and move or place.
    pub fn handle_wake(
        &mut self,
        sh: &Shared,
        id: TaskId,
        cause: WakeCause,
        now: u64,
        fx: &mut Effects,
    ) {
        let Some(mut task) = self.parked.remove(&id) else {
            debug_assert!(
                false,
                "{:?}: a Wake for {id:?}, which it does not hold parked",
                self.id
            );
            return self.forward(sh, Msg::Wake { task: id, cause }, fx);
        };
        if let Some(d) = task.sleep_deadline.take() {
            self.deadlines.remove(&(d, id));
        }
        self.counters.wakes_parked += 1;
        if !task.mask.contains(self.id) {
            return self.relocate(sh, task, TaskState::Waking, now, fx);
        }
        if let Some(w) = cause.waker {
            task.streak.observe(sh.topology().llc_id(w));
            self.counters.wakes_counted += 1;
            fx.trace.push(Trace::Counted {
                task: id,
                streak: task.streak,
            });
        }
        if task.killed {
            task.stopped = false;
        }
        let decision = if task.stopped || task.killed {
            Decision::Stay
        } else {
            let cx = WakeCx {
                shared: sh,
                home: self.id,
                home_busy: self.current.is_some() || self.queued() > 0,
                cause,
            };
            self.policy.place(&cx, &task)
        };
        match decision {
            Decision::Stay => {
                sh.slot(id).park.set(TaskState::Waking, TaskState::Queued);
                fx.trace.push(Trace::Place {
                    task: id,
                    from: self.id,
                    cpu: self.id,
                    reason: PlaceReason::Home,
                });
                self.enqueue(sh, task, now, false, fx);
            }
            Decision::Send(cpu, reason) => self.send(sh, task, cpu, reason, TaskState::Waking, fx),
        }
    }

    fn adopt(
        &mut self,
        sh: &Shared,
        task: Task,
        reason: PlaceReason,
        _from: CpuId,
        now: u64,
        fx: &mut Effects,
    ) {
        if !task.mask.contains(self.id) {
            // The mask changed in flight: the adopter corrects it.
            return self.relocate(sh, task, TaskState::Moving, now, fx);
        }
        sh.slot(task.id)
            .park
            .set(TaskState::Moving, TaskState::Queued);
        let initial = reason == PlaceReason::Spawn;
        self.enqueue(sh, task, now, initial, fx);
    }

    /// Hands `task` to `cpu` (`from` is its park state now).
    fn send(
        &mut self,
        sh: &Shared,
        task: Task,
        cpu: CpuId,
        reason: PlaceReason,
        from: TaskState,
        fx: &mut Effects,
    ) {
        debug_assert!(
            task.mask.contains(cpu),
            "{reason:?} would place {:?} outside its mask",
            task.id
        );
        sh.slot(task.id).park.send(from, cpu);
        self.counters.count_move(reason);
        fx.trace.push(Trace::Place {
            task: task.id,
            from: self.id,
            cpu,
            reason,
        });
        let k = sh.post(
            Some(self.id),
            cpu,
            Msg::Adopt {
                task,
                reason,
                from: self.id,
            },
        );
        self.kick(k, fx);
    }

    /// Sends a task whose mask no longer names this CPU to one it names.
    fn relocate(&mut self, sh: &Shared, task: Task, from: TaskState, _now: u64, fx: &mut Effects) {
        let cpu = nearest_in_mask(sh, self.id, &task.mask).expect("masks are never empty");
        self.send(sh, task, cpu, PlaceReason::Affinity, from, fx);
    }

    /// Queues a task here: placed by its lag (fair) or by priority (RT),
    /// then the wake-up preemption check.
    fn enqueue(&mut self, sh: &Shared, mut task: Task, now: u64, initial: bool, fx: &mut Effects) {
        debug_assert!(task.mask.contains(self.id) || cfg!(feature = "mutant-mask-ignored"));
        if task.stopped {
            self.held.insert(task.id, task);
            return;
        }
        let id = task.id;
        self.core_dirty = true;
        if task.is_rt() {
            self.seq += 1;
            task.seq = self.seq;
            let prio = task.rt_prio();
            self.insert_rt(task);
            let preempt = match &self.current {
                Some(c) if c.is_rt() => prio > c.rt_prio(),
                Some(_) => true,
                None => false,
            };
            if preempt {
                self.resched(id, fx);
            }
        } else {
            if let Some(c) = self.current.as_mut().filter(|c| !c.is_rt()) {
                c.fair.update_curr(now);
            }
            place_entity(&mut task.fair, self.fair_entities(), self.zero_v, initial);
            self.fair.push(task);
            self.wakeup_preempt(id, fx);
        }
        if self.current.is_none() {
            // Nothing runs here: a pass must pick it.
            fx.resched = true;
        }
        self.publish(sh);
    }

    fn insert_rt(&mut self, task: Task) {
        let at = self
            .rt
            .iter()
            .position(|t| {
                (t.rt_prio(), core::cmp::Reverse(t.seq))
                    < (task.rt_prio(), core::cmp::Reverse(task.seq))
            })
            .unwrap_or(self.rt.len());
        self.rt.insert(at, task);
    }

    /// `wakeup_preempt_fair()`: reschedule when the pick would now be the
    /// woken task (the running one being protected holds it off).
    fn wakeup_preempt(&mut self, woken: TaskId, fx: &mut Effects) {
        let Some(cur) = self.current.as_ref() else {
            return;
        };
        if cur.is_rt() {
            return;
        }
        let queue = self.fair.iter().map(|t| &t.fair);
        if let Pick::Queued(i) = pick_eevdf(queue, Some(&cur.fair), &self.fair_cfg, self.zero_v) {
            if self.fair[i].id == woken {
                let id = cur.id;
                self.resched(id, fx);
                return;
            }
        }
        // Not preempting: the protection may last at most the smallest
        // queued slice (`update_protect_slice()`).
        let min = self.min_slice();
        let cur = &mut self.current.as_mut().expect("checked").fair;
        cur.vprot = cur
            .vprot
            .min(cur.vruntime + calc_delta_fair(min, cur.weight));
    }

    /// The fair entities competing here: the queue and a fair running task.
    fn fair_entities(&self) -> impl Iterator<Item = &Entity> + Clone {
        self.fair
            .iter()
            .map(|t| &t.fair)
            .chain(self.current.iter().filter(|c| !c.is_rt()).map(|c| &c.fair))
    }

    /// `V` of the queue plus `extra` (a leaving entity).
    fn avg_with(&self, extra: Option<&Entity>) -> i64 {
        Avg::of(self.fair.iter().map(|t| &t.fair).chain(extra), self.zero_v).v()
    }

    fn min_slice(&self) -> u64 {
        self.fair_entities()
            .map(|e| e.slice)
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Picks what runs next; the running task competes. `None`: idle.
    fn schedule(&mut self, sh: &Shared, now: u64, fx: &mut Effects) -> Option<TaskId> {
        let resched = core::mem::take(&mut self.need_resched);
        if let Some(cur) = self.current.as_mut() {
            if !cur.is_rt() {
                cur.fair.update_curr(now);
            }
        }
        let runnable = self.running().is_some();
        if runnable && !resched {
            return self.current();
        }
        let next = if self.core_sched {
            self.core_pick(sh, now, fx)
        } else {
            let cfg = self.fair_cfg;
            let p = pick_task(
                self.running(),
                self.fair.iter(),
                self.rt.first(),
                &cfg,
                self.zero_v,
            );
            match p {
                Some(t) if Some(t.id) == self.current() => Next::Again,
                Some(t) => Next::Take(t.id),
                None => Next::Idle,
            }
        };
        self.run_pick(sh, next, now, fx)
    }

    /// The running task, when it may go on running here (not stopped, in
    /// its mask).
    fn running(&self) -> Option<&Task> {
        self.current
            .as_ref()
            .filter(|c| !c.stopped && c.mask.contains(self.id))
    }

    /// The core-wide pick (the protocol is in `coresched`): the pick a
    /// sibling's selection left here, else the local pick when no cookie
    /// is in play, else a selection; siblings it reschedules are kicked.
    fn core_pick(&mut self, sh: &Shared, now: u64, fx: &mut Effects) -> Next {
        let cfg = self.fair_cfg;
        let (pick, resched) = {
            let mut core = sh.core(self.id).lock();
            self.publish_view(&mut core);
            let mut pick = core
                .take_pick(self.id, &mut self.sched_seq)
                .filter(|p| self.can_run(*p));
            if pick.is_none() && !core.need_sync() {
                pick = core.local_pick(self.id, &cfg);
            }
            match pick {
                Some(p) => (p, Vec::new()),
                None => {
                    let s = core.select(self.id, now, &cfg, &mut self.sched_seq);
                    (s.mine, s.resched)
                }
            }
        };
        for cpu in resched {
            let k = sh.resched_remote(cpu);
            self.kick(k, fx);
        }
        match pick {
            CorePick::Task(id) if self.running().is_some_and(|c| c.id == id) => Next::Again,
            CorePick::Task(id) => Next::Take(id),
            CorePick::Idle => Next::Idle,
        }
    }

    /// Whether a pick a sibling's selection left here can still be run.
    fn can_run(&self, p: CorePick) -> bool {
        match p {
            CorePick::Task(id) => {
                self.running().is_some_and(|c| c.id == id)
                    || self.fair.iter().chain(self.rt.iter()).any(|t| t.id == id)
            }
            CorePick::Idle => true,
        }
    }

    /// Runs what the pick chose (`put_prev_set_next_task()`): the running
    /// task again, another task, or nothing.
    fn run_pick(&mut self, sh: &Shared, next: Next, now: u64, fx: &mut Effects) -> Option<TaskId> {
        let next = match next {
            Next::Again => {
                // A re-pick: Linux renews nothing, so an expired vprot stays
                // expired; the seed-004 fix renews it.
                let renew =
                    self.fair_cfg.protect_on_repick && !cfg!(feature = "mutant-no-repick-renewal");
                if renew && self.current.as_ref().is_some_and(|c| !c.is_rt()) {
                    let min = self.min_slice();
                    self.current
                        .as_mut()
                        .expect("checked")
                        .fair
                        .set_protect(min);
                }
                return self.current();
            }
            Next::Take(id) => Some(self.take_waiting(id)),
            Next::Idle => None,
        };
        // Switching: the previous task goes back (or away).
        if let Some(mut prev) = self.current.take() {
            prev.last_ran = now;
            let park = &sh.slot(prev.id).park;
            park.set(TaskState::Running, TaskState::Queued);
            if prev.stopped {
                self.core_dirty = true;
                self.held.insert(prev.id, prev);
            } else if !prev.mask.contains(self.id) {
                self.core_dirty = true;
                self.dequeue_lag(&mut prev);
                self.relocate(sh, prev, TaskState::Queued, now, fx);
            } else {
                self.put_back(prev);
            }
        }
        let mut next = next?;
        sh.slot(next.id)
            .park
            .set(TaskState::Queued, TaskState::Running);
        next.fair.exec_start = now;
        next.fair.prev_sum_exec = next.fair.sum_exec;
        // A fresh pick arms protection (`set_next_entity(.., first = true)`
        // calls `set_protect_slice()`), a sibling's selection included: its
        // install ends in `put_prev_set_next_task()` too.
        if !next.is_rt() {
            let min = self
                .fair_entities()
                .map(|e| e.slice)
                .chain([next.fair.slice])
                .min()
                .unwrap_or(next.fair.slice);
            next.fair.set_protect(min);
        }
        let id = next.id;
        self.current = Some(next);
        Some(id)
    }

    /// Removes a waiting task to run it (no lag: it stays on this queue).
    fn take_waiting(&mut self, id: TaskId) -> Task {
        if let Some(i) = self.fair.iter().position(|t| t.id == id) {
            return self.fair.remove(i);
        }
        let i = self
            .rt
            .iter()
            .position(|t| t.id == id)
            .expect("the pick names a task waiting here");
        self.rt.remove(i)
    }

    /// Publishes this CPU's run queue to its core (core scheduling only),
    /// telling it first when the runnable set changed; returns how many
    /// siblings the core's last selection forced idle.
    fn publish_core(&mut self, sh: &Shared) -> u32 {
        if !self.core_sched {
            return 0;
        }
        let mut core = sh.core(self.id).lock();
        self.publish_view(&mut core);
        core.forceidle
    }

    fn publish_view(&mut self, core: &mut CoreState) {
        if core::mem::take(&mut self.core_dirty) {
            core.task_seq += 1;
        }
        let view = |t: &Task| View {
            id: t.id,
            cookie: t.cookie,
            class: t.class(),
            fair: t.fair,
        };
        let running = self.running().map(view);
        let curr = self.current();
        let v: &mut RqView = &mut core.sib(self.id).view;
        v.curr = curr;
        v.running = running;
        v.zero_v = self.zero_v;
        v.waiting.clear();
        v.waiting
            .extend(self.fair.iter().chain(self.rt.iter()).map(view));
    }

    /// The cookie of the task this CPU runs, for invariant checks.
    pub fn running_cookie(&self) -> Option<u64> {
        self.current.as_ref().map(|c| c.cookie)
    }

    /// A preempted task goes back to its queue with its numbers unchanged.
    fn put_back(&mut self, t: Task) {
        if t.is_rt() {
            self.insert_rt(t);
        } else {
            self.fair.push(t);
        }
    }

    /// Removes a queued task, recording its lag (it is leaving this queue).
    fn take_queued(&mut self, task: TaskId, _now: u64) -> Option<Task> {
        self.core_dirty = true;
        if let Some(i) = self.fair.iter().position(|t| t.id == task) {
            let mut t = self.fair.remove(i);
            self.dequeue_lag(&mut t);
            return Some(t);
        }
        let i = self.rt.iter().position(|t| t.id == task)?;
        Some(self.rt.remove(i))
    }

    fn dequeue_lag(&mut self, t: &mut Task) {
        if !t.is_rt() {
            let v = self.avg_with(Some(&t.fair));
            t.fair.update_lag(v, self.fair_cfg.tick_ns);
        }
    }

    fn fire_deadlines(&mut self, sh: &Shared, now: u64, fx: &mut Effects) {
        while let Some(&(t, id)) = self.deadlines.first() {
            if t > now {
                break;
            }
            self.deadlines.pop_first();
            if let Some(task) = self.parked.get_mut(&id) {
                if task.sleep_deadline == Some(t) {
                    task.sleep_deadline = None;
                    // The scheduler's own wake: no waker, through delivery.
                    let (d, k) = sh.deliver(id, WakeCause::NONE, Some(self.id));
                    fx.trace.push(Trace::Wake {
                        task: id,
                        cause: WakeCause::NONE,
                        delivery: d,
                    });
                    self.kick(k, fx);
                }
            }
        }
    }

    // ----------------------------------------------------------------------
    // Balancing

    /// Newly idle: ask the busiest CPU with queued work, own LLC first.
    fn try_steal(&mut self, sh: &Shared, fx: &mut Effects) {
        if self.steal_pending || !sh.overloaded() {
            return;
        }
        let topo = sh.topology();
        let mut seen = CpuSet::single(self.id);
        for level in [Level::Llc, Level::Node, Level::Machine] {
            let scope = topo.span(self.id, level) - seen;
            seen = seen | scope;
            let victim = scope.iter_from(self.id).filter(|&c| sh.load(c) >= 2).fold(
                None::<(u32, CpuId)>,
                |best, c| {
                    let l = sh.load(c);
                    if best.is_none_or(|(b, _)| l > b) {
                        Some((l, c))
                    } else {
                        best
                    }
                },
            );
            if let Some((_, v)) = victim {
                self.steal_pending = true;
                let msg = Msg::StealRequest {
                    thief: self.id,
                    cookie: None,
                };
                let k = sh.post(Some(self.id), v, msg);
                self.kick(k, fx);
                return;
            }
        }
    }

    /// Forced idle (`sched_core_balance()` → `try_steal_cookie()`): ask
    /// for a waiting task of the core's cookie, from a sibling that has one
    /// (its published queue says so), else from the busiest CPU with work
    /// waiting, own LLC first, then node, then machine. Linux asks every
    /// CPU of each domain in turn; one request at a time is this model's.
    fn steal_cookie(&mut self, sh: &Shared, fx: &mut Effects) {
        if self.steal_pending || cfg!(feature = "mutant-no-cookie-steal") {
            return;
        }
        let victim = {
            let core = sh.core(self.id).lock();
            if core.cookie == 0 || core.forceidle == 0 {
                return;
            }
            let c = core.cookie;
            let sib = core
                .sibs
                .iter()
                .find(|s| s.cpu != self.id && s.view.waiting.iter().any(|v| v.cookie == c))
                .map(|s| s.cpu);
            sib.map(|v| (v, c)).or_else(|| {
                let topo = sh.topology();
                let mut seen = *topo.core_cpus(self.id);
                [Level::Llc, Level::Node, Level::Machine]
                    .into_iter()
                    .find_map(|level| {
                        let scope = topo.span(self.id, level) - seen;
                        seen = seen | scope;
                        scope
                            .iter_from(self.id)
                            .filter(|&o| sh.load(o) >= 2)
                            .max_by_key(|&o| sh.load(o))
                    })
                    .map(|v| (v, c))
            })
        };
        if let Some((v, cookie)) = victim {
            self.steal_pending = true;
            let msg = Msg::StealRequest {
                thief: self.id,
                cookie: Some(cookie),
            };
            let k = sh.post(Some(self.id), v, msg);
            self.kick(k, fx);
        }
    }

    /// A thief asked: give it the queued fair task that would run last here,
    /// if its mask allows and it is not cache-hot; a forced-idle thief, a
    /// waiting task of its cookie, hot or not (`try_steal_cookie()`).
    fn give_to(
        &mut self,
        sh: &Shared,
        thief: CpuId,
        cookie: Option<u64>,
        now: u64,
        fx: &mut Effects,
    ) {
        if !sh.doorbell(thief).asleep() && sh.load(thief) > 0 && cookie.is_none() {
            return; // it found work meanwhile
        }
        let id = match cookie {
            Some(c) => self
                .fair
                .iter()
                .chain(self.rt.iter())
                .find(|t| t.cookie == c && !t.killed && t.mask.contains(thief))
                .map(|t| t.id),
            None => self.migratable(sh, now, Some(thief)).map(|t| t.id),
        };
        if let Some(t) = id.and_then(|id| self.take_queued(id, now)) {
            self.send(sh, t, thief, PlaceReason::Steal, TaskState::Queued, fx);
            self.publish(sh);
        }
    }

    /// Periodic: push one queued task to a sleeping CPU, nearest first.
    fn push_balance(&mut self, sh: &Shared, now: u64, fx: &mut Effects) {
        let Some((id, mask)) = self.migratable(sh, now, None).map(|t| (t.id, t.mask)) else {
            return;
        };
        let topo = sh.topology();
        let avoid = CpuSet::single(self.id);
        for level in [Level::Llc, Level::Node, Level::Machine] {
            if let Some(target) =
                crate::policy::idle_among(sh, &topo.span(self.id, level), self.id, &mask, &avoid)
            {
                let t = self.take_queued(id, now).expect("queued");
                self.send(sh, t, target, PlaceReason::Balance, TaskState::Queued, fx);
                self.publish(sh);
                return;
            }
        }
    }

    /// The queued fair task a balance pass may take: not killed, not
    /// cache-hot (`task_hot()`: ran within the migration cost), allowed on
    /// `to` when one is named; the one that would run last here.
    fn migratable(&self, sh: &Shared, now: u64, to: Option<CpuId>) -> Option<&Task> {
        let cost = sh.config().balance.migration_cost_ns;
        self.fair
            .iter()
            .filter(|t| !t.killed && now.saturating_sub(t.last_ran) >= cost)
            .filter(|t| to.is_none_or(|c| t.mask.contains(c)))
            .max_by_key(|t| t.fair.deadline)
    }

    /// Benchmarks only: puts a queued task back to sleep without a pass, so a
    /// benchmark can time `handle_wake` alone, wake after wake.
    #[cfg(feature = "testhost")]
    pub fn repark(&mut self, sh: &Shared, id: TaskId) {
        let t = self
            .take_queued(id, 0)
            .expect("repark: the task is queued here");
        sh.slot(id).park.set(TaskState::Queued, TaskState::Parked);
        self.parked.insert(id, t);
        self.publish(sh);
    }

    /// Benchmarks only: the messages waiting here, taken.
    #[cfg(feature = "testhost")]
    pub fn take_mail_for_bench(&mut self, sh: &Shared) -> usize {
        sh.take_mail(self.id).len()
    }

    // ----------------------------------------------------------------------

    fn kick(&mut self, k: Option<Kick>, fx: &mut Effects) {
        if let Some(k) = k {
            self.counters.count_kick(&k);
            fx.kicks.push(k);
        }
    }

    /// Publishes this CPU's load for balancing and, under core scheduling,
    /// its run queue to its core.
    fn publish(&mut self, sh: &Shared) {
        sh.set_load(
            self.id,
            self.current.is_some() as u32 + self.queued() as u32,
        );
        self.publish_core(sh);
    }
}
