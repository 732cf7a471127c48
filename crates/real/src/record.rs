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

/// The counters every record has, 0 when nothing happened.
const COUNTERS: &[&str] = &[
    "kernel.wakes",
    "kernel.wakes.by_task",
    "kernel.wakes.by_other",
    "kernel.wakes.from_interrupt",
    "kernel.wakes.start",
    "kernel.switches",
    "kernel.switches.preempted",
    "kernel.migrations",
    "kernel.runq_wait_ns",
];

impl KernelRecord {
    /// The trace's threads: those the record names, by their own ids;
    /// `processes` names their processes.
    pub fn who(&self, processes: BTreeMap<i32, String>) -> schedlab_trace::Who {
        schedlab_trace::Who {
            threads: self
                .threads
                .iter()
                .map(|(&id, t)| (id, (t.tid, t.tgid, t.name.clone())))
                .collect(),
            processes,
        }
    }
}

/// Reads the raw events: `ours` maps each of the run's thread ids to
/// (slot, name, process id); `t0` is the run's start (`CLOCK_MONOTONIC`,
/// the capture's clock), so event times are since the run began;
/// `starter` is the thread whose wakes start the run's tasks, if one did.
pub fn read(
    raw: &[Raw],
    formats: &BTreeMap<u16, Format>,
    ours: &BTreeMap<i32, (u32, String, i32)>,
    t0: u64,
    lost_pages: u64,
    starter: Option<i32>,
) -> KernelRecord {
    let mut r = Reader::new(ours, lost_pages, starter);
    for e in raw {
        let Some(f) = formats.get(&e.id()) else {
            continue;
        };
        let at = e.ts.saturating_sub(t0);
        match f.name.as_str() {
            "sched_waking" => r.waking(e, f, at),
            "sched_wakeup" | "sched_wakeup_new" => {
                let pid = e.int(f, "pid") as i32;
                if ours.contains_key(&pid) {
                    r.runnable_at.entry(pid).or_insert(e.ts);
                }
            }
            "sched_migrate_task" => r.migrate(e, f, at),
            "sched_switch" => r.switch(e, f, at),
            _ => {}
        }
    }
    r.rec
}

/// The record being read, and what reading it remembers between events.
struct Reader<'o> {
    rec: KernelRecord,
    ours: &'o BTreeMap<i32, (u32, String, i32)>,
    /// Task ids by thread id: the run's slots, then others as they appear.
    ids: BTreeMap<i32, u32>,
    next_id: u32,
    /// Per thread, its first `sched_waking` not yet run.
    waking_at: BTreeMap<i32, u64>,
    /// Per thread, when it became runnable and has not yet run.
    runnable_at: BTreeMap<i32, u64>,
    /// Each thread's last name in a switch.
    comms: BTreeMap<i32, String>,
    /// The thread whose wakes start the run's tasks.
    starter: Option<i32>,
}

