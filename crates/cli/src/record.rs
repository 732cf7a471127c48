//! `schedlab record [--out DIR] [--duration S] [--buffer-kb KB] [--edges inbox|pair] -- CMD ARGS...`
//! (or `--pid PID --duration S`, a running process's threads):
//! a program's real schedule, recorded by the kernel (root: tracefs) and
//! written as three files in DIR:
//!
//! * `trace.pftrace`: the schedule as a Perfetto trace, as `trace --real`
//!   writes one;
//! * `summary.json`: the command, its exit code and wall time, and per
//!   recorded thread its process, CPU time, wakes received and from whom,
//!   migrations; wake-to-run percentiles; what the recording kept and left
//!   out (threads outside it, wakes of threads that had not blocked,
//!   pages of events the kernel lost);
//! * `replay.toml`: a scenario file that replays it
//!   (`schedlab_real::replay` says how each thread's program is rebuilt;
//!   `--edges` chooses whether a wake goes through the woken thread's
//!   inbox, the default, or the pair's own pipe: `replay::Edges`).
//!   It names no topology: `schedlab run DIR/replay.toml --topology T
//!   --policy P` replays it on any machine under any policy. Its figures:
//!   the makespan (the first thread's program, from its start to its end:
//!   the command's own wall time when it waits for what it starts), the
//!   wake-to-run latency's p50 and p99, migrations, and for the (at most
//!   four) processes with most threads, `end_llcs.PROCESS`: how many LLCs
//!   its threads end in.
//!
//! The command's exit code is passed on (after the files are written);
//! `--duration` or `--max-events` (the kernel's buffers holding that many
//! events, read every 10 ms) stops it (its process group killed) and says
//! so.
//!
//! ## `--check`: the replay held to its recording
//!
//! `schedlab_real::check` (its doc has the figures and their tolerances),
//! then the shadow of the recording alone (`schedlab_real::shadow`): the
//! kernel's picks decided again by the model's fair class.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Args;
use schedlab_real::recording::{self, Recording};
use schedlab_real::replay::{self, Converted, WAKE_TO_RUN};
use schedlab_real::shadow;
use schedlab_sim::figures::percentile;
use schedlab_sim::sched::TaskId;
use schedlab_sim::{Op, Outcome};
use serde::Serialize;
use serde_json::json;

use crate::Failure;

#[derive(Args, Debug)]
pub struct RecordArgs {
    /// Where trace.pftrace, summary.json and replay.toml go.
    #[arg(long, value_name = "DIR", default_value = "record")]
    out: PathBuf,
    /// Stop after this many seconds (the command's process group killed).
    #[arg(long, value_name = "S")]
    duration: Option<f64>,
    /// Each CPU's trace buffer, KiB (raise it when events are lost).
    #[arg(long, value_name = "KB")]
    buffer_kb: Option<u64>,
    /// Stop (the command's process group killed) once this many events
    /// are recorded: a recording too large to keep or convert.
    #[arg(long, value_name = "N", conflicts_with = "pid")]
    max_events: Option<u64>,
    /// Replay the recording on this machine under `linux` and print how
    /// close it comes (the module doc's table and tolerances).
    #[arg(long)]
    check: bool,
    /// Which pipe a wake edge goes through in the replay: the woken
    /// thread's own (`inbox`: any of its wakers ends any of its waits, as
    /// on a socket many threads write) or the pair's (`pair`: each wait
    /// waits for the waker the kernel saw, as a handoff does).
    #[arg(long, value_enum, default_value_t = EdgesArg::Inbox)]
    edges: EdgesArg,
    /// Record this running process (every thread it has and every task
    /// they start) for --duration, instead of a command; it goes on after.
    #[arg(
        long,
        value_name = "PID",
        requires = "duration",
        conflicts_with = "cmd"
    )]
    pid: Option<i32>,
    /// The command and its arguments, after `--`.
    #[arg(required_unless_present = "pid", last = true, value_name = "CMD")]
    cmd: Vec<String>,
}

/// `--edges` (`schedlab_real::replay::Edges`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum EdgesArg {
    Inbox,
    Pair,
}

