//! The seed's balancer ([`Seed`]): a newly idle CPU asks the busiest CPU
//! for queued work, a busy CPU's tick pushes a queued task to a sleeping
//! CPU, and a CPU asked gives.
//!
//! Every search walks [`Topology::rings`](schedlab_topology::Topology::rings)
//! around the CPU, nearest first, and takes the first ring with an answer;
//! within a ring the tie-break is always the same: id order from the CPU
//! on, the first of the best.
//!
//! Work moves only by messages: a thief asks ([`Request::Ask`]) and the
//! victim, which owns its queue, decides what to give. One ask is out at a
//! time per pass.

use alloc::vec::Vec;
use core::convert::Infallible;

use schedlab_topology::{CpuId, CpuSet, Topology};

use crate::balancer::{Balancer, Cx, Request, Requests};
use crate::config::Config;
use crate::effects::PlaceReason;
use crate::policy::{idle_among, PolicyState};
use crate::shared::Shared;
use crate::task::Task;

/// The CPU of `ring` with the most tasks, if it has one waiting (load 2 or
/// more); the first such in id order from `from`. `overloaded` is
/// [`Shared::overloaded_cpus`], read once per search: only those CPUs can
/// have work waiting.
pub(crate) fn busiest<S: PolicyState>(
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

/// The seed's balancer, one per CPU: when its tick last pushed.
#[derive(Clone, Copy, Debug, Default)]
pub struct Seed {
    last_balance: u64,
}

/// The seed's hooks, for any message type: it posts none, so the built-in
/// dispatcher takes its requests as they are, with no conversion.
impl Seed {
    /// Periodic: every `interval_ns`, push one queued task to a sleeping
    /// CPU, nearest ring first.
    pub(crate) fn tick_as<S: PolicyState, M>(
        &mut self,
        cx: &mut Cx<'_, S>,
        now: u64,
    ) -> Requests<M> {
        let mut req = Requests::none();
        if now.saturating_sub(self.last_balance) < cx.sh.config().balance.interval_ns {
            return req;
        }
        self.last_balance = now;
        let Some((id, mask)) = migratable(cx, now, None).map(|t| (t.id, t.mask)) else {
            return req;
        };
        let m = cx.sh.machine(cx.cpu, now);
        let avoid = CpuSet::single(cx.cpu);
        let target = cx
            .sh
            .topology()
            .rings_outward(cx.cpu)
            .find_map(|ring| idle_among(&m, &ring, cx.cpu, &mask, &avoid));
        if let Some(to) = target {
            req.push(Request::Send {
                task: id,
                to,
                reason: PlaceReason::Balance,
            });
        }
        req
    }

    /// Newly idle: ask the busiest CPU with queued work, nearest ring first
    /// (Linux's `sched_balance_newidle()` skips when no CPU is overloaded).
    pub(crate) fn newly_idle_as<S: PolicyState, M>(
        &mut self,
        cx: &mut Cx<'_, S>,
        _now: u64,
    ) -> Requests<M> {
        let mut req = Requests::none();
        if !cx.sh.overloaded_besides(cx.cpu) {
            return req;
        }
        let over = cx.sh.overloaded_cpus() - CpuSet::single(cx.cpu);
        let victim = cx
            .sh
            .topology()
            .rings_outward(cx.cpu)
            .find_map(|ring| busiest(cx.sh, &ring, &over, cx.cpu));
        if let Some(victim) = victim {
            req.push(Request::Ask { victim });
        }
        req
    }

    /// A thief asked: give it the queued fair task that would run last
    /// here, if its mask allows and it is not cache-hot.
    pub(crate) fn asked_as<S: PolicyState, M>(
        &mut self,
        cx: &mut Cx<'_, S>,
        thief: CpuId,
        now: u64,
    ) -> Requests<M> {
        let mut req = Requests::none();
        if !cx.sh.doorbell(thief).asleep() && cx.sh.load(thief) > 0 {
            return req; // it found work meanwhile
        }
        if let Some(t) = migratable(cx, now, Some(thief)) {
            req.push(Request::Send {
                task: t.id,
                to: thief,
                reason: PlaceReason::Steal,
            });
        }
        req
    }
}

impl Balancer for Seed {
    type Msg = Infallible;

    fn for_machine(topo: &Topology, _config: &Config, _max_tasks: usize) -> Vec<Seed> {
        topo.cpu_ids().map(|_| Seed::default()).collect()
    }

    fn name(&self) -> &str {
        "seed"
    }

    fn tick<S: PolicyState>(&mut self, cx: &mut Cx<'_, S>, now: u64) -> Requests<Infallible> {
        self.tick_as(cx, now)
    }

    /// It reads only the other CPUs' loads.
    fn newly_idle_reads_itself(&self) -> bool {
        false
    }

    fn newly_idle<S: PolicyState>(&mut self, cx: &mut Cx<'_, S>, now: u64) -> Requests<Infallible> {
        self.newly_idle_as(cx, now)
    }

    fn asked<S: PolicyState>(
        &mut self,
        cx: &mut Cx<'_, S>,
        thief: CpuId,
        now: u64,
    ) -> Requests<Infallible> {
        self.asked_as(cx, thief, now)
    }
}

/// The queued fair task a balance pass may take: not killed, not cache-hot
/// (`task_hot()`: ran within the migration cost), allowed on `to` when one
/// is named; the one that would run last here.
fn migratable<'a, S: PolicyState>(
    cx: &Cx<'a, S>,
    now: u64,
    to: Option<CpuId>,
) -> Option<&'a Task<S>> {
    let cost = cx.sh.config().balance.migration_cost_ns;
    cx.queued_fair()
        .filter(|t| !t.killed && now.saturating_sub(t.last_ran) >= cost)
        .filter(|t| to.is_none_or(|c| t.mask.contains(c)))
        .max_by_key(|t| t.fair.deadline)
}