impl<'o> Reader<'o> {
    fn new(
        ours: &'o BTreeMap<i32, (u32, String, i32)>,
        lost_pages: u64,
        starter: Option<i32>,
    ) -> Reader<'o> {
        let mut rec = KernelRecord {
            lost_pages,
            counters: COUNTERS.iter().map(|k| (k.to_string(), 0)).collect(),
            ..KernelRecord::default()
        };
        let mut ids = BTreeMap::new();
        for (&tid, (slot, name, tgid)) in ours {
            ids.insert(tid, *slot);
            rec.threads.insert(
                *slot,
                Thread {
                    tid,
                    tgid: *tgid,
                    name: name.clone(),
                    ours: true,
                },
            );
        }
        let next_id = ours
            .values()
            .map(|v| v.0 + 1)
            .max()
            .unwrap_or(0)
            .max(1 << 20);
        Reader {
            rec,
            ours,
            ids,
            next_id,
            waking_at: BTreeMap::new(),
            runnable_at: BTreeMap::new(),
            comms: BTreeMap::new(),
            starter,
        }
    }

    fn count(&mut self, k: &str, n: u64) {
        *self.rec.counters.entry(k.to_string()).or_default() += n;
    }

    /// The run's name of thread `tid`, when it is one of the run's.
    fn name_of(&self, tid: i32) -> Option<String> {
        self.ours.get(&tid).map(|v| v.1.clone())
    }

    /// The task id of thread `tid` (named `comm` when first seen); `None`
    /// for the idle task (0).
    fn id_of(&mut self, tid: i32, comm: &str) -> Option<TaskId> {
        if tid == 0 {
            return None;
        }
        let next = &mut self.next_id;
        let id = *self.ids.entry(tid).or_insert_with(|| {
            *next += 1;
            *next - 1
        });
        self.rec.threads.entry(id).or_insert_with(|| Thread {
            tid,
            tgid: tid,
            name: comm.to_string(),
            ours: false,
        });
        Some(TaskId(id))
    }

    /// A `sched_waking` of one of the run's threads: counted by waker
    /// (module doc) and logged.
    fn waking(&mut self, e: &Raw, f: &Format, at: u64) {
        let pid = e.int(f, "pid") as i32;
        let Some(wakee) = self.name_of(pid) else {
            return;
        };
        let common_pid = e.int(f, "common_pid") as i32;
        self.count("kernel.wakes", 1);
        let irq = e.int(f, "common_flags") & IRQ_FLAGS != 0 || common_pid == 0;
        let waker = if irq {
            self.count("kernel.wakes.from_interrupt", 1);
            "interrupt".to_string()
        } else if let Some(n) = self.name_of(common_pid) {
            self.count("kernel.wakes.by_task", 1);
            n
        } else if Some(common_pid) == self.starter {
            // The parent's one wake per task (from the thread that
            // started the run): the start signal.
            self.count("kernel.wakes.start", 1);
            "the run's start".to_string()
        } else {
            self.count("kernel.wakes.by_other", 1);
            let comm = self.comms.get(&common_pid).cloned().unwrap_or_default();
            format!("pid {common_pid} ({comm})")
        };
        *self
            .rec
            .wakes_by
            .entry(wakee.clone())
            .or_default()
            .entry(waker)
            .or_default() += 1;
        self.waking_at.entry(pid).or_insert(e.ts);
        let task = self.id_of(pid, &wakee).expect("a real pid");
        let waker = if irq {
            None
        } else {
            self.id_of(common_pid, "")
        };
        self.rec.events.push(Event {
            at,
            kind: EventKind::Waking {
                cpu: CpuId::new(e.cpu),
                task,
                waker,
                target: CpuId::new(e.int(f, "target_cpu").max(0) as usize),
                parked: true,
            },
        });
    }

    /// A `sched_migrate_task` of one of the run's threads: counted, and
    /// logged as a placement whose reason is the event's name.
    fn migrate(&mut self, e: &Raw, f: &Format, at: u64) {
        let pid = e.int(f, "pid") as i32;
        let Some(n) = self.name_of(pid) else {
            return;
        };
        self.count("kernel.migrations", 1);
        *self.rec.migrations.entry(n.clone()).or_default() += 1;
        let task = self.id_of(pid, &n).expect("a real pid");
        let cpu = |name| CpuId::new(e.int(f, name).max(0) as usize);
        self.rec.events.push(Event {
            at,
            kind: EventKind::Place {
                cpu: CpuId::new(e.cpu),
                task,
                from: cpu("orig_cpu"),
                to: cpu("dest_cpu"),
                // The trace writer writes it back as that event.
                reason: schedlab_trace::KERNEL_MIGRATION,
            },
        });
    }

    /// A `sched_switch`: counted when it leaves one of the run's threads,
    /// its wake-to-run and runqueue wait when it runs one, and logged.
    fn switch(&mut self, e: &Raw, f: &Format, at: u64) {
        let (prev, next) = (e.int(f, "prev_pid") as i32, e.int(f, "next_pid") as i32);
        let prev_state = prev_state(e.int(f, "prev_state"));
        if self.ours.contains_key(&prev) {
            self.count("kernel.switches", 1);
            if prev_state == PrevState::Runnable {
                self.count("kernel.switches.preempted", 1);
                self.runnable_at.insert(prev, e.ts);
            }
        }
        if self.ours.contains_key(&next) {
            if let Some(w) = self.waking_at.remove(&next) {
                self.rec.wake_to_run.push(e.ts.saturating_sub(w));
            }
            if let Some(w) = self.runnable_at.remove(&next) {
                self.count("kernel.runq_wait_ns", e.ts.saturating_sub(w));
            }
        }
        let prev_comm = e.str(f, "prev_comm");
        let next_comm = e.str(f, "next_comm");
        self.comms.insert(prev, prev_comm.clone());
        self.comms.insert(next, next_comm.clone());
        let prev = self.id_of(prev, &prev_comm);
        let next = self.id_of(next, &next_comm);
        self.rec.events.push(Event {
            at,
            kind: EventKind::Switch {
                cpu: CpuId::new(e.cpu),
                prev,
                prev_state,
                next,
            },
        });
    }
}
