//! Balancing: a newly idle CPU asks for queued work (`try_steal`), a CPU
//! forced idle by core scheduling asks for work of its core's cookie
//! (`steal_cookie`), a busy CPU's tick pushes a queued task to a sleeping
//! CPU (`push_balance`), and a CPU asked gives (`give_to`).
//!
//! Every search walks [`Topology::rings`](schedlab_topology::Topology::rings)
//! around the CPU, nearest first, and takes the first ring with an answer;
//! within a ring the tie-break is always the same: id order from the CPU
//! on, the first of the best.
//!
//! Work moves only by messages: a thief posts a `StealRequest` and the
//! victim, which owns its queue, decides what to give. One request is out
//! at a time per thief (`steal_pending`, cleared at its next pass).

use schedlab_topology::{CpuId, CpuSet};

use crate::effects::{Effects, PlaceReason};
use crate::park::TaskState;
use crate::policy::{idle_among, Policy, PolicyState};
use crate::shared::{Msg, Shared};
use crate::task::Task;
use crate::CpuSched;

/// The CPU of `ring` with the most tasks, if it has one waiting (load 2 or
/// more); the first such in id order from `from`. `overloaded` is
/// [`Shared::overloaded_cpus`], read once per search: only those CPUs can
/// have work waiting.
fn busiest<S: PolicyState>(
    sh: &Shared<S>,
    ring: &CpuSet,
    overloaded: &CpuSet,
    from: CpuId,
) -> Option<CpuId> {
    (*ring & *overloaded)
        .iter_from(from)
        .filter(|&c| sh.load(c) >= 2)
        .fold(None::<(u32, CpuId)>, |best, c| {
            let l = sh.load(c);
            match best {
                Some((b, _)) if b >= l => best,
                _ => Some((l, c)),
            }
        })
        .map(|(_, c)| c)
}

impl<P: Policy> CpuSched<P> {
    /// Newly idle: ask the busiest CPU with queued work, nearest ring first
    /// (Linux's `sched_balance_newidle()` skips when no CPU is overloaded).
    pub(crate) fn try_steal(&mut self, sh: &Shared<P::TaskState>, fx: &mut Effects) {
        if self.steal_pending {
            return;
        }
        let over = sh.overloaded_cpus() - CpuSet::single(self.id);
        if over.is_empty() {
            return;
        }
        let victim = sh
            .topology()
            .rings(self.id)
            .iter()
            .find_map(|ring| busiest(sh, ring, &over, self.id));
        if let Some(v) = victim {
            self.ask(sh, v, None, fx);
        }
    }

    /// Forced idle (`sched_core_balance()` → `try_steal_cookie()`): ask
    /// for a waiting task of the core's cookie, from a sibling that has one
    /// (its published queue says so), else from the busiest CPU with work
    /// waiting, nearest ring first. Linux asks every CPU of each domain in
    /// turn; one request at a time is this model's.
    pub(crate) fn steal_cookie(&mut self, sh: &Shared<P::TaskState>, fx: &mut Effects) {
        if self.steal_pending {
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
            sib.or_else(|| {
                let topo = sh.topology();
                let over = sh.overloaded_cpus() - *topo.core_cpus(self.id);
                topo.rings(self.id)
                    .iter()
                    .find_map(|ring| busiest(sh, ring, &over, self.id))
            })
            .map(|v| (v, c))
        };
        if let Some((v, cookie)) = victim {
            self.ask(sh, v, Some(cookie), fx);
        }
    }

    fn ask(
        &mut self,
        sh: &Shared<P::TaskState>,
        victim: CpuId,
        cookie: Option<u64>,
        fx: &mut Effects,
    ) {
        self.steal_pending = true;
        let msg = Msg::StealRequest {
            thief: self.id,
            cookie,
        };
        let k = sh.post(Some(self.id), victim, msg);
        self.kick(k, fx);
    }

    /// A thief asked: give it the queued fair task that would run last here,
    /// if its mask allows and it is not cache-hot; a forced-idle thief, a
    /// waiting task of its cookie, hot or not (`try_steal_cookie()`).
    pub(crate) fn give_to(
        &mut self,
        sh: &Shared<P::TaskState>,
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
                .rq
                .fair
                .iter()
                .chain(self.rq.rt.iter())
                .find(|t| t.cookie == c && !t.killed && t.mask.contains(thief))
                .map(|t| t.id),
            None => self.migratable(sh, now, Some(thief)).map(|t| t.id),
        };
        if let Some(t) = id.and_then(|id| self.rq.take_queued(id)) {
            self.send(sh, t, thief, PlaceReason::Steal, TaskState::Queued, fx);
            self.publish(sh);
        }
    }

    /// Periodic: push one queued task to a sleeping CPU, nearest ring first.
    pub(crate) fn push_balance(&mut self, sh: &Shared<P::TaskState>, now: u64, fx: &mut Effects) {
        let Some((id, mask)) = self.migratable(sh, now, None).map(|t| (t.id, t.mask)) else {
            return;
        };
        let m = sh.machine(self.id, now);
        let avoid = CpuSet::single(self.id);
        let target = sh
            .topology()
            .rings(self.id)
            .iter()
            .find_map(|ring| idle_among(&m, ring, self.id, &mask, &avoid));
        if let Some(target) = target {
            let t = self.rq.take_queued(id).expect("queued");
            self.send(sh, t, target, PlaceReason::Balance, TaskState::Queued, fx);
            self.publish(sh);
        }
    }

    /// The queued fair task a balance pass may take: not killed, not
    /// cache-hot (`task_hot()`: ran within the migration cost), allowed on
    /// `to` when one is named; the one that would run last here.
    fn migratable(
        &self,
        sh: &Shared<P::TaskState>,
        now: u64,
        to: Option<CpuId>,
    ) -> Option<&Task<P::TaskState>> {
        let cost = sh.config().balance.migration_cost_ns;
        self.rq
            .fair
            .iter()
            .filter(|t| !t.killed && now.saturating_sub(t.last_ran) >= cost)
            .filter(|t| to.is_none_or(|c| t.mask.contains(c)))
            .max_by_key(|t| t.fair.deadline)
    }
}
