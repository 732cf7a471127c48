//! `perf.data` of `perf sched record` (or `perf record -e 'sched:*'`),
//! read with the `linux-perf-data` crate (the maintained reader of perf's
//! format, samply's): its records, each tracepoint sample's `raw` data
//! (the ftrace record the kernel wrote, `common_type` first) with its
//! time and CPU, and its `HEADER_TRACING_DATA` section, which is the
//! tracing host's `header_page`, `header_event` and event formats in
//! trace-cmd's layout (the front of a version-6 `trace.dat`), read by
//! [`super::tracedat`]'s parsers.
//!
//! Why this and not `perf script`'s text or `perf data convert
//! --to-json`: the JSON carries no tracepoint fields, and the text is
//! each event's print format, which differs across kernels; the raw
//! records are read with the file's own layouts, as trace-cmd's are.
//! `PERF_RECORD_LOST` counts as a lost page.

use std::collections::BTreeMap;

use linux_perf_data::linux_perf_event_reader::{EventRecord, RecordType};
use linux_perf_data::{PerfFileReader, PerfFileRecord};

use super::Trace;
use crate::tracefs::Raw;

/// perf.data's first eight bytes.
pub const MAGIC: &[u8] = b"PERFILE2";

/// Every section the header names lies inside the file: the reader
/// allocates a feature section's size before it reads it, so a corrupt
/// size would abort the process rather than fail (perf's
/// `perf_file_header`: magic, size, attr_size, then the attrs, data and
/// event_types sections as offset and size, then 256 feature bits; the
/// feature sections' table follows the data section).
fn sections_inside(bytes: &[u8], file: &str) -> Result<(), String> {
    let u64_at = |at: usize| -> Option<u64> {
        Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
    };
    let truncated = || format!("{file}: perf.data: the header is cut short: truncated?");
    let len = bytes.len() as u64;
    let inside = |off: u64, size: u64, what: &str| -> Result<(), String> {
        match off.checked_add(size) {
            Some(end) if end <= len => Ok(()),
            _ => Err(format!(
                "{file}: perf.data: {what} at offset {off:#x}, {size} bytes, is past the file's end ({len} bytes): truncated?"
            )),
        }
    };
    let sect = |at: usize| -> Result<(u64, u64), String> {
        Ok((
            u64_at(at).ok_or_else(truncated)?,
            u64_at(at + 8).ok_or_else(truncated)?,
        ))
    };
    let (attrs, data, types) = (sect(24)?, sect(40)?, sect(56)?);
    inside(attrs.0, attrs.1, "the attributes section")?;
    inside(data.0, data.1, "the data section")?;
    inside(types.0, types.1, "the event types section")?;
    let bits = bytes.get(72..104).ok_or_else(truncated)?;
    let features = bits.iter().map(|b| b.count_ones() as u64).sum::<u64>();
    let table = data.0.saturating_add(data.1);
    inside(
        table,
        features.saturating_mul(16),
        "the feature sections' table",
    )?;
    for i in 0..features {
        let (off, size) = sect((table + 16 * i) as usize)?;
        inside(off, size, "a feature section")?;
    }
    Ok(())
}

/// Reads `bytes`, a perf.data file named `file`.
pub fn read(bytes: &[u8], file: &str) -> Result<Trace, String> {
    sections_inside(bytes, file)?;
    let perf = |e: linux_perf_data::Error| format!("{file}: perf.data: {e}");
    let PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = PerfFileReader::parse_file(std::io::Cursor::new(bytes)).map_err(perf)?;
    let Some(tracing) = perf_file.feature_section_data(linux_perf_data::Feature::TRACING_DATA)
    else {
        return Err(format!(
            "{file}: perf.data with no tracing data: record scheduler tracepoints (`perf sched record`)"
        ));
    };
    let formats = super::tracedat::tracing_data(tracing, &format!("{file}'s tracing data"))?;
    let ncpus = perf_file
        .nr_cpus()
        .ok()
        .flatten()
        .map_or(0, |n| n.nr_cpus_available as usize);
    let (mut raw, mut lost_pages, mut no_raw) = (Vec::new(), 0u64, 0u64);
    while let Some(rec) = record_iter.next_record(&mut perf_file).map_err(perf)? {
        let PerfFileRecord::EventRecord { record, .. } = rec else {
            continue;
        };
        if record.record_type == RecordType::LOST {
            lost_pages += 1;
            continue;
        }
        // Only samples are parsed: the reader asserts on some corrupt
        // records of other kinds (an MMAP2's build id) rather than failing.
        if record.record_type != RecordType::SAMPLE {
            continue;
        }
        match record.parse() {
            Ok(EventRecord::Sample(s)) => {
                let (Some(ts), Some(cpu), Some(data)) = (s.timestamp, s.cpu, s.raw) else {
                    no_raw += 1;
                    continue;
                };
                raw.push(Raw {
                    ts,
                    cpu: cpu as usize,
                    payload: data.as_slice().into_owned(),
                });
            }
            Ok(_) => {}
            Err(e) => return Err(format!("{file}: a record: {e}")),
        }
    }
    let mut notes = Vec::new();
    if no_raw > 0 {
        notes.push(format!(
            "{no_raw} samples without a time, CPU or raw data left out"
        ));
    }
    let max_cpu = raw.iter().map(|e| e.cpu + 1).max().unwrap_or(0);
    Ok(Trace {
        kind: "perf.data".into(),
        raw,
        formats,
        lost_pages,
        ncpus: ncpus.max(max_cpu),
        tgids: BTreeMap::new(),
        notes,
    })
}
