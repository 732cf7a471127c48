//! Readers: a Linux sysfs tree, the text of `lscpu -p`, and a TOML file.
//!
//! Every error is a [`ReadError`] that names the file, the line (and column
//! where one applies) and what was expected there. None of these readers
//! panics on any input; the cpulist and `lscpu -p` parsers are property
//! tested on arbitrary text.
//!
//! ## sysfs
//!
//! [`from_sysfs`] takes a root: either a filesystem root holding `sys/`
//! (default `/`), or a sysfs mount itself. It reads
//!
//! * `devices/system/cpu/online`: the CPUs (they must be dense from 0; a
//!   machine with a hole in its online CPUs is refused, since our ids are
//!   the kernel's);
//! * `cpuN/topology/core_cpus_list`, or `thread_siblings_list` on kernels
//!   before 5.6: the SMT core;
//! * `cpuN/cache/index*/` with `level` 3 and its `shared_cpu_list`: the LLC.
//!   Instruction caches are skipped. With no level 3 (an ARM part whose
//!   clusters share an L2) the highest level present is the LLC. With no
//!   cache directory at all (some VMs) the node is taken as the LLC;
//! * `devices/system/node/nodeN/cpulist`: the nodes; one node when the
//!   directory is absent. Memory-only nodes (an empty cpulist) are dropped.
//!
//! All lists are cut to the online CPUs.
//!
//! ## `lscpu -p`
//!
//! [`from_lscpu`] reads the parsable output: comment lines start with `#`,
//! and the last one of the form `# CPU,Core,...` names the columns (the
//! default is `# CPU,Core,Socket,Node,,L1d,L1i,L2,L3`; the empty name between
//! `Node` and `L1d` is a column every row leaves empty). A combined column
//! such as `L1d:L1i:L2:L3` (from `lscpu -p=CPU,CORE,CACHE`) is split on `:`.
//! `lscpu -p` gives no cache sizes: its LLCs get
//! [`crate::topology::DEFAULT_LLC_BYTES`] (32 MiB), an assumption `topo`
//! shows beside each LLC.
//! The LLC is the `L3` column, else the highest `Ln` present (not `L1i`).
//! Cache ids may be sparse; siblings may be numbered `N` and `N+ncores`;
//! an empty `Node` is node 0. Without a header the default columns are
//! assumed.
//!
//! ## TOML
//!
//! [`from_toml`] reads either a uniform shape or an explicit tree:
//!
//! ```toml
//! name = "my-box"             # optional; default: the file's stem
//! llc_bytes = 33554432        # optional: every LLC's size (default 32 MiB;
//!                             # a preset's is sourced, sysfs reads each
//!                             # cache's `size`, `lscpu -p` gives none)
//!
//! [shape]                     # either this ...
//! nodes = 1
//! llcs_per_node = 2
//! cores_per_llc = 4
//! threads_per_core = 2
//! siblings = "adjacent"       # "adjacent" (2k, 2k+1) or "split" (N, N+ncores)
//!
//! [[node]]                    # ... or this, one table per node
//! id = 0                      # optional; default: its position
//! [[node.llc]]                # one per LLC of the node
//! cores = ["0-1", "2-3"]      # one cpulist per SMT core
//! ```
//!
//! [`TopologySpec`] is the same format as a serde type, so a scenario file
//! can embed it as its `[topology]` table.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::cpuset::{parse_cpulist, CpuId, CpuSet, MAX_CPUS};
use crate::topology::{Shape, Siblings, Topology, TopologyError};

/// An input that is not a machine: where, and what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadError {
    pub file: PathBuf,
    /// 1-based; `None` when the fault is the file as a whole (missing, say).
    pub line: Option<usize>,
    /// 1-based character column within the line.
    pub column: Option<usize>,
    /// "expected ..., found ..." or a sentence that says both.
    pub message: String,
}

