//! Perfetto traces (`.pftrace`, `.perfetto-trace`): the `ftrace_events`
//! bundles of `traced_probes` (Android, ChromeOS, `tracebox` on Linux),
//! and `schedlab`'s own `trace.pftrace`, decoded with the `prost`
//! messages of `schedlab_trace::perfetto`.
//!
//! Each event becomes the ftrace record the kernel wrote for it, laid out
//! by the kernel's own `format` of that event ([`FORMATS`], the text of
//! Linux 6.18's `events/sched/*/format`), so the rest of `import` reads a
//! Perfetto trace exactly as it reads trace-cmd's. Read:
//!
//! * `sched_switch`, `sched_waking`, `sched_wakeup`, `sched_wakeup_new`,
//!   `sched_migrate_task`, `task_newtask`, `sched_process_exit` and
//!   `sched_process_free` as `FtraceEvent`s (`pid` is the kernel's
//!   `common_pid`, `common_flags` its flags);
//! * the **compact encoding** (`FtraceEventBundle.compact_sched`, which
//!   `traced_probes` writes by default): switches and wakings as columns,
//!   timestamps delta-encoded within the bundle, command names interned.
//!   It drops what the kernel's record had and Perfetto can infer, and we
//!   infer it as Perfetto's trace processor does: a switch's previous task
//!   is the CPU's last next task, and a waking's `common_pid` the task
//!   running on its CPU then (none before the CPU's first switch: the
//!   waking is counted from an interrupt). A CPU's first switch, whose
//!   previous task the trace does not say, is dropped and counted;
//! * `process_tree` (threads' processes), `cpu_info` (the CPU count) and
//!   `lost_events` (a bundle after lost events counts as a lost page).

use std::collections::BTreeMap;
use std::path::Path;

use prost::Message;
use schedlab_trace::perfetto::{self as pf, Data, Ftrace};

use super::Trace;
use crate::tracefs::{self, Format, Raw};

/// Linux 6.18's formats of the events read, as tracefs prints them.
pub const FORMATS: &[(&str, u16, &str)] = &[
    (
        "sched_switch",
        1,
        "field:char prev_comm[16]; offset:8; size:16; signed:0;
         field:pid_t prev_pid; offset:24; size:4; signed:1;
         field:int prev_prio; offset:28; size:4; signed:1;
         field:long prev_state; offset:32; size:8; signed:1;
         field:char next_comm[16]; offset:40; size:16; signed:0;
         field:pid_t next_pid; offset:56; size:4; signed:1;
         field:int next_prio; offset:60; size:4; signed:1;",
    ),
    ("sched_waking", 2, WAKE),
    ("sched_wakeup", 3, WAKE),
    ("sched_wakeup_new", 4, WAKE),
    (
        "sched_migrate_task",
        5,
        "field:char comm[16]; offset:8; size:16; signed:0;
         field:pid_t pid; offset:24; size:4; signed:1;
         field:int prio; offset:28; size:4; signed:1;
         field:int orig_cpu; offset:32; size:4; signed:1;
         field:int dest_cpu; offset:36; size:4; signed:1;",
    ),
    (
        "task_newtask",
        6,
        "field:pid_t pid; offset:8; size:4; signed:1;
         field:char comm[16]; offset:12; size:16; signed:0;
         field:unsigned long clone_flags; offset:32; size:8; signed:0;",
    ),
    ("sched_process_exit", 7, EXIT),
    ("sched_process_free", 8, EXIT),
];

const WAKE: &str = "field:char comm[16]; offset:8; size:16; signed:0;
         field:pid_t pid; offset:24; size:4; signed:1;
         field:int prio; offset:28; size:4; signed:1;
         field:int target_cpu; offset:32; size:4; signed:1;";

const EXIT: &str = "field:char comm[16]; offset:8; size:16; signed:0;
         field:pid_t pid; offset:24; size:4; signed:1;
         field:int prio; offset:28; size:4; signed:1;";

/// Every event's common fields, first in each.
const COMMON: &str = "field:unsigned short common_type; offset:0; size:2; signed:0;
         field:unsigned char common_flags; offset:2; size:1; signed:0;
         field:unsigned char common_preempt_count; offset:3; size:1; signed:0;
         field:int common_pid; offset:4; size:4; signed:1;";

/// The formats, by id.
pub fn formats() -> BTreeMap<u16, Format> {
    FORMATS
        .iter()
        .map(|&(name, id, fields)| {
            let text = format!("name: {name}\nID: {id}\nformat:\n{COMMON}\n{fields}\n");
            let f = tracefs::parse_format(name, &text, Path::new(name))
                .expect("the formats above parse");
            (id, f)
        })
        .collect()
}

/// A record being laid out in its event's format.
struct Rec<'f> {
    f: &'f Format,
    b: Vec<u8>,
}

