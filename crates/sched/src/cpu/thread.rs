//! The running thread's calls into its CPU: spawn a task, wake one, park
//! (block, sleep, join), yield, exit; and kill, stop, continue or re-mask
//! any task (the `lifecycle` room's step 1). Each runs on the thread's CPU,
//! takes `now`, and returns the [`Effects`] for the host; those that stop
//! the running task end in a pass.

use schedlab_topology::{CpuSet, LlcId};

use super::{CpuSched, Spawned};

use crate::balancer::Balancer;
use crate::doorbell::IdleDepth;
use crate::effects::{Effects, Park, PlaceReason, Switch, Trace, WakeCause};
use crate::fair::WakeFlags;
use crate::park::{Parked, TaskState};
use crate::policy::{Policy, SpawnRule};
use crate::shared::{Msg, Shared, SpawnError};
use crate::task::{new_task, TaskId, TaskSpec};

impl<P: Policy, B: Balancer> CpuSched<P, B> {
    /// Creates a task and places it (spawn placement: the policy's
    /// [`Policy::place_new`], else the machine's spawn rule). The new task is
    /// runnable at once.
    pub fn spawn(
        &mut self,
        sh: &Shared<P::TaskState>,
        spec: TaskSpec,
        now: u64,
    ) -> Result<Spawned, SpawnError> {
        self.rooms.rq.clock_to(now);
        let topo = sh.topology();
        let mask = spec.mask.map_or(*topo.cpus(), |m| m & *topo.cpus());
        if mask.is_empty() {
            return Err(SpawnError::EmptyMask);
        }
        let m = sh.machine(self.id, now).with_llcs(&self.balancer);
        let target = self
            .policy
            .place_new(&m, self.id, &mask)
            .filter(|c| mask.contains(*c))
            .or_else(|| self.spawn.place_new(&m, self.id, &mask))
            .or_else(|| {
                if mask.contains(self.id) {
                    Some(self.id)
                } else {
                    mask.iter_from(self.id).find(|c| topo.contains(*c))
                }
            })
            .ok_or(SpawnError::EmptyMask)?;
        let state = if target == self.id {
            TaskState::Queued
        } else {
            TaskState::Moving
        };
        let id = sh.alloc_task(state, target)?;
        let slice = spec.slice_ns.unwrap_or(sh.config().fair.base_slice_ns);
        let task = new_task(id, &spec, mask, slice, now);
        if let Some(p) = spec.process {
            self.balancer.threads(topo, p, 1);
        }
        let mut fx = Effects::default();
        fx.trace.push(Trace::Place {
            task: id,
            from: self.id,
            cpu: target,
            reason: PlaceReason::Spawn,
        });
        if target == self.id {
            let fork = WakeFlags {
                fork: true,
                in_task: true,
                ..WakeFlags::default()
            };
            self.enqueue(sh, task, now, fork, &mut fx);
        } else {
            self.rooms.counters.count_move(PlaceReason::Spawn);
            let msg = Msg::Adopt {
                task,
                reason: PlaceReason::Spawn,
                sync: false,
            };
            self.post(sh, target, msg, &mut fx);
        }
        Ok(Spawned {
            task: id,
            effects: fx,
        })
    }

    /// The running thread (or a device interrupt, between `irq_enter` and
    /// `irq_exit`) wakes `task`. Goes through delivery; attribution is
    /// [`CpuSched::waker`].
    pub fn wake(&mut self, sh: &Shared<P::TaskState>, task: TaskId, now: u64) -> Effects {
        self.wake_with(sh, task, false, now)
    }

    /// [`CpuSched::wake`] from a thread that blocks right after (a sync
    /// wake, Linux's `WF_SYNC`).
    pub fn wake_sync(&mut self, sh: &Shared<P::TaskState>, task: TaskId, now: u64) -> Effects {
        self.wake_with(sh, task, true, now)
    }

    #[inline]
    fn wake_with(
        &mut self,
        sh: &Shared<P::TaskState>,
        task: TaskId,
        sync: bool,
        now: u64,
    ) -> Effects {
        self.rooms.rq.clock_to(now);
        let waker = self.waker();
        let cause = WakeCause {
            waker,
            sync: sync && waker.is_some(),
        };
        let mut fx = Effects::default();
        self.deliver(sh, task, cause, now, &mut fx);
        fx
    }

