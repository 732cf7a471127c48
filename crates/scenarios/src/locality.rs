//! The scenarios of LLC warmth (the simulator's `warmth` module): where
//! co-locating a process's threads pays, and where packing more hot data
//! into one LLC than it holds costs.
//!
//! * `shared_workers`: one dispatcher wakes a process of `workers` workers
//!   for each of `items` items; each worker computes `work_ns` on the
//!   process's `shared_bytes` of shared data (which its threads write, so
//!   a copy in one LLC goes cold in the others), then meets the others at
//!   a barrier. `placement`: `packed` (every worker allowed only LLC 0),
//!   `spread` (worker i allowed only LLC i mod 2), `free` (anywhere, worker
//!   i starting on CPU i: the policy decides) or `scattered` (anywhere,
//!   worker i starting in LLC i: does a policy gather them?). Figures:
//!   `item_us` (p50 of the dispatcher's item), `llc_refill_mib` and
//!   `cold_starts` of all threads, `end_llcs` (how many LLCs the workers
//!   end in) and `end_llc_most` (the most workers ending in one LLC).
//! * `busy_process`: one process of `threads` busy threads (each computes
//!   `work_ns` on `shared_bytes` of shared data and sleeps `sleep_ns`,
//!   `rounds` times), started scattered over the LLCs (or `crowded`: all in
//!   LLC 0, free to move, which the balancer must spread): more busy threads
//!   than one LLC has CPUs is where gathering a process over-aggregates.
//!   Figures: `round_us`, `end_llcs`, `end_llc_most`, `llc_refill_mib`.
//! * `split_pairs`: one process of `pairs` request/reply pairs sharing
//!   `shared_bytes`, each client starting in LLC 0 and its server in LLC 1,
//!   neither pinned: the seed's split pair, many of them in one process
//!   (does a policy bring each pair together, and the process into one
//!   LLC?). Figures: `rtt_us` (p50), `end_llcs`, `llc_refill_mib`.
//! * `server_clients`: one process of a server and `clients` clients, the
//!   server starting in LLC 0 and client i in LLC i, none pinned: whom
//!   does the server follow? Figures: `rtt_us` (p50 of a call), `end_llcs`,
//!   `server_moves` (moves of the server while all clients run).
//! * `llc_overflow`: two processes of `threads` threads, each with
//!   `shared_bytes` of shared data, whose threads compute `work_ns` and
//!   sleep `sleep_ns`, `rounds` times. `placement`: `packed` (all in
//!   LLC 0), `spread` (process a in LLC 0, b in LLC 1) or `free`. When the
//!   two processes' data exceeds an LLC, packed threads evict each other's.
//!   Figures: `round_us` (p50 of a round), `llc_refill_mib`, `cold_starts`.

use schedlab_sim::sched::TaskSpec;
use schedlab_sim::{Figure, Op};
use schedlab_topology::CpuSet;

use crate::ops::{call, futex_wait, futex_wake, lap, repeat, reply, run, serve};
use crate::{Builder, Params, ScenarioError};

/// Where the threads may run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Placement {
    Packed,
    Spread,
    Free,
    /// Thread i starts in LLC i (mod the machine's), free to move.
    Scattered,
    /// Every thread starts in LLC 0, free to move.
    Crowded,
}

fn placement(p: &mut Params) -> Result<Placement, ScenarioError> {
    placement_or(p, "packed")
}

fn placement_or(p: &mut Params, default: &str) -> Result<Placement, ScenarioError> {
    let v: String = p.get("placement", default.to_string())?;
    match v.as_str() {
        "packed" => Ok(Placement::Packed),
        "spread" => Ok(Placement::Spread),
        "free" => Ok(Placement::Free),
        "scattered" => Ok(Placement::Scattered),
        "crowded" => Ok(Placement::Crowded),
        v => Err(ScenarioError(format!(
            "placement {v:?}: expected packed, spread, free, scattered or crowded"
        ))),
    }
}

/// The CPUs of LLC `k` (mod the machine's LLCs), and its first CPU.
fn llc(b: &Builder, k: usize) -> (CpuSet, usize) {
    let t = b.topology();
    let l = &t.llcs()[k % t.llcs().len()];
    (l.cpus, l.cpus.first().map_or(0, |c| c.index()))
}

fn two_llcs(b: &Builder, name: &str, pl: Placement) -> Result<(), ScenarioError> {
    if pl == Placement::Spread && b.topology().llcs().len() < 2 {
        return Err(ScenarioError(format!(
            "{name} with placement = spread needs two LLCs; {} has one",
            b.topology().name()
        )));
    }
    Ok(())
}

