//! trace-cmd's `trace.dat`, versions 6 and 7, as trace-cmd.dat.v6(5) and
//! trace-cmd.dat.v7(5) lay them out (trace-cmd 3.x writes both).
//!
//! The file carries the tracing host's own `header_page`, `header_event`
//! and every recorded event's `format`: they are read with the parsers
//! `record` reads tracefs with ([`crate::tracefs`]), so nothing about an
//! event's layout is assumed. The per-CPU data is the ring buffer's pages
//! as the kernel wrote them, read by [`crate::tracefs::parse_page`].
//!
//! * **Version 6**: the sections in a fixed order, then options (a
//!   `BUFFER` option names an instance's data), then `flyrecord` and each
//!   CPU's offset and size.
//! * **Version 7**: the compression header, then sections anywhere,
//!   found through chains of options sections (`HEADER_INFO`,
//!   `FTRACE_EVENTS`, `EVENT_FORMATS`, `CMDLINES`, `BUFFER`, `CPUCOUNT`);
//!   each section may be compressed, and a buffer's data is compressed in
//!   chunks. zstd (`ruzstd`, pure Rust) and zlib (`flate2`) are read: the
//!   two trace-cmd's libtracecmd builds in.
//!
//! Only little-endian files are read (every x86 and arm64 host writes
//! one); a big-endian file is refused by name. Of several buffers (the
//! top one and `-B` instances), the top one is read when it holds data,
//! else the first instance that does, and the others are named in a
//! note. A `latency` file (no per-CPU data) is refused.

use std::collections::BTreeMap;
use std::io::Read;

use super::Trace;
use crate::tracefs::{self, EventHeader, Format, PageHeader};

/// The file's first ten bytes.
pub const MAGIC: &[u8] = b"\x17\x08\x44tracing";

/// A position in the file, for errors that say where.
struct Cursor<'b> {
    b: &'b [u8],
    at: usize,
    /// What `b` is (the file, or a decompressed section of it at an offset).
    what: String,
}

