//! `schedlab topo`: read a machine from a preset, a sysfs tree, `lscpu -p`
//! text or a TOML file, and print it as a tree or as JSON.

use std::path::PathBuf;

use clap::Args;
use schedlab_topology::read::{from_lscpu_file, from_sysfs, from_toml_file};
use schedlab_topology::{Topology, PRESETS};
use serde_json::json;

use crate::Failure;

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("source").args(["topology", "sysfs", "lscpu", "file", "list"])))]
pub struct TopoArgs {
    /// The machine, as every command takes it: a preset (see --list),
    /// `sysfs`, `sysfs:ROOT`, `lscpu:FILE` or `FILE.toml`. `--preset` is
    /// the same.
    #[arg(long, visible_alias = "preset", value_name = "T")]
    topology: Option<String>,
    /// A Linux sysfs tree: a filesystem root holding sys/, or a sysfs mount.
    /// With no source at all, this machine's (/) is read.
    #[arg(long, value_name = "ROOT", num_args = 0..=1, default_missing_value = "/")]
    sysfs: Option<PathBuf>,
    /// A file holding the output of `lscpu -p`.
    #[arg(long, value_name = "FILE")]
    lscpu: Option<PathBuf>,
    /// A TOML topology file (format: the schedlab_topology::read module doc).
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,
    /// Print the topology as JSON.
    #[arg(long)]
    json: bool,
    /// Name the presets and the machine each stands for.
    #[arg(long)]
    list: bool,
}

pub fn run(args: &TopoArgs) -> Result<(), Failure> {
    if args.list {
        let width = PRESETS.iter().map(|p| p.name.len()).max().unwrap_or(0);
        for p in PRESETS {
            say!("{:width$}  {:>4} CPUs  {}", p.name, p.shape.cpus(), p.doc);
        }
        return Ok(());
    }
    let topo = load(args)?;
    if args.json {
        say!(
            "{}",
            serde_json::to_string_pretty(&to_json(&topo)).expect("JSON of plain data")
        );
    } else {
        say_part!("{}", tree(&topo));
    }
    Ok(())
}

fn load(args: &TopoArgs) -> Result<Topology, Failure> {
    let bad = |e: schedlab_topology::read::ReadError| Failure::Input(e.to_string());
    if let Some(t) = &args.topology {
        return schedlab_scenarios::topology(t).map_err(|e| Failure::Input(e.0));
    }
    if let Some(f) = &args.lscpu {
        return from_lscpu_file(f).map_err(bad);
    }
    if let Some(f) = &args.file {
        return from_toml_file(f).map_err(bad);
    }
    let root = args.sysfs.clone().unwrap_or_else(|| PathBuf::from("/"));
    from_sysfs(&root).map_err(bad)
}

/// `{"name", "cpus": N, "hz": CONFIG_HZ, "nodes": [{"id", "llcs": [{"index", "llc_bytes", "cores": [[cpu, ..], ..]}]}]}`
pub fn to_json(t: &Topology) -> serde_json::Value {
    let nodes: Vec<_> =
        t.nodes()
            .iter()
            .map(|n| {
                let llcs: Vec<_> = n
                .llcs
                .iter()
                .map(|&l| {
                    let llc = &t.llcs()[l as usize];
                    let cores: Vec<Vec<usize>> = llc
                        .cores
                        .iter()
                        .map(|&c| t.cores()[c as usize].iter().map(|cpu| cpu.index()).collect())
                        .collect();
                    json!({"index": llc.id.index(), "cpus": llc.cpus.to_string(), "llc_bytes": llc.bytes, "cores": cores})
                })
                .collect();
                json!({"id": n.id, "cpus": n.cpus.to_string(), "llcs": llcs})
            })
            .collect();
    json!({"name": t.name(), "cpus": t.num_cpus(), "hz": t.hz(), "nodes": nodes})
}

/// A size in the largest binary unit that divides it.
fn size(b: u64) -> String {
    match b {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// The human form: one line per node, LLC and core.
pub fn tree(t: &Topology) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let plural = |n: usize, w: &str| {
        if n == 1 {
            format!("{n} {w}")
        } else {
            format!("{n} {w}s")
        }
    };
    writeln!(
        out,
        "{}: {}, {}, {}, {}, HZ {}",
        t.name(),
        plural(t.num_cpus(), "CPU"),
        plural(t.nodes().len(), "node"),
        plural(t.llcs().len(), "LLC"),
        plural(t.cores().len(), "core"),
        t.hz(),
    )
    .unwrap();
    for n in t.nodes() {
        writeln!(out, "node {}  cpus {}", n.id, n.cpus).unwrap();
        for &l in &n.llcs {
            let llc = &t.llcs()[l as usize];
            writeln!(
                out,
                "  llc {}  cpus {}  ({}, {})",
                llc.id.index(),
                llc.cpus,
                plural(llc.cores.len(), "core"),
                size(llc.bytes)
            )
            .unwrap();
            for &c in &llc.cores {
                let cpus: Vec<String> = t.cores()[c as usize]
                    .iter()
                    .map(|c| c.index().to_string())
                    .collect();
                writeln!(out, "    core {}  cpus {}", c, cpus.join(",")).unwrap();
            }
        }
    }
    out
}
