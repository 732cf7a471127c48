//! The suite's rows: the seed's benchmark table (docs/ARCHITECTURE.md, the suite),
//! simulated. Each row is a built-in scenario (`schedlab run ipc.reqrep.8`)
//! whose first figure is the row's, with a unit and a direction.
//!
//! ## How the rows are run
//!
//! Like the seed's osbench, on the seed kernel's spawn placement (`rotate`:
//! a new thread goes to the next free core in a rotation that ignores
//! LLCs) with balancing on, on both sides of an A/B, so that the A/B
//! measures wake placement alone. A benchmark's main thread starts where
//! earlier rows left it: a CPU drawn from the seed, as a boot would. Each
//! row runs a few milliseconds of simulated time over many rounds; its
//! figure is the median (or the stated percentile) over the rounds.
//!
//! ## What each row assumes (where the seed does not say)
//!
//! * `ipc.reqrep.*`, `ipc.reqrep_handle.8`, `fs.disk.read_4k_at`: the pair
//!   starts split across the LLCs, each side on a CPU of its LLC drawn from
//!   the seed, neither pinned: the layout the rotation gave every base boot
//!   of the seed's ab7. `reqrep_handle` carries a handle the server
//!   installs and drops: 1 µs of server work per call (an assumption).
//!   The disk read is 4 µs of device time completed by an interrupt on
//!   cpu0, whose wake names no waker (an assumption: a fast NVMe read).
//! * `pipe.throughput.N`: each of 7 rounds, the main thread (the reader)
//!   spawns a fresh writer, which writes 1 MiB in N-byte writes and exits;
//!   the reader reads it and joins the writer. GB/s over the whole run.
//! * `pingpong.*.cross_core`: two threads pinned on two cores of one LLC
//!   (cpu1 and cpu2 where the machine has them so, as the seed's rows;
//!   else the first two cores' first CPUs) trade a byte (pipes) or a
//!   futex, 2000 round trips.
//! * `wake.storm.call.wN`: the main thread calls N server threads it spawned,
//!   round robin, 512 calls in all; µs per call.
//! * `wake.storm.drain.wN`: the main thread wakes N waiting threads at once
//!   (one futex), each works 2 µs and reports on a pipe, and the main thread
//!   waits for all N; µs per round, 32 rounds.
//! * `thread.spawn_join.default`: spawn a thread that exits at once, join
//!   it; 200 times; µs per spawn and join.
//! * `work.build_shaped.j16`: a parent spawns 16 children at a time that
//!   compute 200 to 500 µs (child i: 200 + 20 i) and exit, and waits for
//!   each exit as make does (`join_any`: any child, each exit wakes it);
//!   each child is a process of its own (make forks and execs its jobs);
//!   4 batches; µs for the build.
//! * `hackbench.pipe.gN`: rt-tests' hackbench in pipe mode (the `hackbench`
//!   built-in, `crate::field`) at a size the default machine runs in a few
//!   simulated milliseconds: N groups of 20 fds; ms, what it prints as Time.
//!   Every child is a process of its own (`fork()`, the tool's default).
//! * `memory.stream`: the `stream` built-in with half as many threads as
//!   the machine has CPUs (one per core on SMT machines), 40 kernels of
//!   1 ms: 40 ms simulated, four cache-aware epochs. Upstream saw no change
//!   on stream; this row is the negative control.
//! * `hackbench.thread.g1.f4`, `hackbench.thread.g4.f4`: `hackbench -T`,
//!   every child a thread of one process, at the sizes of upstream's
//!   cache-aware runs (one group over a few fds): 8 threads, which fit
//!   an LLC of 16 CPUs (genoa-96's, epyc-9t24-vm's) but, running at once
//!   on SMT cores, not amd-2x8's of 8 (`invalid_llc_nr()` counts running
//!   threads times the SMT width), and 32, which fit no LLC of 16 CPUs.
//!   Loops are set so each runs tens of simulated milliseconds: several
//!   10 ms cache-aware epochs and LLC-level balance intervals, but not the
//!   top-level balance that, after about a second on spr-2s and genoa-96,
//!   splits the group under `linux`; `--param loops=900000` runs 3–10 s,
//!   where upstream's gain shows (docs/FINDINGS.md). The suite keeps the
//!   short length for its speed.
//! * `schbench.m1.wakeup_p99`, `schbench.m2.t4.wakeup_p99`: schbench's
//!   default mode (the `schbench` built-in) with one message thread and a
//!   worker per CPU, or two of four workers each (half the machine), for
//!   200 ms: the workers' wakeup latency p99, µs.
//! * `wake.periodic.idle`, `time.sleep_late.10ms`: one thread sleeps 1 ms
//!   (100 times) or 10 ms (20 times) on an idle machine; how late it
//!   wakes, µs (p50).
//! * `fair.nice`: a nice-0 and a nice-5 spinner share cpu0 for 200 ms; how
//!   far their CPU-time ratio is from their weights' ratio, percent.
//! * `tail.timer`: 16 threads sleep 200 µs between random gaps while 8
//!   spinners keep half the machine busy; p99 of how late they wake, µs.

