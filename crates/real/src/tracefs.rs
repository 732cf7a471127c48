//! The kernel's own record of a run: the scheduler's tracepoints, read
//! from tracefs's per-CPU ring buffers (`per_cpu/cpuN/trace_pipe_raw`).
//!
//! ## Leaving tracefs as it was found
//!
//! The capture never touches the top-level trace buffer: it makes an
//! *instance* of its own (`instances/schedlab-PID-N`, a buffer with its
//! own events, pid filter, clock and size) and removes it at the end. If
//! tracefs is not mounted, it mounts it on a temporary directory and
//! unmounts it after. Both undo steps run from `Drop`, so an error, a
//! panic that unwinds or a Ctrl-C (caught by the run, which then unwinds
//! normally) leaves tracefs as it was.
//!
//! A run killed outright (SIGKILL, the OOM killer) runs no `Drop`: its
//! instance would go on recording every switch of the machine into its
//! buffers, and its mount would stay. So each capture first sweeps what
//! dead runs left ([`sweep_stale`]): an instance or a mount whose name
//! carries the pid of a process that is gone is removed, and the run says
//! so in one line. A pid the kernel has since given to another process
//! keeps its leftovers until that process ends: nothing a live process
//! could own is touched.
//!
//! ## What is recorded
//!
//! `sched:sched_switch`, `sched_waking`, `sched_wakeup`,
//! `sched_wakeup_new`, `sched_migrate_task`, `sched_process_fork` and
//! `sched_process_exit`, filtered in the kernel to the run's threads by
//! `set_event_pid` with `options/event-fork` (threads a task spawns are
//! followed). The kernel keeps a `sched_switch` when either side is a
//! listed thread and a wake-up when the woken one is, but any other event
//! only when the thread running as it fires is listed
//! (`kernel/trace/trace_events.c`: only the switch and wake-up events
//! have probes that look at the task they name). A `sched_migrate_task`
//! is fired by whoever moves the task: the waker, but also an idle CPU's
//! balancer, a stopper thread's active balance or another program's wake;
//! so it is recorded in a second instance with no pid filter
//! (`sched_migrate_task` alone, every thread's), and the run's own are
//! kept when it is read. (With the filter, a balancer's moves were lost:
//! `schedlab import` of trace-cmd's record of the same run found them.)
//! Both instances' clock is `mono`, the `CLOCK_MONOTONIC` that laps read.
//!
//! ## Reading the buffers
//!
//! Nothing about the layout is assumed: the sub-buffer ("page") header is
//! read from `events/header_page` (its `timestamp`, `commit` and `data`
//! fields), the event header's bit widths and special types from
//! `events/header_event`, and each event's fields from its
//! `events/sched/NAME/format`, as libtraceevent's `kbuffer` does. A page
//! is a timestamp, a commit word (the bytes used; bit 31 set when events
//! were lost before it) and events, each a 32-bit header of `type_len`
//! and `time_delta`: `type_len` 1..=28 is a data event of `4 * type_len`
//! bytes, 0 one whose length is in the next word, then padding, a time
//! extension (the delta's high bits) and an absolute time stamp.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

mod sweep;
pub use sweep::sweep_stale;

use crate::sys;

/// The events captured.
pub const EVENTS: [(&str, &str); 8] = [
    ("sched", "sched_switch"),
    ("sched", "sched_waking"),
    ("sched", "sched_wakeup"),
    ("sched", "sched_wakeup_new"),
    ("sched", "sched_migrate_task"),
    ("sched", "sched_process_fork"),
    ("sched", "sched_process_exit"),
    // Its clone_flags say whether a new task is a thread (CLONE_THREAD)
    // or a process: `schedlab record` keeps each in its own process.
    ("task", "task_newtask"),
];

/// Per-CPU buffer, KiB.
pub const BUFFER_KB: u64 = 16 * 1024;

/// The event recorded in an instance of its own, unfiltered (module doc).
const MIGRATE: &str = "sched_migrate_task";

/// That instance's per-CPU buffer, KiB: every thread's migrations.
const MIGRATIONS_KB: u64 = 1024;

/// One field of an event's format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
}

/// An event's format: its id and fields by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Format {
    pub name: String,
    pub id: u16,
    pub fields: BTreeMap<String, Field>,
}

fn bad(file: &Path, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: {what}", file.display()),
    )
}

