//! The three files of a recording (`schedlab record`'s, and what an
//! imported trace becomes): `replay.toml`, the scenario that replays it;
//! `summary.json`, its counters, threads, wake edges and shadow; and
//! `trace.pftrace`, its schedule as a Perfetto trace. What each holds is
//! written in `docs/RECORD.md`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use schedlab_sim::figures::percentile;
use schedlab_sim::{Op, Outcome};
use serde::Serialize;
use serde_json::json;

use crate::recording::Recording;
use crate::replay::{Converted, WAKE_TO_RUN};
use crate::Error;

/// A recording's three files, in memory.
pub struct Files {
    pub replay: String,
    pub summary: String,
    pub trace: Vec<u8>,
}

/// The files of `rec` converted as `conv`; `what` says in words what was
/// recorded (the command, or `pid N`), `cmd` is the command line.
pub fn files(
    rec: &Recording,
    conv: &Converted,
    what: &str,
    cmd: &[String],
) -> Result<Files, Error> {
    Ok(Files {
        replay: replay_file(what, rec, conv)?,
        summary: summary(cmd, rec, conv),
        trace: trace(rec),
    })
}

impl Files {
    /// Writes the three files into `dir` (made if missing).
    pub fn write(&self, dir: &Path) -> Result<(), Error> {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::Input(format!("{}: {e}", dir.display())))?;
        let write = |file: &str, bytes: &[u8]| -> Result<PathBuf, Error> {
            let p = dir.join(file);
            std::fs::write(&p, bytes).map_err(|e| Error::Input(format!("{}: {e}", p.display())))?;
            Ok(p)
        };
        write("replay.toml", self.replay.as_bytes())?;
        write("summary.json", self.summary.as_bytes())?;
        write("trace.pftrace", &self.trace)?;
        Ok(())
    }
}

/// The makespan lap's metric (the first thread's program).
const MAKESPAN: &str = "makespan";

/// The replay file's head (its tasks are written after, one op a line).
#[derive(Serialize)]
struct ReplayFile {
    name: String,
    run_ms: u64,
    process: Vec<ProcessEntry>,
    figure: Vec<BTreeMap<String, serde_json::Value>>,
}

#[derive(Serialize)]
struct ProcessEntry {
    name: String,
}

/// `v` as one line of TOML (an inline table, array or value), with no
/// spaces: a replay holds hundreds of thousands of these.
fn inline(v: &toml::Value) -> String {
    match v {
        toml::Value::Table(t) => {
            let kv: Vec<String> = t
                .iter()
                .map(|(k, v)| format!("{k}={}", inline(v)))
                .collect();
            format!("{{{}}}", kv.join(","))
        }
        toml::Value::Array(a) => {
            let items: Vec<String> = a.iter().map(inline).collect();
            format!("[{}]", items.join(","))
        }
        v => v.to_string(),
    }
}

/// A `[[task]]` with its program, one op a line.
fn task_text(name: &str, cpu: usize, process: &str, program: &[Op]) -> Result<String, Error> {
    let q = |s: &str| toml::Value::String(s.to_string()).to_string();
    let mut t = format!(
        "\n[[task]]\nname = {}\ncpu = {cpu}\nprocess = {}\nprogram = [\n",
        q(name),
        q(process)
    );
    for op in program {
        let v = toml::Value::try_from(op)
            .map_err(|e| Error::Fault(format!("writing the replay file: {e}")))?;
        t.push_str("  ");
        t.push_str(&inline(&v));
        t.push_str(",\n");
    }
    t.push_str("]\n");
    Ok(t)
}

/// Each recorded process: its id and name (`comm-tgid`, the comm of the
/// thread whose tid is the process's).
pub fn processes(rec: &Recording) -> BTreeMap<i32, String> {
    let by_tid: BTreeMap<i32, &str> = rec
        .threads
        .values()
        .map(|t| (t.tid, t.name.as_str()))
        .collect();
    rec.threads
        .values()
        .map(|t| {
            let name = by_tid
                .get(&t.tgid)
                .map_or_else(|| format!("process-{}", t.tgid), |n| n.to_string());
            (t.tgid, name)
        })
        .collect()
}