use schedlab_sim::sched::{Balance, SpawnPolicy, TaskSpec};
use schedlab_sim::{Figure, Op};
use schedlab_topology::{CpuId, CpuSet};

use crate::ops::{call, futex_wait, futex_wake, lap, lap_start, repeat, reply, run, serve};
use crate::{Builder, Params, ScenarioError};

/// Which way a row is better.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Direction {
    Lower,
    Higher,
}

impl Direction {
    pub fn name(self) -> &'static str {
        match self {
            Direction::Lower => "lower",
            Direction::Higher => "higher",
        }
    }
}

/// What builds a row's scenario into a builder (the row's own
/// parameters read from `Params`).
pub type Build = fn(&Row, &mut Builder, &mut Params) -> Result<(), ScenarioError>;

/// One row of the suite: its name, unit, direction, what it measures, and
/// what builds it. [`ROWS`] is the one table of them.
#[derive(Clone, Copy, Debug)]
pub struct Row {
    pub name: &'static str,
    /// The unit of the row's figure.
    pub unit: &'static str,
    pub direction: Direction,
    pub what: &'static str,
    pub(crate) build: Build,
}

const fn row(
    name: &'static str,
    unit: &'static str,
    direction: Direction,
    what: &'static str,
    build: Build,
) -> Row {
    Row {
        name,
        unit,
        direction,
        what,
        build,
    }
}

use Direction::{Higher, Lower};