/// Parses a `format` file (or `header_page`, whose lines are the same
/// `field:TYPE NAME; offset:N; size:N; signed:N;` form).
pub fn parse_format(name: &str, text: &str, file: &Path) -> io::Result<Format> {
    let mut f = Format {
        name: name.to_string(),
        ..Format::default()
    };
    for line in text.lines() {
        let line = line.trim();
        if let Some(id) = line.strip_prefix("ID:") {
            f.id = id
                .trim()
                .parse()
                .map_err(|_| bad(file, "an ID that is no number"))?;
            continue;
        }
        let Some(rest) = line.strip_prefix("field:") else {
            continue;
        };
        let mut decl = "";
        let (mut offset, mut size, mut signed) = (None, None, false);
        for part in rest.split(';').map(str::trim) {
            if let Some(v) = part.strip_prefix("offset:") {
                offset = v.parse().ok();
            } else if let Some(v) = part.strip_prefix("size:") {
                size = v.parse().ok();
            } else if let Some(v) = part.strip_prefix("signed:") {
                signed = v == "1";
            } else if decl.is_empty() {
                decl = part;
            }
        }
        let name = decl
            .split_whitespace()
            .last()
            .map(|n| n.split('[').next().unwrap_or(n))
            .ok_or_else(|| bad(file, "a field with no name"))?;
        let (Some(offset), Some(size)) = (offset, size) else {
            return Err(bad(file, &format!("field {name} has no offset or size")));
        };
        f.fields.insert(
            name.to_string(),
            Field {
                offset,
                size,
                signed,
            },
        );
    }
    Ok(f)
}

/// The event header's layout, from `header_event`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventHeader {
    pub type_len_bits: u32,
    pub padding: u32,
    pub time_extend: u32,
    pub time_stamp: u32,
    pub data_max: u32,
}

pub fn parse_header_event(text: &str, file: &Path) -> io::Result<EventHeader> {
    let num = |key: &str| -> io::Result<u32> {
        text.lines()
            .find(|l| l.trim_start().starts_with(key))
            .and_then(|l| {
                l.split(|c: char| !c.is_ascii_digit())
                    .find(|s| !s.is_empty())
            })
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| bad(file, &format!("no {key}")))
    };
    Ok(EventHeader {
        type_len_bits: num("type_len")?,
        padding: num("padding")?,
        time_extend: num("time_extend")?,
        time_stamp: num("time_stamp")?,
        data_max: num("data max")?,
    })
}

/// Where the page header's fields are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageHeader {
    pub timestamp: Field,
    pub commit: Field,
    pub data: Field,
}

pub fn parse_header_page(text: &str, file: &Path) -> io::Result<PageHeader> {
    let f = parse_format("header_page", text, file)?;
    let get = |n: &str| {
        f.fields
            .get(n)
            .copied()
            .ok_or_else(|| bad(file, &format!("no {n} field")))
    };
    Ok(PageHeader {
        timestamp: get("timestamp")?,
        commit: get("commit")?,
        data: get("data")?,
    })
}

fn read_uint(b: &[u8], at: usize, size: usize) -> u64 {
    let mut v = 0u64;
    for (i, byte) in b[at..at + size].iter().enumerate() {
        v |= (*byte as u64) << (8 * i);
    }
    v
}

/// One event read back: when, on which CPU, its id and its payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Raw {
    pub ts: u64,
    pub cpu: usize,
    pub payload: Vec<u8>,
}

impl Raw {
    /// Field `name` of `f`, as an integer (sign-extended when signed).
    pub fn int(&self, f: &Format, name: &str) -> i64 {
        let Some(fl) = f.fields.get(name) else {
            return 0;
        };
        if fl.offset + fl.size > self.payload.len() || fl.size > 8 {
            return 0;
        }
        let v = read_uint(&self.payload, fl.offset, fl.size);
        if fl.signed && fl.size < 8 {
            let shift = 64 - 8 * fl.size as u32;
            ((v << shift) as i64) >> shift
        } else {
            v as i64
        }
    }

    /// Field `name` of `f`, as a NUL-terminated string.
    pub fn str(&self, f: &Format, name: &str) -> String {
        let Some(fl) = f.fields.get(name) else {
            return String::new();
        };
        let end = (fl.offset + fl.size).min(self.payload.len());
        let b = &self.payload[fl.offset.min(end)..end];
        let b = &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())];
        String::from_utf8_lossy(b).into_owned()
    }

    /// Its event id (`common_type`, first in every payload).
    pub fn id(&self) -> u16 {
        if self.payload.len() < 2 {
            return 0;
        }
        read_uint(&self.payload, 0, 2) as u16
    }
}