impl ReadError {
    fn new(
        file: &Path,
        line: Option<usize>,
        column: Option<usize>,
        message: impl Into<String>,
    ) -> Self {
        ReadError {
            file: file.to_path_buf(),
            line,
            column,
            message: message.into(),
        }
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
            if let Some(c) = self.column {
                write!(f, ":{c}")?;
            }
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ReadError {}

fn read_text(path: &Path) -> Result<String, ReadError> {
    fs::read_to_string(path)
        .map_err(|e| ReadError::new(path, None, None, format!("cannot read: {e}")))
}

/// Reads a one-line cpulist file (sysfs), errors at line 1 and its column.
fn read_cpulist(path: &Path) -> Result<CpuSet, ReadError> {
    let text = read_text(path)?;
    let first = text.lines().next().unwrap_or("");
    if text.trim_end().lines().count() > 1 {
        return Err(ReadError::new(
            path,
            Some(2),
            Some(1),
            "expected one line holding a cpulist, found a second line",
        ));
    }
    parse_cpulist(first).map_err(|e| {
        ReadError::new(
            path,
            Some(1),
            Some(e.column),
            format!("expected {}, found {}", e.expected, e.found),
        )
    })
}

/// The `(line, column)` of byte `offset` in `text`, both 1-based.
pub fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let mut cut = offset;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let before = &text[..cut];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    (line, col)
}

// --------------------------------------------------------------------------
// sysfs

/// Reads the topology of the Linux sysfs tree at `root` (see the module doc).
pub fn from_sysfs(root: &Path) -> Result<Topology, ReadError> {
    let sys = if root.join("sys/devices/system/cpu").is_dir() {
        root.join("sys")
    } else if root.join("devices/system/cpu").is_dir() {
        root.to_path_buf()
    } else {
        return Err(ReadError::new(
            root,
            None,
            None,
            "expected a sysfs tree: neither sys/devices/system/cpu nor devices/system/cpu is a directory here",
        ));
    };
    let cpu_dir = sys.join("devices/system/cpu");
    let online_path = cpu_dir.join("online");
    let online = read_cpulist(&online_path)?;
    if online.is_empty() {
        return Err(ReadError::new(
            &online_path,
            Some(1),
            Some(1),
            "expected at least one online CPU, found none",
        ));
    }

    // Every group remembers the file it came from, to blame errors on.
    let mut cores: BTreeMap<CpuSet, PathBuf> = BTreeMap::new();
    let mut llcs: BTreeMap<CpuSet, PathBuf> = BTreeMap::new();
    let mut no_cache: Vec<CpuId> = Vec::new();
    for cpu in &online {
        let dir = cpu_dir.join(format!("cpu{}", cpu.index()));
        let core_path = ["topology/core_cpus_list", "topology/thread_siblings_list"]
            .iter()
            .map(|p| dir.join(p))
            .find(|p| p.is_file())
            .ok_or_else(|| {
                ReadError::new(
                    &dir.join("topology/core_cpus_list"),
                    None,
                    None,
                    format!("expected {cpu}'s SMT core here (or in thread_siblings_list), found neither file"),
                )
            })?;
        let core = read_cpulist(&core_path)? & online;
        if !core.contains(cpu) {
            return Err(ReadError::new(
                &core_path,
                Some(1),
                None,
                format!("expected {cpu}'s own core to list it, found {core}"),
            ));
        }
        cores.entry(core).or_insert(core_path);
        match llc_of(&dir, cpu)? {
            Some((set, path)) => {
                let set = set & online;
                if !set.contains(cpu) {
                    return Err(ReadError::new(
                        &path,
                        Some(1),
                        None,
                        format!("expected {cpu}'s own cache to list it, found {set}"),
                    ));
                }
                llcs.entry(set).or_insert(path);
            }
            None => no_cache.push(cpu),
        }
    }

    let node_dir = sys.join("devices/system/node");
    let mut nodes: Vec<(u32, CpuSet, PathBuf)> = Vec::new();
    if node_dir.is_dir() {
        let mut found: BTreeSet<(u32, PathBuf)> = BTreeSet::new();
        let entries = fs::read_dir(&node_dir)
            .map_err(|e| ReadError::new(&node_dir, None, None, format!("cannot list: {e}")))?;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(id) = name
                .strip_prefix("node")
                .and_then(|n| n.parse::<u32>().ok())
            {
                found.insert((id, entry.path().join("cpulist")));
            }
        }
        for (id, path) in found {
            let set = read_cpulist(&path)? & online;
            if !set.is_empty() {
                nodes.push((id, set, path));
            }
        }
    }
    if nodes.is_empty() {
        nodes.push((0, online, node_dir.clone()));
    }
    // No cache information: the CPU's node stands for its LLC.
    for cpu in no_cache {
        if let Some((_, set, path)) = nodes.iter().find(|(_, s, _)| s.contains(cpu)) {
            llcs.entry(*set).or_insert_with(|| path.clone());
        }
    }