/// Every row, in the suite's order.
pub const ROWS: &[Row] = &[
    row("ipc.reqrep.8", "µs", Lower, "request/reply, 8 B each way, started split across the LLCs: round trip p50", reqrep),
    row("ipc.reqrep.4096", "µs", Lower, "request/reply, 4 KiB each way, started split: round trip p50", reqrep),
    row("ipc.reqrep.65536", "µs", Lower, "request/reply, 64 KiB each way, started split: round trip p50", reqrep),
    row("ipc.reqrep_handle.8", "µs", Lower, "request/reply carrying a handle (1 µs of server work), started split: round trip p50", reqrep_handle),
    row("fs.disk.read_4k_at", "µs", Lower, "a client reads 4 KiB from a file server that reads the disk (completion by interrupt), started split: p50", disk_read),
    row("pipe.throughput.256", "GB/s", Higher, "a fresh writer thread each round writes 1 MiB in 256 B writes to the main thread", pipe_throughput),
    row("pipe.throughput.4096", "GB/s", Higher, "the same in 4 KiB writes", pipe_throughput),
    row("pipe.throughput.16384", "GB/s", Higher, "the same in 16 KiB writes", pipe_throughput),
    row("pipe.throughput.65536", "GB/s", Higher, "the same in 64 KiB writes", pipe_throughput),
    row("pingpong.pipe.cross_core", "µs", Lower, "a byte back and forth over two pipes, threads pinned on cpu1 and cpu2: round trip p50", pingpong_pipe),
    row("pingpong.futex.cross_core", "µs", Lower, "futex ping-pong, threads pinned on cpu1 and cpu2: round trip p50", pingpong_futex),
    row("wake.storm.call.w1", "µs", Lower, "the main thread calls 1 server thread: per call p50", storm_call),
    row("wake.storm.call.w4", "µs", Lower, "the main thread calls 4 server threads round robin: per call p50", storm_call),
    row("wake.storm.call.w64", "µs", Lower, "the main thread calls 64 server threads round robin: per call p50", storm_call),
    row("wake.storm.drain.w1", "µs", Lower, "the main thread wakes 1 waiter and waits for it to drain: per round p50", storm_drain),
    row("wake.storm.drain.w4", "µs", Lower, "... 4 waiters at once: per round p50", storm_drain),
    row("wake.storm.drain.w16", "µs", Lower, "... 16 waiters at once: per round p50", storm_drain),
    row("wake.storm.drain.w64", "µs", Lower, "... 64 waiters at once: per round p50", storm_drain),
    row("thread.spawn_join.default", "µs", Lower, "spawn a thread that exits at once and join it: p50", spawn_join),
    row("work.build_shaped.j16", "µs", Lower, "a parent runs 4 batches of 16 children (200-500 µs each), waiting for each exit: the build", build_shaped),
    row("wake.periodic.idle", "µs", Lower, "a 1 ms periodic sleep on an idle machine: how late it wakes, p50", sleep_late),
    row("time.sleep_late.10ms", "µs", Lower, "a 10 ms sleep on an idle machine: how late it wakes, p50", sleep_late),
    row("fair.nice", "%", Lower, "nice 0 against nice 5 on one CPU: CPU-time ratio off the weights' ratio", fair_nice),
    row("tail.timer", "µs", Lower, "200 µs sleeps of 16 threads beside 8 spinners: how late they wake, p99", tail_timer),
    row("hackbench.pipe.g1", "ms", Lower, "hackbench -p: 1 group of 20 senders and 20 receivers, 50 loops of 100 B: Time", hackbench_g1),
    row("hackbench.pipe.g4", "ms", Lower, "hackbench -p: 4 groups (160 threads), 25 loops: Time", hackbench_g4),
    row("hackbench.thread.g1.f4", "ms", Lower, "hackbench -p -T: 1 group of 4 senders and 4 receivers, threads of one process (fewer than an LLC of 16 CPUs holds), 10000 loops: Time", hackbench_thread_g1),
    row("hackbench.thread.g4.f4", "ms", Lower, "hackbench -p -T: 4 groups of 4 and 4 (32 threads of one process, wider than an LLC of 16 CPUs), 2500 loops: Time", hackbench_thread_g4),
    row("schbench.m1.wakeup_p99", "µs", Lower, "schbench: 1 message thread waking a worker per CPU: wakeup latency p99", schbench_m1),
    row("schbench.m2.t4.wakeup_p99", "µs", Lower, "schbench: 2 message threads of 4 workers (half the machine): wakeup latency p99", schbench_m2),
    row("locality.shared_workers", "µs", Lower, "a dispatcher wakes 4 workers of one process sharing 4 MiB of written data, worker i starting in LLC i: item p50", locality_row),
    row("locality.split_pairs", "µs", Lower, "one process of 4 request/reply pairs, each client starting in LLC 0 and its server in LLC 1, unpinned: round trip p50", locality_row),
    row("locality.server_clients", "µs", Lower, "one process: a server and a client starting in each LLC (up to 4), unpinned: call p50", locality_row),
    row("locality.llc_overflow", "µs", Lower, "two processes of 2 threads with 12 MiB of shared data each, free to go anywhere: round p50", locality_row),
    row("memory.stream", "µs", Lower, "stream under OpenMP, half as many threads as CPUs, nothing shared: kernel p50 (the negative control: every policy should read alike)", stream_half),
    row("locality.busy_process", "µs", Lower, "one process of one and a half LLCs' worth of busy threads, started scattered: round p50", locality_row),
];

/// The row named `name`.
pub fn find(name: &str) -> Option<&'static Row> {
    ROWS.iter().find(|r| r.name == name)
}

fn one(c: usize) -> Option<CpuSet> {
    Some(CpuSet::single(CpuId::new(c)))
}

fn p50(metric: &str) -> Figure {
    Figure::LapP50Us {
        metric: metric.into(),
    }
}

fn late(metric: &str, expected_ns: u64, percentile: f64) -> Figure {
    Figure::LapLateUs {
        metric: metric.into(),
        expected_ns,
        percentile,
    }
}

/// The machine's first two LLCs, a split pair's two sides.
fn split_sides(b: &Builder) -> Result<(CpuSet, CpuSet), ScenarioError> {
    let t = b.topology();
    let llcs = t.llcs();
    if llcs.len() < 2 {
        return Err(ScenarioError(format!(
            "this row starts a pair split across two LLCs, and {} has one (try --topology amd-2x8)",
            t.name()
        )));
    }
    Ok((llcs[0].cpus, llcs[1].cpus))
}

