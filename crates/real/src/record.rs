//! The kernel's record turned into the simulator's counters and event log.
//!
//! * a **wake** is a `sched_waking` of one of the run's threads; its waker
//!   is the event's `common_pid` (the thread running when it was posted),
//!   unless the event's flags say it was posted from an interrupt (hard or
//!   soft) or the pid is 0, as Linux's own `sched_waking` is read. The
//!   wakes the parent posts to start the tasks are counted apart
//!   (`kernel.wakes.start`), as are wakes by threads outside the run;
//! * **wake-to-run** is from a `sched_waking` to the `sched_switch` that
//!   runs the thread next; **runqueue wait** is from a thread becoming
//!   runnable (`sched_wakeup`, `sched_wakeup_new`, or a `sched_switch`
//!   that leaves it runnable: a preemption) to that switch;
//! * a **migration** is a `sched_migrate_task` of one of the run's threads;
//! * a **switch** is a `sched_switch` away from one of them, preempted
//!   when its `prev_state` is 0 (`R`).

use std::collections::BTreeMap;

use schedlab_sim::sched::TaskId;
use schedlab_sim::{Event, EventKind, PrevState};
use schedlab_topology::CpuId;
use serde::Serialize;

use crate::tracefs::{Format, Raw};

/// `common_flags` bits (`TRACE_FLAG_HARDIRQ`, `TRACE_FLAG_SOFTIRQ`):
/// the event was recorded in interrupt context.
pub(crate) const IRQ_FLAGS: i64 = 0x08 | 0x10;

/// How `sched_switch`'s `prev_state` says the previous task left: 0 (`R`)
/// preempted, `EXIT_DEAD` or `EXIT_ZOMBIE` exited, anything else blocked.
pub(crate) fn prev_state(state: i64) -> PrevState {
    match state & 0x7f {
        0 => PrevState::Runnable,
        s if s & (0x10 | 0x20) != 0 => PrevState::Exited,
        _ => PrevState::Blocked,
    }
}

/// A thread the record names: one of the run's, or another the kernel
/// switched with them.
#[derive(Clone, Debug, Serialize)]
pub struct Thread {
    pub tid: i32,
    pub tgid: i32,
    pub name: String,
    /// One of the run's tasks.
    pub ours: bool,
}

/// What the kernel recorded of a run, in the simulator's terms.
#[derive(Clone, Debug, Default, Serialize)]
pub struct KernelRecord {
    /// `kernel.*` counters: wakes (and by whom), switches, preemptions,
    /// migrations, runqueue wait.
    pub counters: BTreeMap<String, u64>,
    /// Per woken task, per waker: wakes. A waker that is no task of the
    /// run is `pid N (comm)`; one posted from an interrupt `interrupt`.
    pub wakes_by: BTreeMap<String, BTreeMap<String, u64>>,
    /// Per task: migrations.
    pub migrations: BTreeMap<String, u64>,
    /// Wake-to-run latencies, ns, in order.
    #[serde(skip)]
    pub wake_to_run: Vec<u64>,
    /// Pages the kernel said lost events before them (0: nothing lost).
    pub lost_pages: u64,
    /// The event log, as the simulator's (task ids: the run's slots, then
    /// other threads by first appearance).
    #[serde(skip)]
    pub events: Vec<Event>,
    /// Every thread the log names, by task id.
    #[serde(skip)]
    pub threads: BTreeMap<u32, Thread>,
}