impl<'f> Rec<'f> {
    fn new(f: &'f Format, common_pid: i32, flags: u32) -> Rec<'f> {
        let size = f
            .fields
            .values()
            .map(|x| x.offset + x.size)
            .max()
            .unwrap_or(8);
        let mut r = Rec {
            f,
            b: vec![0; size],
        };
        r.int("common_type", i64::from(f.id));
        r.int("common_flags", i64::from(flags));
        r.int("common_pid", i64::from(common_pid));
        r
    }

    fn int(&mut self, name: &str, v: i64) -> &mut Self {
        let fl = self.f.fields[name];
        let bytes = v.to_le_bytes();
        self.b[fl.offset..fl.offset + fl.size].copy_from_slice(&bytes[..fl.size]);
        self
    }

    fn str(&mut self, name: &str, s: &str) -> &mut Self {
        let fl = self.f.fields[name];
        let n = s.len().min(fl.size - 1);
        self.b[fl.offset..fl.offset + n].copy_from_slice(&s.as_bytes()[..n]);
        self
    }
}

/// The reader's state across bundles: each CPU's current task.
struct Reader {
    formats: BTreeMap<u16, Format>,
    current: BTreeMap<usize, (i32, String)>,
    raw: Vec<Raw>,
    unknown_prev: u64,
}

impl Reader {
    fn push(
        &mut self,
        ts: u64,
        cpu: usize,
        name: &str,
        common_pid: i32,
        flags: u32,
        fill: impl FnOnce(&mut Rec),
    ) {
        let id = FORMATS.iter().find(|f| f.0 == name).map_or(0, |f| f.1);
        let f = &self.formats[&id];
        let mut r = Rec::new(f, common_pid, flags);
        fill(&mut r);
        self.raw.push(Raw {
            ts,
            cpu,
            payload: r.b,
        });
    }

    fn switch(
        &mut self,
        ts: u64,
        cpu: usize,
        prev: (i32, String),
        state: i64,
        next: (i32, String),
    ) {
        self.current.insert(cpu, next.clone());
        self.push(ts, cpu, "sched_switch", prev.0, 0, |r| {
            r.str("prev_comm", &prev.1)
                .int("prev_pid", i64::from(prev.0))
                .int("prev_state", state)
                .str("next_comm", &next.1)
                .int("next_pid", i64::from(next.0));
        });
    }

    fn event(&mut self, cpu: usize, e: &pf::FtraceEvent) {
        let (Some(ts), Some(ev)) = (e.timestamp, &e.event) else {
            return;
        };
        let pid = e.pid.unwrap_or(0) as i32;
        let flags = e.common_flags.unwrap_or(0);
        let s = |o: &Option<String>| o.clone().unwrap_or_default();
        match ev {
            Ftrace::SchedSwitch(x) => self.switch(
                ts,
                cpu,
                (x.prev_pid.unwrap_or(0), s(&x.prev_comm)),
                x.prev_state.unwrap_or(0),
                (x.next_pid.unwrap_or(0), s(&x.next_comm)),
            ),
            Ftrace::SchedWaking(x) | Ftrace::SchedWakeup(x) | Ftrace::SchedWakeupNew(x) => {
                let name = match ev {
                    Ftrace::SchedWaking(_) => "sched_waking",
                    Ftrace::SchedWakeup(_) => "sched_wakeup",
                    _ => "sched_wakeup_new",
                };
                self.push(ts, cpu, name, pid, flags, |r| {
                    r.str("comm", &s(&x.comm))
                        .int("pid", i64::from(x.pid.unwrap_or(0)))
                        .int("target_cpu", i64::from(x.target_cpu.unwrap_or(0)));
                });
            }
            Ftrace::SchedMigrateTask(x) => {
                self.push(ts, cpu, "sched_migrate_task", pid, flags, |r| {
                    r.str("comm", &s(&x.comm))
                        .int("pid", i64::from(x.pid.unwrap_or(0)))
                        .int("orig_cpu", i64::from(x.orig_cpu.unwrap_or(0)))
                        .int("dest_cpu", i64::from(x.dest_cpu.unwrap_or(0)));
                })
            }
            Ftrace::TaskNewtask(x) => self.push(ts, cpu, "task_newtask", pid, flags, |r| {
                r.int("pid", i64::from(x.pid.unwrap_or(0)))
                    .str("comm", &s(&x.comm))
                    .int("clone_flags", x.clone_flags.unwrap_or(0) as i64);
            }),
            Ftrace::SchedProcessExit(x) | Ftrace::SchedProcessFree(x) => {
                let name = match ev {
                    Ftrace::SchedProcessExit(_) => "sched_process_exit",
                    _ => "sched_process_free",
                };
                self.push(ts, cpu, name, pid, flags, |r| {
                    r.str("comm", &s(&x.comm))
                        .int("pid", i64::from(x.pid.unwrap_or(0)));
                });
            }
            Ftrace::IpiRaise(_) => {}
        }
    }

