//! The scheduler's invariants, checked by hosts after every step (the test
//! host after every pass, the simulator after every event in tests and
//! debug builds).
//!
//! * every live task is held by exactly one CPU, or is in flight (`Moving`,
//!   or `Waking` with its Wake message on the way);
//! * a CPU runs at most one task;
//! * the park word agrees with where the task is and names its holder (a
//!   delayed task is held by the run queue that kept it);
//! * no task runs or waits in a queue on a CPU its mask does not name
//!   (parked and held tasks are corrected when they next run);
//! * under core scheduling, SMT siblings never run tasks of different
//!   cookies, except while a reschedule of one of them is pending (its
//!   IPI is in flight: the window Linux has too).

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;

use schedlab_topology::CpuId;

use crate::balancer::Balancer;
use crate::cpu::{CpuSched, Holding};
use crate::park::TaskState;
use crate::policy::Policy;
use crate::shared::Shared;
use crate::task::TaskId;

/// `Err` names the first broken invariant.
pub fn check<P: Policy, B: Balancer>(
    sh: &Shared<P::TaskState>,
    cpus: &[CpuSched<P, B>],
) -> Result<(), String> {
    let mut seen: BTreeMap<TaskId, (CpuId, Holding)> = BTreeMap::new();
    for c in cpus {
        let mut running = 0;
        for (t, h) in c.holdings(sh) {
            if let Some(prev) = seen.insert(t, (c.id(), h)) {
                return Err(format!("{t:?} held twice: {prev:?} and {:?}", (c.id(), h)));
            }
            if h == Holding::Running {
                running += 1;
            }
            let task = c.task(sh, t).expect("held");
            if matches!(h, Holding::Running | Holding::Queued) && !task.mask().contains(c.id()) {
                return Err(format!(
                    "{t:?} is {h:?} on {:?}, outside its mask {}",
                    c.id(),
                    task.mask()
                ));
            }
            let w = sh.task_word(t);
            let ok = match h {
                Holding::Running => matches!(w.state, TaskState::Running | TaskState::Committing),
                Holding::Queued | Holding::Held => matches!(w.state, TaskState::Queued),
                Holding::Parked => matches!(w.state, TaskState::Parked | TaskState::Waking),
                // A wake that won it may have its requeue on the way here.
                Holding::Delayed => matches!(w.state, TaskState::Delayed | TaskState::Waking),
            };
            if !ok || w.owner != c.id() {
                return Err(format!(
                    "{t:?} is {h:?} on {:?} but its park word says {w:?}",
                    c.id()
                ));
            }
        }
        if running > 1 {
            return Err(format!("{:?} runs {running} tasks", c.id()));
        }
    }
    if sh.config().core_sched {
        for core in sh.topology().cores() {
            let running: alloc::vec::Vec<(CpuId, u64)> = core
                .iter()
                .filter_map(|c| cpus[c.index()].running_cookie().map(|k| (c, k)))
                .collect();
            let pending = core.iter().any(|c| sh.resched_pending(c));
            if let Some(w) = running.windows(2).find(|w| w[0].1 != w[1].1) {
                if !pending {
                    return Err(format!(
                        "siblings {:?} (cookie {}) and {:?} (cookie {}) run different cookies with no reschedule pending",
                        w[0].0, w[0].1, w[1].0, w[1].1
                    ));
                }
            }
        }
    }
    for i in 0..sh.tasks_created() {
        let t = TaskId(i as u32);
        let w = sh.task_word(t);
        let in_flight = matches!(w.state, TaskState::Moving | TaskState::Waking);
        if w.state != TaskState::Dead && !in_flight && !seen.contains_key(&t) {
            return Err(format!("{t:?} is lost: {w:?}, held by no CPU"));
        }
    }
    Ok(())
}
