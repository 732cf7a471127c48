//! The built-in scenarios: the seed's cases (the seed kernel's, docs/REFERENCES.md) and the rows they
//! are measured by. Each reads its own parameters and the common ones.

use schedlab_sim::sched::{Balance, TaskSpec};
use schedlab_sim::{Figure, MoveReason, Op, Within};
use schedlab_topology::{CpuSet, Level, Topology, DEFAULT_PRESET};

use crate::ops::{call, futex_wait, futex_wake, lap, repeat, reply, run, serve};
use crate::{rows, topology, Builder, Params, Scenario, ScenarioError};

/// What builds a built-in into a builder, from its parameters.
pub type Build = fn(&mut Builder, &mut Params) -> Result<(), ScenarioError>;

/// A built-in scenario: its name, what it is, and what builds it.
#[derive(Clone, Copy, Debug)]
pub struct Builtin {
    pub name: &'static str,
    pub what: &'static str,
    build: Build,
    /// The machine it runs on when none is named (else the default
    /// preset).
    pub topology: Option<&'static str>,
}

const fn builtin(name: &'static str, what: &'static str, build: Build) -> Builtin {
    Builtin {
        name,
        what,
        build,
        topology: None,
    }
}

/// A built-in whose own machine is `topology` unless the user names one.
const fn builtin_on(
    name: &'static str,
    what: &'static str,
    build: Build,
    topology: &'static str,
) -> Builtin {
    Builtin {
        topology: Some(topology),
        ..builtin(name, what, build)
    }
}

/// Every built-in, the one table of them (the suite's rows are built-ins
/// too: [`rows::ROWS`]).
pub const CATALOG: &[Builtin] = &[
    builtin(
        "reqrep",
        "a request/reply pair, pinned as `placement` says (split | same_llc | same_core), `bytes` each way, `rounds` round trips; rtt_us",
        reqrep,
    ),
    builtin(
        "split_pair",
        "request/reply started with the client in LLC 0 and the server in LLC 1, neither pinned: moves once into one LLC",
        split_pair,
    ),
    builtin(
        "server_two_llcs",
        "one unpinned server on cpu0, a client pinned in LLC 0 and one pinned on cpu9, balancing off, `rounds` each; server_moves counts the moves made while both clients run",
        server_two_llcs,
    ),
    builtin(
        "server_busy_near",
        "the seed's blind spot: a server whose near client's requests find it busy (flags) and whose far client's find it parked; `rounds` (240) near requests in bursts of `burst` (8); server_moves while both run",
        server_busy_near,
    ),
    builtin(
        "fan_out",
        "a producer on cpu0 wakes 16 futex waiters for 16 rounds, balancing on: migrations",
        fan_out,
    ),
    builtin(
        "leaving",
        "7 counted wakes from a thread, then 8 after it begins leaving: the task stays home",
        leaving,
    ),
    builtin_on(
        "cs_spinners",
        "seed-004's selftest on smt-2x2: one SMT pair cookied, two CPU-bound spinners on each sibling; resched_ipis_per_cpu_per_s (`cookies=false`: the control)",
        cs_spinners,
        "smt-2x2",
    ),
    builtin(
        "many_pairs",
        "`pairs` request/reply pairs (default one per CPU), unpinned, started side by side: the simulator's scale case (epyc-2s-384: 768 tasks)",
        many_pairs,
    ),
    builtin(
        "schbench",
        "schbench's default mode: `message_threads` (1) each waking `workers` (one per CPU) that sleep `sleep_us` (100) then multiply matrices (`operations` 5, `footprint_kb` 256); wakeup_p50_us, wakeup_p99_us, request_p99_us, rps",
        schbench_default,
    ),
    builtin(
        "stream",
        "McCalpin's stream under OpenMP: `threads` (one per CPU) of one process run its 4 kernels `ntimes` (10) times over their own slices of three arrays of `array_size` (10M) doubles, `kernel_us` (1000) each, a barrier after each; nothing shared; kernel_us, end_llcs",
        stream_default,
    ),
    builtin(
        "sched_pipe",
        "perf bench sched pipe: two processes pass a 4-byte int back and forth over two pipes, `loops` (20000) times; `cpu` (none) pins both to one CPU, as taskset -c CPU; usecs_per_op, what perf prints",
        crate::field::sched_pipe,
    ),
    builtin(
        "hackbench",
        "rt-tests' hackbench in pipe mode: `groups` (10) of `fds` (20) senders each writing `datasize` (100) B to every receiver of the group, `loops` (100) times; total_ms, what it prints as Time",
        hackbench_default,
    ),
    builtin(
        "shared_workers",
        "a dispatcher wakes a process of `workers` (8) sharing `shared_bytes` (4 MiB) of written data, `items` (100) times, `work_ns` each; `placement` packed (LLC 0) | spread (two LLCs) | free | scattered (worker i starts in LLC i); item_us, llc_refill_mib, cold_starts, end_llcs, end_llc_most",
        crate::locality::shared_workers,
    ),
    builtin(
        "split_pairs",
        "one process of `pairs` (4) request/reply pairs, each client starting in LLC 0 and its server in LLC 1, unpinned, sharing `shared_bytes` (1 MiB); rtt_us, end_llcs, llc_refill_mib",
        crate::locality::split_pairs,
    ),
    builtin(
        "server_clients",
        "one process: a server starting in LLC 0 and `clients` (one per LLC, up to 4) clients starting in LLC i, unpinned; rtt_us, end_llcs, server_moves",
        crate::locality::server_clients,
    ),
    builtin(
        "busy_process",
        "one process of `threads` (24) busy threads sharing `shared_bytes` (8 MiB): each runs `work_ns` (2 ms) and sleeps `sleep_ns` (50 us), `rounds` (400) times, started scattered over the LLCs: more busy threads than an LLC has CPUs (over-aggregation); round_us, end_llcs, end_llc_most, llc_refill_mib",
        crate::locality::busy_process,
    ),
    builtin(
        "llc_overflow",
        "two processes of `threads` (2) with `shared_bytes` (12 MiB) each run `work_ns` and sleep `sleep_ns`, `rounds` (100) times; `placement` packed (one LLC) | spread | free; round_us, llc_refill_mib, cold_starts",
        crate::locality::llc_overflow,
    ),
    builtin(
        "indep_wakes",
        "a task woken at random by pinned wakers in two LLCs, parked at every wake: moves per counted wake against 1/(2^(k+1)-2)",
        indep_wakes,
    ),
];