/// The events of one page (sub-buffer) read from `trace_pipe_raw`, and
/// whether the kernel lost events before it.
pub fn parse_page(page: &[u8], cpu: usize, ph: &PageHeader, eh: &EventHeader) -> (Vec<Raw>, bool) {
    let mut out = Vec::new();
    if page.len() < ph.data.offset {
        return (out, false);
    }
    let mut ts = read_uint(page, ph.timestamp.offset, ph.timestamp.size);
    let commit = read_uint(page, ph.commit.offset, ph.commit.size);
    let lost = commit & (1 << 31) != 0;
    let len = (commit & ((1 << 30) - 1)) as usize;
    let start = ph.data.offset;
    let end = (start + len).min(page.len());
    let mask = (1u32 << eh.type_len_bits) - 1;
    let mut at = start;
    while at + 4 <= end {
        let h = read_uint(page, at, 4) as u32;
        let (type_len, delta) = (h & mask, (h >> eh.type_len_bits) as u64);
        let word = |i: usize| {
            if at + 4 + 4 * i + 4 <= end {
                read_uint(page, at + 4 + 4 * i, 4)
            } else {
                0
            }
        };
        if type_len == eh.padding {
            if delta == 0 {
                break; // the rest of the page is empty
            }
            ts += delta;
            at += 4 + word(0) as usize;
        } else if type_len == eh.time_extend {
            ts += (word(0) << eh_shift(eh)) + delta;
            at += 8;
        } else if type_len == eh.time_stamp {
            ts = (word(0) << eh_shift(eh)) | delta;
            at += 8;
        } else {
            ts += delta;
            let (data, n) = if type_len == 0 {
                (at + 8, (word(0) as usize).saturating_sub(4))
            } else {
                (at + 4, 4 * type_len as usize)
            };
            if type_len > eh.data_max || data + n > end {
                break;
            }
            out.push(Raw {
                ts,
                cpu,
                payload: page[data..data + n].to_vec(),
            });
            at = data + n.div_ceil(4) * 4;
        }
    }
    (out, lost)
}

/// The bits of the time delta: what a time extension's word is shifted by.
fn eh_shift(eh: &EventHeader) -> u32 {
    32 - eh.type_len_bits
}

/// A capture in progress: tracefs's mount (made by us or found), our
/// instance, its formats.
pub struct Capture {
    /// The tracefs root, and whether we mounted it.
    root: PathBuf,
    mounted: bool,
    instance: PathBuf,
    /// The instance of every thread's `sched_migrate_task` (module doc).
    migrations: PathBuf,
    pub formats: BTreeMap<u16, Format>,
    page: PageHeader,
    header: EventHeader,
    pub ncpus: usize,
}

/// Where tracefs is mounted now, if it is (every mount shows the same
/// tracefs, so each run may mount its own and unmount it).
fn find_mount() -> Option<PathBuf> {
    // Another run's own mount goes when that run ends: not ours to use.
    sweep::tracefs_mounts()
        .into_iter()
        .find(|dir| sweep::run_mount_owner(dir).is_none())
}

