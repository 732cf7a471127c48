//! The `lscpu -p` reader (the module doc of `read` has the format).

use std::collections::BTreeMap;
use std::path::Path;

use super::error::{read_text, ReadError};
use crate::cpuset::{CpuId, CpuSet, MAX_CPUS};
use crate::topology::Topology;

const LSCPU_DEFAULT_HEADER: &str = "CPU,Core,Socket,Node,,L1d,L1i,L2,L3";

/// Reads the text of `lscpu -p` (see the module doc). `file` names the
/// source in errors.
pub fn from_lscpu(text: &str, file: &Path) -> Result<Topology, ReadError> {
    let (rows, llc_column) = read_rows(text, file)?;
    let (core_sets, llc_sets, node_sets) = group_rows(&rows, &llc_column, file)?;
    let name = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "lscpu".into());
    Topology::from_groups(&name, &core_sets, &llc_sets, &node_sets).map_err(|e| {
        let line = e.cpu().and_then(|c| rows.get(&c)).map(|r| r.line);
        ReadError::new(file, line, line.map(|_| 1), e.to_string())
    })
}

/// One CPU's row: its line, (socket, core), LLC id (with its column), node.
struct Row {
    line: usize,
    core: (u64, u64),
    llc: Option<(usize, String)>,
    node: u32,
}

/// Every CPU row of the text, and the LLC column the header named.
#[allow(clippy::type_complexity)]
fn read_rows(
    text: &str,
    file: &Path,
) -> Result<(BTreeMap<CpuId, Row>, Option<(usize, String)>), ReadError> {
    let err =
        |line: usize, col: usize, msg: String| ReadError::new(file, Some(line), Some(col), msg);
    let mut header: Option<Vec<String>> = None;
    let mut rows: BTreeMap<CpuId, Row> = BTreeMap::new();
    let mut columns: Option<Columns> = None;
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = raw.trim_end_matches('\r');
        if let Some(c) = line.strip_prefix('#') {
            let c = c.trim();
            let names_cpu = c
                .split(',')
                .next()
                .is_some_and(|f| f.trim().eq_ignore_ascii_case("cpu"));
            if columns.is_none() && names_cpu {
                header = Some(
                    split_fields(c)
                        .into_iter()
                        .map(|(_, f)| f.to_string())
                        .collect(),
                );
            }
            continue;
        }
        if line.trim().is_empty() {
            continue;
        }
        if columns.is_none() {
            let names = header.clone().unwrap_or_else(|| {
                LSCPU_DEFAULT_HEADER
                    .split(',')
                    .map(str::to_string)
                    .collect()
            });
            columns = Some(Columns::new(&names).map_err(|m| err(line_no, 1, m))?);
        }
        let cols = columns.as_ref().expect("set above");
        let (cpu, row) = parse_row(line_no, line, cols, file)?;
        if let Some(prev) = rows.get(&cpu) {
            let col = split_fields(line)[cols.cpu].0;
            return Err(err(
                line_no,
                col,
                format!(
                    "expected each CPU once, found {cpu} again (first on line {})",
                    prev.line
                ),
            ));
        }
        rows.insert(cpu, row);
    }
    if rows.is_empty() {
        let last = text.lines().count().max(1);
        return Err(err(
            last,
            1,
            "expected at least one CPU row, found none".into(),
        ));
    }
    Ok((rows, columns.and_then(|c| c.llc)))
}

/// One data line, read with the header's columns.
fn parse_row(
    line_no: usize,
    line: &str,
    cols: &Columns,
    file: &Path,
) -> Result<(CpuId, Row), ReadError> {
    let err =
        |line: usize, col: usize, msg: String| ReadError::new(file, Some(line), Some(col), msg);
    let fields = split_fields(line);
    if fields.len() != cols.count {
        return Err(err(
            line_no,
            line.chars().count() + 1,
            format!(
                "expected {} comma-separated fields, found {}",
                cols.count,
                fields.len()
            ),
        ));
    }
    let num = |idx: usize, what: &str| -> Result<u64, ReadError> {
        let (col, f) = fields[idx];
        let f = f.trim();
        f.parse::<u64>().map_err(|_| {
            err(
                line_no,
                col,
                format!("expected {what} (a number), found {f:?}"),
            )
        })
    };
    let filled = |idx: Option<usize>| idx.filter(|&i| !fields[i].1.trim().is_empty());
    let cpu_n = num(cols.cpu, "a CPU number")?;
    let cpu = CpuId::try_new(cpu_n as usize)
        .filter(|_| cpu_n < MAX_CPUS as u64)
        .ok_or_else(|| {
            err(
                line_no,
                fields[cols.cpu].0,
                format!("expected a CPU number below {MAX_CPUS}, found {cpu_n}"),
            )
        })?;
    let core = num(cols.core, "a core id")?;
    let socket = match filled(cols.socket) {
        Some(s) => num(s, "a socket id")?,
        None => 0,
    };
    let node = match filled(cols.node) {
        Some(n) => {
            let v = num(n, "a node id")?;
            u32::try_from(v).map_err(|_| {
                err(
                    line_no,
                    fields[n].0,
                    format!("expected a node id below 2^32, found {v}"),
                )
            })?
        }
        None => 0,
    };
    let llc = match filled(cols.llc.as_ref().map(|(i, _)| *i)) {
        Some(idx) => {
            num(idx, "a cache id")?;
            let (col, f) = fields[idx];
            Some((col, f.trim().to_string()))
        }
        None => None,
    };
    let row = Row {
        line: line_no,
        core: (socket, core),
        llc,
        node,
    };
    Ok((cpu, row))
}