pub fn names() -> impl Iterator<Item = &'static str> {
    CATALOG.iter().map(|b| b.name)
}

/// Builds the built-in `name` on `topo` (its default when `None`).
pub fn build(name: &str, topo: Option<&str>, mut p: Params) -> Result<Scenario, ScenarioError> {
    let builtin = CATALOG.iter().find(|c| c.name == name);
    let own = builtin.and_then(|c| c.topology);
    let t = topology(topo.or(own).unwrap_or(DEFAULT_PRESET))?;
    let mut b = Builder::new(name, t);
    if let Some(builtin) = builtin {
        (builtin.build)(&mut b, &mut p)?;
    } else if let Some(row) = rows::find(name) {
        rows::build(row, &mut b, &mut p)?;
    } else {
        let known: Vec<&str> = names().chain(rows::ROWS.iter().map(|r| r.name)).collect();
        return Err(ScenarioError(format!(
            "unknown scenario {name:?}: expected one of {}, or a .toml file",
            known.join(", ")
        )));
    }
    b.common(&mut p)?;
    let params = p.finish(name)?;
    Ok(b.build(params))
}

/// A CPU of `t` at `level` from `cpu`: the first that is that far, in id
/// order (e.g. the first CPU of another core in the same LLC).
fn cpu_at(t: &Topology, cpu: usize, level: Level) -> Result<usize, ScenarioError> {
    let c = schedlab_topology::CpuId::new(cpu);
    t.cpu_ids()
        .find(|&o| t.level_between(c, o) == level)
        .map(|o| o.index())
        .ok_or_else(|| {
            ScenarioError(format!(
                "topology {} has no CPU at level {level:?} from cpu{cpu}",
                t.name()
            ))
        })
}

/// The first CPU outside `cpu`'s LLC (same node first).
fn other_llc(t: &Topology, cpu: usize) -> Result<usize, ScenarioError> {
    cpu_at(t, cpu, Level::Node)
        .or_else(|_| cpu_at(t, cpu, Level::Machine))
        .map_err(|_| {
            ScenarioError(format!(
                "this scenario needs a second LLC, and {} has one (try --topology amd-2x8)",
                t.name()
            ))
        })
}

/// The request/reply pair: a client calling, a server serving.
fn pair(
    b: &mut Builder,
    client: (usize, Option<CpuSet>),
    server: (usize, Option<CpuSet>),
    bytes: u64,
    rounds: u64,
    service_ns: u64,
) {
    b.task(
        "client",
        client.0,
        client.1,
        TaskSpec::fair(0),
        vec![
            lap("rtt"),
            repeat(rounds, vec![call("p", bytes), lap("rtt")]),
        ],
    );
    b.task(
        "server",
        server.0,
        server.1,
        TaskSpec::fair(0),
        vec![repeat(
            rounds,
            vec![serve("p"), run(service_ns), reply(bytes)],
        )],
    );
}