impl<'b> Cursor<'b> {
    fn new(b: &'b [u8], at: usize, what: String) -> Cursor<'b> {
        Cursor { b, at, what }
    }

    fn err(&self, msg: &str) -> String {
        format!("{} at offset {:#x}: {msg}", self.what, self.at)
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'b [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len());
        let Some(end) = end else {
            return Err(self.err(&format!(
                "the file ends inside {what} ({n} bytes wanted, {} left): truncated?",
                self.b.len().saturating_sub(self.at)
            )));
        };
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn uint(&mut self, n: usize, what: &str) -> Result<u64, String> {
        let s = self.take(n, what)?;
        Ok(s.iter().rev().fold(0u64, |v, &b| v << 8 | u64::from(b)))
    }

    fn u16(&mut self, what: &str) -> Result<u16, String> {
        Ok(self.uint(2, what)? as u16)
    }

    fn u32(&mut self, what: &str) -> Result<u32, String> {
        Ok(self.uint(4, what)? as u32)
    }

    fn u64(&mut self, what: &str) -> Result<u64, String> {
        self.uint(8, what)
    }

    /// A NUL-terminated string.
    fn cstr(&mut self, what: &str) -> Result<String, String> {
        let rest = &self.b[self.at.min(self.b.len())..];
        let Some(n) = rest.iter().position(|&c| c == 0) else {
            return Err(self.err(&format!("{what} has no terminating NUL: truncated?")));
        };
        let s = String::from_utf8_lossy(&rest[..n]).into_owned();
        self.at += n + 1;
        Ok(s)
    }

    /// A length-prefixed text of `len_bytes`-wide length.
    fn text(&mut self, len_bytes: usize, what: &str) -> Result<String, String> {
        let n = self.uint(len_bytes, what)? as usize;
        Ok(String::from_utf8_lossy(self.take(n, what)?).into_owned())
    }

    fn expect(&mut self, lit: &[u8], what: &str) -> Result<(), String> {
        let at = self.at;
        if self.take(lit.len(), what)? != lit {
            self.at = at;
            return Err(self.err(&format!(
                "expected {what} ({:?})",
                String::from_utf8_lossy(lit)
            )));
        }
        Ok(())
    }
}

/// The layouts the file carries.
#[derive(Default)]
struct Headers {
    page: Option<PageHeader>,
    event: Option<EventHeader>,
    formats: BTreeMap<u16, Format>,
}

/// One buffer's per-CPU data: (cpu, offset, size), and whether its
/// data is compressed in chunks.
#[derive(Default)]
struct Buffer {
    name: String,
    cpus: Vec<(usize, u64, u64)>,
    chunked: bool,
}

/// The initial format: magic, version, endianness, long size, page size.
fn front(c: &mut Cursor) -> Result<(String, usize), String> {
    c.expect(MAGIC, "trace-cmd's magic")?;
    let version = c.cstr("the version")?;
    if c.take(1, "the endianness")?[0] != 0 {
        return Err(c.err("a big-endian trace: only little-endian traces are read"));
    }
    let _long_size = c.take(1, "the long size")?;
    let page_size = c.u32("the page size")? as usize;
    Ok((version, page_size))
}

/// perf.data's tracing data (`HEADER_TRACING_DATA`): the initial format
/// and the header, ftrace and event sections of a version-6 file; its
/// event formats.
pub fn tracing_data(bytes: &[u8], what: &str) -> Result<BTreeMap<u16, Format>, String> {
    let mut c = Cursor::new(bytes, 0, what.to_string());
    front(&mut c)?;
    let mut h = Headers::default();
    header_info(&mut c, &mut h)?;
    ftrace_events(&mut c)?;
    event_formats(&mut c, &mut h)?;
    has_switches(&h.formats, what, "perf sched record")?;
    Ok(h.formats)
}

/// The trace `what` has the format of `sched_switch` (recorded by `how`).
fn has_switches(formats: &BTreeMap<u16, Format>, what: &str, how: &str) -> Result<(), String> {
    if formats.values().any(|f| f.name == "sched_switch") {
        return Ok(());
    }
    Err(format!(
        "{what}: the trace has no sched_switch events' format: record with `{how}`"
    ))
}

/// Reads `bytes`, a trace.dat file named `file`.
pub fn read(bytes: &[u8], file: &str) -> Result<Trace, String> {
    let mut c = Cursor::new(bytes, 0, file.to_string());
    let (version, page_size) = front(&mut c)?;
    let version: u32 = version
        .parse()
        .map_err(|_| c.err("the version is no number"))?;
    let (h, buffers, ncpus, mut notes, alg) = match version {
        6 => v6(&mut c)?,
        7 => v7(&mut c)?,
        v => return Err(c.err(&format!("version {v}: only versions 6 and 7 are read"))),
    };
    let (Some(ph), Some(eh)) = (h.page, h.event) else {
        return Err(format!(
            "{file}: no header_page or header_event section: not a complete trace"
        ));
    };
    has_switches(&h.formats, file, "trace-cmd record -e sched")?;
    let chosen = buffers
        .iter()
        .position(|b| b.name.is_empty() && b.cpus.iter().any(|c| c.2 > 0))
        .or_else(|| buffers.iter().position(|b| b.cpus.iter().any(|c| c.2 > 0)));
    let Some(chosen) = chosen else {
        return Err(format!("{file}: no buffer of the trace holds data"));
    };
    for (i, b) in buffers.iter().enumerate() {
        if i != chosen {
            notes.push(format!(
                "buffer {:?} not read (one buffer is read: {:?})",
                b.name, buffers[chosen].name
            ));
        }
    }
    let b = &buffers[chosen];
    let (mut raw, mut lost_pages) = (Vec::new(), 0);
    for &(cpu, off, size) in &b.cpus {
        let alg = b.chunked.then_some(alg.as_str());
        let data = cpu_data(bytes, file, off, size, alg)?;
        for page in data.chunks(page_size.max(1)) {
            let (evs, lost) = tracefs::parse_page(page, cpu, &ph, &eh);
            raw.extend(evs);
            lost_pages += u64::from(lost);
        }
    }
    let max_cpu = b.cpus.iter().map(|c| c.0 + 1).max().unwrap_or(0);
    Ok(Trace {
        kind: format!("trace-cmd trace.dat v{version}"),
        raw,
        formats: h.formats,
        lost_pages,
        ncpus: ncpus.max(max_cpu),
        tgids: BTreeMap::new(),
        notes,
    })
}

/// One CPU's data, decompressed by `alg` when the buffer is compressed
/// in chunks.
fn cpu_data(
    bytes: &[u8],
    file: &str,
    off: u64,
    size: u64,
    alg: Option<&str>,
) -> Result<Vec<u8>, String> {
    let mut c = Cursor::new(bytes, off as usize, file.to_string());
    let Some(alg) = alg else {
        return Ok(c.take(size as usize, "a CPU's data")?.to_vec());
    };
    if size == 0 {
        return Ok(Vec::new());
    }
    let chunks = c.u32("the count of compressed chunks")?;
    let mut out = Vec::new();
    for _ in 0..chunks {
        let zsize = c.u32("a chunk's compressed size")? as usize;
        let usize_ = c.u32("a chunk's size")? as usize;
        let at = c.at;
        let z = c.take(zsize, "a compressed chunk")?;
        out.extend(
            decompress(alg, z, usize_).map_err(|e| format!("{file} at offset {at:#x}: {e}"))?,
        );
    }
    Ok(out)
}

/// `z` decompressed by `alg` (the file's compression), which must give
/// `size` bytes.
fn decompress(alg: &str, z: &[u8], size: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    match alg {
        "zstd" => ruzstd::decoding::StreamingDecoder::new(z)
            .map_err(|e| format!("zstd: {e}"))?
            .read_to_end(&mut out)
            .map_err(|e| format!("zstd: {e}"))?,
        "zlib" => flate2::read::ZlibDecoder::new(z)
            .read_to_end(&mut out)
            .map_err(|e| format!("zlib: {e}"))?,
        a => {
            return Err(format!(
                "compressed with {a:?}: only zstd and zlib are read"
            ))
        }
    };
    if out.len() != size {
        return Err(format!(
            "a compressed block gave {} bytes, its header said {size}",
            out.len()
        ));
    }
    Ok(out)
}

/// The header sections: header_page and header_event.
fn header_info(c: &mut Cursor, h: &mut Headers) -> Result<(), String> {
    c.expect(b"header_page\0", "\"header_page\"")?;
    let at = c.at;
    let text = c.text(8, "the page header")?;
    h.page = Some(
        tracefs::parse_header_page(&text, std::path::Path::new("header_page"))
            .map_err(|e| format!("{} at offset {at:#x}: {e}", c.what))?,
    );
    c.expect(b"header_event\0", "\"header_event\"")?;
    let at = c.at;
    let text = c.text(8, "the event header")?;
    h.event = Some(
        tracefs::parse_header_event(&text, std::path::Path::new("header_event"))
            .map_err(|e| format!("{} at offset {at:#x}: {e}", c.what))?,
    );
    Ok(())
}

/// The ftrace formats (skipped: no scheduler event is among them).
fn ftrace_events(c: &mut Cursor) -> Result<(), String> {
    let n = c.u32("the count of ftrace formats")?;
    for _ in 0..n {
        c.text(8, "an ftrace format")?;
    }
    Ok(())
}

/// Every system's event formats.
fn event_formats(c: &mut Cursor, h: &mut Headers) -> Result<(), String> {
    let systems = c.u32("the count of event systems")?;
    for _ in 0..systems {
        let system = c.cstr("a system's name")?;
        let n = c.u32("a system's count of events")?;
        for _ in 0..n {
            let at = c.at;
            let text = c.text(8, "an event format")?;
            let name = text
                .lines()
                .find_map(|l| l.strip_prefix("name:"))
                .map(|n| n.trim().to_string())
                .unwrap_or_default();
            let f = tracefs::parse_format(&name, &text, std::path::Path::new(&system))
                .map_err(|e| format!("{} at offset {at:#x}: {e}", c.what))?;
            h.formats.insert(f.id, f);
        }
    }
    Ok(())
}

/// The headers, the buffers, the CPU count, notes, and the compression.
type Parsed = (Headers, Vec<Buffer>, usize, Vec<String>, String);

fn v6(c: &mut Cursor) -> Result<Parsed, String> {
    let mut h = Headers::default();
    header_info(c, &mut h)?;
    ftrace_events(c)?;
    event_formats(c, &mut h)?;
    c.text(4, "kallsyms")?;
    c.text(4, "the printk formats")?;
    // The saved command lines: the events name every thread themselves.
    c.text(8, "the saved command lines")?;
    let ncpus = c.u32("the count of CPUs")? as usize;
    let mut notes = Vec::new();
    let mut kind = c.take(10, "the data's kind")?.to_vec();
    if kind == b"options  \0" {
        loop {
            let id = c.u16("an option's id")?;
            if id == 0 {
                break;
            }
            let size = c.u32("an option's size")? as usize;
            let data = c.take(size, "an option")?;
            if id == 3 {
                let name = data.get(8..).map_or(String::new(), |d| {
                    String::from_utf8_lossy(d.split(|&b| b == 0).next().unwrap_or(d)).into_owned()
                });
                notes.push(format!(
                    "instance buffer {name:?} not read (version 6: the top buffer is read)"
                ));
            }
        }
        kind = c.take(10, "the data's kind")?.to_vec();
    }
    match kind.as_slice() {
        b"flyrecord\0" => {}
        b"latency  \0" => return Err(c.err(
            "a latency trace (text, no per-CPU events): record with `trace-cmd record -e sched`",
        )),
        _ => return Err(c.err("expected \"flyrecord\" or \"latency\"")),
    }
    let mut top = Buffer::default();
    for cpu in 0..ncpus {
        let off = c.u64("a CPU's data offset")?;
        let size = c.u64("a CPU's data size")?;
        top.cpus.push((cpu, off, size));
    }
    Ok((h, vec![top], ncpus, notes, String::new()))
}

/// A version-7 section at `off`: its id and its (decompressed) bytes.
fn section(bytes: &[u8], file: &str, alg: &str, off: u64) -> Result<(u16, Vec<u8>), String> {
    let mut c = Cursor::new(bytes, off as usize, file.to_string());
    let id = c.u16("a section's id")?;
    let flags = c.u16("a section's flags")?;
    let _desc = c.u32("a section's description")?;
    let size = c.u64("a section's size")? as usize;
    if flags & 1 == 0 {
        return Ok((id, c.take(size, "a section")?.to_vec()));
    }
    let zsize = c.u32("a compressed section's size")? as usize;
    let usize_ = c.u32("a section's size")? as usize;
    let at = c.at;
    let z = c.take(zsize, "a compressed section")?;
    Ok((
        id,
        decompress(alg, z, usize_).map_err(|e| format!("{file} at offset {at:#x}: {e}"))?,
    ))
}

fn v7(c: &mut Cursor) -> Result<Parsed, String> {
    let alg = c.cstr("the compression's name")?;
    let _ver = c.cstr("the compression's version")?;
    let mut next = c.u64("the first options section's offset")?;
    let file = c.what.clone();
    let mut h = Headers::default();
    let mut buffers = Vec::new();
    let (mut ncpus, notes) = (0, Vec::new());
    let mut seen = std::collections::BTreeSet::new();
    while next != 0 {
        if !seen.insert(next) {
            return Err(format!(
                "{file} at offset {next:#x}: the options sections loop"
            ));
        }
        let (id, body) = section(c.b, &file, &alg, next)?;
        if id != 0 {
            return Err(format!(
                "{file} at offset {next:#x}: expected an options section, found section {id}"
            ));
        }
        let what = format!("{file}'s options section at {next:#x}");
        let mut o = Cursor::new(&body, 0, what);
        loop {
            let id = o.u16("an option's id")?;
            let size = o.u32("an option's size")? as usize;
            let data = o.take(size, "an option")?;
            let mut d = Cursor::new(data, 0, o.what.clone());
            match id {
                0 => {
                    next = d.u64("the next options section's offset")?;
                    break;
                }
                3 => buffers.push(buffer(c.b, &file, &mut d)?),
                8 => ncpus = d.u32("the CPU count")? as usize,
                16..=18 => {
                    let off = d.u64("a section's offset")?;
                    let (_, s) = section(c.b, &file, &alg, off)?;
                    let mut sc = Cursor::new(&s, 0, format!("{file}'s section at {off:#x}"));
                    match id {
                        16 => header_info(&mut sc, &mut h)?,
                        17 => ftrace_events(&mut sc)?,
                        18 => event_formats(&mut sc, &mut h)?,
                        _ => {}
                    }
                }
                22 => return Err(d.err("a latency trace (text, no per-CPU events): record with `trace-cmd record -e sched`")),
                _ => {}
            }
        }
    }
    Ok((h, buffers, ncpus, notes, alg))
}

/// A `BUFFER` option: the instance's name, its section (whose header says
/// whether its data is compressed) and its CPUs' data.
fn buffer(bytes: &[u8], file: &str, d: &mut Cursor) -> Result<Buffer, String> {
    let off = d.u64("a buffer's section offset")?;
    let name = d.cstr("a buffer's name")?;
    let _clock = d.cstr("a buffer's clock")?;
    let _page = d.u32("a buffer's page size")?;
    let n = d.u32("a buffer's CPU count")?;
    let mut s = Cursor::new(bytes, off as usize + 2, file.to_string());
    let chunked = s.u16("the buffer section's flags")? & 1 != 0;
    let mut b = Buffer {
        name,
        cpus: Vec::new(),
        chunked,
    };
    for _ in 0..n {
        let cpu = d.u32("a CPU's id")? as usize;
        let off = d.u64("a CPU's data offset")?;
        let size = d.u64("a CPU's data size")?;
        b.cpus.push((cpu, off, size));
    }
    Ok(b)
}
