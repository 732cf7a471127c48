//! One CPU's scheduler: the state it owns and the entry points a host calls
//! on its behalf.
//!
//! ## Ownership
//!
//! A `CpuSched` is owned by its CPU (`&mut self`): its rooms (the run
//! queue, its held (stopped) tasks, the ids of the tasks that parked here
//! and their deadlines), its copy of the placement policy, its balancer. Another CPU can reach it
//! only through [`Shared`]: a message in its mailbox, a ring of its
//! doorbell, a task's park word. Every entry point runs on behalf of this
//! CPU, takes `now`, and returns [`Effects`] for the host to carry out.
//!
//! ## Rooms
//!
//! `cpu/` is the CPU itself: this file keeps the struct, the tick and the
//! pass; `thread` the calls a running thread makes; `carry` the one place
//! that carries out what the rooms return (`Act`) and the balancer asks
//! (its requests): the reschedule flag, publishing, posting and kicking.
//! The rooms own their state (`rooms`: the run queue, the sleepers, the
//! held tasks, the pick's state, the counters), and what the CPU does with
//! them are steps lent what they work on, which never reach the CPU:
//! `wake` (the whole wake protocol: attribution, delivery, the deciding
//! CPU's half, adoption), `pick` (what runs next, core-wide under core
//! scheduling), `lifecycle` (kill, stop, continue, set-mask, forwarding),
//! `cookie` (core scheduling's steal), `moves` (handing to
//! another CPU), and the balancer (`balancer`).
//!
//! ## The pass
//!
//! The host runs [`CpuSched::pass`] when the CPU is kicked, and the entry
//! points that stop the current task (block, yield, exit) end in one:
//!
//! 1. answer the doorbell (awake, kick answered);
//! 2. drain the mailbox: `Wake` → the deciding CPU's half of a wake,
//!    `Adopt` → take ownership, steal requests, and the lifecycle messages;
//! 3. fire due deadlines (a wake with no waker, through delivery);
//! 4. loop while the mailbox refilled;
//! 5. pick: RT first, then EEVDF, the running task included; under core
//!    scheduling the pick is core-wide (`coresched`);
//! 6. nothing to run: ask for a steal (newly idle balance), set the doorbell
//!    asleep, look at the mailbox once more (see `doorbell`), and idle at the
//!    depth the host named.

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use schedlab_topology::CpuId;

use crate::balancer::{Balancer, Cx};
use crate::balancers::Builtin;
use crate::cookie::cookie_victim;
use crate::doorbell::IdleDepth;
use crate::effects::{Counters, Effects, Switch};
use crate::fair::Entity;
use crate::held::Held;
use crate::pick::publish_core;
use crate::pick_state::PickState;
use crate::policy::Policy;
use crate::rooms::Rooms;
use crate::runqueue::{Resched, RunQueue};
use crate::shared::{Msg, Shared};
use crate::sleepers::Sleepers;
use crate::spawn::MachineSpawn;
use crate::task::{Task, TaskId};

/// Where a task sits on its owner, for hosts and invariant checks.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Holding {
    Running,
    Queued,
    Parked,
    /// Runnable but stopped.
    Held,
    /// Blocked, kept competing in the run queue (`DELAY_DEQUEUE`).
    Delayed,
}

/// What [`CpuSched::spawn`] created and what the host must do about it.
#[must_use = "the host must carry out the spawn's effects"]
#[derive(Debug)]
pub struct Spawned {
    pub task: TaskId,
    pub effects: Effects,
}

/// A balancer hook's [`Cx`] for CPU `$s` (fields borrowed one by one, so
/// the balancer itself stays free to borrow mutably).
macro_rules! cx {
    ($s:ident, $sh:expr) => {
        Cx {
            cpu: $s.id,
            sh: $sh,
            rq: &$s.rooms.rq,
            pushing: $s.rooms.pick.pushing,
            counters: &mut $s.rooms.counters,
        }
    };
}