impl From<EdgesArg> for replay::Edges {
    fn from(e: EdgesArg) -> replay::Edges {
        match e {
            EdgesArg::Inbox => replay::Edges::Inbox,
            EdgesArg::Pair => replay::Edges::Pair,
        }
    }
}

/// What was recorded, in words: the command, or the process.
fn what(a: &RecordArgs) -> String {
    match a.pid {
        Some(p) => format!("pid {p}"),
        None => a.cmd.join(" "),
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
fn task_text(name: &str, cpu: usize, process: &str, program: &[Op]) -> Result<String, Failure> {
    let q = |s: &str| toml::Value::String(s.to_string()).to_string();
    let mut t = format!(
        "\n[[task]]\nname = {}\ncpu = {cpu}\nprocess = {}\nprogram = [\n",
        q(name),
        q(process)
    );
    for op in program {
        let v = toml::Value::try_from(op)
            .map_err(|e| Failure::Real(format!("writing the replay file: {e}")))?;
        t.push_str("  ");
        t.push_str(&inline(&v));
        t.push_str(",\n");
    }
    t.push_str("]\n");
    Ok(t)
}

pub fn run(a: &RecordArgs) -> Result<(), Failure> {
    let opts = recording::Options {
        duration_ns: a.duration.map(|s| (s * 1e9) as u64),
        buffer_kb: a.buffer_kb,
        max_events: a.max_events,
    };
    let rec = match a.pid {
        Some(pid) => recording::attach(pid, opts.duration_ns.unwrap_or(0), &opts),
        None => recording::record(&a.cmd, &opts),
    }?;
    let names: BTreeMap<TaskId, String> = rec
        .threads
        .iter()
        .map(|(id, t)| (*id, t.name.clone()))
        .collect();
    let conv = replay::convert(
        &rec.record.events,
        &rec.life,
        &names,
        rec.wall_ns,
        a.edges.into(),
    );
    std::fs::create_dir_all(&a.out)
        .map_err(|e| Failure::Input(format!("{}: {e}", a.out.display())))?;
    let write = |file: &str, bytes: &[u8]| -> Result<PathBuf, Failure> {
        let p = a.out.join(file);
        std::fs::write(&p, bytes).map_err(|e| Failure::Input(format!("{}: {e}", p.display())))?;
        Ok(p)
    };
    let toml_text = replay_file(a, &rec, &conv)?;
    write("replay.toml", toml_text.as_bytes())?;
    write("summary.json", summary(a, &rec, &conv).as_bytes())?;
    write("trace.pftrace", &trace(&rec))?;
    let edges: u64 = conv.edges.values().sum();
    say!(
        "recorded `{}`: exit {}, {:.3} ms, {} threads in {} processes; {} events{}",
        what(a),
        rec.status,
        rec.wall_ns as f64 / 1e6,
        rec.threads.len(),
        processes(&rec).len(),
        rec.raw_events,
        if rec.cut {
            "; stopped at --duration or --max-events, the command killed"
        } else {
            ""
        }
    );
    say!(
        "replay: {edges} wake edges kept between {} pairs, {} blocks replayed as sleeps (an interrupt or a thread outside), {} wakes of threads not blocked left out",
        conv.edges.len(),
        conv.sleeps,
        conv.early_wakes
    );
    if rec.lost_pages > 0 {
        say!(
            "warning: the kernel lost events before {} pages of its buffers: raise --buffer-kb (now {} KiB per CPU)",
            rec.lost_pages,
            a.buffer_kb.unwrap_or(schedlab_real::tracefs::BUFFER_KB)
        );
    }
    say!(
        "wrote {}/{{trace.pftrace, summary.json, replay.toml}}; replay with: schedlab run {}/replay.toml --topology sysfs --policy linux",
        a.out.display(),
        a.out.display()
    );
    if a.check {
        check(a, &rec, &conv)?;
    }
    if rec.status != 0 {
        return Err(Failure::Exit(rec.status.clamp(1, 255) as u8));
    }
    Ok(())
}

/// `--check`: the replay against the recording (`schedlab_real::check`),
/// then the shadow.
fn check(a: &RecordArgs, rec: &Recording, conv: &Converted) -> Result<(), Failure> {
    let c = schedlab_real::check::check(rec, conv, &a.out.join("replay.toml"))?;
    say!(
        "replayed on this machine under linux, {} seeds (medians): {} recorded pairs with a wake, {} threads",
        schedlab_real::check::SEEDS,
        c.pairs,
        rec.threads.len()
    );
    say!(
        "  {:36} {:>12} {:>12}  verdict",
        "figure",
        "recorded",
        "replayed"
    );
    for r in &c.rows {
        say!(
            "  {:36} {:>12} {:>12}  {}",
            r.name,
            crate::print::fmt(r.recorded),
            crate::print::fmt(r.replayed),
            if r.within { "within" } else { "outside" }
        );
    }
    say!(
        "  {:36} {:>12} {:>12}  (not held to a tolerance)",
        "switches while runnable (preempted)",
        c.preempted
            .0
            .map_or("-".to_string(), |n| crate::print::fmt(n as f64)),
        crate::print::fmt(c.preempted.1)
    );
    if let Some(st) = &c.stall {
        say!("the replay stalled: {st}");
    }
    print_shadow(&rec.shadow);
    Ok(())
}

/// The kernel's own decisions, made again by the model's fair class from
/// the kernel's state (`schedlab_real::shadow`): the default set, the one
/// that fits best, and every candidate.
fn print_shadow(r: &shadow::Report) {
    say!(
        "the kernel's picks and wake-up preemptions, decided again by the model's fair class from the kernel's own state (the kernel's tick {} ms):",
        r.tick_ns as f64 / 1e6
    );
    let share = |s: f64, n: u64| match n {
        0 => "none compared".to_string(),
        n => format!("{:.0}% of {n}", 100.0 * s),
    };
    let row = |label: &str, x: &shadow::Row| {
        let a = &x.agreement;
        say!(
            "  {label:9} {:40} {:>6} {:>16} {:>16}",
            x.set,
            x.hz,
            share(a.pick_share(), a.picks),
            share(a.wake_share(), a.wakes)
        );
    };
    say!(
        "  {:9} {:40} {:>6} {:>16} {:>16}",
        "",
        "feature set",
        "HZ",
        "picks agree",
        "wake-ups agree"
    );
    row("model", &r.model);
    row("fit", &r.fit);
    let mut ranked: Vec<&shadow::Row> = r.candidates.iter().collect();
    ranked.sort_by_key(|c| std::cmp::Reverse(c.agreement.alike()));
    for c in ranked.iter().take(8) {
        row("candidate", c);
    }
}

/// Each recorded process: its id and name (`comm-tgid`, the comm of the
/// thread whose tid is the process's).
fn processes(rec: &Recording) -> BTreeMap<i32, String> {
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

fn replay_file(a: &RecordArgs, rec: &Recording, conv: &Converted) -> Result<String, Failure> {
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
        .map_err(|e| Failure::Real(format!("writing the replay file: {e}")))?;
    let outside: u64 = rec.outside.values().sum();
    Ok(format!(
        "# schedlab record: `{}`, exit {}, {:.3} ms on this machine.\n\
         # {} threads in {} processes; {} other threads the record names are left out.\n\
         # No [topology]: schedlab run THIS --topology T --policy P.\n\n{body}{tasks}",
        what(a),
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

fn summary(a: &RecordArgs, rec: &Recording, conv: &Converted) -> String {
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
        "command": a.cmd, "exit_code": rec.status, "wall_ns": rec.wall_ns,
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
    let who = crate::trace::Who::of_record(k, processes);
    let topo = schedlab_scenarios::topology("sysfs").ok();
    let o = Outcome {
        end_ns: rec.wall_ns,
        topology: topo,
        ..Outcome::default()
    };
    let events: Vec<&schedlab_sim::Event> = k.events.iter().collect();
    crate::trace::perfetto_of(&who, &o, &events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_real::recording::RecThread;

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