    /// The running task blocks. If a wake is pending the park returns at
    /// once (`switch` is the same task); else it parks and the CPU passes.
    pub fn block(&mut self, sh: &Shared<P::TaskState>, now: u64, idle: IdleDepth) -> Effects {
        self.park_current(sh, now, None, idle)
    }

    /// The running task sleeps until `deadline`; the owner's deadline heap
    /// wakes it with no waker.
    pub fn sleep_until(
        &mut self,
        sh: &Shared<P::TaskState>,
        deadline: u64,
        now: u64,
        idle: IdleDepth,
    ) -> Effects {
        if deadline <= now {
            return self.returned();
        }
        self.park_current(sh, now, Some(deadline), idle)
    }

    /// A parking call that returns at once: the running task runs on.
    fn returned(&self) -> Effects {
        Effects {
            park: Park::Returned,
            ..self.keep_running()
        }
    }

    fn keep_running(&self) -> Effects {
        Effects {
            switch: self.current().map(Switch::Run),
            ..Effects::default()
        }
    }

    /// Parks the running task: `commit`, then `finish_park` (which returns
    /// at once when a wake is pending); a parked task's entity goes into its
    /// slot, where the CPU that wins its wake finds it, unless the run queue
    /// keeps it delayed (`DELAY_DEQUEUE`, decided first: the park word then
    /// says `Delayed`).
    fn park_current(
        &mut self,
        sh: &Shared<P::TaskState>,
        now: u64,
        deadline: Option<u64>,
        idle: IdleDepth,
    ) -> Effects {
        self.rooms.rq.clock_to(now);
        // One `Effects`, built where it is returned: both paths fill it.
        let mut fx = Effects::default();
        let mut task = self
            .rooms
            .rq
            .current
            .take()
            .expect("block with no running task");
        let slot = sh.slot(task.id);
        slot.park.commit();
        let delay = self.rooms.rq.would_delay(&mut task, now);
        let to = if delay {
            TaskState::Delayed
        } else {
            TaskState::Parked
        };
        if let Parked::FlagConsumed { waker_llc } = slot.park.finish_park_as(to) {
            if let Some(l) = waker_llc {
                let m = sh.machine(self.id, now).with_llcs(&self.balancer);
                self.policy
                    .flag_consumed(&m, LlcId::from_raw(l), &mut task.policy);
            }
            fx.park = Park::Returned;
            fx.trace.push(Trace::ParkReturned { task: task.id });
            fx.switch = Some(Switch::Run(task.id));
            self.rooms.rq.current = Some(task);
            return fx;
        }
        self.rooms.rq.leaving(&mut task, now);
        self.balancer.ran(self.id, sh.topology(), &mut task, now);
        task.sleep_deadline = deadline;
        let id = task.id;
        fx.park = Park::Parked;
        fx.trace.push(Trace::Parked { task: id });
        match self.rooms.rq.block_charged(task, delay) {
            // From here a waker that won `Parked -> Waking` may take it (it
            // waits for this store, as Linux's waker waits for `p->on_cpu`).
            Some(task) => *slot.parked.lock() = Some(task),
            None => self.rooms.counters.fair_delayed += 1,
        }
        self.rooms.sleepers.park(id, deadline);
        self.pass_after(sh, now, idle, &mut fx);
        fx
    }

    /// The running task yields: fair moves its deadline a slice on
    /// (`yield_task_fair`), RT goes to the back of its priority.
    pub fn yield_now(&mut self, sh: &Shared<P::TaskState>, now: u64, idle: IdleDepth) -> Effects {
        self.rooms.rq.clock_to(now);
        if let Some(t) = self.rooms.rq.current.as_mut() {
            if t.is_rt() {
                let t = self.rooms.rq.current.take().expect("checked");
                sh.slot(t.id)
                    .park
                    .set(TaskState::Running, TaskState::Queued);
                self.rooms.rq.requeue_rt(t, now);
            } else {
                t.fair.update_curr(now);
                t.fair.deadline += t.fair.vslice();
                t.fair.vprot = t.fair.vruntime;
            }
        }
        self.rooms.pick.need_resched = true;
        self.pass(sh, now, idle)
    }

