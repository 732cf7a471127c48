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

use std::path::PathBuf;

use clap::Args;
use schedlab_real::recording::{self, Recording};
use schedlab_real::replay::{self, Converted};
use schedlab_real::shadow;

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
pub(crate) enum EdgesArg {
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
    let conv = rec.convert(a.edges.into());
    schedlab_real::files::files(&rec, &conv, &what(a), &a.cmd)?.write(&a.out)?;
    let edges: u64 = conv.edges.values().sum();
    say!(
        "recorded `{}`: exit {}, {:.3} ms, {} threads in {} processes; {} events{}",
        what(a),
        rec.status,
        rec.wall_ns as f64 / 1e6,
        rec.threads.len(),
        schedlab_real::files::processes(&rec).len(),
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
        check(&a.out, &rec, &conv)?;
    }
    if rec.status != 0 {
        return Err(Failure::Exit(rec.status.clamp(1, 255) as u8));
    }
    Ok(())
}

/// `--check`: the replay (`out/replay.toml`) against the recording
/// (`schedlab_real::check`), then the shadow.
pub(crate) fn check(
    out: &std::path::Path,
    rec: &Recording,
    conv: &Converted,
) -> Result<(), Failure> {
    let c = schedlab_real::check::check(rec, conv, &out.join("replay.toml"))?;
    say!(
        "replayed on the recording's machine under linux, {} seeds (medians): {} recorded pairs with a wake, {} threads",
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
    if let Some(p) = &r.placement {
        let pct = |n: u64| 100.0 * n as f64 / p.wakes.max(1) as f64;
        say!(
            "the kernel's wake placement, decided again by the model's select_task_rq_fair() from the kernel's state: {} wakes, the same CPU {:.0}% (every wake taken as sync: {:.0}%); moved off prev: the kernel {:.0}%, the model {:.0}%",
            p.wakes,
            pct(p.same),
            pct(p.same_if_sync),
            pct(p.kernel_moved),
            pct(p.model_moved)
        );
        for (why, n) in &p.apart_by {
            say!("  placed apart, the model's step and the kernel's: {why}: {n}");
        }
    }
    if let Some(b) = &r.balance {
        say!(
            "the kernel's migrations outside a wake, asked of the model's balancer from the kernel's state: {} moves, the model would have made {}; {} newly idle CPUs, at {} of which the model would have pulled where the kernel did not ({} trying every domain, without NI_RANDOM's dice)",
            b.moves,
            b.model_would,
            b.newidle,
            b.model_extra,
            b.model_extra_every_domain
        );
        for (why, n) in &b.by {
            say!("  the destination's kind and the model's answer: {why}: {n}");
        }
    }
}
