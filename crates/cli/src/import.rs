//! `schedlab import FILE [--out DIR] [--pid PID]... [--comm GLOB]...
//! [--cpus LIST] [--topology T] [--hz HZ] [--edges inbox|pair] [--check]`:
//! a trace someone already has (trace-cmd's `trace.dat`, `perf.data` of
//! `perf sched record`, a Perfetto trace) made into the three files
//! `record` writes (`trace.pftrace`, `summary.json`, `replay.toml`) and
//! its shadow, without root and without the machine
//! (`schedlab_real::import` says how each format is read and which
//! threads are kept).
//!
//! The machine is the trace's: its CPU count, in one LLC, unless
//! `--topology` names its shape (a sysfs or lscpu dump taken there, as
//! `schedlab topo` reads them); a trace naming a CPU the topology lacks
//! is refused. `--hz` is that machine's tick (its `CONFIG_HZ`; default
//! the topology's, else 1000): the shadow's model row runs at it.

use std::path::PathBuf;

use clap::Args;
use schedlab_real::import::{self, Select};
use schedlab_real::recording::Machine;

use crate::record::EdgesArg;
use crate::Failure;

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// The trace: trace.dat, perf.data or a Perfetto trace.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Where trace.pftrace, summary.json and replay.toml go.
    #[arg(long, value_name = "DIR", default_value = "import")]
    out: PathBuf,
    /// Keep this thread or process (and every task it started); repeat.
    #[arg(long, value_name = "PID")]
    pid: Vec<i32>,
    /// Keep the threads with a name matching this glob (and every task
    /// they started); repeat.
    #[arg(long, value_name = "GLOB")]
    comm: Vec<String>,
    /// Keep only the events of these CPUs (a cpulist: 0-3,8).
    #[arg(long, value_name = "LIST")]
    cpus: Option<String>,
    /// The shape of the machine the trace came from (a preset, sysfs:DIR,
    /// lscpu:FILE or a .toml); default: its CPUs in one LLC.
    #[arg(long, value_name = "T")]
    topology: Option<String>,
    /// That machine's tick, Hz (default: the topology's).
    #[arg(long, value_name = "HZ")]
    hz: Option<u32>,
    /// Which pipe a wake edge goes through in the replay (as `record`).
    #[arg(long, value_enum, default_value_t = EdgesArg::Inbox)]
    edges: EdgesArg,
    /// Replay the import on the trace's machine under `linux` and print
    /// how close it comes, then the shadow (as `record --check`).
    #[arg(long)]
    check: bool,
}

/// The threads and CPUs asked for.
fn select(a: &ImportArgs) -> Result<Select, Failure> {
    let cpus = match &a.cpus {
        Some(list) => Some(
            schedlab_topology::parse_cpulist(list)
                .map_err(|e| Failure::Input(format!("--cpus {list}: {e}")))?
                .iter()
                .map(|c| c.index())
                .collect(),
        ),
        None => None,
    };
    Ok(Select {
        pids: a.pid.clone(),
        comms: a.comm.clone(),
        cpus,
    })
}

/// The machine the trace came from (module doc): `--topology`, else its
/// `ncpus` CPUs in one LLC, ticking at `--hz` or the topology's.
fn machine(a: &ImportArgs, ncpus: usize) -> Result<Machine, Failure> {
    let topo = match &a.topology {
        Some(t) => schedlab_scenarios::topology(t).map_err(|e| Failure::Input(e.0))?,
        None => import::flat(ncpus),
    };
    let hz = a.hz.unwrap_or(topo.hz());
    Ok(Machine {
        ncpus: ncpus.max(topo.num_cpus()),
        hz,
        topology: Some(topo.with_hz(hz)),
    })
}

pub fn run(a: &ImportArgs) -> Result<(), Failure> {
    let trace = import::read(&a.file)?;
    let sel = select(a)?;
    let m = machine(a, trace.ncpus)?;
    let (kind, nraw) = (trace.kind.clone(), trace.raw.len());
    let (rec, notes) = import::recording(trace, &sel, &m)?;
    let conv = rec.convert(a.edges.into());
    let what = format!("{} ({kind})", a.file.display());
    schedlab_real::files::files(&rec, &conv, &what, &[])?.write(&a.out)?;
    say!(
        "imported {what}: {nraw} events over {:.3} ms on {} CPUs; kept {} threads in {} processes, {} others left out",
        rec.wall_ns as f64 / 1e6,
        m.ncpus,
        rec.threads.len(),
        schedlab_real::files::processes(&rec).len(),
        rec.outside.values().sum::<u64>()
    );
    for n in &notes {
        say!("note: {n}");
    }
    if rec.lost_pages > 0 {
        say!(
            "warning: the trace says events were lost before {} of its pages (or bundles): its counts miss those events",
            rec.lost_pages
        );
    }
    let k = &rec.record.counters;
    say!(
        "kernel: {} wakes ({} by a kept thread, {} by others, {} from interrupts), {} switches, {} migrations",
        k["kernel.wakes"],
        k["kernel.wakes.by_task"],
        k["kernel.wakes.by_other"],
        k["kernel.wakes.from_interrupt"],
        k["kernel.switches"],
        k["kernel.migrations"]
    );
    say!(
        "wrote {}/{{trace.pftrace, summary.json, replay.toml}}; replay with: schedlab run {}/replay.toml --topology {} --policy linux",
        a.out.display(),
        a.out.display(),
        a.topology.as_deref().unwrap_or("T")
    );
    if a.check {
        crate::record::check(&a.out, &rec, &conv)?;
    }
    Ok(())
}