fn replay_file(what: &str, rec: &Recording, conv: &Converted) -> Result<String, Error> {
    let procs = processes(rec);
    let mut tasks = String::new();
    for (id, t) in &rec.threads {
        let r = &conv.threads[id];
        let mut program = r.program.clone();
        if id.0 == 0 {
            program.insert(
                0,
                Op::LapStart {
                    metric: MAKESPAN.into(),
                },
            );
            program.push(Op::Lap {
                metric: MAKESPAN.into(),
            });
        }
        tasks.push_str(&task_text(
            &t.name,
            r.start_cpu.unwrap_or(0),
            &procs[&t.tgid],
            &program,
        )?);
    }
    let fig = |name: &str, v: serde_json::Value| -> BTreeMap<String, serde_json::Value> {
        let mut m: BTreeMap<String, serde_json::Value> =
            serde_json::from_value(v).expect("an object");
        m.insert("name".into(), name.into());
        m
    };
    let file = ReplayFile {
        name: format!(
            "replay-{}",
            rec.threads.values().next().map_or("cmd", |t| &t.comm)
        ),
        // Room to replay on a slower machine or under a worse policy.
        run_ms: (rec.wall_ns / 1_000_000).saturating_mul(20).max(1_000),
        process: procs
            .values()
            .map(|n| ProcessEntry { name: n.clone() })
            .collect(),
        figure: vec![
            fig(
                "makespan_ms",
                json!({"kind": "lap_p50_ms", "metric": MAKESPAN}),
            ),
            fig(
                "wake_to_run_p50_us",
                json!({"kind": "lap_p50_us", "metric": WAKE_TO_RUN}),
            ),
            fig(
                "wake_to_run_p99_us",
                json!({"kind": "lap_p99_us", "metric": WAKE_TO_RUN}),
            ),
            fig("migrations", json!({"kind": "migrations", "tasks": []})),
        ]
        .into_iter()
        .chain(
            end_llcs_figures(rec, &procs)
                .into_iter()
                .map(|(n, v)| fig(&n, v)),
        )
        .collect(),
    };
    let body = toml::to_string(&file)
        .map_err(|e| Error::Fault(format!("writing the replay file: {e}")))?;
    let outside: u64 = rec.outside.values().sum();
    Ok(format!(
        "# schedlab record: `{}`, exit {}, {:.3} ms on this machine.\n\
         # {} threads in {} processes; {} other threads the record names are left out.\n\
         # No [topology]: schedlab run THIS --topology T --policy P.\n\n{body}{tasks}",
        what,
        rec.status,
        rec.wall_ns as f64 / 1e6,
        rec.threads.len(),
        procs.len(),
        outside
    ))
}

/// The processes with most threads (two or more; at most
/// [`END_LLC_PROCESSES`]): how many LLCs each one's threads end in, the
/// figure cache-aware scheduling's aggregation moves.
fn end_llcs_figures(
    rec: &Recording,
    procs: &BTreeMap<i32, String>,
) -> Vec<(String, serde_json::Value)> {
    let mut members: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for t in rec.threads.values() {
        members.entry(t.tgid).or_default().push(t.name.clone());
    }
    let mut big: Vec<(i32, Vec<String>)> =
        members.into_iter().filter(|(_, m)| m.len() >= 2).collect();
    big.sort_by_key(|(p, m)| (std::cmp::Reverse(m.len()), *p));
    big.into_iter()
        .take(END_LLC_PROCESSES)
        .map(|(p, m)| {
            (
                format!("end_llcs.{}", procs[&p]),
                json!({"kind": "end_llcs_of", "tasks": m}),
            )
        })
        .collect()
}

