//! `schedlab trace`: one run's event log as a Perfetto trace
//! (`schedlab_trace`, whose doc says what the file holds), or as JSON
//! lines. Both are made from the simulator's one event log
//! (`schedlab_sim::events`); `--real`, from the kernel's record of a real
//! run in the simulator's terms.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Args;
use schedlab_sim::{Event, EventKind, Outcome, Registry, Sim};
use schedlab_trace::{perfetto, perfetto_of};

use crate::scenario::{build, Common};
use crate::Failure;

#[derive(Args, Debug)]
pub struct TraceArgs {
    #[command(flatten)]
    common: Common,
    /// The seed to run.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Where the Perfetto trace goes (default: SCENARIO.pftrace).
    #[arg(short = 'o', long, value_name = "FILE.pftrace")]
    out: Option<PathBuf>,
    /// Keep events at or after this simulated time.
    #[arg(long, value_name = "NS")]
    from: Option<u64>,
    /// Keep events before this simulated time.
    #[arg(long, value_name = "NS")]
    to: Option<u64>,
}

pub fn run(a: &TraceArgs, reg: &Registry) -> Result<(), Failure> {
    let mut s = build(&a.common, &a.common.params, reg)?;
    if a.common.real {
        return real(a, &s);
    }
    s.spec.keep_events = true;
    let o = Sim::new(&s.spec, a.seed).run();
    let events = window(a, &o)?;
    if a.common.json {
        return json_lines(&events);
    }
    let bytes = perfetto(&s.name, &o, &events);
    let path = write(a, &format!("{}.pftrace", s.name), &bytes)?;
    let count = |f: fn(&EventKind) -> bool| events.iter().filter(|e| f(&e.kind)).count();
    say!(
        "{}: {} switches, {} wakings, {} IPIs and idle kicks, {} placements, {} bytes; open it at https://ui.perfetto.dev (\"Open trace file\")",
        path.display(),
        count(|k| matches!(k, EventKind::Switch { .. })),
        count(|k| matches!(k, EventKind::Waking { .. })),
        count(|k| matches!(k, EventKind::Kick { .. })),
        count(|k| matches!(k, EventKind::Place { .. })),
        bytes.len()
    );
    Ok(())
}

/// The events of `o`'s log within `--from` and `--to`.
fn window<'o>(a: &TraceArgs, o: &'o Outcome) -> Result<Vec<&'o Event>, Failure> {
    let (from, to) = (a.from.unwrap_or(0), a.to.unwrap_or(u64::MAX));
    if from >= to {
        return Err(Failure::Input(format!(
            "--from {from} --to {to}: expected from < to"
        )));
    }
    Ok(o.event_log
        .iter()
        .filter(|e| e.at >= from && e.at < to)
        .collect())
}

/// `--json`: the events as JSON lines.
fn json_lines(events: &[&Event]) -> Result<(), Failure> {
    for e in events {
        say!("{}", serde_json::to_string(e).expect("plain data"));
    }
    Ok(())
}

/// Writes the trace to `--out`, or to `default`; where it went.
fn write(a: &TraceArgs, default: &str, bytes: &[u8]) -> Result<PathBuf, Failure> {
    let path = a.out.clone().unwrap_or_else(|| PathBuf::from(default));
    std::fs::write(&path, bytes)
        .map_err(|e| Failure::Input(format!("{}: cannot write: {e}", path.display())))?;
    Ok(path)
}

/// `schedlab trace --real`: one real run's kernel record as the same
/// Perfetto trace, with the kernel's thread and process ids.
fn real(a: &TraceArgs, s: &schedlab_scenarios::Scenario) -> Result<(), Failure> {
    let mut outs = crate::real::run_reps(s, 1..=1, true, true)?;
    let r = outs.pop().expect("one rep");
    let Some(k) = &r.kernel else {
        return Err(Failure::Input(format!(
            "a real trace needs the kernel's record, which is missing: {}",
            r.no_record.unwrap_or_default()
        )));
    };
    let events = window(a, &r.outcome)?;
    if a.common.json {
        return json_lines(&events);
    }
    let mut processes: BTreeMap<i32, String> = BTreeMap::new();
    for t in k.threads.values() {
        let p = if t.tid == t.tgid {
            t.name.clone()
        } else {
            format!("{} ({})", s.name, t.tgid)
        };
        processes.entry(t.tgid).or_insert(p);
    }
    let who = k.who(processes);
    let bytes = perfetto_of(&who, &r.outcome, &events);
    let path = write(a, &format!("{}.real.pftrace", s.name), &bytes)?;
    let count = |f: fn(&EventKind) -> bool| events.iter().filter(|e| f(&e.kind)).count();
    say!(
        "{}: the kernel's record of a real run: {} switches, {} wakings, {} bytes; open it at https://ui.perfetto.dev (\"Open trace file\")",
        path.display(),
        count(|k| matches!(k, EventKind::Switch { .. })),
        count(|k| matches!(k, EventKind::Waking { .. })),
        bytes.len()
    );
    Ok(())
}