fn write(path: &Path, v: &str) -> io::Result<()> {
    std::fs::write(path, v)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

/// Reads a tracefs text file in one large read: some of them (as
/// `header_page`) answer a short first read with its bytes and then end
/// of file, so `read_to_string`'s small probing read would lose the rest.
fn read(path: &Path) -> io::Result<String> {
    use std::io::Read;
    let ctx = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    let mut f = std::fs::File::open(path).map_err(ctx)?;
    let mut buf = vec![0u8; 1 << 16];
    let mut n = 0;
    loop {
        let r = f.read(&mut buf[n..]).map_err(ctx)?;
        if r == 0 {
            break;
        }
        n += r;
        if n == buf.len() {
            buf.resize(n * 2, 0);
        }
    }
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

static INSTANCES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

impl Capture {
    /// Why a capture cannot be made here, if it cannot.
    pub fn unavailable() -> Option<String> {
        if !sys::is_root() {
            return Some(
                "the kernel's record needs root (tracefs): run as root for the counters".into(),
            );
        }
        None
    }

    /// Sets up an instance with the events on, tracing off.
    pub fn new(ncpus: usize) -> io::Result<Capture> {
        let (root, mounted) = match find_mount() {
            Some(r) => (r, false),
            None => {
                let dir =
                    std::env::temp_dir().join(format!("schedlab-tracefs-{}", std::process::id()));
                std::fs::create_dir_all(&dir)?;
                if let Err(e) = sys::mount_tracefs(&dir) {
                    let _ = std::fs::remove_dir(&dir);
                    return Err(io::Error::new(e.kind(), format!("mount -t tracefs: {e}")));
                }
                (dir, true)
            }
        };
        if let Some(line) = sweep_stale(&root) {
            eprintln!("{line}");
        }
        let n = INSTANCES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let instance = root
            .join("instances")
            .join(format!("schedlab-{}-{n}", std::process::id()));
        // From here on, Drop undoes what was done.
        let mut cap = Capture {
            root,
            mounted,
            instance: PathBuf::new(),
            migrations: PathBuf::new(),
            formats: BTreeMap::new(),
            page: PageHeader {
                timestamp: Field {
                    offset: 0,
                    size: 8,
                    signed: false,
                },
                commit: Field {
                    offset: 8,
                    size: 8,
                    signed: false,
                },
                data: Field {
                    offset: 16,
                    size: 0,
                    signed: false,
                },
            },
            header: EventHeader {
                type_len_bits: 5,
                padding: 29,
                time_extend: 30,
                time_stamp: 31,
                data_max: 28,
            },
            ncpus,
        };
        std::fs::create_dir(&instance)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", instance.display())))?;
        cap.instance = instance;
        let ev = cap.root.join("events");
        let hp = ev.join("header_page");
        cap.page = parse_header_page(&read(&hp)?, &hp)?;
        let he = ev.join("header_event");
        cap.header = parse_header_event(&read(&he)?, &he)?;
        for (sub, name) in EVENTS {
            let p = ev.join(sub).join(name).join("format");
            let f = parse_format(name, &read(&p)?, &p)?;
            cap.formats.insert(f.id, f);
        }
        let i = cap.instance.clone();
        write(&i.join("tracing_on"), "0")?;
        write(&i.join("trace_clock"), "mono")?;
        write(&i.join("buffer_size_kb"), &BUFFER_KB.to_string())?;
        write(&i.join("options/event-fork"), "1")?;
        for (sub, name) in EVENTS.iter().filter(|e| e.1 != MIGRATE) {
            write(&i.join("events").join(sub).join(name).join("enable"), "1")?;
        }
        cap.add_migrations()?;
        Ok(cap)
    }

    /// The instance of every thread's migrations (module doc), tracing
    /// off.
    fn add_migrations(&mut self) -> io::Result<()> {
        let n = INSTANCES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let m = self
            .root
            .join("instances")
            .join(format!("schedlab-{}-{n}", std::process::id()));
        std::fs::create_dir(&m)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", m.display())))?;
        self.migrations = m.clone();
        write(&m.join("tracing_on"), "0")?;
        write(&m.join("trace_clock"), "mono")?;
        write(&m.join("buffer_size_kb"), &MIGRATIONS_KB.to_string())?;
        write(&m.join("events/sched").join(MIGRATE).join("enable"), "1")
    }

    /// Sets each CPU's buffer to `kb` KiB (the default: [`BUFFER_KB`]).
    pub fn set_buffer_kb(&self, kb: u64) -> io::Result<()> {
        write(&self.instance.join("buffer_size_kb"), &kb.to_string())
    }

    /// Events the instance's buffers hold now, summed over its CPUs
    /// (`per_cpu/cpuN/stats`: `entries`), and those the kernel overwrote
    /// or dropped (`overrun`, `dropped events`).
    pub fn entries(&self) -> io::Result<(u64, u64)> {
        let (mut held, mut lost) = (0, 0);
        for cpu in 0..self.ncpus {
            let p = self.instance.join(format!("per_cpu/cpu{cpu}/stats"));
            for line in read(&p)?.lines() {
                let (k, v) = line.split_once(':').unwrap_or((line, ""));
                let n: u64 = v.trim().parse().unwrap_or(0);
                match k.trim() {
                    "entries" => held += n,
                    "overrun" | "dropped events" => lost += n,
                    _ => {}
                }
            }
        }
        Ok((held, lost))
    }

    /// Records the events of `pids` (and the threads they start) from now.
    pub fn start(&self, pids: &[i32]) -> io::Result<()> {
        let list: Vec<String> = pids.iter().map(i32::to_string).collect();
        write(&self.instance.join("set_event_pid"), &list.join(" "))?;
        write(&self.migrations.join("tracing_on"), "1")?;
        write(&self.instance.join("tracing_on"), "1")
    }

    pub fn stop(&self) -> io::Result<()> {
        write(&self.instance.join("tracing_on"), "0")?;
        write(&self.migrations.join("tracing_on"), "0")
    }

    /// Every event recorded, per CPU in order, and how many pages said
    /// events were lost before them.
    pub fn read(&self) -> io::Result<(Vec<Raw>, u64)> {
        let (mut all, lost) = self.read_instance(&self.instance)?;
        let (moves, lost_moves) = self.read_instance(&self.migrations)?;
        all.extend(moves);
        all.sort_by_key(|e| (e.ts, e.cpu));
        Ok((all, lost + lost_moves))
    }

    /// The events of instance `dir`, and its pages after lost events.
    fn read_instance(&self, dir: &Path) -> io::Result<(Vec<Raw>, u64)> {
        use std::io::Read;
        use std::os::unix::fs::OpenOptionsExt;
        let page_size = self.page.data.offset + self.page.data.size;
        let mut all = Vec::new();
        let mut lost = 0;
        for cpu in 0..self.ncpus {
            let p = dir.join(format!("per_cpu/cpu{cpu}/trace_pipe_raw"));
            let mut f = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&p)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", p.display())))?;
            let mut page = vec![0u8; page_size];
            loop {
                match f.read(&mut page) {
                    Ok(0) => break,
                    Ok(n) => {
                        let (evs, l) = parse_page(&page[..n], cpu, &self.page, &self.header);
                        all.extend(evs);
                        lost += l as u64;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            }
        }
        Ok((all, lost))
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        // Removing an instance frees its buffers and every setting made in
        // it.
        for i in [&self.instance, &self.migrations] {
            if !i.as_os_str().is_empty() {
                sweep::remove_instance(i);
            }
        }
        if self.mounted {
            let _ = sys::umount(&self.root);
            let _ = std::fs::remove_dir(&self.root);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER_PAGE: &str = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n";
    const HEADER_EVENT: &str = "# compressed entry header\n\ttype_len    :    5 bits\n\ttime_delta  :   27 bits\n\tarray       :   32 bits\n\n\tpadding     : type == 29\n\ttime_extend : type == 30\n\ttime_stamp : type == 31\n\tdata max type_len  == 28\n";

    #[test]
    fn formats_give_each_field_its_offset_size_and_sign() {
        let text = "name: sched_waking\nID: 375\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n";
        let f = parse_format("sched_waking", text, Path::new("format")).unwrap();
        assert_eq!(f.id, 375);
        assert_eq!(
            f.fields["comm"],
            Field {
                offset: 8,
                size: 16,
                signed: false
            }
        );
        assert_eq!(
            f.fields["pid"],
            Field {
                offset: 24,
                size: 4,
                signed: true
            }
        );
        let ph = parse_header_page(HEADER_PAGE, Path::new("header_page")).unwrap();
        assert_eq!(
            (ph.commit.offset, ph.data.offset, ph.data.size),
            (8, 16, 4080)
        );
        let eh = parse_header_event(HEADER_EVENT, Path::new("header_event")).unwrap();
        assert_eq!(
            eh,
            EventHeader {
                type_len_bits: 5,
                padding: 29,
                time_extend: 30,
                time_stamp: 31,
                data_max: 28
            }
        );
    }

    /// A page built by hand as the kernel's ring buffer writes one: a data
    /// event of 8 bytes 10 ns after the page's time, a time extension, a
    /// long event (type_len 0), and the empty padding that ends a page.
    #[test]
    fn a_page_reads_back_its_events_and_times() {
        let ph = parse_header_page(HEADER_PAGE, Path::new("hp")).unwrap();
        let eh = parse_header_event(HEADER_EVENT, Path::new("he")).unwrap();
        let mut p = vec![0u8; 4096];
        p[..8].copy_from_slice(&1_000u64.to_le_bytes());
        let mut body: Vec<u8> = Vec::new();
        let hdr = |type_len: u32, delta: u32| (type_len | delta << 5).to_le_bytes();
        body.extend(hdr(2, 10));
        body.extend([7, 0, 0, 0, 1, 2, 3, 4]);
        body.extend(hdr(30, 5)); // extend: delta = (1 << 27) + 5
        body.extend(1u32.to_le_bytes());
        body.extend(hdr(0, 3));
        body.extend(12u32.to_le_bytes()); // 8 bytes of data + the length word
        body.extend([9, 0, 0, 0, 5, 6, 7, 8]);
        body.extend(hdr(29, 0));
        let commit = body.len() as u64 | 1 << 31;
        p[8..16].copy_from_slice(&commit.to_le_bytes());
        p[16..16 + body.len()].copy_from_slice(&body);
        let (evs, lost) = parse_page(&p, 3, &ph, &eh);
        assert!(
            lost,
            "bit 31 of commit says events were lost before the page"
        );
        assert_eq!(evs.len(), 2, "two data events: {evs:?}");
        assert_eq!((evs[0].ts, evs[0].id(), evs[0].cpu), (1_010, 7, 3));
        assert_eq!(evs[1].ts, 1_010 + (1 << 27) + 5 + 3);
        assert_eq!(evs[1].payload, vec![9, 0, 0, 0, 5, 6, 7, 8]);
    }
}
