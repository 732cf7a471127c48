//! The balancer seam: what moves queued work between CPUs when no wake
//! does, beside the policy seam ([`crate::Policy`]) that places wakes.
//!
//! ## The contract
//!
//! A balancer is a type [`CpuSched`](crate::CpuSched) is generic over, as a
//! policy is. Each CPU holds its own value: its per-CPU state, touched only
//! by that CPU (`&mut self`). What the CPUs of one machine share (Linux's
//! per-domain intervals, cache-aware scheduling's per-process occupancy)
//! the balancer keeps itself, behind its own locks and atomics, in a part
//! every CPU's value points to ([`Balancer::for_machine`] makes them).
//!
//! The core calls its hooks at fixed points, with a [`Cx`]: the CPU, the
//! machine's doors ([`Shared`]: topology, config, published loads,
//! doorbells), a read-only view of the CPU's run queue, and the counters.
//!
//! * [`Balancer::tick`]: the scheduler tick (when `periodic` is on);
//! * [`Balancer::newly_idle`]: the pass found nothing to run (when
//!   `newidle` is on);
//! * [`Balancer::idle_ended`]: the pass picked a task;
//! * [`Balancer::handle`]: one of its own messages arrived;
//! * [`Balancer::asked`]: another CPU's [`Request::Ask`] arrived;
//! * [`Balancer::tick_running`]: the tick, with the running task;
//! * [`Balancer::ran`]: a task stops running here (its run is accounted);
//! * [`Balancer::threads`]: a process gains or loses a thread;
//! * [`Balancer::publish`]: the CPU publishes its load;
//! * [`Balancer::keeps_idle_tick`]: whether an idle CPU keeps its tick.
//!
//! A hook never moves a task or posts a message itself: it returns
//! `#[must_use]` [`Requests`] (send this queued task there, post this
//! message, ask that CPU for work, push the running task at the next pick)
//! that the core carries out, in order, through the one path that moves
//! tasks today (an `Adopt` message and a kick); then, when a task moved,
//! the CPU publishes its load.
//!
//! ## The built-ins
//!
//! Three implementations live in this crate:
//! [`Seed`](crate::balance::Seed) (the seed's: steal when newly idle, push
//! from the tick), [`LinuxLb`](crate::linux::balance::LinuxLb) (Linux's)
//! and [`LinuxCasLb`](crate::linux::cache::LinuxCasLb) (Linux's with
//! cache-aware scheduling). [`Builtin`](crate::balancers::Builtin) holds
//! whichever the config's [`BalanceKind`](crate::config::BalanceKind)
//! names, so a host that runs every built-in needs one type; the core never
//! asks which one runs. A balancer written outside this crate plugs in the
//! same way, with the policy that brings it: `examples/custom-policy` has
//! one, with its tutorial.
//!
//! ## Hooks and when the core calls them
//!
//! [`Balancer::newly_idle_reads_itself`] says whether the CPU publishes its
//! empty queue before [`Balancer::newly_idle`] (Linux's passes count the CPU
//! among the others; the seed's reads only the others and saves that
//! publish on every idle). One ask is out per round of a pass: the core
//! calls `newly_idle` only when no ask of this round is pending.

use alloc::vec::Vec;
use core::fmt;

use smallvec::SmallVec;

use schedlab_topology::{CpuId, Topology};

use crate::config::Config;
use crate::effects::{Counters, PlaceReason};
use crate::runqueue::RunQueue;
use crate::shared::LlcStats;
use crate::shared::Shared;
use crate::task::PolicyState;
use crate::task::{Task, TaskId};

/// What a balancer hook sees of its CPU.
pub struct Cx<'a, S> {
    pub(crate) cpu: CpuId,
    pub(crate) sh: &'a Shared<S>,
    pub(crate) rq: &'a RunQueue<S>,
    /// The running task the stopper will push at the next pick, and where.
    pub(crate) pushing: Option<(TaskId, CpuId)>,
    /// The CPU's counters: a balancer counts what it does here.
    pub counters: &'a mut Counters,
}

impl<'a, S: PolicyState> Cx<'a, S> {
    /// The CPU the hook runs on.
    pub fn cpu(&self) -> CpuId {
        self.cpu
    }

    /// The machine's doors: topology, config, published loads, doorbells.
    pub fn shared(&self) -> &'a Shared<S> {
        self.sh
    }

    /// The running task, if any.
    pub fn current(&self) -> Option<&'a Task<S>> {
        self.rq.current.as_ref()
    }

    /// The queued fair tasks, in queue order (runnable: not the delayed
    /// ones, which a balancer never moves here; Linux's `can_migrate_task()`
    /// moves one only for a `migrate_load` imbalance, not modelled).
    pub fn queued_fair(&self) -> impl Iterator<Item = &'a Task<S>> {
        self.rq.fair.queued.iter()
    }

    /// Runnable tasks waiting here (not the running one).
    pub fn queued(&self) -> usize {
        self.rq.queued()
    }

    /// The running task and every queued one.
    pub fn runnable(&self) -> impl Iterator<Item = &'a Task<S>> {
        self.rq.runnable()
    }

    /// A running task the stopper will push at the next pick, and where.
    pub fn pushing(&self) -> Option<(TaskId, CpuId)> {
        self.pushing
    }
}

