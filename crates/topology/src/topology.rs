//! The machine's shape: for every CPU its SMT core, its LLC and its NUMA node.
//!
//! A `Topology` is built once (from a preset, a reader or a [`Shape`]),
//! validated, and then shared read-only by every CPU: it is the one piece of
//! scheduler input no CPU owns. Lookups on the wake path are one array index
//! (`place(cpu)`), so `llc_id(cpu)` costs what the waker-streak rule can
//! afford on every wake.
//!
//! Groups are ordered by their first CPU, so a topology has one canonical
//! form whatever order its source listed things in. An LLC is named by the id
//! of its first CPU ([`LlcId`]): the rule stores it in ten bits, so it must be
//! below 1024, which [`MAX_CPUS`] guarantees.
//!
//! Validation (each a [`TopologyError`]): at least one CPU, at most
//! [`MAX_CPUS`]; ids dense from 0; no CPU listed twice at one level; every
//! CPU in exactly one core, one LLC and one node; an SMT core inside one LLC;
//! an LLC inside one node; node ids unique.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use crate::cpuset::{CpuId, CpuSet, MAX_CPUS};

/// An LLC's name: the id of its first CPU. Below 1024 by construction.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct LlcId(u16);

impl LlcId {
    /// The largest value an LLC id can take, plus one.
    pub const LIMIT: usize = MAX_CPUS;

    pub const fn of_first_cpu(cpu: CpuId) -> LlcId {
        LlcId(cpu.index() as u16)
    }

    /// An id as some encoding stored it. It may be 1024 or more, and then
    /// names no LLC of any machine: decoders must check it.
    pub const fn from_raw(index: u16) -> LlcId {
        LlcId(index)
    }

    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for LlcId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "llc{}", self.0)
    }
}

/// How close two CPUs are, nearest first.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Level {
    /// The same CPU.
    Same,
    /// SMT siblings of one core.
    Smt,
    /// Different cores of one last-level cache.
    Llc,
    /// Different LLCs of one NUMA node.
    Node,
    /// Different nodes.
    Machine,
}

impl Level {
    pub const ALL: [Level; 5] = [
        Level::Same,
        Level::Smt,
        Level::Llc,
        Level::Node,
        Level::Machine,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Level::Same => "same",
            Level::Smt => "smt",
            Level::Llc => "llc",
            Level::Node => "node",
            Level::Machine => "machine",
        }
    }
}

/// Where one CPU sits, as ordinals into the topology's groups.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct CpuPlace {
    /// Ordinal of its SMT core in [`Topology::cores`].
    pub core: u16,
    /// Ordinal of its LLC in [`Topology::llcs`].
    pub llc: u16,
    /// Its LLC's id (the LLC's first CPU), kept here so the wake path reads
    /// it in one lookup.
    pub llc_id: LlcId,
    /// Ordinal of its node in [`Topology::nodes`].
    pub node: u16,
}

/// A last-level cache and the cores that share it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Llc {
    pub id: LlcId,
    pub cpus: CpuSet,
    /// Ordinals into [`Topology::cores`], in order of their first CPU.
    pub cores: Vec<u16>,
    /// Ordinal into [`Topology::nodes`].
    pub node: u16,
    /// Its capacity in bytes ([`DEFAULT_LLC_BYTES`] until a preset, sysfs
    /// or a file says otherwise).
    pub bytes: u64,
}

/// An LLC's size when the source gives none (`lscpu -p`, a bare shape):
/// 32 MiB, a Zen 3/4 CCD's L3 (AMD's EPYC 9004 and Ryzen 5000 product
/// pages). An assumption, said wherever it is used.
pub const DEFAULT_LLC_BYTES: u64 = 32 << 20;

/// A NUMA node and its LLCs.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Node {
    /// The node's number as its source gave it (sysfs `nodeN`).
    pub id: u32,
    pub cpus: CpuSet,
    /// Ordinals into [`Topology::llcs`], in order of their first CPU.
    pub llcs: Vec<u16>,
}