    let core_sets: Vec<CpuSet> = cores.keys().copied().collect();
    let llc_sets: Vec<CpuSet> = llcs.keys().copied().collect();
    let node_sets: Vec<(u32, CpuSet)> = nodes.iter().map(|(i, s, _)| (*i, *s)).collect();
    let name = format!("sysfs:{}", root.display());
    let mut t = Topology::from_groups(&name, &core_sets, &llc_sets, &node_sets).map_err(|e| {
        fn holder<'a>(
            mut groups: impl Iterator<Item = (&'a CpuSet, &'a PathBuf)>,
            cpu: CpuId,
        ) -> Option<PathBuf> {
            groups
                .find(|(s, _)| s.contains(cpu))
                .map(|(_, p)| p.clone())
        }
        let file = match (&e, e.cpu()) {
            (TopologyError::LlcSpansNodes { node_b, .. }, _) => nodes
                .iter()
                .find(|(i, _, _)| i == node_b)
                .map(|(_, _, p)| p.clone()),
            (TopologyError::CoreSpansLlcs { cpu_b, .. }, _) => holder(llcs.iter(), *cpu_b),
            (
                TopologyError::ListedTwice {
                    level: "SMT core", ..
                },
                Some(cpu),
            ) => holder(cores.iter().rev(), cpu),
            (TopologyError::ListedTwice { level: "LLC", .. }, Some(cpu)) => {
                holder(llcs.iter().rev(), cpu)
            }
            (
                TopologyError::Uncovered {
                    level: "NUMA node", ..
                },
                _,
            ) => Some(node_dir.clone()),
            (TopologyError::NotDense { .. } | TopologyError::NoCpus, _) => {
                Some(online_path.clone())
            }
            (_, Some(cpu)) => holder(cores.iter(), cpu),
            _ => None,
        };
        let mut msg = e.to_string();
        if let TopologyError::LlcSpansNodes { llc, .. } = &e {
            if let Some(p) = llcs.get(llc) {
                msg = format!("{msg} (the LLC is {})", p.display());
            }
        }
        ReadError::new(
            file.as_deref().unwrap_or(&cpu_dir),
            file.as_ref().map(|_| 1),
            None,
            msg,
        )
    })?;
    // Each LLC's size: the `size` beside the `shared_cpu_list` it came
    // from (a node standing for a missing cache keeps the default).
    for k in 0..t.llcs().len() {
        let cpus = t.llcs()[k].cpus;
        let Some(size) = llcs.get(&cpus).map(|p| p.with_file_name("size")) else {
            continue;
        };
        if size.is_file() {
            let bytes = parse_cache_size(&read_text(&size)?).ok_or_else(|| {
                ReadError::new(&size, Some(1), Some(1), "expected a cache size like 32768K")
            })?;
            t.set_llc_bytes(k, bytes);
        }
    }
    Ok(t)
}

/// A sysfs cache size: `32768K`, `16M`, or bytes.
fn parse_cache_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (num, mul) = match t.as_bytes().last()? {
        b'K' => (&t[..t.len() - 1], 1u64 << 10),
        b'M' => (&t[..t.len() - 1], 1 << 20),
        b'G' => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mul).filter(|&b| b > 0)
}