/// A client and a server that start split across the LLCs: the client
/// calls with `req` bytes, the server works `work_ns` and replies `resp`.
fn split_pair(
    b: &mut Builder,
    rounds: u64,
    req: u64,
    resp: u64,
    server_body: Vec<Op>,
) -> Result<(), ScenarioError> {
    let (a, z) = split_sides(b)?;
    let first = |s: CpuSet| s.iter().next().expect("an LLC has CPUs").index();
    b.task(
        "client",
        first(a),
        None,
        TaskSpec::fair(0),
        vec![repeat(
            rounds,
            vec![lap_start("op"), call("p", req), lap("op")],
        )],
    )
    .start_in(a);
    let mut body = vec![serve("p")];
    body.extend(server_body);
    body.push(reply(resp));
    b.task(
        "server",
        first(z),
        None,
        TaskSpec::fair(0),
        vec![repeat(rounds, body)],
    )
    .start_in(z);
    b.figure("op_us", p50("op"));
    Ok(())
}

/// Two threads pinned on cpu1 and cpu2 trading turns: `ping` runs its two
/// ops per round trip (timed), `pong` its two.
/// Two CPUs on different cores of one LLC: cpu1 and cpu2 where the
/// machine has them so (the seed's pair), else the first CPUs of the first
/// two cores of the first LLC that has two (cpu0 and cpu1 on a 2-CPU
/// machine); cpu1 and cpu2 regardless when no LLC has two cores.
fn cross_core_pair(t: &schedlab_topology::Topology) -> (usize, usize) {
    use schedlab_topology::{CpuId, Level};
    let fits = |a: usize, b: usize| {
        a.max(b) < t.num_cpus() && t.level_between(CpuId::new(a), CpuId::new(b)) == Level::Llc
    };
    if fits(1, 2) {
        return (1, 2);
    }
    for core in t.cores() {
        let Some(a) = core.iter().next() else {
            continue;
        };
        let other = t
            .cores()
            .iter()
            .filter_map(|c| c.iter().next())
            .find(|&b| b > a && fits(a.index(), b.index()));
        if let Some(b) = other {
            return (a.index(), b.index());
        }
    }
    (1, 2)
}

fn pingpong(b: &mut Builder, rounds: u64, ping: [Op; 2], pong: [Op; 2]) {
    let [p1, p2] = ping;
    let (c1, c2) = cross_core_pair(b.topology());
    b.task(
        "ping",
        c1,
        one(c1),
        TaskSpec::fair(0),
        vec![repeat(rounds, vec![lap_start("rtt"), p1, p2, lap("rtt")])],
    );
    b.task(
        "pong",
        c2,
        one(c2),
        TaskSpec::fair(0),
        vec![repeat(rounds, pong.to_vec())],
    );
    b.figure("rtt_us", p50("rtt"));
}

/// The main thread: starts on a CPU drawn from the seed.
fn main_thread(b: &mut Builder, program: Vec<Op>) {
    let all = *b.topology().cpus();
    b.task("main", 0, None, TaskSpec::fair(0), program)
        .start_in(all);
}

/// The `locality.*` rows: the scenarios where aggregating a process in one
/// LLC is the question (at wake or in balance), sized for a suite row and
/// reporting its first figure.
fn locality_row(r: &Row, b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let set = |p: &mut Params, k: &str, v: String| p.set_default(k, v);
    match r.name {
        "locality.shared_workers" => {
            set(p, "placement", "scattered".into());
            set(p, "workers", "4".into());
            set(p, "items", "400".into());
            crate::locality::shared_workers(b, p)
        }
        "locality.split_pairs" => crate::locality::split_pairs(b, p),
        "locality.server_clients" => crate::locality::server_clients(b, p),
        "locality.llc_overflow" => {
            set(p, "placement", "free".into());
            set(p, "rounds", "400".into());
            crate::locality::llc_overflow(b, p)
        }
        "locality.busy_process" => {
            let llc = b.topology().llcs()[0].cpus.weight() as u64;
            set(p, "threads", (llc * 3 / 2).to_string());
            set(p, "rounds", "100".into());
            crate::locality::busy_process(b, p)
        }
        n => Err(ScenarioError(format!("no row {n:?}"))),
    }
}

/// Builds the row `r` into `b`: the suite's setup (the seed kernel's
/// spawn rule, balancing on, 500 ms at most), then the row's own builder.
pub(crate) fn build(r: &Row, b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    b.config().spawn = SpawnPolicy::Rotate;
    b.config().balance = Balance::ON;
    b.run_ns(500_000_000);
    (r.build)(r, b, p)
}

