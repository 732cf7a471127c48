//! The Linux sysfs reader (the module doc of `read` has the format).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use super::error::{read_cpulist, read_text, ReadError};
use crate::cpuset::{CpuId, CpuSet};
use crate::topology::{Topology, TopologyError};

/// What a sysfs tree lists, each group with the file it came from (to
/// blame errors on).
struct Found {
    cpu_dir: PathBuf,
    online_path: PathBuf,
    node_dir: PathBuf,
    cores: BTreeMap<CpuSet, PathBuf>,
    llcs: BTreeMap<CpuSet, PathBuf>,
    nodes: Vec<(u32, CpuSet, PathBuf)>,
}

/// Reads the topology of the Linux sysfs tree at `root` (see the module doc).
pub fn from_sysfs(root: &Path) -> Result<Topology, ReadError> {
    let sys = sysfs_of(root)?;
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
    let (cores, mut llcs, no_cache) = read_cpus(&cpu_dir, online)?;
    let node_dir = sys.join("devices/system/node");
    let nodes = read_nodes(&node_dir, online)?;
    // No cache information: the CPU's node stands for its LLC.
    for cpu in no_cache {
        if let Some((_, set, path)) = nodes.iter().find(|(_, s, _)| s.contains(cpu)) {
            llcs.entry(*set).or_insert_with(|| path.clone());
        }
    }
    let found = Found {
        cpu_dir,
        online_path,
        node_dir,
        cores,
        llcs,
        nodes,
    };
    let core_sets: Vec<CpuSet> = found.cores.keys().copied().collect();
    let llc_sets: Vec<CpuSet> = found.llcs.keys().copied().collect();
    let node_sets: Vec<(u32, CpuSet)> = found.nodes.iter().map(|(i, s, _)| (*i, *s)).collect();
    let name = format!("sysfs:{}", root.display());
    let mut t = Topology::from_groups(&name, &core_sets, &llc_sets, &node_sets)
        .map_err(|e| found.blame(&e))?;
    set_llc_sizes(&mut t, &found.llcs)?;
    Ok(match kernel_hz(root) {
        Some((hz, _)) => t.with_hz(hz),
        None => t,
    })
}

/// The `CONFIG_HZ` of the kernel whose files are under `root` (`/` for
/// this machine's), and the file it was read from: `boot/config-RELEASE`
/// (the release from `proc/sys/kernel/osrelease`), else `proc/config.gz`.
/// `None` when neither holds a `CONFIG_HZ=` line.
pub fn kernel_hz(root: &Path) -> Option<(u32, PathBuf)> {
    let hz_in = |text: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix("CONFIG_HZ=")?.trim().parse::<u32>().ok())
            .filter(|&hz| hz > 0)
    };
    if let Ok(release) = std::fs::read_to_string(root.join("proc/sys/kernel/osrelease")) {
        let boot = root.join(format!("boot/config-{}", release.trim()));
        if let Some(hz) = std::fs::read_to_string(&boot).ok().and_then(|t| hz_in(&t)) {
            return Some((hz, boot));
        }
    }
    let gz = root.join("proc/config.gz");
    let file = std::fs::File::open(&gz).ok()?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(file), &mut text).ok()?;
    hz_in(&text).map(|hz| (hz, gz))
}

/// The sysfs mount at `root`: `root/sys`, or `root` itself.
fn sysfs_of(root: &Path) -> Result<PathBuf, ReadError> {
    if root.join("sys/devices/system/cpu").is_dir() {
        Ok(root.join("sys"))
    } else if root.join("devices/system/cpu").is_dir() {
        Ok(root.to_path_buf())
    } else {
        Err(ReadError::new(
            root,
            None,
            None,
            "expected a sysfs tree: neither sys/devices/system/cpu nor devices/system/cpu is a directory here",
        ))
    }
}

/// Each online CPU's SMT core and LLC, and the CPUs with no cache listed.
#[allow(clippy::type_complexity)]
fn read_cpus(
    cpu_dir: &Path,
    online: CpuSet,
) -> Result<
    (
        BTreeMap<CpuSet, PathBuf>,
        BTreeMap<CpuSet, PathBuf>,
        Vec<CpuId>,
    ),
    ReadError,
> {
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
    Ok((cores, llcs, no_cache))
}

/// The nodes with online CPUs; one node of every CPU when none is listed.
fn read_nodes(node_dir: &Path, online: CpuSet) -> Result<Vec<(u32, CpuSet, PathBuf)>, ReadError> {
    let mut nodes: Vec<(u32, CpuSet, PathBuf)> = Vec::new();
    if node_dir.is_dir() {
        let mut found: BTreeSet<(u32, PathBuf)> = BTreeSet::new();
        let entries = fs::read_dir(node_dir)
            .map_err(|e| ReadError::new(node_dir, None, None, format!("cannot list: {e}")))?;
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
        nodes.push((0, online, node_dir.to_path_buf()));
    }
    Ok(nodes)
}

impl Found {
    /// A topology error, blamed on the file whose group broke the rule.
    fn blame(&self, e: &TopologyError) -> ReadError {
        fn holder<'a>(
            mut groups: impl Iterator<Item = (&'a CpuSet, &'a PathBuf)>,
            cpu: CpuId,
        ) -> Option<PathBuf> {
            groups
                .find(|(s, _)| s.contains(cpu))
                .map(|(_, p)| p.clone())
        }
        let file = match (e, e.cpu()) {
            (TopologyError::LlcSpansNodes { node_b, .. }, _) => self
                .nodes
                .iter()
                .find(|(i, _, _)| i == node_b)
                .map(|(_, _, p)| p.clone()),
            (TopologyError::CoreSpansLlcs { cpu_b, .. }, _) => holder(self.llcs.iter(), *cpu_b),
            (
                TopologyError::ListedTwice {
                    level: "SMT core", ..
                },
                Some(cpu),
            ) => holder(self.cores.iter().rev(), cpu),
            (TopologyError::ListedTwice { level: "LLC", .. }, Some(cpu)) => {
                holder(self.llcs.iter().rev(), cpu)
            }
            (
                TopologyError::Uncovered {
                    level: "NUMA node", ..
                },
                _,
            ) => Some(self.node_dir.clone()),
            (TopologyError::NotDense { .. } | TopologyError::NoCpus, _) => {
                Some(self.online_path.clone())
            }
            (_, Some(cpu)) => holder(self.cores.iter(), cpu),
            _ => None,
        };
        let mut msg = e.to_string();
        if let TopologyError::LlcSpansNodes { llc, .. } = e {
            if let Some(p) = self.llcs.get(llc) {
                msg = format!("{msg} (the LLC is {})", p.display());
            }
        }
        ReadError::new(
            file.as_deref().unwrap_or(&self.cpu_dir),
            file.as_ref().map(|_| 1),
            None,
            msg,
        )
    }
}

/// Each LLC's size: the `size` beside the `shared_cpu_list` it came from
/// (a node standing for a missing cache keeps the default).
fn set_llc_sizes(t: &mut Topology, llcs: &BTreeMap<CpuSet, PathBuf>) -> Result<(), ReadError> {
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
    Ok(())
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