/// The last-level cache of one CPU: level 3 if present, else the highest
/// level, skipping instruction caches. `None` when there is no cache info.
fn llc_of(dir: &Path, cpu: CpuId) -> Result<Option<(CpuSet, PathBuf)>, ReadError> {
    let cache = dir.join("cache");
    let Ok(entries) = fs::read_dir(&cache) else {
        return Ok(None);
    };
    let mut best: Option<(u32, PathBuf)> = None;
    let mut names: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("index"))
        .map(|e| e.path())
        .collect();
    names.sort();
    for idx in names {
        let level_path = idx.join("level");
        let text = read_text(&level_path)?;
        let level: u32 = text.trim().parse().map_err(|_| {
            ReadError::new(
                &level_path,
                Some(1),
                Some(1),
                format!("expected a cache level (a number), found {:?}", text.trim()),
            )
        })?;
        let ty = fs::read_to_string(idx.join("type")).unwrap_or_default();
        if ty.trim() == "Instruction" {
            continue;
        }
        if best.as_ref().is_none_or(|(l, _)| level > *l) {
            best = Some((level, idx));
        }
    }
    let Some((_, idx)) = best else {
        return Ok(None);
    };
    let path = idx.join("shared_cpu_list");
    if !path.is_file() {
        return Err(ReadError::new(
            &path,
            None,
            None,
            format!("expected the CPUs sharing {cpu}'s last-level cache, found no such file"),
        ));
    }
    Ok(Some((read_cpulist(&path)?, path)))
}

// --------------------------------------------------------------------------
// lscpu -p

const LSCPU_DEFAULT_HEADER: &str = "CPU,Core,Socket,Node,,L1d,L1i,L2,L3";

