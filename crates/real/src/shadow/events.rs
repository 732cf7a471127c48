//! The shadow's events: from the kernel's raw record, from a simulated
//! run's event log, and the kernel's tick.

use std::collections::BTreeMap;

use schedlab_sim::events::{Event, EventKind};

use super::Ev;
use crate::record::{prev_state, IRQ_FLAGS};
use crate::tracefs::{Format, Raw};

/// `common_flags`: `TRACE_FLAG_NEED_RESCHED_LAZY | TRACE_FLAG_NEED_RESCHED`.
const NEED_RESCHED: i64 = 0x02 | 0x04;

/// The shadow's events from the kernel's raw record, in time order.
pub fn events(raw: &[Raw], formats: &BTreeMap<u16, Format>) -> Vec<Ev> {
    let mut sorted: Vec<&Raw> = raw.iter().collect();
    sorted.sort_by_key(|e| e.ts);
    let mut waking_resched: BTreeMap<i32, bool> = BTreeMap::new();
    let mut out = Vec::new();
    for e in sorted {
        let Some(f) = formats.get(&e.id()) else {
            continue;
        };
        let flags = e.int(f, "common_flags");
        match f.name.as_str() {
            "sched_waking" => {
                let task = e.int(f, "pid") as i32;
                waking_resched.insert(task, flags & NEED_RESCHED != 0);
                let common_pid = e.int(f, "common_pid") as i32;
                out.push(Ev::Waking {
                    at: e.ts,
                    cpu: e.cpu,
                    task,
                    waker: if flags & IRQ_FLAGS != 0 {
                        0
                    } else {
                        common_pid
                    },
                    prev: e.int(f, "target_cpu").max(0) as usize,
                });
            }
            "sched_wakeup" | "sched_wakeup_new" => {
                let task = e.int(f, "pid") as i32;
                let before = waking_resched.remove(&task);
                out.push(Ev::Wakeup {
                    at: e.ts,
                    cpu: e.cpu,
                    task,
                    prio: e.int(f, "prio") as i32,
                    target: e.int(f, "target_cpu").max(0) as usize,
                    new: f.name == "sched_wakeup_new",
                    by_task: flags & IRQ_FLAGS == 0 && e.int(f, "common_pid") != 0,
                    kernel_resched: match before {
                        Some(false) => Some(flags & NEED_RESCHED != 0),
                        _ => None,
                    },
                    resched_before: before == Some(true),
                });
            }
            "sched_switch" => out.push(Ev::Switch {
                at: e.ts,
                cpu: e.cpu,
                prev: e.int(f, "prev_pid") as i32,
                prev_prio: e.int(f, "prev_prio") as i32,
                prev_state: prev_state(e.int(f, "prev_state")),
                next: e.int(f, "next_pid") as i32,
                next_prio: e.int(f, "next_prio") as i32,
            }),
            "sched_migrate_task" => out.push(Ev::Migrate {
                at: e.ts,
                task: e.int(f, "pid") as i32,
                from: e.int(f, "orig_cpu").max(0) as usize,
                to: e.int(f, "dest_cpu").max(0) as usize,
            }),
            _ => {}
        }
    }
    out
}

/// A nice-0 task's `prio`, for a simulated run's events.
pub(super) const PRIO: i32 = 120;

/// The shadow's events from a simulated run's event log: a placement
/// enqueues the woken task where it was placed (a balancer's move of a
/// queued task is a migration), a switch is a switch. A task's id is its
/// slot + 1 (0 is idle). The simulator keeps no need-resched flag, so its
/// wakes are not compared; its tasks are taken as nice 0.
pub fn events_of_sim(log: &[Event]) -> Vec<Ev> {
    let tid = |t: schedlab_sim::sched::TaskId| t.0 as i32 + 1;
    let opt = |t: Option<schedlab_sim::sched::TaskId>| t.map_or(0, tid);
    log.iter()
        .filter_map(|e| match e.kind {
            EventKind::Switch {
                cpu,
                prev,
                prev_state,
                next,
            } => Some(Ev::Switch {
                at: e.at,
                cpu: cpu.index(),
                prev: opt(prev),
                prev_prio: PRIO,
                prev_state,
                next: opt(next),
                next_prio: PRIO,
            }),
            EventKind::Place {
                task,
                from,
                to,
                reason: "balance",
                ..
            } => Some(Ev::Migrate {
                at: e.at,
                task: tid(task),
                from: from.index(),
                to: to.index(),
            }),
            EventKind::Place {
                reason: "spawn", ..
            } => None,
            EventKind::Place { cpu, task, to, .. } => Some(Ev::Wakeup {
                at: e.at,
                cpu: cpu.index(),
                task: tid(task),
                prio: PRIO,
                target: to.index(),
                new: false,
                by_task: true,
                kernel_resched: None,
                resched_before: false,
            }),
            _ => None,
        })
        .collect()
}