/// Reads the raw events: `ours` maps each of the run's thread ids to
/// (slot, name, process id); `t0` is the run's start (`CLOCK_MONOTONIC`,
/// the capture's clock), so event times are since the run began.
pub fn read(
    raw: &[Raw],
    formats: &BTreeMap<u16, Format>,
    ours: &BTreeMap<i32, (u32, String, i32)>,
    t0: u64,
    lost_pages: u64,
) -> KernelRecord {
    let mut r = KernelRecord {
        lost_pages,
        ..KernelRecord::default()
    };
    let mut ids: BTreeMap<i32, u32> = BTreeMap::new();
    for (&tid, (slot, name, tgid)) in ours {
        ids.insert(tid, *slot);
        r.threads.insert(
            *slot,
            Thread {
                tid,
                tgid: *tgid,
                name: name.clone(),
                ours: true,
            },
        );
    }
    let mut next_id = ours
        .values()
        .map(|v| v.0 + 1)
        .max()
        .unwrap_or(0)
        .max(1 << 20);
    let mut id_of = |tid: i32, comm: &str, threads: &mut BTreeMap<u32, Thread>| -> Option<TaskId> {
        if tid == 0 {
            return None;
        }
        let id = *ids.entry(tid).or_insert_with(|| {
            next_id += 1;
            next_id - 1
        });
        threads.entry(id).or_insert_with(|| Thread {
            tid,
            tgid: tid,
            name: comm.to_string(),
            ours: false,
        });
        Some(TaskId(id))
    };
    let name_of = |tid: i32| ours.get(&tid).map(|v| v.1.clone());
    let mut waking_at: BTreeMap<i32, u64> = BTreeMap::new();
    let mut runnable_at: BTreeMap<i32, u64> = BTreeMap::new();
    let mut comms: BTreeMap<i32, String> = BTreeMap::new();
    let count =
        |r: &mut KernelRecord, k: &str, n: u64| *r.counters.entry(k.to_string()).or_default() += n;
    for k in [
        "kernel.wakes",
        "kernel.wakes.by_task",
        "kernel.wakes.by_other",
        "kernel.wakes.from_interrupt",
        "kernel.wakes.start",
        "kernel.switches",
        "kernel.switches.preempted",
        "kernel.migrations",
        "kernel.runq_wait_ns",
    ] {
        count(&mut r, k, 0);
    }
    for e in raw {
        let Some(f) = formats.get(&e.id()) else {
            continue;
        };
        let at = e.ts.saturating_sub(t0);
        let cpu = CpuId::new(e.cpu);
        let common_pid = e.int(f, "common_pid") as i32;
        match f.name.as_str() {
            "sched_waking" => {
                let pid = e.int(f, "pid") as i32;
                let Some(wakee) = name_of(pid) else { continue };
                count(&mut r, "kernel.wakes", 1);
                let irq = e.int(f, "common_flags") & IRQ_FLAGS != 0 || common_pid == 0;
                let waker = if irq {
                    count(&mut r, "kernel.wakes.from_interrupt", 1);
                    "interrupt".to_string()
                } else if let Some(n) = name_of(common_pid) {
                    count(&mut r, "kernel.wakes.by_task", 1);
                    n
                } else if common_pid == crate::sys::gettid() {
                    // The parent's one wake per task (from this thread,
                    // which started the run): the start signal.
                    count(&mut r, "kernel.wakes.start", 1);
                    "the run's start".to_string()
                } else {
                    count(&mut r, "kernel.wakes.by_other", 1);
                    let comm = comms.get(&common_pid).cloned().unwrap_or_default();
                    format!("pid {common_pid} ({comm})")
                };
                *r.wakes_by
                    .entry(wakee.clone())
                    .or_default()
                    .entry(waker)
                    .or_default() += 1;
                waking_at.entry(pid).or_insert(e.ts);
                let task = id_of(pid, &wakee, &mut r.threads).expect("a real pid");
                let waker = if irq {
                    None
                } else {
                    id_of(common_pid, "", &mut r.threads)
                };
                r.events.push(Event {
                    at,
                    kind: EventKind::Waking {
                        cpu,
                        task,
                        waker,
                        target: CpuId::new(e.int(f, "target_cpu").max(0) as usize),
                        parked: true,
                    },
                });
            }
            "sched_wakeup" | "sched_wakeup_new" => {
                let pid = e.int(f, "pid") as i32;
                if ours.contains_key(&pid) {
                    runnable_at.entry(pid).or_insert(e.ts);
                }
            }
            "sched_migrate_task" => {
                let pid = e.int(f, "pid") as i32;
                if let Some(n) = name_of(pid) {
                    count(&mut r, "kernel.migrations", 1);
                    *r.migrations.entry(n).or_default() += 1;
                }
            }
            "sched_switch" => {
                let (prev, next) = (e.int(f, "prev_pid") as i32, e.int(f, "next_pid") as i32);
                let prev_state = prev_state(e.int(f, "prev_state"));
                if ours.contains_key(&prev) {
                    count(&mut r, "kernel.switches", 1);
                    if prev_state == PrevState::Runnable {
                        count(&mut r, "kernel.switches.preempted", 1);
                        runnable_at.insert(prev, e.ts);
                    }
                }
                if ours.contains_key(&next) {
                    if let Some(w) = waking_at.remove(&next) {
                        r.wake_to_run.push(e.ts.saturating_sub(w));
                    }
                    if let Some(w) = runnable_at.remove(&next) {
                        count(&mut r, "kernel.runq_wait_ns", e.ts.saturating_sub(w));
                    }
                }
                let prev_comm = e.str(f, "prev_comm");
                let next_comm = e.str(f, "next_comm");
                comms.insert(e.int(f, "prev_pid") as i32, prev_comm.clone());
                comms.insert(e.int(f, "next_pid") as i32, next_comm.clone());
                let prev = id_of(prev, &prev_comm, &mut r.threads);
                let next = id_of(next, &next_comm, &mut r.threads);
                r.events.push(Event {
                    at,
                    kind: EventKind::Switch {
                        cpu,
                        prev,
                        prev_state,
                        next,
                    },
                });
            }
            _ => {}
        }
    }
    r
}