fn reqrep(b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let placement: String = p.get("placement", "same_llc".to_string())?;
    let bytes: u64 = p.get("bytes", 8)?;
    let rounds: u64 = p.get("rounds", 2000)?;
    let t = b.topology().clone();
    let server = match placement.as_str() {
        "split" => other_llc(&t, 0)?,
        "same_llc" => cpu_at(&t, 0, Level::Llc)?,
        "same_core" => cpu_at(&t, 0, Level::Smt)?,
        o => {
            return Err(ScenarioError(format!(
                "placement {o:?}: expected split, same_llc or same_core"
            )))
        }
    };
    let one = |c: usize| Some(CpuSet::single(schedlab_topology::CpuId::new(c)));
    pair(b, (0, one(0)), (server, one(server)), bytes, rounds, 0);
    b.figure(
        "rtt_us",
        Figure::LapP50Us {
            metric: "rtt".into(),
        },
    );
    b.figure(
        "rtt_p99_us",
        Figure::LapP99Us {
            metric: "rtt".into(),
        },
    );
    Ok(())
}

fn split_pair(b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let rounds: u64 = p.get("rounds", 200)?;
    let bytes: u64 = p.get("bytes", 8)?;
    b.config().balance = Balance::OFF;
    let t = b.topology().clone();
    let far = other_llc(&t, 0)?;
    pair(b, (0, None), (far, None), bytes, rounds, 0);
    b.figure(
        "pair_moves",
        Figure::Moves {
            tasks: vec![],
            reasons: vec![],
            while_running: vec![],
        },
    );
    b.figure(
        "final_same_llc",
        Figure::SameAt {
            a: "client".into(),
            b: "server".into(),
            level: Within::Llc,
        },
    );
    b.figure(
        "final_same_core",
        Figure::SameAt {
            a: "client".into(),
            b: "server".into(),
            level: Within::Core,
        },
    );
    b.figure(
        "rtt_us",
        Figure::LapP50Us {
            metric: "rtt".into(),
        },
    );
    Ok(())
}

/// The server's moves, counted while both its clients run: once one is
/// done, following the other is what a rule should do; the seed's claim is
/// about a server between two clients.
fn server_moves() -> Figure {
    Figure::Moves {
        tasks: vec!["server".into()],
        reasons: vec![],
        while_running: vec!["client_near".into(), "client_far".into()],
    }
}

fn server_two_llcs(b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let rounds: u64 = p.get("rounds", 24)?;
    let bytes: u64 = p.get("bytes", 8)?;
    let think: u64 = p.get("think_max_ns", 20_000)?;
    b.config().balance = Balance::OFF;
    let t = b.topology().clone();
    let llc0 = t.llcs()[0].cpus;
    let far = other_llc(&t, 1)?;
    let far = cpu_at(&t, far, Level::Smt).unwrap_or(far); // cpu9 on amd-2x8
    let near = llc0.iter().nth(2).map(|c| c.index()).unwrap_or(0);
    let client = |name: &str, b: &mut Builder, cpu: usize, mask: CpuSet| {
        b.task(
            name,
            cpu,
            Some(mask),
            TaskSpec::fair(0),
            // Each client thinks a random while between calls, so which
            // client's request finds the server parked varies.
            vec![repeat(
                rounds,
                vec![
                    call("p", bytes),
                    Op::RandomSleep {
                        min: 1_000,
                        max: think,
                    },
                ],
            )],
        );
    };
    client("client_near", b, near, llc0);
    client(
        "client_far",
        b,
        far,
        CpuSet::single(schedlab_topology::CpuId::new(far)),
    );
    b.task(
        "server",
        0,
        None,
        TaskSpec::fair(0),
        vec![repeat(2 * rounds, vec![serve("p"), reply(bytes)])],
    );
    b.figure("server_moves", server_moves());
    b.figure(
        "pair_moves",
        Figure::Moves {
            tasks: vec![],
            reasons: vec![],
            while_running: vec![],
        },
    );
    Ok(())
}

