//! Work a CPU asks another for: the one message that does it
//! (`StealRequest`), and core scheduling's use of it. A CPU forced idle by
//! core scheduling asks for a waiting task of its core's cookie
//! (`steal_cookie`), and the CPU asked gives one (`give_cookie`). A
//! balancer asks through the same message ([`Request::Ask`]) and answers
//! through its own [`Balancer::asked`].
//!
//! [`Request::Ask`]: crate::balancer::Request::Ask
//! [`Balancer::asked`]: crate::balancer::Balancer::asked

use schedlab_topology::CpuId;

use crate::balance::busiest;
use crate::balancer::Balancer;
use crate::effects::{Effects, PlaceReason};
use crate::park::TaskState;
use crate::policy::Policy;
use crate::shared::{Msg, Shared};
use crate::CpuSched;

impl<P: Policy, B: Balancer> CpuSched<P, B> {
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

    /// Asks `victim` for a queued task (of `cookie`, when one is named).
    /// One ask is out at a time (`steal_pending`, cleared at the next
    /// round of the pass).
    pub(crate) fn ask(
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

    /// A forced-idle thief asked: give it a waiting task of its cookie, hot
    /// or not (`try_steal_cookie()`).
    pub(crate) fn give_cookie(
        &mut self,
        sh: &Shared<P::TaskState>,
        thief: CpuId,
        cookie: u64,
        fx: &mut Effects,
    ) {
        let id = self
            .rq
            .fair
            .iter()
            .chain(self.rq.rt.iter())
            .find(|t| t.cookie == cookie && !t.killed && t.mask.contains(thief))
            .map(|t| t.id);
        if let Some(t) = id.and_then(|id| self.rq.take_queued(id)) {
            self.send(sh, t, thief, PlaceReason::Steal, TaskState::Queued, fx);
            self.publish(sh);
        }
    }
}