/// At most this many processes get an `end_llcs` figure.
const END_LLC_PROCESSES: usize = 4;

fn summary(cmd: &[String], rec: &Recording, conv: &Converted) -> String {
    let k = &rec.record;
    let procs = processes(rec);
    let threads: serde_json::Map<String, serde_json::Value> = rec
        .threads
        .iter()
        .map(|(id, t)| {
            (
                t.name.clone(),
                json!({"tid": t.tid, "pid": t.tgid, "process": procs[&t.tgid],
                       "cpu_ns": conv.threads[id].cpu_ns,
                       "wakes_from": k.wakes_by.get(&t.name).cloned().unwrap_or_default(),
                       "migrations": k.migrations.get(&t.name).copied().unwrap_or(0)}),
            )
        })
        .collect();
    let q = |p| percentile(&k.wake_to_run, p) / 1e3;
    let edges: Vec<serde_json::Value> = conv
        .edges
        .iter()
        .map(|((w, t), n)| json!({"waker": rec.threads[w].name, "wakee": rec.threads[t].name, "wakes": n}))
        .collect();
    let v = json!({
        "command": cmd, "exit_code": rec.status, "wall_ns": rec.wall_ns,
        "cut_short": rec.cut,
        "counters": k.counters,
        "wake_to_run_us": {"n": k.wake_to_run.len(), "p50": q(0.5), "p90": q(0.9), "p99": q(0.99)},
        "threads": threads,
        "replay": {"wake_edges": edges, "sleeps": conv.sleeps, "early_wakes_left_out": conv.early_wakes},
        "left_out_threads": rec.outside,
        "raw_events": rec.raw_events, "lost_pages": rec.lost_pages,
        "shadow": rec.shadow,
    });
    serde_json::to_string_pretty(&v).expect("plain data")
}

fn trace(rec: &Recording) -> Vec<u8> {
    let k = &rec.record;
    let mut processes: BTreeMap<i32, String> = processes(rec);
    for t in k.threads.values().filter(|t| !t.ours) {
        processes.entry(t.tgid).or_insert_with(|| t.name.clone());
    }
    let who = k.who(processes);
    let o = Outcome {
        end_ns: rec.wall_ns,
        topology: rec.topology.clone(),
        ..Outcome::default()
    };
    let events: Vec<&schedlab_sim::Event> = k.events.iter().collect();
    schedlab_trace::perfetto_of(&who, &o, &events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::RecThread;
    use schedlab_sim::sched::TaskId;

    fn thread(tid: i32, tgid: i32) -> RecThread {
        RecThread {
            tid,
            tgid,
            comm: "t".into(),
            name: format!("t-{tid}"),
        }
    }

    /// Only processes of two threads or more get an `end_llcs` figure,
    /// naming every thread of theirs; the biggest first.
    #[test]
    fn end_llcs_figures_name_each_multithreaded_process_s_threads() {
        let threads: BTreeMap<TaskId, RecThread> =
            [(10, 10), (11, 10), (12, 10), (20, 20), (30, 30), (31, 30)]
                .iter()
                .enumerate()
                .map(|(i, &(t, g))| (TaskId(i as u32), thread(t, g)))
                .collect();
        let rec = Recording {
            status: 0,
            wall_ns: 1,
            cut: false,
            threads,
            record: Default::default(),
            life: Default::default(),
            outside: Default::default(),
            raw_events: 0,
            lost_pages: 0,
            shadow: Default::default(),
            topology: None,
        };
        let f = end_llcs_figures(&rec, &processes(&rec));
        let names: Vec<&str> = f.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["end_llcs.t-10", "end_llcs.t-30"],
            "process 20 has one thread"
        );
        assert_eq!(f[0].1["tasks"], json!(["t-10", "t-11", "t-12"]));
        assert_eq!(f[0].1["kind"], "end_llcs_of");
    }
}