/// The seed's blind spot (its review's finding B1), isolated: a server on
/// cpu0 whose near client (pinned in LLC 0) sends bursts of `burst`
/// requests, each arriving while the server is still busy (the client
/// thinks `think_ns`, less than the server's `post_ns` of work after each
/// reply), so every near wake is a flag; between bursts it lets the far
/// client (pinned on another LLC's CPU) go, whose request arrives once the
/// server has parked (it waits `post_ns` + 15 µs), and pauses `pause_ns`
/// (35 µs), longer than that wait and shorter than it plus the server's
/// `work_ns` on the far request, so its next request flags again. The seed's
/// rule counts only the far client's parked wakes and follows it after K
/// bursts; counting flags (`waker-streak:K:flags`) sees the near client.
/// `rounds` near requests (240), `burst` (8) each; `server_moves` counted
/// while both clients run.
fn server_busy_near(b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let rounds: u64 = p.get("rounds", 240)?;
    let burst: u64 = p.get("burst", 8)?;
    let think: u64 = p.get("think_ns", 2_000)?;
    let work: u64 = p.get("work_ns", 20_000)?;
    let post: u64 = p.get("post_ns", 10_000)?;
    let pause: u64 = p.get("pause_ns", 35_000)?;
    if burst == 0 || rounds < burst {
        return Err(ScenarioError(format!(
            "server_busy_near: burst = {burst}, rounds = {rounds}: expected 1 <= burst <= rounds"
        )));
    }
    let bursts = rounds / burst;
    b.config().balance = Balance::OFF;
    let t = b.topology().clone();
    let llc0 = t.llcs()[0].cpus;
    let far = other_llc(&t, 1)?;
    let near = llc0.iter().nth(2).map(|c| c.index()).unwrap_or(0);
    b.task(
        "client_near",
        near,
        Some(llc0),
        TaskSpec::fair(0),
        vec![repeat(
            bursts,
            vec![
                repeat(burst, vec![call("p", 8), Op::Sleep(think)]),
                futex_wake("far_go", 1),
                Op::Sleep(pause),
            ],
        )],
    );
    b.task(
        "client_far",
        far,
        Some(CpuSet::single(schedlab_topology::CpuId::new(far))),
        TaskSpec::fair(0),
        // It waits past the server's post-work, so its request finds the
        // server parked.
        vec![repeat(
            bursts,
            vec![futex_wait("far_go"), Op::Sleep(post + 15_000), call("p", 8)],
        )],
    );
    b.task(
        "server",
        0,
        None,
        TaskSpec::fair(0),
        vec![repeat(
            bursts * (burst + 1),
            vec![serve("p"), run(work), reply(8), run(post)],
        )],
    );
    b.figure("server_moves", server_moves());
    b.figure(
        "server_flags",
        Figure::Counter {
            name: "wakes.flagged".into(),
        },
    );
    Ok(())
}

fn fan_out(b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let waiters: u64 = p.get("waiters", 16)?;
    let rounds: u64 = p.get("rounds", 16)?;
    let work: u64 = p.get("work_ns", 20_000)?;
    let gap: u64 = p.get("gap_ns", 200_000)?;
    b.config().balance = Balance::ON;
    let n = b.topology().num_cpus() as u64;
    for i in 0..waiters {
        b.task(
            &format!("waiter{i}"),
            ((i + 1) % n) as usize,
            None,
            TaskSpec::fair(0),
            vec![repeat(rounds, vec![futex_wait("go"), run(work)])],
        );
    }
    b.task(
        "producer",
        0,
        Some(CpuSet::single(schedlab_topology::CpuId::new(0))),
        TaskSpec::fair(0),
        vec![repeat(
            rounds,
            vec![Op::Sleep(gap), futex_wake("go", waiters as u32)],
        )],
    );
    let names: Vec<String> = (0..waiters).map(|i| format!("waiter{i}")).collect();
    b.figure(
        "migrations",
        Figure::Migrations {
            tasks: names.clone(),
        },
    );
    b.figure(
        "waiter_moves",
        Figure::Moves {
            tasks: names,
            reasons: vec![],
            while_running: vec![],
        },
    );
    b.figure(
        "rule_moves",
        Figure::Counter {
            name: "moves.waker_rule".into(),
        },
    );
    Ok(())
}

fn leaving(b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let before: u64 = p.get("before", 7)?;
    let after: u64 = p.get("after", 8)?;
    b.config().balance = Balance::OFF;
    let t = b.topology().clone();
    let far = other_llc(&t, 1)?;
    b.task(
        "sleeper",
        far,
        None,
        TaskSpec::fair(0),
        vec![repeat(before + after, vec![futex_wait("f")])],
    );
    let wake = || vec![Op::Sleep(50_000), futex_wake("f", 1)];
    b.task(
        "waker",
        1,
        Some(CpuSet::single(schedlab_topology::CpuId::new(1))),
        TaskSpec::fair(0),
        vec![repeat(before, wake()), Op::Leave, repeat(after, wake())],
    );
    b.figure(
        "sleeper_moves",
        Figure::Moves {
            tasks: vec!["sleeper".into()],
            reasons: vec![],
            while_running: vec![],
        },
    );
    b.figure(
        "counted_wakes",
        Figure::Counter {
            name: "wakes.counted".into(),
        },
    );
    Ok(())
}