/// The wake protocol's room for CPU `$s`, lent its fields for one step.
macro_rules! waking {
    ($s:ident, $sh:expr) => {
        $crate::wake::Waking {
            cpu: $s.id,
            sh: $sh,
            policy: &mut $s.policy,
            balancer: &$s.balancer,
            rooms: &mut $s.rooms,
        }
    };
}

mod carry;
mod thread;

/// One CPU's scheduler state, generic over its placement policy `P` and
/// its load balancer `B` (by default the built-in one the config names).
pub struct CpuSched<P: Policy, B: Balancer = Builtin> {
    pub(crate) id: CpuId,
    pub(crate) policy: P,
    pub(crate) balancer: B,
    pub(crate) spawn: MachineSpawn,
    /// The run queue, the sleepers, the held tasks, the pick's state and
    /// the counters, side by side.
    pub(crate) rooms: Rooms<P::TaskState>,
    irq_depth: u32,
    pub(crate) steal_pending: bool,
    /// The mailbox's messages while a pass handles them: swapped with the
    /// mailbox, so neither gives its capacity up.
    mail: VecDeque<Msg<P::TaskState>>,
}

impl<P: Policy, B: Balancer> CpuSched<P, B> {
    /// The schedulers of every CPU of `sh`'s machine, one per CPU, each with
    /// its own copy of `policy` and its CPU's balancer, for the host to
    /// hand out.
    pub fn for_machine(sh: &Shared<P::TaskState>, policy: P) -> Vec<CpuSched<P, B>> {
        let balancers = B::for_machine(sh.topology(), sh.config(), sh.task_capacity());
        sh.topology()
            .cpu_ids()
            .zip(balancers)
            .map(|(id, balancer)| CpuSched {
                id,
                policy: policy.clone(),
                balancer,
                spawn: MachineSpawn::new(sh.config().spawn, id),
                rooms: Rooms {
                    rq: RunQueue::new(sh.config().fair),
                    sleepers: Sleepers::default(),
                    held: Held::default(),
                    pick: PickState::new(
                        sh.config().core_sched && sh.topology().core_cpus(id).weight() > 1,
                    ),
                    counters: Counters::default(),
                },
                irq_depth: 0,
                steal_pending: false,
                mail: VecDeque::new(),
            })
            .collect()
    }

    pub fn id(&self) -> CpuId {
        self.id
    }

    pub fn current(&self) -> Option<TaskId> {
        self.rooms.rq.current_id()
    }

    pub fn counters(&self) -> &Counters {
        &self.rooms.counters
    }

    /// Runnable tasks waiting here (not the running one).
    pub fn queued(&self) -> usize {
        self.rooms.rq.queued()
    }

    /// Every task this CPU holds, and how. A parked task is held while its
    /// entity waits in its slot with this CPU as its owner.
    pub fn holdings(&self, sh: &Shared<P::TaskState>) -> Vec<(TaskId, Holding)> {
        let cur = self
            .rooms
            .rq
            .current
            .iter()
            .map(|t| (t.id, Holding::Running));
        let q = self
            .rooms
            .rq
            .fair
            .queued
            .iter()
            .chain(self.rooms.rq.rt.iter())
            .map(|t| (t.id, Holding::Queued));
        let d = self
            .rooms
            .rq
            .fair
            .delayed
            .iter()
            .map(|t| (t.id, Holding::Delayed));
        let p = self
            .rooms
            .sleepers
            .iter()
            .filter(|&&id| self.rooms.sleepers.parked_here(self.id, sh, id))
            .map(|&id| (id, Holding::Parked));
        let h = self.rooms.held.ids().map(|id| (id, Holding::Held));
        cur.chain(q).chain(d).chain(p).chain(h).collect()
    }