/// The size a row's name ends with (`ipc.reqrep.4096`: 4096; 8 if none).
fn size(name: &str) -> u64 {
    name.rsplit('.')
        .next()
        .and_then(|x| x.parse().ok())
        .unwrap_or(8)
}

/// The width a row's name ends with (`wake.storm.call.w4`: 4; 1 if none).
fn width(name: &str) -> u64 {
    name.rsplit(".w")
        .next()
        .and_then(|x| x.parse().ok())
        .unwrap_or(1)
}

fn hackbench_g1(_: &Row, b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    crate::field::hackbench(b, p, (1, 20, 50))
}

fn hackbench_g4(_: &Row, b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    crate::field::hackbench(b, p, (4, 20, 25))
}

fn hackbench_thread_g1(_: &Row, b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    crate::field::hackbench_in(b, p, (1, 4, 10_000), "thread")
}

fn hackbench_thread_g4(_: &Row, b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    crate::field::hackbench_in(b, p, (4, 4, 2_500), "thread")
}

fn stream_half(_: &Row, b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let half = (b.topology().num_cpus() as u64 / 2).max(1);
    crate::field::stream(b, p, half)
}

fn schbench_m1(_: &Row, b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let cpus = b.topology().num_cpus() as u64;
    crate::field::schbench(b, p, (1, cpus), "wakeup_p99_us")
}

fn schbench_m2(_: &Row, b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    crate::field::schbench(b, p, (2, 4), "wakeup_p99_us")
}

fn reqrep(r: &Row, b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let bytes = size(r.name);
    let rounds: u64 = p.get("rounds", if bytes >= 65536 { 200 } else { 400 })?;
    split_pair(b, rounds, bytes, bytes, vec![])
}

fn reqrep_handle(_: &Row, b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let rounds: u64 = p.get("rounds", 400)?;
    split_pair(b, rounds, 8, 8, vec![run(1_000)])
}

fn disk_read(_: &Row, b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let rounds: u64 = p.get("rounds", 400)?;
    let io: u64 = p.get("io_ns", 4_000)?;
    split_pair(b, rounds, 64, 4096, vec![Op::Io(io)])
}

fn pipe_throughput(r: &Row, b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let chunk = size(r.name);
    let rounds: u64 = p.get("rounds", 7)?;
    let total: u64 = p.get("bytes", 1 << 20)?;
    let writes = total.div_ceil(chunk);
    let w = |pipe: &str| Op::PipeWrite {
        pipe: pipe.into(),
        bytes: chunk,
    };
    b.program("writer", vec![repeat(writes, vec![w("p")]), Op::Exit]);
    let read = vec![
        Op::PipeRead {
            pipe: "p".into(),
            bytes: chunk,
        },
        Op::Count {
            metric: "bytes".into(),
            n: chunk,
        },
    ];
    let round = vec![
        Op::Spawn {
            program: "writer".into(),
        },
        repeat(writes, read),
        Op::Join,
    ];
    main_thread(b, vec![repeat(rounds, round)]);
    b.figure(
        "gbps",
        Figure::PerNs {
            metric: "bytes".into(),
        },
    );
    Ok(())
}

fn pingpong_pipe(_: &Row, b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let rounds: u64 = p.get("rounds", 2000)?;
    let w = |pipe: &str| Op::PipeWrite {
        pipe: pipe.into(),
        bytes: 1,
    };
    let r = |pipe: &str| Op::PipeRead {
        pipe: pipe.into(),
        bytes: 1,
    };
    pingpong(b, rounds, [w("a"), r("b")], [r("a"), w("b")]);
    Ok(())
}

fn pingpong_futex(_: &Row, b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let rounds: u64 = p.get("rounds", 2000)?;
    pingpong(
        b,
        rounds,
        [futex_wake("a", 1), futex_wait("b")],
        [futex_wait("a"), futex_wake("b", 1)],
    );
    Ok(())
}

fn storm_call(r: &Row, b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let w = width(r.name);
    let calls: u64 = p.get("calls", 512)?;
    let per = calls.div_ceil(w);
    let mut main = Vec::new();
    for i in 0..w {
        let name = format!("server{i}");
        b.program(
            &name,
            vec![repeat(per, vec![serve(&format!("s{i}")), reply(8)])],
        );
        main.push(Op::Spawn { program: name });
    }
    let round: Vec<Op> = (0..w)
        .flat_map(|i| [lap_start("call"), call(&format!("s{i}"), 8), lap("call")])
        .collect();
    main.push(repeat(per, round));
    main.extend((0..w).map(|_| Op::Join));
    main_thread(b, main);
    b.figure("call_us", p50("call"));
    Ok(())
}