    /// The compact encoding (module doc), switches and wakings merged in
    /// time order so each waking sees the CPU's task at its time.
    fn compact(&mut self, cpu: usize, c: &pf::CompactSched) {
        let comm = |i: u32| c.intern_table.get(i as usize).cloned().unwrap_or_default();
        let switches = undelta(
            &c.switch_timestamp,
            &[
                c.switch_prev_state.len(),
                c.switch_next_pid.len(),
                c.switch_next_comm_index.len(),
            ],
        );
        let wakings = undelta(
            &c.waking_timestamp,
            &[
                c.waking_pid.len(),
                c.waking_target_cpu.len(),
                c.waking_comm_index.len(),
            ],
        );
        let (mut si, mut wi) = (0, 0);
        while si < switches.len() || wi < wakings.len() {
            let take_switch =
                wi >= wakings.len() || (si < switches.len() && switches[si].0 <= wakings[wi].0);
            if take_switch {
                let (ts, i) = switches[si];
                si += 1;
                let next = (c.switch_next_pid[i], comm(c.switch_next_comm_index[i]));
                match self.current.get(&cpu).cloned() {
                    Some(prev) => self.switch(ts, cpu, prev, c.switch_prev_state[i], next),
                    None => {
                        self.unknown_prev += 1;
                        self.current.insert(cpu, next);
                    }
                }
            } else {
                let (ts, i) = wakings[wi];
                wi += 1;
                let flags = c.waking_common_flags.get(i).copied().unwrap_or(0);
                let waker = self.current.get(&cpu).map_or(0, |t| t.0);
                let (pid, tcpu, name) = (
                    c.waking_pid[i],
                    c.waking_target_cpu[i],
                    comm(c.waking_comm_index[i]),
                );
                self.push(ts, cpu, "sched_waking", waker, flags, |r| {
                    r.str("comm", &name)
                        .int("pid", i64::from(pid))
                        .int("target_cpu", i64::from(tcpu));
                });
            }
        }
    }
}

/// A compact column's events: (time, index), the times summed from 0 over
/// the delta-encoded `ts`, as many as every column (`lens`) has.
fn undelta(ts: &[u64], lens: &[usize]) -> Vec<(u64, usize)> {
    let n = lens.iter().copied().fold(ts.len(), usize::min);
    let mut at = 0u64;
    ts[..n]
        .iter()
        .enumerate()
        .map(|(i, d)| {
            at = at.wrapping_add(*d);
            (at, i)
        })
        .collect()
}

/// Reads `bytes`, a Perfetto trace named `file`.
pub fn read(bytes: &[u8], file: &str) -> Result<Trace, String> {
    let trace = pf::Trace::decode(bytes)
        .map_err(|e| format!("{file}: not a Perfetto trace (protobuf: {e})"))?;
    let formats = formats();
    let mut r = Reader {
        formats,
        current: BTreeMap::new(),
        raw: Vec::new(),
        unknown_prev: 0,
    };
    let (mut lost_pages, mut cpu_info, mut max_cpu, mut bundles) = (0, 0, 0, 0u64);
    let mut tgids = BTreeMap::new();
    let mut notes = Vec::new();
    for p in &trace.packet {
        match &p.data {
            Some(Data::FtraceEvents(b)) => {
                bundles += 1;
                let cpu = b.cpu.unwrap_or(0) as usize;
                max_cpu = max_cpu.max(cpu + 1);
                lost_pages += u64::from(b.lost_events.unwrap_or(false));
                // Within a bundle, events and the compact columns are each
                // in time order; the compact ones are merged after.
                for e in &b.event {
                    r.event(cpu, e);
                }
                if let Some(c) = &b.compact_sched {
                    r.compact(cpu, c);
                }
            }
            Some(Data::ProcessTree(t)) => {
                for th in &t.threads {
                    if let (Some(tid), Some(tgid)) = (th.tid, th.tgid) {
                        tgids.insert(tid, tgid);
                    }
                }
            }
            Some(Data::CpuInfo(c)) => cpu_info = c.cpus.len(),
            _ => {}
        }
    }
    if bundles == 0 {
        return Err(format!(
            "{file}: a Perfetto trace with no ftrace events: record with the linux.ftrace data source and sched/sched_switch, sched/sched_waking"
        ));
    }
    if r.unknown_prev > 0 {
        notes.push(format!(
            "{} compact switches dropped: each CPU's first, whose previous task the trace does not name",
            r.unknown_prev
        ));
    }
    Ok(Trace {
        kind: "Perfetto".into(),
        raw: r.raw,
        formats: r.formats,
        lost_pages,
        ncpus: cpu_info.max(max_cpu),
        tgids,
        notes,
    })
}