    /// A copy of a task this CPU holds.
    pub fn task(&self, sh: &Shared<P::TaskState>, id: TaskId) -> Option<Task<P::TaskState>> {
        if let Some(t) = self.rooms.rq.runnable().find(|t| t.id == id) {
            return Some(t.clone());
        }
        if let Some(t) = self.rooms.rq.fair.delayed.iter().find(|t| t.id == id) {
            return Some(t.clone());
        }
        if let Some(t) = self.rooms.held.get(id) {
            return Some(t.clone());
        }
        if self.rooms.sleepers.parked_here(self.id, sh, id) {
            return sh.parked_task(id);
        }
        None
    }

    /// The policy's state for a task this CPU holds.
    pub fn task_state(&self, sh: &Shared<P::TaskState>, id: TaskId) -> Option<P::TaskState> {
        self.task(sh, id).map(|t| t.policy)
    }

    pub fn entity_of(&self, sh: &Shared<P::TaskState>, id: TaskId) -> Option<Entity> {
        self.task(sh, id).map(|t| t.fair)
    }

    /// The earliest deadline this CPU holds.
    pub fn next_deadline(&self) -> Option<u64> {
        self.rooms.sleepers.next_deadline()
    }

    /// The cookie of the task this CPU runs, for invariant checks.
    pub fn running_cookie(&self) -> Option<u64> {
        self.rooms.rq.current.as_ref().map(|c| c.cookie)
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

    /// The waker a wake posted now names (the `wake` module's step 1): this
    /// CPU, when a thread that has not begun leaving runs here outside an
    /// interrupt.
    pub fn waker(&self) -> Option<CpuId> {
        if self.irq_depth > 0 {
            return None;
        }
        match &self.rooms.rq.current {
            Some(t) if !t.leaving => Some(self.id),
            _ => None,
        }
    }

    /// The scheduler tick: charge the running task, ask for a reschedule
    /// per `update_curr()`, and balance periodically.
    pub fn tick(&mut self, sh: &Shared<P::TaskState>, now: u64) -> Effects {
        self.rooms.rq.clock_to(now);
        // `entity_tick()` -> `update_load_avg()`, published for wakers.
        self.rooms.rq.sync_pelt();
        sh.set_pelt(self.id, &self.rooms.rq.avg);
        let mut fx = Effects::default();
        let others = self.rooms.rq.fair.others();
        let asks = self.rooms.rq.tick_asks(now);
        if sh.config().balance.periodic {
            let req = self.balancer.tick(&mut cx!(self, sh), now);
            self.carry_out(sh, req, &mut fx);
            if let Some(t) = self.rooms.rq.current.as_mut() {
                let topo = sh.topology();
                (self.balancer).tick_running(self.id, topo, &mut self.rooms.counters, t, now);
            }
        }
        // `task_tick_core()`: alone beside a forced-idle sibling, give way
        // once half the slice is used (MIN_NR_TASKS_DURING_FORCEIDLE = 2).
        let forceidle = publish_core(self.id, sh, &self.rooms.pick, &mut self.rooms.rq) > 0;
        let give_way = forceidle
            && !others
            && self
                .rooms
                .rq
                .current
                .as_ref()
                .is_some_and(|t| !t.is_rt() && t.fair.slice_used(2));
        if asks || give_way {
            let id = self.current().expect("a running task asked");
            self.resched(Resched(id), &mut fx);
        }
        fx.resched = self.rooms.pick.need_resched;
        fx
    }

    // ----------------------------------------------------------------------
    // The pass

    /// Drains the mailbox, fires deadlines, and picks (see the module doc).
    pub fn pass(&mut self, sh: &Shared<P::TaskState>, now: u64, idle: IdleDepth) -> Effects {
        let mut fx = Effects::default();
        self.pass_into(sh, now, idle, &mut fx);
        fx
    }

    /// A pass whose effects follow `fx`'s (as `fx.merge(self.pass(..))`,
    /// without building and moving a second `Effects`).
    pub(crate) fn pass_after(
        &mut self,
        sh: &Shared<P::TaskState>,
        now: u64,
        idle: IdleDepth,
        fx: &mut Effects,
    ) {
        let (resched, timer) = (fx.resched, fx.timer);
        self.pass_into(sh, now, idle, fx);
        fx.resched |= resched;
        fx.timer = fx.timer.or(timer);
    }

    fn pass_into(
        &mut self,
        sh: &Shared<P::TaskState>,
        now: u64,
        idle: IdleDepth,
        fx: &mut Effects,
    ) {
        self.rooms.rq.clock_to(now);
        loop {
            sh.doorbell(self.id).answer();
            if sh.take_resched(self.id) {
                self.rooms.pick.need_resched = true;
            }
            self.steal_pending = false;
            // Popped one at a time, in place: a `drain(..)` of a buffer
            // taken out of `self` pays for its drop guard and a drop on
            // every pass, mail or none.
            sh.swap_mail(self.id, &mut self.mail);
            while let Some(msg) = self.mail.pop_front() {
                self.handle(sh, msg, now, fx);
            }
            self.fire_deadlines(sh, now, fx);
            if sh.has_mail(self.id) {
                continue;
            }
            let picked = self.schedule(sh, now, fx);
            if core::mem::take(&mut self.rooms.pick.wait_mail) {
                continue;
            }
            if let Some(next) = picked {
                self.balancer.idle_ended(&mut cx!(self, sh), now);
                fx.switch = Some(Switch::Run(next));
                break;
            }
            if self.queued() > 0 {
                // Forced idle: the core runs another cookie than the work
                // waiting here (`queue_core_balance()`).
                if !self.steal_pending {
                    if let Some((victim, cookie)) = cookie_victim(self.id, sh) {
                        self.ask(sh, victim, Some(cookie), fx);
                    }
                }
            } else if sh.config().balance.newidle && !self.steal_pending {
                if self.balancer.newly_idle_reads_itself() {
                    // It reads what this CPU has now: nothing.
                    self.publish(sh);
                }
                let req = self.balancer.newly_idle(&mut cx!(self, sh), now);
                self.steal_pending = !req.is_empty();
                self.carry_out(sh, req, fx);
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
    }

    /// Benchmarks only: puts a queued task back to sleep without a pass, so a
    /// benchmark can time a parked wake alone, wake after wake.
    #[cfg(feature = "testhost")]
    pub fn repark(&mut self, sh: &Shared<P::TaskState>, id: TaskId) {
        let t = self
            .rooms
            .rq
            .take_queued(id, false)
            .expect("repark: the task is queued here");
        sh.slot(id).park.set(
            crate::park::TaskState::Queued,
            crate::park::TaskState::Parked,
        );
        *sh.slot(id).parked.lock() = Some(t);
        self.rooms.sleepers.park(id, None);
        self.publish(sh);
    }

    /// Benchmarks only: the owner's half of a parked wake, alone.
    #[cfg(feature = "testhost")]
    pub fn handle_wake_for_bench(
        &mut self,
        sh: &Shared<P::TaskState>,
        task: TaskId,
        cause: crate::effects::WakeCause,
        now: u64,
        fx: &mut Effects,
    ) {
        if let Some(a) = waking!(self, sh).handle_wake(task, cause, now, fx) {
            self.act(sh, a, now, fx);
        }
    }

    /// Benchmarks only: the messages waiting here, taken.
    #[cfg(feature = "testhost")]
    pub fn take_mail_for_bench(&mut self, sh: &Shared<P::TaskState>) -> usize {
        sh.take_mail(self.id).len()
    }

    // ----------------------------------------------------------------------

    /// Whether this CPU, idle, keeps its tick (its balancer says so).
    pub fn keeps_idle_tick(&self, sh: &Shared<P::TaskState>) -> bool {
        self.balancer.keeps_idle_tick(sh.config())
    }
}