fn indep_wakes(b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let wakes: u64 = p.get("wakes", 4000)?;
    b.config().balance = Balance::OFF;
    let t = b.topology().clone();
    let far = other_llc(&t, 1)?;
    b.task(
        "task",
        0,
        None,
        TaskSpec::fair(0),
        vec![repeat(wakes, vec![futex_wait("f")])],
    );
    for (name, cpu) in [("waker0", 1), ("waker1", far)] {
        b.task(
            name,
            cpu,
            Some(CpuSet::single(schedlab_topology::CpuId::new(cpu))),
            TaskSpec::fair(0),
            // Each waker is a Poisson source of the same rate: which one
            // comes next is a fair coin, independent of the past.
            vec![repeat(
                wakes,
                vec![Op::ExpSleep { mean: 100_000 }, futex_wake("f", 1)],
            )],
        );
    }
    b.run_ns(wakes * 60_000);
    b.figure(
        "moves",
        Figure::Moves {
            tasks: vec!["task".into()],
            reasons: vec![MoveReason::WakerRule],
            while_running: vec![],
        },
    );
    b.figure(
        "counted_wakes",
        Figure::Counter {
            name: "wakes.counted".into(),
        },
    );
    Ok(())
}

fn many_pairs(b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let n = b.topology().num_cpus() as u64;
    let pairs: u64 = p.get("pairs", n)?;
    let rounds: u64 = p.get("rounds", 200)?;
    let work: u64 = p.get("service_ns", 2_000)?;
    for i in 0..pairs {
        let port = format!("p{i}");
        let (c, s) = ((2 * i % n) as usize, ((2 * i + 1) % n) as usize);
        b.task(
            &format!("client{i}"),
            c,
            None,
            TaskSpec::fair(0),
            vec![
                lap("rtt"),
                repeat(rounds, vec![call(&port, 64), run(work), lap("rtt")]),
            ],
        );
        b.task(
            &format!("server{i}"),
            s,
            None,
            TaskSpec::fair(0),
            vec![repeat(rounds, vec![serve(&port), run(work), reply(64)])],
        );
    }
    b.figure(
        "rtt_us",
        Figure::LapP50Us {
            metric: "rtt".into(),
        },
    );
    b.figure("migrations", Figure::Migrations { tasks: vec![] });
    Ok(())
}

/// The seed-004 selftest (docs/REFERENCES.md): cookie one SMT pair, run two spinners on each of
/// its siblings, count reschedule IPIs. Linux measured 808-2123 per CPU per
/// second without the fix (the selftest fails above 1000) and 224-271 with
/// it.
fn cs_spinners(b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let cookies = p.get_bool("cookies", true)?;
    let t = b.topology().clone();
    let first = schedlab_topology::CpuId::new(0);
    let pair: Vec<usize> = t.core_cpus(first).iter().map(|c| c.index()).collect();
    if pair.len() < 2 {
        return Err(ScenarioError(format!(
            "cs_spinners needs SMT: {} has one thread per core",
            t.name()
        )));
    }
    b.config().core_sched = cookies;
    b.config().balance = Balance::OFF;
    // The selftest's machine is a QEMU guest.
    b.cost(schedlab_sim::CostModel::preset("guest").expect("a preset"));
    b.run_ns(2_000_000_000);
    for &cpu in &pair[..2] {
        for k in 0..2 {
            let mut spec = TaskSpec::fair(0);
            spec.cookie = if cookies { 1 } else { 0 };
            b.task(
                &format!("spin{cpu}.{k}"),
                cpu,
                Some(CpuSet::single(schedlab_topology::CpuId::new(cpu))),
                spec,
                vec![run(u64::MAX / 4)],
            );
        }
    }
    b.figure(
        "resched_ipis_per_cpu_per_s",
        Figure::CounterPerCpuPerSecond {
            name: "ipi.resched".into(),
            cpus: Some(2),
        },
    );
    Ok(())
}

fn hackbench_default(b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    crate::field::hackbench(b, p, (10, 20, 100))
}

fn schbench_default(b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let cpus = b.topology().num_cpus() as u64;
    crate::field::schbench(b, p, (1, cpus), "wakeup_p99_us")
}

fn stream_default(b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let cpus = b.topology().num_cpus() as u64;
    crate::field::stream(b, p, cpus)
}