/// Reads the text of `lscpu -p` (see the module doc). `file` names the
/// source in errors.
pub fn from_lscpu(text: &str, file: &Path) -> Result<Topology, ReadError> {
    let err =
        |line: usize, col: usize, msg: String| ReadError::new(file, Some(line), Some(col), msg);
    let mut header: Option<Vec<String>> = None;
    // Per CPU: its line, (socket, core), llc key, node.
    struct Row {
        line: usize,
        core: (u64, u64),
        llc: Option<(usize, String)>,
        node: u32,
    }
    let mut rows: BTreeMap<CpuId, Row> = BTreeMap::new();
    let mut llc_column: Option<(usize, String)> = None;
    let mut columns: Option<Columns> = None;

    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = raw.trim_end_matches('\r');
        if let Some(c) = line.strip_prefix('#') {
            let c = c.trim();
            if columns.is_none()
                && c.split(',')
                    .next()
                    .map(|f| f.trim().eq_ignore_ascii_case("cpu"))
                    == Some(true)
            {
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
        let cols = match &columns {
            Some(c) => c,
            None => {
                let names = header.clone().unwrap_or_else(|| {
                    LSCPU_DEFAULT_HEADER
                        .split(',')
                        .map(str::to_string)
                        .collect()
                });
                let c = Columns::new(&names).map_err(|m| err(line_no, 1, m))?;
                llc_column = c.llc.clone();
                columns = Some(c);
                columns.as_ref().unwrap()
            }
        };
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
        let socket = match cols.socket {
            Some(s) if !fields[s].1.trim().is_empty() => num(s, "a socket id")?,
            _ => 0,
        };
        let node = match cols.node {
            Some(n) if !fields[n].1.trim().is_empty() => {
                let v = num(n, "a node id")?;
                u32::try_from(v).map_err(|_| {
                    err(
                        line_no,
                        fields[n].0,
                        format!("expected a node id below 2^32, found {v}"),
                    )
                })?
            }
            _ => 0,
        };
        let llc = match &llc_column {
            Some((idx, _)) => {
                let (col, f) = fields[*idx];
                let f = f.trim();
                if f.is_empty() {
                    None
                } else {
                    f.parse::<u64>().map_err(|_| {
                        err(
                            line_no,
                            col,
                            format!("expected a cache id (a number), found {f:?}"),
                        )
                    })?;
                    Some((col, f.to_string()))
                }
            }
            None => None,
        };
        if let Some(prev) = rows.get(&cpu) {
            return Err(err(
                line_no,
                fields[cols.cpu].0,
                format!(
                    "expected each CPU once, found {cpu} again (first on line {})",
                    prev.line
                ),
            ));
        }
        rows.insert(
            cpu,
            Row {
                line: line_no,
                core: (socket, core),
                llc,
                node,
            },
        );
    }
    if rows.is_empty() {
        let last = text.lines().count().max(1);
        return Err(err(
            last,
            1,
            "expected at least one CPU row, found none".into(),
        ));
    }

    let mut cores: BTreeMap<(u64, u64), CpuSet> = BTreeMap::new();
    let mut llcs: BTreeMap<String, CpuSet> = BTreeMap::new();
    let mut nodes: BTreeMap<u32, CpuSet> = BTreeMap::new();
    let with_llc = rows.values().filter(|r| r.llc.is_some()).count();
    for (cpu, r) in &rows {
        cores.entry(r.core).or_default().insert(*cpu);
        nodes.entry(r.node).or_default().insert(*cpu);
        match &r.llc {
            Some((_, id)) => {
                llcs.entry(id.clone()).or_default().insert(*cpu);
            }
            None if with_llc > 0 => {
                let (_, name) = llc_column.as_ref().expect("a row has an llc id");
                return Err(err(
                    r.line,
                    1,
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
    let core_sets: Vec<CpuSet> = cores.values().copied().collect();
    let llc_sets: Vec<CpuSet> = llcs.values().copied().collect();
    let node_sets: Vec<(u32, CpuSet)> = nodes.iter().map(|(i, s)| (*i, *s)).collect();
    let name = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "lscpu".into());
    Topology::from_groups(&name, &core_sets, &llc_sets, &node_sets).map_err(|e| {
        let line = e.cpu().and_then(|c| rows.get(&c)).map(|r| r.line);
        ReadError::new(file, line, line.map(|_| 1), e.to_string())
    })
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

// --------------------------------------------------------------------------
// TOML

/// The TOML topology format (see the module doc), as a serde type.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologySpec {
    pub name: Option<String>,
    /// A preset's name, for scenario files: `preset = "amd-2x8"`.
    pub preset: Option<toml::Spanned<String>>,
    pub shape: Option<ShapeSpec>,
    #[serde(default)]
    pub node: Vec<NodeSpec>,
    /// Every LLC's size in bytes (a preset's own, or 32 MiB, otherwise).
    pub llc_bytes: Option<toml::Spanned<u64>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShapeSpec {
    pub nodes: usize,
    pub llcs_per_node: usize,
    pub cores_per_llc: usize,
    pub threads_per_core: usize,
    #[serde(default = "adjacent")]
    pub siblings: SiblingsSpec,
}

fn adjacent() -> SiblingsSpec {
    SiblingsSpec::Adjacent
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SiblingsSpec {
    Adjacent,
    Split,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    pub id: Option<u32>,
    #[serde(default)]
    pub llc: Vec<LlcSpec>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlcSpec {
    pub cores: Vec<toml::Spanned<String>>,
}

impl TopologySpec {
    /// Builds the machine. `text` is the document the spec was read from, so
    /// errors can point into it; `default_name` is used when it names none.
    pub fn build(
        &self,
        text: &str,
        file: &Path,
        default_name: &str,
    ) -> Result<Topology, ReadError> {
        let t = self.groups(text, file, default_name)?;
        match &self.llc_bytes {
            None => Ok(t),
            Some(b) if *b.get_ref() == 0 => {
                let (l, c) = line_column(text, b.span().start);
                Err(ReadError::new(
                    file,
                    Some(l),
                    Some(c),
                    "expected llc_bytes of 1 or more, found 0",
                ))
            }
            Some(b) => Ok(t.with_llc_bytes(*b.get_ref())),
        }
    }

    fn groups(&self, text: &str, file: &Path, default_name: &str) -> Result<Topology, ReadError> {
        let at = |offset: usize, msg: String| {
            let (l, c) = line_column(text, offset);
            ReadError::new(file, Some(l), Some(c), msg)
        };
        let name = self
            .name
            .clone()
            .unwrap_or_else(|| default_name.to_string());
        let sources = self.preset.is_some() as u8
            + self.shape.is_some() as u8
            + (!self.node.is_empty()) as u8;
        if sources != 1 {
            return Err(ReadError::new(
                file,
                None,
                None,
                format!("expected exactly one of `preset`, `[shape]` or `[[node]]` tables, found {sources}"),
            ));
        }
        if let Some(p) = &self.preset {
            let t = crate::presets::preset(p.get_ref()).ok_or_else(|| {
                let names: Vec<&str> = crate::presets::PRESETS.iter().map(|p| p.name).collect();
                at(
                    p.span().start,
                    format!(
                        "expected a preset ({}), found {:?}",
                        names.join(", "),
                        p.get_ref()
                    ),
                )
            })?;
            return Ok(match &self.name {
                Some(n) => t.renamed(n),
                None => t,
            });
        }
        if let Some(s) = &self.shape {
            let shape = Shape {
                nodes: s.nodes,
                llcs_per_node: s.llcs_per_node,
                cores_per_llc: s.cores_per_llc,
                threads_per_core: s.threads_per_core,
                siblings: match s.siblings {
                    SiblingsSpec::Adjacent => Siblings::Adjacent,
                    SiblingsSpec::Split => Siblings::Split,
                },
            };
            return shape
                .build(&name)
                .map_err(|e| ReadError::new(file, None, None, format!("[shape]: {e}")));
        }
        let mut cores = Vec::new();
        let mut spans = Vec::new();
        let mut llcs = Vec::new();
        let mut nodes = Vec::new();
        for (i, n) in self.node.iter().enumerate() {
            let mut node_set = CpuSet::new();
            for l in &n.llc {
                let mut llc_set = CpuSet::new();
                for c in &l.cores {
                    // +1: the span starts at the opening quote.
                    let set = parse_cpulist(c.get_ref()).map_err(|e| {
                        at(
                            c.span().start + 1 + byte_of_column(c.get_ref(), e.column),
                            format!("expected {}, found {}", e.expected, e.found),
                        )
                    })?;
                    llc_set = llc_set | set;
                    cores.push(set);
                    spans.push((set, c.span().start));
                }
                node_set = node_set | llc_set;
                llcs.push(llc_set);
            }
            nodes.push((n.id.unwrap_or(i as u32), node_set));
        }
        Topology::from_groups(&name, &cores, &llcs, &nodes).map_err(|e| {
            // Point at the last core string that holds the blamed CPU.
            match e
                .cpu()
                .and_then(|cpu| spans.iter().rev().find(|(s, _)| s.contains(cpu)))
            {
                Some((_, off)) => at(*off, e.to_string()),
                None => ReadError::new(file, None, None, e.to_string()),
            }
        })
    }
}

fn byte_of_column(s: &str, column: usize) -> usize {
    s.char_indices()
        .nth(column.saturating_sub(1))
        .map(|(b, _)| b)
        .unwrap_or(s.len())
}

/// Maps a TOML parse error to a [`ReadError`] at its line and column.
pub fn toml_error(text: &str, file: &Path, e: &toml::de::Error) -> ReadError {
    let msg = e.message().trim().to_string();
    match e.span() {
        Some(span) => {
            let (l, c) = line_column(text, span.start);
            ReadError::new(file, Some(l), Some(c), msg)
        }
        None => ReadError::new(file, None, None, msg),
    }
}

/// Reads the TOML topology format from `text`; `file` names it in errors.
pub fn from_toml(text: &str, file: &Path) -> Result<Topology, ReadError> {
    let spec: TopologySpec = toml::from_str(text).map_err(|e| toml_error(text, file, &e))?;
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "toml".into());
    spec.build(text, file, &stem)
}

/// Reads a TOML topology file.
pub fn from_toml_file(path: &Path) -> Result<Topology, ReadError> {
    from_toml(&read_text(path)?, path)
}

/// Reads a file holding the output of `lscpu -p`.
pub fn from_lscpu_file(path: &Path) -> Result<Topology, ReadError> {
    from_lscpu(&read_text(path)?, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_column_counts_chars() {
        let t = "ab\ncdé\nf";
        assert_eq!(line_column(t, 0), (1, 1));
        assert_eq!(line_column(t, 3), (2, 1));
        assert_eq!(line_column(t, 7), (2, 4));
        assert_eq!(line_column(t, 99), (3, 2));
    }

    #[test]
    fn lscpu_default_and_split_siblings() {
        let text = "# CPU,Core,Socket,Node,,L1d,L1i,L2,L3\n0,0,0,0,,0,0,0,0\n1,1,0,0,,1,1,1,0\n2,0,0,0,,0,0,0,0\n3,1,0,0,,1,1,1,0\n";
        let t = from_lscpu(text, Path::new("x.txt")).unwrap();
        assert_eq!(t.core_cpus(CpuId::new(0)), &parse_cpulist("0,2").unwrap());
        assert_eq!(t.llcs().len(), 1);
    }

    #[test]
    fn lscpu_errors_name_line_and_column() {
        let text = "# CPU,Core,Socket,Node,,L1d,L1i,L2,L3\n0,0,0,0,,0,0,0,0\n1,x,0,0,,1,1,1,0\n";
        let e = from_lscpu(text, Path::new("bad.txt")).unwrap_err();
        assert_eq!((e.line, e.column), (Some(3), Some(3)), "{e}");
        assert!(
            e.to_string().starts_with("bad.txt:3:3: expected a core id"),
            "{e}"
        );
        let e = from_lscpu("# CPU,Core\n0,0\n0,1\n", Path::new("d")).unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
        let e = from_lscpu("# CPU,Core\n0,0,5\n", Path::new("d")).unwrap_err();
        assert_eq!((e.line, e.column), (Some(2), Some(6)), "{e}");
    }

    #[test]
    fn toml_shape_preset_and_tree() {
        let t = from_toml(
            "[shape]\nnodes=1\nllcs_per_node=2\ncores_per_llc=4\nthreads_per_core=2\n",
            Path::new("m.toml"),
        )
        .unwrap();
        assert_eq!((t.num_cpus(), t.name()), (16, "m"));
        let t = from_toml("preset = \"t14\"\n", Path::new("p.toml")).unwrap();
        assert_eq!(t.num_cpus(), 16);
        let t = from_toml(
            "name = \"tiny\"\n[[node]]\n[[node.llc]]\ncores = [\"0-1\", \"2-3\"]\n",
            Path::new("t.toml"),
        )
        .unwrap();
        assert_eq!((t.name(), t.cores().len()), ("tiny", 2));
    }

    #[test]
    fn toml_errors_point_into_the_text() {
        let text = "[[node]]\n[[node.llc]]\ncores = [\"0-1\", \"2-x\"]\n";
        let e = from_toml(text, Path::new("t.toml")).unwrap_err();
        assert_eq!((e.line, e.column), (Some(3), Some(20)), "{e}");
        let text = "[[node]]\n[[node.llc]]\ncores = [\"0-1\", \"1-2\"]\n";
        let e = from_toml(text, Path::new("t.toml")).unwrap_err();
        assert_eq!((e.line, e.column), (Some(3), Some(17)), "{e}");
        assert!(e.message.contains("cpu1 listed in two"), "{e}");
        let e = from_toml("[shape]\nnodes = \"two\"\n", Path::new("s.toml")).unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        let e = from_toml("preset = \"nope\"\n", Path::new("s.toml")).unwrap_err();
        assert_eq!((e.line, e.column), (Some(1), Some(10)), "{e}");
        let e = from_toml("bogus = 1\n", Path::new("s.toml")).unwrap_err();
        assert_eq!(e.line, Some(1), "{e}");
    }
}