fn storm_drain(r: &Row, b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let w = width(r.name);
    let rounds: u64 = p.get("rounds", 32)?;
    let work: u64 = p.get("work_ns", 2_000)?;
    let report = Op::PipeWrite {
        pipe: "done".into(),
        bytes: 1,
    };
    b.program(
        "waiter",
        vec![repeat(rounds, vec![futex_wait("go"), run(work), report])],
    );
    let mut main: Vec<Op> = (0..w)
        .map(|_| Op::Spawn {
            program: "waiter".into(),
        })
        .collect();
    main.push(repeat(
        rounds,
        vec![
            lap_start("round"),
            futex_wake("go", w as u32),
            Op::PipeRead {
                pipe: "done".into(),
                bytes: w,
            },
            lap("round"),
        ],
    ));
    main.extend((0..w).map(|_| Op::Join));
    main_thread(b, main);
    b.figure("round_us", p50("round"));
    Ok(())
}

fn spawn_join(_: &Row, b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let rounds: u64 = p.get("rounds", 200)?;
    b.program("child", vec![Op::Exit]);
    let round = vec![
        lap_start("spawn_join"),
        Op::Spawn {
            program: "child".into(),
        },
        Op::Join,
        lap("spawn_join"),
    ];
    main_thread(b, vec![repeat(rounds, round)]);
    b.figure("spawn_join_us", p50("spawn_join"));
    Ok(())
}

fn build_shaped(_: &Row, b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let batches: u64 = p.get("batches", 4)?;
    let mut batch = Vec::new();
    for i in 0..16u64 {
        let name = format!("job{i}");
        b.program(&name, vec![run(200_000 + 20_000 * i), Op::Exit]);
        // make forks (and execs) each job: a process of its own.
        batch.push(Op::Fork { program: name });
    }
    batch.push(repeat(16, vec![Op::JoinAny]));
    main_thread(
        b,
        vec![lap_start("build"), repeat(batches, batch), lap("build")],
    );
    b.figure("build_us", p50("build"));
    Ok(())
}

fn sleep_late(r: &Row, b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let (ns, n) = if r.name == "wake.periodic.idle" {
        (1_000_000, 100)
    } else {
        (10_000_000, 20)
    };
    let rounds: u64 = p.get("rounds", n)?;
    main_thread(
        b,
        vec![repeat(
            rounds,
            vec![lap_start("sleep"), Op::Sleep(ns), lap("sleep")],
        )],
    );
    b.figure("late_us", late("sleep", ns, 50.0));
    Ok(())
}

fn fair_nice(_: &Row, b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let ms: u64 = p.get("spin_ms", 200)?;
    b.run_ns(ms * 1_000_000);
    for (name, nice) in [("nice0", 0), ("nice5", 5)] {
        b.task(
            name,
            0,
            one(0),
            TaskSpec::fair(nice),
            vec![run(u64::MAX / 4)],
        );
    }
    b.figure(
        "share_error_pct",
        Figure::ShareErrorPct {
            a: "nice0".into(),
            nice_a: 0,
            b: "nice5".into(),
            nice_b: 5,
        },
    );
    Ok(())
}

fn tail_timer(_: &Row, b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let rounds: u64 = p.get("rounds", 200)?;
    let n = b.topology().num_cpus();
    for i in 0..n / 2 {
        b.task(
            &format!("spin{i}"),
            2 * i,
            None,
            TaskSpec::fair(0),
            vec![run(u64::MAX / 4)],
        );
    }
    let gap = Op::RandomSleep {
        min: 10_000,
        max: 300_000,
    };
    let round = vec![gap, lap_start("sleep"), Op::Sleep(200_000), lap("sleep")];
    for i in 0..16 {
        b.task(
            &format!("sleeper{i}"),
            i % n,
            None,
            TaskSpec::fair(0),
            vec![repeat(rounds, round.clone())],
        );
    }
    // The spinners never end: stop when the sleepers would have.
    b.run_ns(rounds * 400_000);
    b.figure("late_p99_us", late("sleep", 200_000, 99.0));
    Ok(())
}