/// Where thread `i` of group `g` may run and starts.
fn mask(b: &Builder, pl: Placement, g: usize, i: u64) -> (Option<CpuSet>, usize, CpuSet) {
    let all = *b.topology().cpus();
    match pl {
        Placement::Packed => {
            let (set, first) = llc(b, 0);
            (Some(set), first, set)
        }
        Placement::Spread => {
            let (set, first) = llc(b, g);
            (Some(set), first, set)
        }
        Placement::Free => (None, (i as usize) % all.weight().max(1), all),
        Placement::Scattered => {
            let (set, first) = llc(b, i as usize);
            (None, first, set)
        }
        Placement::Crowded => {
            let (set, first) = llc(b, 0);
            (None, first, set)
        }
    }
}

/// `rounds` rounds of `work` ns of computing and a `sleep` ns sleep, each
/// timed as the lap `round`.
fn rounds_of(rounds: u64, work: u64, sleep: u64) -> Vec<Op> {
    vec![repeat(
        rounds,
        vec![
            Op::LapStart {
                metric: "round".into(),
            },
            run(work),
            Op::Sleep(sleep),
            lap("round"),
        ],
    )]
}

/// A round's p50, over a run as long as the programs take.
fn round_figure(b: &mut Builder) {
    b.run_ns(10_000_000_000);
    b.figure(
        "round_us",
        Figure::LapP50Us {
            metric: "round".into(),
        },
    );
}

/// A round trip's p50 and how many LLCs all the tasks end in, over a run
/// as long as the programs take.
fn rtt_figures(b: &mut Builder) {
    b.run_ns(10_000_000_000);
    b.figure(
        "rtt_us",
        Figure::LapP50Us {
            metric: "rtt".into(),
        },
    );
    b.figure(
        "end_llcs",
        Figure::EndLlcs {
            prefix: String::new(),
        },
    );
}

/// Where the threads named `prefix*` end: how many LLCs, and the most in one.
fn end_figures(b: &mut Builder, prefix: &str) {
    b.figure(
        "end_llcs",
        Figure::EndLlcs {
            prefix: prefix.into(),
        },
    );
    b.figure(
        "end_llc_most",
        Figure::EndLlcMost {
            prefix: prefix.into(),
        },
    );
}

fn refill_figures(b: &mut Builder, tasks: Vec<String>) {
    b.figure(
        "llc_refill_mib",
        Figure::LlcRefillMib {
            tasks: tasks.clone(),
        },
    );
    b.figure("cold_starts", Figure::ColdStarts { tasks });
}

pub(crate) fn shared_workers(b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let workers: u64 = p.get("workers", 8)?;
    let shared: u64 = p.get("shared_bytes", 4 << 20)?;
    let items: u64 = p.get("items", 100)?;
    let work: u64 = p.get("work_ns", 200_000)?;
    let pl = placement(p)?;
    two_llcs(b, "shared_workers", pl)?;
    if workers == 0 || workers > 1000 {
        return Err(ScenarioError(format!(
            "shared_workers: workers = {workers}: expected 1 to 1000"
        )));
    }
    let n = u32::try_from(workers + 1).expect("bounded above");
    b.process("app", shared);
    let worker = vec![repeat(
        items,
        vec![
            futex_wait("go"),
            run(work),
            Op::Barrier {
                barrier: "done".into(),
                n,
            },
        ],
    )];
    for i in 0..workers {
        let (m, first, start) = mask(b, pl, (i % 2) as usize, i);
        b.task(
            &format!("worker{i}"),
            first,
            m,
            TaskSpec::fair(0),
            worker.clone(),
        )
        .start_in(start)
        .in_process("app");
    }
    let dispatcher = vec![repeat(
        items,
        vec![
            Op::LapStart {
                metric: "item".into(),
            },
            futex_wake("go", n - 1),
            Op::Barrier {
                barrier: "done".into(),
                n,
            },
            lap("item"),
        ],
    )];
    let (_, first) = llc(b, 0);
    b.task("dispatcher", first, None, TaskSpec::fair(0), dispatcher)
        .in_process("app");
    b.run_ns(10_000_000_000);
    b.figure(
        "item_us",
        Figure::LapP50Us {
            metric: "item".into(),
        },
    );
    refill_figures(b, vec![]);
    end_figures(b, "worker");
    Ok(())
}

pub(crate) fn busy_process(b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let threads: u64 = p.get("threads", 24)?;
    let shared: u64 = p.get("shared_bytes", 8 << 20)?;
    let rounds: u64 = p.get("rounds", 400)?;
    let work: u64 = p.get("work_ns", 2_000_000)?;
    let sleep: u64 = p.get("sleep_ns", 50_000)?;
    let pl = placement_or(p, "scattered")?;
    if threads == 0 || threads > 1000 {
        return Err(ScenarioError(format!(
            "busy_process: threads = {threads}: expected 1 to 1000"
        )));
    }
    b.process("app", shared);
    let body = rounds_of(rounds, work, sleep);
    for i in 0..threads {
        let (m, first, start) = mask(b, pl, 0, i);
        b.task(&format!("t{i}"), first, m, TaskSpec::fair(0), body.clone())
            .start_in(start)
            .in_process("app");
    }
    round_figure(b);
    end_figures(b, "t");
    refill_figures(b, vec![]);
    Ok(())
}