    /// The running thread begins leaving its process: from now on its wakes
    /// name no waker. Set once, never cleared.
    pub fn begin_leaving(&mut self) {
        if let Some(t) = self.rooms.rq.current.as_mut() {
            t.leaving = true;
        }
    }

    /// The running task exits: leaving is set, joiners are woken (with no
    /// waker), the task is gone, and the CPU passes.
    pub fn exit(&mut self, sh: &Shared<P::TaskState>, now: u64, idle: IdleDepth) -> Effects {
        self.rooms.rq.clock_to(now);
        self.begin_leaving();
        let mut fx = Effects::default();
        let task = self.current().expect("exit with no running task");
        let joiners = {
            let mut j = sh.slot(task).join.lock();
            j.exited = true;
            core::mem::take(&mut j.joiners)
        };
        for j in joiners {
            let cause = WakeCause {
                waker: self.waker(),
                sync: false,
            };
            self.deliver(sh, j, cause, now, &mut fx);
        }
        let mut t = self.rooms.rq.current.take().expect("checked");
        self.rooms.rq.dequeue_running(&mut t, now);
        self.balancer.ran(self.id, sh.topology(), &mut t, now);
        if let Some(p) = t.process {
            self.balancer.threads(sh.topology(), p, -1);
        }
        sh.slot(task).park.set(TaskState::Running, TaskState::Dead);
        fx.trace.push(Trace::Exited { task });
        self.pass_after(sh, now, idle, &mut fx);
        fx
    }

    /// The running task waits for `target` to exit.
    pub fn join(
        &mut self,
        sh: &Shared<P::TaskState>,
        target: TaskId,
        now: u64,
        idle: IdleDepth,
    ) -> Effects {
        let me = self.current().expect("join with no running task");
        {
            let mut j = sh.slot(target).join.lock();
            if j.exited {
                return self.returned();
            }
            j.joiners.push(me);
        }
        // An exit between the push and the park is a flag: the park returns.
        self.block(sh, now, idle)
    }

    /// Kills `target`: it runs only to its exit (the host checks
    /// [`Shared::is_killed`] before each of its steps).
    pub fn kill(&mut self, sh: &Shared<P::TaskState>, target: TaskId, now: u64) -> Effects {
        let old = sh.slot(target).park.kill();
        let mut fx = Effects::default();
        if old.state != TaskState::Dead {
            self.send_to_owner(sh, Msg::Kill { task: target }, now, &mut fx);
        }
        fx
    }

    pub fn stop(&mut self, sh: &Shared<P::TaskState>, target: TaskId, now: u64) -> Effects {
        let mut fx = Effects::default();
        self.send_to_owner(sh, Msg::Stop { task: target }, now, &mut fx);
        fx
    }

    pub fn cont(&mut self, sh: &Shared<P::TaskState>, target: TaskId, now: u64) -> Effects {
        let mut fx = Effects::default();
        self.send_to_owner(sh, Msg::Continue { task: target }, now, &mut fx);
        fx
    }

    /// Changes `target`'s mask; its owner corrects its place.
    pub fn set_mask(
        &mut self,
        sh: &Shared<P::TaskState>,
        target: TaskId,
        mask: CpuSet,
        now: u64,
    ) -> Effects {
        let mut fx = Effects::default();
        let mask = alloc::boxed::Box::new(mask);
        let msg = Msg::SetMask { task: target, mask };
        self.send_to_owner(sh, msg, now, &mut fx);
        fx
    }

    /// The lifecycle's step 1: to the task's owner, or acted on here.
    fn send_to_owner(
        &mut self,
        sh: &Shared<P::TaskState>,
        msg: Msg<P::TaskState>,
        now: u64,
        fx: &mut Effects,
    ) {
        let task = msg.task().expect("lifecycle messages name a task");
        let owner = sh.task_word(task).owner;
        if owner == self.id {
            self.handle_lifecycle(sh, msg, now, fx);
        } else {
            self.post(sh, owner, msg, fx);
        }
    }
}
