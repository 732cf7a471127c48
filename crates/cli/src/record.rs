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
//! Replayed on this machine (`--topology sysfs`) under `linux`, seeds 1
//! to 5, against what was recorded, each with a tolerance fixed here
//! before the programs below were measured:
//!
//! | figure | recorded | replayed | within when |
//! |---|---|---|---|
//! | makespan | the command's wall time | `makespan_ms` | replay / recording in [1/1.5, 1.5] |
//! | wakes | `sched_waking` of a recorded thread by another | parked wakes between recorded threads | ratio in [1/2, 2] |
//! | wake edges | pairs (waker, wakee) with a wake | pairs with a parked wake | at least 3/4 of the recorded pairs |
//! | CPU per thread | its time on a CPU | its `cpu_ns` | 3/4 of threads (with 100 µs or more) within a ratio of 1.25 |
//!
//! A fifth line is printed beside them and held to no tolerance: the
//! switches of a recorded thread away from its CPU while still runnable
//! (`kernel.switches.preempted` against the replay's `switches.preempted`),
//! the scheduling a replay redoes rather than copies: where the wakes come
//! out short, this is where the two schedulers part.
//!
//! Last, and of the recording alone: the kernel's picks and wake-up
//! preemptions decided again by the model's fair class from the kernel's
//! own state (`schedlab_real::shadow`), with the model's rules, with
//! Linux's `DELAY_DEQUEUE` added, and with `NEXT_BUDDY` on top: whether a
//! gap is the replay's or the model's rules'.
//!
//! The replayed figures are the median over the seeds. What falls outside
//! is what the replay cannot carry: control flow that depends on data or
//! on timing (a thread that found its pipe already full of bytes never
//! blocked in the recording, and one that would block on the replay's
//! machine does not know it), lock contention that changes order, and
//! interrupts replayed as sleeps.

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
    }
    .map_err(|e| match e {
        schedlab_real::Error::Input(m) => Failure::Input(m),
        schedlab_real::Error::Fault(m) => Failure::Real(m),
        schedlab_real::Error::Interrupted => Failure::Interrupted,
    })?;
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

/// `--check`: the replay against the recording (module doc).
fn check(a: &RecordArgs, rec: &Recording, conv: &Converted) -> Result<(), Failure> {
    let topo = schedlab_scenarios::topology("sysfs").map_err(|e| Failure::Input(e.0))?;
    let params = schedlab_scenarios::Params::parse(&["policy=linux".to_string()])
        .map_err(|e| Failure::Input(e.0))?;
    let mut s = schedlab_scenarios::file::load_on(&a.out.join("replay.toml"), params, topo)
        .map_err(|e| Failure::Input(e.to_string()))?;
    s.spec.count_wakers = true;
    let outs: Vec<Outcome> = (1..=5)
        .map(|seed| schedlab_sim::Sim::new(&s.spec, seed).run())
        .collect();
    let med = |f: &dyn Fn(&Outcome) -> f64| {
        schedlab_scenarios::suite::median(&outs.iter().map(f).collect::<Vec<_>>())
    };
    let ours: std::collections::BTreeSet<&str> =
        rec.threads.values().map(|t| t.name.as_str()).collect();
    // Wakes between recorded threads, and the pairs with one.
    let rec_pairs: Vec<(&str, &str)> = rec
        .record
        .wakes_by
        .iter()
        .flat_map(|(t, by)| by.keys().map(move |w| (w.as_str(), t.as_str())))
        .filter(|(w, t)| ours.contains(w) && ours.contains(t) && w != t)
        .collect();
    let rec_wakes: u64 = rec_pairs
        .iter()
        .map(|(w, t)| rec.record.wakes_by[*t][*w])
        .sum();
    let sim_wakes = |o: &Outcome| -> f64 {
        o.wakes_by
            .iter()
            .flat_map(|(t, by)| by.iter().map(move |(w, n)| (w, t, n)))
            .filter(|(w, t, _)| ours.contains(w.as_str()) && w != t)
            .map(|(_, _, n)| *n as f64)
            .sum::<f64>()
            // An empty sum is -0.0.
            + 0.0
    };
    let kept = |o: &Outcome| -> f64 {
        let n = rec_pairs
            .iter()
            .filter(|(w, t)| o.wakes_by.get(*t).is_some_and(|by| by.contains_key(*w)))
            .count();
        n as f64 / rec_pairs.len().max(1) as f64
    };
    let cpu_ok = |o: &Outcome| -> f64 {
        let big: Vec<(&String, u64)> = rec
            .threads
            .iter()
            .map(|(id, t)| (&t.name, conv.threads[id].cpu_ns))
            .filter(|(_, ns)| *ns >= 100_000)
            .collect();
        let ok = big
            .iter()
            .filter(|(n, ns)| {
                let r = o.tasks.get(*n).map_or(0, |t| t.cpu_ns) as f64 / *ns as f64;
                (1.0 / 1.25..=1.25).contains(&r)
            })
            .count();
        ok as f64 / big.len().max(1) as f64
    };
    let makespan = med(&|o| {
        s.figures
            .iter()
            .find(|(n, _)| n == "makespan_ms")
            .map_or(0.0, |(_, f)| f.compute(o))
    });
    let rec_ms = rec.wall_ns as f64 / 1e6;
    let (wakes, pairs, cpu) = (med(&sim_wakes), med(&kept), med(&cpu_ok));
    let ratio_in = |r: f64, k: f64| (1.0 / k..=k).contains(&r);
    // With nothing recorded, the replay is within when it has none either.
    let wakes_ok = match rec_wakes {
        0 => wakes == 0.0,
        n => ratio_in(wakes / n as f64, 2.0),
    };
    let rows = [
        (
            "makespan_ms",
            rec_ms,
            makespan,
            ratio_in(makespan / rec_ms, 1.5),
        ),
        ("wakes between threads", rec_wakes as f64, wakes, wakes_ok),
        (
            "wake edges (pairs) kept",
            1.0,
            pairs,
            rec_pairs.is_empty() || pairs >= 0.75,
        ),
        ("threads with CPU time within 1.25x", 1.0, cpu, cpu >= 0.75),
    ];
    say!(
        "replayed on this machine under linux, 5 seeds (medians): {} recorded pairs with a wake, {} threads",
        rec_pairs.len(),
        rec.threads.len()
    );
    say!(
        "  {:36} {:>12} {:>12}  verdict",
        "figure",
        "recorded",
        "replayed"
    );
    for (name, r, p, ok) in rows {
        say!(
            "  {name:36} {:>12} {:>12}  {}",
            crate::print::fmt(r),
            crate::print::fmt(p),
            if ok { "within" } else { "outside" }
        );
    }
    // Not held to a tolerance: how often a thread lost its CPU while still
    // runnable, the scheduling the replay does not copy but redoes.
    let rec_pre = rec.record.counters.get("kernel.switches.preempted");
    let pre = med(&|o| o.counters.get("switches.preempted").copied().unwrap_or(0) as f64);
    say!(
        "  {:36} {:>12} {:>12}  (not held to a tolerance)",
        "switches while runnable (preempted)",
        rec_pre.map_or("-".to_string(), |n| crate::print::fmt(*n as f64)),
        crate::print::fmt(pre)
    );
    if let Some(st) = outs.iter().find_map(|o| o.stall.as_ref()) {
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
