//! Work a CPU asks another for: the one message that does it
//! (`StealRequest`), and core scheduling's use of it. A CPU forced idle by
//! core scheduling asks for a waiting task of its core's cookie
//! (`steal_cookie`), and the CPU asked gives one (`give_cookie`). A
//! balancer asks through the same message ([`Request::Ask`]) and answers
//! through its own [`Balancer::asked`].
//!
//! Both halves are decisions over what they read (the core's published
//! queues, this CPU's run queue); the CPU posts the ask and sends the task.
//!
//! [`Request::Ask`]: crate::balancer::Request::Ask
//! [`Balancer::asked`]: crate::balancer::Balancer::asked

use schedlab_topology::CpuId;

use crate::balance::busiest;
use crate::policy::PolicyState;
use crate::runqueue::RunQueue;
use crate::shared::Shared;
use crate::task::Task;

/// Forced idle (`sched_core_balance()` → `try_steal_cookie()`): whom
/// `cpu` asks for a waiting task of its core's cookie, and that cookie: a
/// sibling that has one (its published queue says so), else the busiest
/// CPU with work waiting, nearest ring first. Linux asks every CPU of each
/// domain in turn; one request at a time is this model's.
pub(crate) fn cookie_victim<S: PolicyState>(cpu: CpuId, sh: &Shared<S>) -> Option<(CpuId, u64)> {
    let core = sh.core(cpu).lock();
    if core.cookie == 0 || core.forceidle == 0 {
        return None;
    }
    let c = core.cookie;
    let sib = core
        .sibs
        .iter()
        .find(|s| s.cpu != cpu && s.view.waiting.iter().any(|v| v.cookie == c))
        .map(|s| s.cpu);
    sib.or_else(|| {
        let topo = sh.topology();
        let over = sh.overloaded_cpus() - *topo.core_cpus(cpu);
        topo.rings_outward(cpu)
            .find_map(|ring| busiest(sh, &ring, &over, cpu))
    })
    .map(|v| (v, c))
}

/// A forced-idle thief asked: a waiting task of its cookie, hot or not
/// (`try_steal_cookie()`), taken out of the queue.
pub(crate) fn give_cookie<S: PolicyState>(
    rq: &mut RunQueue<S>,
    thief: CpuId,
    cookie: u64,
) -> Option<Task<S>> {
    let id = rq
        .fair
        .queued
        .iter()
        .chain(rq.rt.iter())
        .find(|t| t.cookie == cookie && !t.killed && t.mask.contains(thief))
        .map(|t| t.id)?;
    rq.take_queued(id, true)
}