/// The rows grouped: SMT cores, LLCs (each node is one LLC when no row
/// names a cache), nodes.
#[allow(clippy::type_complexity)]
fn group_rows(
    rows: &BTreeMap<CpuId, Row>,
    llc_column: &Option<(usize, String)>,
    file: &Path,
) -> Result<(Vec<CpuSet>, Vec<CpuSet>, Vec<(u32, CpuSet)>), ReadError> {
    let mut cores: BTreeMap<(u64, u64), CpuSet> = BTreeMap::new();
    let mut llcs: BTreeMap<String, CpuSet> = BTreeMap::new();
    let mut nodes: BTreeMap<u32, CpuSet> = BTreeMap::new();
    let with_llc = rows.values().filter(|r| r.llc.is_some()).count();
    for (cpu, r) in rows {
        cores.entry(r.core).or_default().insert(*cpu);
        nodes.entry(r.node).or_default().insert(*cpu);
        match &r.llc {
            Some((_, id)) => {
                llcs.entry(id.clone()).or_default().insert(*cpu);
            }
            None if with_llc > 0 => {
                let (_, name) = llc_column.as_ref().expect("a row has an llc id");
                return Err(ReadError::new(
                    file,
                    Some(r.line),
                    Some(1),
                    format!("expected a {name} cache id for {cpu}, found an empty field"),
                ));
            }
            // No cache column filled anywhere: each node is one LLC.
            None => {
                llcs.entry(format!("node{}", r.node))
                    .or_default()
                    .insert(*cpu);
            }
        }
    }
    Ok((
        cores.values().copied().collect(),
        llcs.values().copied().collect(),
        nodes.iter().map(|(i, s)| (*i, *s)).collect(),
    ))
}

/// Fields of one line with their 1-based start columns.
fn split_fields(line: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut col = 1;
    for f in line.split(',') {
        out.push((col, f));
        col += f.chars().count() + 1;
    }
    // A combined cache column ("0:0:0:0") is split into its parts, which
    // keep the column of the whole field.
    let mut expanded = Vec::new();
    for (c, f) in out {
        if f.contains(':') {
            expanded.extend(f.split(':').map(|p| (c, p)));
        } else {
            expanded.push((c, f));
        }
    }
    expanded
}

struct Columns {
    count: usize,
    cpu: usize,
    core: usize,
    socket: Option<usize>,
    node: Option<usize>,
    llc: Option<(usize, String)>,
}

impl Columns {
    fn new(names: &[String]) -> Result<Columns, String> {
        let find = |want: &str| {
            names
                .iter()
                .position(|n| n.trim().eq_ignore_ascii_case(want))
        };
        let cpu = find("cpu").ok_or("expected a CPU column in the header")?;
        let core = find("core").ok_or_else(|| {
            format!(
                "expected a Core column in the header, found {:?}",
                names.join(",")
            )
        })?;
        // The LLC column: L3, else the highest Ln that is not an L1i.
        let mut llc: Option<(u32, usize, String)> = None;
        for (i, n) in names.iter().enumerate() {
            let n = n.trim();
            let level = n
                .strip_prefix(['L', 'l'])
                .map(|r| r.trim_end_matches(['d', 'i', 'D', 'I']))
                .and_then(|r| r.parse::<u32>().ok());
            if let Some(level) = level {
                if n.ends_with(['i', 'I']) {
                    continue;
                }
                if llc.as_ref().is_none_or(|(l, _, _)| level > *l) {
                    llc = Some((level, i, n.to_string()));
                }
            }
        }
        Ok(Columns {
            count: names.len(),
            cpu,
            core,
            socket: find("socket"),
            node: find("node"),
            llc: llc.map(|(_, i, n)| (i, n)),
        })
    }
}

/// Reads a file holding the output of `lscpu -p`.
pub fn from_lscpu_file(path: &Path) -> Result<Topology, ReadError> {
    from_lscpu(&read_text(path)?, path)
}