/// One thing a balancer asks its CPU to do.
#[derive(Debug)]
pub enum Request<M> {
    /// Take the queued task `task` out of this CPU's queue and send it to
    /// `to` (an `Adopt` and a kick), counted as a move for `reason`.
    Send {
        task: TaskId,
        to: CpuId,
        reason: PlaceReason,
    },
    /// Post the balancer's own message `msg` to `to` (and kick it).
    Post { to: CpuId, msg: M },
    /// Ask `victim` for a queued task: its balancer's [`Balancer::asked`]
    /// answers. One ask is out per pass.
    Ask { victim: CpuId },
    /// Push the running task `task` to `to` at the next pick (Linux's
    /// stopper, `active_load_balance_cpu_stop()`), asking for the pick now.
    PushRunning { task: TaskId, to: CpuId },
}

/// What a hook asks for, in order. A hook usually asks for nothing or
/// one thing, so one is held inline: no allocation on the hot path (a
/// `Vec` here cost about 4 % of a 768-task run's instructions).
#[must_use = "the core must carry out a balancer's requests"]
#[derive(Debug)]
pub struct Requests<M>(SmallVec<[Request<M>; 1]>);

impl<M> Default for Requests<M> {
    fn default() -> Self {
        Requests(SmallVec::new())
    }
}

impl<M> Requests<M> {
    pub fn none() -> Self {
        Requests::default()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn push(&mut self, r: Request<M>) {
        self.0.push(r);
    }

    /// The same requests with their messages mapped to another type.
    pub fn map<N>(self, f: impl Fn(M) -> N) -> Requests<N> {
        if self.0.is_empty() {
            return Requests::none();
        }
        Requests(
            self.0
                .into_iter()
                .map(|r| match r {
                    Request::Send { task, to, reason } => Request::Send { task, to, reason },
                    Request::Post { to, msg } => Request::Post { to, msg: f(msg) },
                    Request::Ask { victim } => Request::Ask { victim },
                    Request::PushRunning { task, to } => Request::PushRunning { task, to },
                })
                .collect(),
        )
    }
}

impl<M> IntoIterator for Requests<M> {
    type Item = Request<M>;
    type IntoIter = smallvec::IntoIter<[Request<M>; 1]>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

/// A load balancer. See the module doc for the contract.
pub trait Balancer: Clone + Send + Sync + 'static {
    /// Its own messages between CPUs.
    type Msg: fmt::Debug + Send + 'static;

    /// One value per CPU of the machine, in CPU order, sharing what the
    /// balancer shares; `max_tasks` is the machine's task table (process
    /// ids are below it).
    fn for_machine(topo: &Topology, config: &Config, max_tasks: usize) -> Vec<Self>;

    /// The name a user writes (`balance = "linux"`).
    fn name(&self) -> &str;

    /// The scheduler tick, when periodic balancing is on.
    fn tick<S: PolicyState>(&mut self, cx: &mut Cx<'_, S>, now: u64) -> Requests<Self::Msg>;

    /// The pass found nothing to run here (newly idle balancing is on and
    /// no ask is out).
    fn newly_idle<S: PolicyState>(&mut self, cx: &mut Cx<'_, S>, now: u64) -> Requests<Self::Msg>;

    /// Whether [`Balancer::newly_idle`] reads this CPU's own published
    /// load (Linux's passes count the CPU among the others): then the CPU
    /// publishes its empty queue first. The seed's reads only the others'
    /// and skips that publish (one per idle, on the hot path).
    fn newly_idle_reads_itself(&self) -> bool {
        true
    }

    /// The pass picked a task.
    fn idle_ended<S: PolicyState>(&mut self, _cx: &mut Cx<'_, S>, _now: u64) {}

    /// One of its messages arrived here.
    fn handle<S: PolicyState>(
        &mut self,
        _cx: &mut Cx<'_, S>,
        _msg: Self::Msg,
        _now: u64,
    ) -> Requests<Self::Msg> {
        Requests::none()
    }

    /// `thief` asked this CPU for a queued task ([`Request::Ask`]).
    fn asked<S: PolicyState>(
        &mut self,
        _cx: &mut Cx<'_, S>,
        _thief: CpuId,
        _now: u64,
    ) -> Requests<Self::Msg> {
        Requests::none()
    }

    /// The tick, after [`Balancer::tick`]'s requests were carried out,
    /// with the task running on `cpu` (when periodic balancing is on).
    fn tick_running<S: PolicyState>(
        &mut self,
        _cpu: CpuId,
        _topo: &Topology,
        _counters: &mut Counters,
        _task: &mut Task<S>,
        _now: u64,
    ) {
    }

    /// `task` stops running on `cpu` (it parks, exits, or is switched
    /// out): its run since it was last accounted.
    fn ran<S: PolicyState>(
        &mut self,
        _cpu: CpuId,
        _topo: &Topology,
        _task: &mut Task<S>,
        _now: u64,
    ) {
    }

    /// A task of `process` starts (`delta` 1) or ends (-1).
    fn threads(&mut self, _topo: &Topology, _process: u32, _delta: i32) {}

    /// The CPU publishes its load: publish what the balancer's peers read.
    fn publish<S: PolicyState>(&self, _cx: &Cx<'_, S>) {}

    /// Whether this CPU, idle, keeps its tick (and balances from it).
    fn keeps_idle_tick(&self, _config: &Config) -> bool {
        false
    }

    /// LLC `llc`'s (utilization, capacity) as the balancer last recorded
    /// them, for the policies' [`crate::policy::Machine::llc_stats`].
    fn llc_stats(&self, _llc: usize) -> Option<(u64, u64)> {
        None
    }
}

/// A balancer's record of the LLCs, as the policies' view reads it.
impl<B: Balancer> LlcStats for B {
    fn recorded(&self, llc: usize) -> Option<(u64, u64)> {
        Balancer::llc_stats(self, llc)
    }
}