pub(crate) fn llc_overflow(b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let threads: u64 = p.get("threads", 2)?;
    let shared: u64 = p.get("shared_bytes", 12 << 20)?;
    let rounds: u64 = p.get("rounds", 100)?;
    let work: u64 = p.get("work_ns", 200_000)?;
    let sleep: u64 = p.get("sleep_ns", 100_000)?;
    let pl = placement(p)?;
    two_llcs(b, "llc_overflow", pl)?;
    if threads == 0 || threads > 500 {
        return Err(ScenarioError(format!(
            "llc_overflow: threads = {threads}: expected 1 to 500"
        )));
    }
    let body = rounds_of(rounds, work, sleep);
    for (g, proc) in ["a", "b"].iter().enumerate() {
        b.process(proc, shared);
        for i in 0..threads {
            let (m, first, start) = mask(b, pl, g, g as u64 * threads + i);
            b.task(
                &format!("{proc}{i}"),
                first,
                m,
                TaskSpec::fair(0),
                body.clone(),
            )
            .start_in(start)
            .in_process(proc);
        }
    }
    round_figure(b);
    refill_figures(b, vec![]);
    Ok(())
}

pub(crate) fn split_pairs(b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let pairs: u64 = p.get("pairs", 4)?;
    let rounds: u64 = p.get("rounds", 400)?;
    let shared: u64 = p.get("shared_bytes", 1 << 20)?;
    let work: u64 = p.get("service_ns", 5_000)?;
    two_llcs(b, "split_pairs", Placement::Spread)?;
    if pairs == 0 || pairs > 500 {
        return Err(ScenarioError(format!(
            "split_pairs: pairs = {pairs}: expected 1 to 500"
        )));
    }
    b.process("app", shared);
    let (near, _) = llc(b, 0);
    let (far, _) = llc(b, 1);
    for i in 0..pairs {
        let port = format!("p{i}");
        let client = vec![
            lap("rtt"),
            repeat(rounds, vec![call(&port, 64), run(work), lap("rtt")]),
        ];
        let server = vec![repeat(rounds, vec![serve(&port), run(work), reply(64)])];
        let first = |set: CpuSet| set.first().map_or(0, |c| c.index());
        b.task(
            &format!("c{i}"),
            first(near),
            None,
            TaskSpec::fair(0),
            client,
        )
        .start_in(near)
        .in_process("app");
        b.task(
            &format!("s{i}"),
            first(far),
            None,
            TaskSpec::fair(0),
            server,
        )
        .start_in(far)
        .in_process("app");
    }
    rtt_figures(b);
    refill_figures(b, vec![]);
    Ok(())
}

pub(crate) fn server_clients(b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let n_llcs = b.topology().llcs().len() as u64;
    let clients: u64 = p.get("clients", n_llcs.min(4))?;
    let rounds: u64 = p.get("rounds", 300)?;
    let shared: u64 = p.get("shared_bytes", 1 << 20)?;
    let work: u64 = p.get("service_ns", 5_000)?;
    let think: u64 = p.get("think_ns", 20_000)?;
    if clients == 0 || clients > 500 {
        return Err(ScenarioError(format!(
            "server_clients: clients = {clients}: expected 1 to 500"
        )));
    }
    b.process("app", shared);
    let (home, first) = llc(b, 0);
    let server = vec![repeat(
        rounds * clients,
        vec![serve("s"), run(work), reply(64)],
    )];
    b.task("server", first, None, TaskSpec::fair(0), server)
        .start_in(home)
        .in_process("app");
    let mut names = Vec::new();
    for i in 0..clients {
        let (set, first) = llc(b, i as usize);
        let client = vec![repeat(
            rounds,
            vec![
                Op::LapStart {
                    metric: "rtt".into(),
                },
                call("s", 64),
                lap("rtt"),
                Op::Sleep(think),
            ],
        )];
        let name = format!("client{i}");
        b.task(&name, first, None, TaskSpec::fair(0), client)
            .start_in(set)
            .in_process("app");
        names.push(name);
    }
    rtt_figures(b);
    b.figure(
        "server_moves",
        Figure::Moves {
            tasks: vec!["server".into()],
            reasons: vec![],
            while_running: names,
        },
    );
    Ok(())
}