/// A validated machine shape. Immutable once built.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Topology {
    name: String,
    all: CpuSet,
    places: Vec<CpuPlace>,
    cores: Vec<CpuSet>,
    /// Each core's CPUs as a list, in id order: a core has a few, and a
    /// scan that asks of each of them (is this core free?) need not walk
    /// the words of a set.
    core_lists: Vec<Vec<CpuId>>,
    llcs: Vec<Llc>,
    nodes: Vec<Node>,
    /// The kernel's tick rate (`CONFIG_HZ`): a machine parameter, since
    /// the tick is when a used-up slice is seen without `HRTICK`.
    hz: u32,
}

/// `CONFIG_HZ` where a machine's source does not name one (the presets:
/// x86_64_defconfig's `HZ_1000`).
pub const DEFAULT_HZ: u32 = 1000;

/// Why a set of groups is not a machine.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum TopologyError {
    /// No CPUs at all.
    NoCpus,
    /// A CPU number at or beyond [`MAX_CPUS`].
    TooManyCpus { cpu: usize },
    /// A group with no CPUs in it.
    EmptyGroup { level: &'static str },
    /// One CPU in two groups of one level.
    ListedTwice { level: &'static str, cpu: CpuId },
    /// Ids are not `0..n`: this one is missing.
    NotDense { missing: CpuId, cpus: CpuSet },
    /// A CPU that is in a core but in no group of this level.
    Uncovered { level: &'static str, cpu: CpuId },
    /// A CPU in a group of this level that is in no core.
    Unknown { level: &'static str, cpu: CpuId },
    /// An SMT core whose threads sit in two LLCs.
    /// `cpu_b` is the first thread found in `llc_b`.
    CoreSpansLlcs {
        core: CpuSet,
        llc_a: CpuSet,
        llc_b: CpuSet,
        cpu_b: CpuId,
    },
    /// An LLC whose CPUs sit in two nodes; `cpu_b` is its first CPU in
    /// `node_b`.
    LlcSpansNodes {
        llc: CpuSet,
        node_a: u32,
        node_b: u32,
        cpu_b: CpuId,
    },
    /// Two nodes with one id.
    DuplicateNode { id: u32 },
    /// A shape with a zero count.
    ZeroShape { field: &'static str },
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use TopologyError::*;
        match self {
            NoCpus => f.write_str("expected at least one CPU, found none"),
            TooManyCpus { cpu } => write!(
                f,
                "expected CPU ids below {MAX_CPUS}, found cpu{cpu} (schedlab handles at most {MAX_CPUS} CPUs)"
            ),
            EmptyGroup { level } => write!(f, "expected every {level} to have a CPU, found an empty one"),
            ListedTwice { level, cpu } => {
                write!(f, "expected each CPU in one {level}, found {cpu} listed in two")
            }
            NotDense { missing, cpus } => write!(
                f,
                "expected CPU ids dense from 0, found {cpus} ({missing} missing)"
            ),
            Uncovered { level, cpu } => write!(f, "expected {cpu} to be in some {level}, found it in none"),
            Unknown { level, cpu } => write!(f, "a {level} lists {cpu}, which is in no SMT core"),
            CoreSpansLlcs { core, llc_a, llc_b, .. } => write!(
                f,
                "expected an SMT core inside one LLC, found core {core} in LLC {llc_a} and LLC {llc_b}"
            ),
            LlcSpansNodes { llc, node_a, node_b, .. } => write!(
                f,
                "expected an LLC inside one NUMA node, found LLC {llc} in node {node_a} and node {node_b}"
            ),
            DuplicateNode { id } => write!(f, "expected node ids to be unique, found node {id} twice"),
            ZeroShape { field } => write!(f, "expected {field} to be at least 1, found 0"),
        }
    }
}

impl TopologyError {
    /// The CPU a reader should point at to show where the input is wrong.
    pub fn cpu(&self) -> Option<CpuId> {
        use TopologyError::*;
        match self {
            ListedTwice { cpu, .. } | Uncovered { cpu, .. } | Unknown { cpu, .. } => Some(*cpu),
            NotDense { missing, cpus } => {
                // Point at the first CPU past the hole: that line is wrong.
                cpus.next_at_or_after(missing.index()).or(Some(*missing))
            }
            CoreSpansLlcs { cpu_b, .. } | LlcSpansNodes { cpu_b, .. } => Some(*cpu_b),
            NoCpus
            | TooManyCpus { .. }
            | EmptyGroup { .. }
            | DuplicateNode { .. }
            | ZeroShape { .. } => None,
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for TopologyError {}

/// How a uniform machine numbers the threads of a core.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Siblings {
    /// Threads of a core are adjacent: core k has CPUs `k*t .. k*t+t`
    /// (the seed kernel's numbering on AMD; QEMU's `-smp threads=2`).
    Adjacent,
    /// Linux on most x86 servers: the first thread of every core, then the
    /// second: core k has CPUs `k`, `k + ncores`, ...
    Split,
}

/// A uniform machine: nodes × LLCs × cores × threads.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Shape {
    pub nodes: usize,
    pub llcs_per_node: usize,
    pub cores_per_llc: usize,
    pub threads_per_core: usize,
    pub siblings: Siblings,
}

impl Shape {
    pub fn cpus(&self) -> usize {
        self.nodes * self.llcs_per_node * self.cores_per_llc * self.threads_per_core
    }

    pub fn build(&self, name: &str) -> Result<Topology, TopologyError> {
        for (field, v) in [
            ("nodes", self.nodes),
            ("llcs_per_node", self.llcs_per_node),
            ("cores_per_llc", self.cores_per_llc),
            ("threads_per_core", self.threads_per_core),
        ] {
            if v == 0 {
                return Err(TopologyError::ZeroShape { field });
            }
        }
        let n = self.cpus();
        if n > MAX_CPUS {
            return Err(TopologyError::TooManyCpus { cpu: n - 1 });
        }
        let ncores = self.nodes * self.llcs_per_node * self.cores_per_llc;
        let t = self.threads_per_core;
        let core_cpus = |k: usize| -> CpuSet {
            (0..t)
                .map(|i| match self.siblings {
                    Siblings::Adjacent => CpuId::new(k * t + i),
                    Siblings::Split => CpuId::new(k + i * ncores),
                })
                .collect()
        };
        let cores: Vec<CpuSet> = (0..ncores).map(core_cpus).collect();
        let llcs: Vec<CpuSet> = cores
            .chunks(self.cores_per_llc)
            .map(|c| c.iter().fold(CpuSet::new(), |a, b| a | *b))
            .collect();
        let nodes: Vec<(u32, CpuSet)> = llcs
            .chunks(self.llcs_per_node)
            .enumerate()
            .map(|(i, l)| (i as u32, l.iter().fold(CpuSet::new(), |a, b| a | *b)))
            .collect();
        Topology::from_groups(name, &cores, &llcs, &nodes)
    }
}

impl Topology {
    /// Builds and validates a topology from its groups, in any order.
    pub fn from_groups(
        name: &str,
        cores: &[CpuSet],
        llcs: &[CpuSet],
        nodes: &[(u32, CpuSet)],
    ) -> Result<Topology, TopologyError> {
        let all = dense_union(cores)?;
        let llc_all = disjoint_union("LLC", llcs.iter())?;
        let node_all = disjoint_union("NUMA node", nodes.iter().map(|(_, s)| s))?;
        covers("LLC", &all, &llc_all)?;
        covers("NUMA node", &all, &node_all)?;

        let mut cores: Vec<CpuSet> = cores.to_vec();
        cores.sort_by_key(|c| c.first());
        let mut llc_sets: Vec<CpuSet> = llcs.to_vec();
        llc_sets.sort_by_key(|c| c.first());
        let node_list = sorted_nodes(nodes)?;
        let places = places(all.weight(), &cores, &llc_sets, &node_list)?;
        let llc_list = llc_list(&places, &cores, &llc_sets, &node_list)?;
        let node_out = node_list
            .iter()
            .enumerate()
            .map(|(k, (id, s))| Node {
                id: *id,
                cpus: *s,
                llcs: (0..llc_list.len() as u16)
                    .filter(|&i| llc_list[i as usize].node == k as u16)
                    .collect(),
            })
            .collect();
        let core_lists = cores.iter().map(|c| c.iter().collect()).collect();
        Ok(Topology {
            name: String::from(name),
            all,
            places,
            cores,
            core_lists,
            llcs: llc_list,
            nodes: node_out,
            hz: DEFAULT_HZ,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `CONFIG_HZ` of the kernel this machine runs.
    pub fn hz(&self) -> u32 {
        self.hz
    }

    /// The same machine with a kernel ticking at `hz` (at least 1).
    pub fn with_hz(mut self, hz: u32) -> Topology {
        self.hz = hz.max(1);
        self
    }

    /// The same machine under another name.
    pub fn renamed(mut self, name: &str) -> Topology {
        self.name = String::from(name);
        self
    }

    /// The same machine with every LLC `bytes` large.
    pub fn with_llc_bytes(mut self, bytes: u64) -> Topology {
        for l in &mut self.llcs {
            l.bytes = bytes;
        }
        self
    }

    /// Sets the size of the LLC at ordinal `k` (the order of
    /// [`Topology::llcs`]).
    pub fn set_llc_bytes(&mut self, k: usize, bytes: u64) {
        if let Some(l) = self.llcs.get_mut(k) {
            l.bytes = bytes;
        }
    }

    /// The ordinal of `cpu`'s LLC among [`Topology::llcs`].
    pub fn llc_ordinal(&self, cpu: CpuId) -> usize {
        self.place(cpu).llc as usize
    }

    pub fn num_cpus(&self) -> usize {
        self.places.len()
    }

    pub fn cpus(&self) -> &CpuSet {
        &self.all
    }

    pub fn cpu_ids(&self) -> impl Iterator<Item = CpuId> + '_ {
        (0..self.places.len()).map(CpuId::new)
    }

    pub fn contains(&self, cpu: CpuId) -> bool {
        cpu.index() < self.places.len()
    }

    /// Where `cpu` sits. Panics if the CPU is not in this machine.
    pub fn place(&self, cpu: CpuId) -> CpuPlace {
        self.places[cpu.index()]
    }

    /// The id of `cpu`'s LLC (its first CPU): one lookup.
    pub fn llc_id(&self, cpu: CpuId) -> LlcId {
        self.places[cpu.index()].llc_id
    }

    /// The CPUs of `cpu`'s SMT core, `cpu` included.
    pub fn core_cpus(&self, cpu: CpuId) -> &CpuSet {
        &self.cores[self.places[cpu.index()].core as usize]
    }

    /// The CPUs of `cpu`'s SMT core, `cpu` included, in id order: the
    /// members of [`Topology::core_cpus`] as a list.
    pub fn core_siblings(&self, cpu: CpuId) -> &[CpuId] {
        &self.core_lists[self.places[cpu.index()].core as usize]
    }

    /// The CPUs of `cpu`'s LLC.
    pub fn llc_cpus(&self, cpu: CpuId) -> &CpuSet {
        &self.llcs[self.places[cpu.index()].llc as usize].cpus
    }

    /// The CPUs of `cpu`'s node.
    pub fn node_cpus(&self, cpu: CpuId) -> &CpuSet {
        &self.nodes[self.places[cpu.index()].node as usize].cpus
    }

    /// The LLC named `id`, if some LLC starts at that CPU.
    pub fn llc_by_id(&self, id: LlcId) -> Option<&Llc> {
        let cpu = CpuId::try_new(id.index())?;
        if !self.contains(cpu) {
            return None;
        }
        let llc = &self.llcs[self.places[cpu.index()].llc as usize];
        (llc.id == id).then_some(llc)
    }

    /// SMT cores, in order of their first CPU.
    pub fn cores(&self) -> &[CpuSet] {
        &self.cores
    }

    pub fn llcs(&self) -> &[Llc] {
        &self.llcs
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The CPUs at `level` around `cpu`: itself, its core, its LLC, its node,
    /// or the machine.
    pub fn span(&self, cpu: CpuId, level: Level) -> CpuSet {
        match level {
            Level::Same => CpuSet::single(cpu),
            Level::Smt => *self.core_cpus(cpu),
            Level::Llc => *self.llc_cpus(cpu),
            Level::Node => *self.node_cpus(cpu),
            Level::Machine => self.all,
        }
    }

    /// The rings around `cpu`, nearest first: its LLC, the rest of its
    /// node, the rest of the machine (each without the ones before it; a
    /// ring may be empty). Every "own LLC, then node, then farther" search
    /// walks these, scanning each ring in id order from `cpu` on, and takes
    /// the first ring that has an answer.
    pub fn rings(&self, cpu: CpuId) -> [CpuSet; 3] {
        [0, 1, 2].map(|k| self.ring(cpu, k))
    }

    /// [`Topology::rings`], each built when the walk reaches it: a search
    /// that stops in the LLC (most do) builds one set, not three.
    pub fn rings_outward(&self, cpu: CpuId) -> impl Iterator<Item = CpuSet> + '_ {
        (0..3).map(move |k| self.ring(cpu, k))
    }

    /// Ring `k` (0, 1 or 2) of [`Topology::rings`].
    fn ring(&self, cpu: CpuId, k: usize) -> CpuSet {
        match k {
            0 => *self.llc_cpus(cpu),
            1 => *self.node_cpus(cpu) - *self.llc_cpus(cpu),
            _ => self.all - *self.node_cpus(cpu),
        }
    }

    /// The nearest level both CPUs share.
    pub fn level_between(&self, a: CpuId, b: CpuId) -> Level {
        let (pa, pb) = (self.place(a), self.place(b));
        if a == b {
            Level::Same
        } else if pa.core == pb.core {
            Level::Smt
        } else if pa.llc == pb.llc {
            Level::Llc
        } else if pa.node == pb.node {
            Level::Node
        } else {
            Level::Machine
        }
    }

    /// The most threads any core has.
    pub fn max_threads_per_core(&self) -> usize {
        self.cores.iter().map(CpuSet::weight).max().unwrap_or(0)
    }
}

/// The CPUs of `cores`, which must not overlap and must be `0..n`.
fn dense_union(cores: &[CpuSet]) -> Result<CpuSet, TopologyError> {
    let all = disjoint_union("SMT core", cores.iter())?;
    let n = all.weight();
    if n == 0 {
        return Err(TopologyError::NoCpus);
    }
    if all != CpuSet::first_n(n) {
        let missing = (0..n)
            .map(CpuId::new)
            .find(|c| !all.contains(*c))
            .expect("a set of n ids that is not 0..n misses one below n");
        return Err(TopologyError::NotDense { missing, cpus: all });
    }
    Ok(all)
}

/// The nodes by id, each id once, memory-only nodes (no CPUs) dropped:
/// sysfs lists them, we have no use.
fn sorted_nodes(nodes: &[(u32, CpuSet)]) -> Result<Vec<(u32, CpuSet)>, TopologyError> {
    let mut node_list: Vec<(u32, CpuSet)> = nodes.to_vec();
    node_list.sort_by_key(|(id, _)| *id);
    for w in node_list.windows(2) {
        if w[0].0 == w[1].0 {
            return Err(TopologyError::DuplicateNode { id: w[0].0 });
        }
    }
    node_list.retain(|(_, s)| !s.is_empty());
    Ok(node_list)
}

/// Each CPU's core, LLC and node (indices into the sorted lists); a core
/// that spans two LLCs is refused.
fn places(
    n: usize,
    cores: &[CpuSet],
    llc_sets: &[CpuSet],
    node_list: &[(u32, CpuSet)],
) -> Result<Vec<CpuPlace>, TopologyError> {
    let mut places = alloc::vec![
        CpuPlace {
            core: 0,
            llc: 0,
            llc_id: LlcId(0),
            node: 0
        };
        n
    ];
    for (k, l) in llc_sets.iter().enumerate() {
        let id = LlcId::of_first_cpu(l.first().expect("LLCs are non-empty"));
        for c in l {
            places[c.index()].llc = k as u16;
            places[c.index()].llc_id = id;
        }
    }
    for (k, (_, s)) in node_list.iter().enumerate() {
        for c in s {
            places[c.index()].node = k as u16;
        }
    }
    for (k, core) in cores.iter().enumerate() {
        let first = core.first().expect("cores are non-empty");
        let llc = places[first.index()].llc;
        for c in core {
            places[c.index()].core = k as u16;
            if places[c.index()].llc != llc {
                return Err(TopologyError::CoreSpansLlcs {
                    core: *core,
                    llc_a: llc_sets[llc as usize],
                    llc_b: llc_sets[places[c.index()].llc as usize],
                    cpu_b: c,
                });
            }
        }
    }
    Ok(places)
}

/// The LLCs with their cores and node; an LLC that spans two nodes is
/// refused.
fn llc_list(
    places: &[CpuPlace],
    cores: &[CpuSet],
    llc_sets: &[CpuSet],
    node_list: &[(u32, CpuSet)],
) -> Result<Vec<Llc>, TopologyError> {
    let mut llc_list = Vec::with_capacity(llc_sets.len());
    for (k, l) in llc_sets.iter().enumerate() {
        let first = l.first().expect("LLCs are non-empty");
        let node = places[first.index()].node;
        for c in l {
            let other = places[c.index()].node;
            if other != node {
                return Err(TopologyError::LlcSpansNodes {
                    llc: *l,
                    node_a: node_list[node as usize].0,
                    node_b: node_list[other as usize].0,
                    cpu_b: c,
                });
            }
        }
        let core_ids: Vec<u16> = (0..cores.len() as u16)
            .filter(|&i| places[cores[i as usize].first().unwrap().index()].llc == k as u16)
            .collect();
        llc_list.push(Llc {
            id: LlcId::of_first_cpu(first),
            cpus: *l,
            cores: core_ids,
            node,
            bytes: DEFAULT_LLC_BYTES,
        });
    }
    Ok(llc_list)
}

fn disjoint_union<'a>(
    level: &'static str,
    groups: impl Iterator<Item = &'a CpuSet>,
) -> Result<CpuSet, TopologyError> {
    let mut all = CpuSet::new();
    for g in groups {
        if g.is_empty() && level != "NUMA node" {
            return Err(TopologyError::EmptyGroup { level });
        }
        if let Some(cpu) = (all & *g).first() {
            return Err(TopologyError::ListedTwice { level, cpu });
        }
        all = all | *g;
    }
    Ok(all)
}

fn covers(level: &'static str, all: &CpuSet, got: &CpuSet) -> Result<(), TopologyError> {
    if let Some(cpu) = (*all - *got).first() {
        return Err(TopologyError::Uncovered { level, cpu });
    }
    if let Some(cpu) = (*got - *all).first() {
        return Err(TopologyError::Unknown { level, cpu });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
