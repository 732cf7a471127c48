//! A program's mutex and its own affinity: `lock` (a relock deadlocks, as a
//! default pthread mutex does), `unlock` (by a task that does not hold the
//! lock, the run stops: undefined for a default mutex), and `affinity`
//! (`sched_setaffinity` on itself).

use schedlab_sched::Balancer;
use schedlab_sched::{Policy, TaskId};
use schedlab_topology::CpuId;

use super::Engine;
use crate::objects::LockId;
use crate::outcome::StallCause;

impl<P: Policy, B: Balancer> Engine<P, B> {
    /// Takes lock `l`, or waits for its hand-off. A task that holds it
    /// already waits for ever: the stall report names the relock.
    pub(super) fn op_lock(&mut self, cpu: CpuId, task: TaskId, l: LockId) -> bool {
        let fresh = !self.task(task).op_started;
        self.task(task).op_started = true;
        let lock = &mut self.objects.locks[l.index()];
        if fresh && lock.owner() == Some(task) {
            // Nothing will wake it.
            return self.wait(cpu, task);
        }
        if lock.acquire(task) {
            self.done(task)
        } else {
            self.wait(cpu, task)
        }
    }

    /// Releases lock `l` to its first waiter; by a task that does not hold
    /// it, the run stops with [`StallCause::Misuse`].
    pub(super) fn op_unlock(&mut self, cpu: CpuId, task: TaskId, l: LockId) -> bool {
        let owner = self.objects.locks[l.index()].owner();
        if owner != Some(task) {
            let held = owner.map_or("nobody holds it".to_string(), |o| {
                format!("{} holds it", self.name(o))
            });
            self.halt = Some(StallCause::Misuse {
                task: self.name(task).to_string(),
                at_ns: self.now,
                what: format!(
                    "unlocked lock {:?}, which it does not hold ({held}): undefined for a default mutex",
                    self.objects.lock_name(l)
                ),
            });
            return false;
        }
        if let Some(w) = self.objects.locks[l.index()].release() {
            self.wake(cpu, w);
        }
        self.done(task)
    }

    /// Sets the task's own mask to the `m`-th of the run's masks.
    pub(super) fn op_affinity(&mut self, cpu: CpuId, task: TaskId, m: u32) -> bool {
        let mask = self.code.masks[m as usize];
        self.next_op(task);
        self.set_spec_mask(task, mask);
        let fx = self.sched[cpu.index()].set_mask(&self.sh, task, mask, self.now);
        self.apply(cpu, &fx);
        if mask.contains(cpu) {
            return true;
        }
        // sched_setaffinity() returns on an allowed CPU (Linux moves the
        // caller before it returns: affine_move_task()): this CPU
        // schedules now, and the program goes on where the task runs next.
        let fx = self.sched[cpu.index()].pass(&self.sh, self.now, self.idle_depth);
        self.apply_returning(cpu, task, &fx)
    }
}
