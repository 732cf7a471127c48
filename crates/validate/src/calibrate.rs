//! `schedlab calibrate`: measure this machine with microbenchmarks run for
//! real, fit the cost model to them: a cost file ([`crate::costs`]).
//!
//! The microbenchmarks are bare ([`schedlab_real::bare`]): the system
//! calls a benchmark nobody here wrote makes, with nothing of our
//! executor around them, so the file describes the machine and not the
//! executor's own overhead. Where a tool measures the same thing (perf's
//! `bench sched pipe`, rt-tests' `cyclictest`) it runs too and its figure
//! is printed beside ours, a check of the bare benchmark.
//!
//! ## What is measured, and the field each sets
//!
//! | measurement | how | beside | sets |
//! |---|---|---|---|
//! | a cache line handed off, per class of CPU pair the machine has | two threads pinned to the pair bounce one atomic word: half the round trip | | `line_ns.{smt,llc,node,machine}` (directly) |
//! | memory bandwidth | one thread copies 256 MiB | | `memory_bytes_per_ns` (directly) |
//! | timer lateness | a 1 ms `clock_nanosleep`, 400 times: how late it returns | `cyclictest -q -r -i 1000` (its Avg) | `timer_late` (min, mean; directly) |
//! | a pipe's system calls | one thread writes 4 bytes into a pipe and reads them back: two system calls that wake nobody, 1000 times | | `syscall_ns` (half the median; directly) |
//! | a pipe round trip on one CPU | perf's `sched pipe`: two processes pinned to one CPU, a 4-byte int each way | `taskset -c 0 perf bench sched pipe` (µs per op: a mean) | `context_switch_ns` (fitted) |
//! | a futex wake to running, the wakee's CPU idle | a futex ping-pong of two threads across a pair of CPUs | | `wake_from_idle_ns[0]` (fitted) |
//! | a futex wake to running, the wakee's CPU busy | the same with a spinner on the wakee's CPU | | `ipi_ns` (fitted) |
//! | thread spawn and join | `pthread_create` of a thread that spins 1 µs, and `pthread_join`, 300 times | | `spawn_ns` (fitted) |
//! | a pipe stream across a pair | a process on one CPU writes 100-byte messages that a process on the other reads, as one hackbench sender and receiver: each 1000 reads | | `lines_per_handoff` (fitted) |
//! | a pipe round trip, anywhere | perf's `sched pipe`, unpinned | `perf bench sched pipe` | nothing: recorded as a check |
//!
//! "Fitted" means: the microbenchmark is simulated on this machine's
//! topology under `linux` with every other field held, and the field is
//! found by bisection (in log space) so that the simulated median equals
//! the real one. Fields are fitted in the order of the table, each with
//! the ones before it set. A field whose simulated median does not reach
//! the real one anywhere in its range (50 ns..2 ms) is set to the end of
//! the range nearest it, and the file says so: the other costs of the
//! path already take more (or less) than the machine does. Fields
//! nothing here measures (`block_ns`, `pass_ns`, `smt_slowdown`,
//! bandwidths between
//! caches, refill and footprint sizes, `jitter`, `irq_ns`) keep their
//! estimates. A pair class the machine lacks (no SMT, one LLC, one node)
//! keeps its estimate too.
//!
//! Calibration never runs the workloads `validate` checks: what
//! `validate` shows are predictions.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use schedlab_real::bare::{self, Pin};
use schedlab_real::{sys, Machine};
use schedlab_scenarios::{file, Params};
use schedlab_sim::figures::percentile;
use schedlab_sim::{CostModel, Lateness, Registry, Sim};
use schedlab_topology::{CpuId, Level, Topology};

use crate::clients::{cyclictest_avg_ns, perf_pipe_us};
use crate::costs::{today, CostsFile, Measurement, Peer, Provenance, Shape};
use crate::{Error, Progress};

/// A microbenchmark's real distribution, ns.
struct Dist {
    median: f64,
    p25: f64,
    p75: f64,
    mean: f64,
    samples: usize,
}

impl Dist {
    fn of(v: &[u64]) -> Dist {
        Dist {
            median: percentile(v, 0.5),
            p25: percentile(v, 0.25),
            p75: percentile(v, 0.75),
            mean: v.iter().sum::<u64>() as f64 / v.len().max(1) as f64,
            samples: v.len(),
        }
    }
}

/// A CPU pair at each level the machine has (`Same`: one CPU twice).
pub fn pairs(t: &Topology) -> Vec<(Level, CpuId, CpuId)> {
    let mut out = vec![(Level::Same, CpuId::new(0), CpuId::new(0))];
    for level in [Level::Smt, Level::Llc, Level::Node, Level::Machine] {
        let n = t.num_cpus();
        let found = (1..n)
            .map(CpuId::new)
            .find(|&b| t.level_between(CpuId::new(0), b) == level);
        if let Some(b) = found {
            out.push((level, CpuId::new(0), b));
        }
    }
    out
}

/// The line-handoff microbenchmark: two threads on `a` and `b` bounce one
/// word `rounds` times; one-way latency per bounce, ns. Both are threads
/// of their own, so the caller's mask is left alone.
fn line_bounce(a: usize, b: usize, rounds: u64) -> Vec<u64> {
    let word = Arc::new(AtomicU64::new(0));
    let w = word.clone();
    let pong = std::thread::spawn(move || {
        let _ = sys::set_affinity(&[b]);
        for i in 0..rounds {
            while w.load(Ordering::Acquire) != 2 * i + 1 {
                std::hint::spin_loop();
            }
            w.store(2 * i + 2, Ordering::Release);
        }
    });
    let ping = std::thread::spawn(move || {
        let _ = sys::set_affinity(&[a]);
        let mut laps = Vec::with_capacity(rounds as usize);
        for i in 0..rounds {
            let t = sys::now();
            word.store(2 * i + 1, Ordering::Release);
            while word.load(Ordering::Acquire) != 2 * i + 2 {
                std::hint::spin_loop();
            }
            laps.push((sys::now() - t) / 2);
        }
        laps
    });
    pong.join().expect("the bouncing thread");
    ping.join().expect("the timing thread")
}

/// One thread's copy bandwidth over 256 MiB, bytes per ns (best of 3).
fn copy_bandwidth() -> f64 {
    let n = 256 << 20;
    let src = vec![1u8; n];
    let mut dst = vec![0u8; n];
    (0..3)
        .map(|_| {
            let t = sys::now();
            dst.copy_from_slice(&src);
            std::hint::black_box(&dst);
            n as f64 / (sys::now() - t).max(1) as f64
        })
        .fold(0.0, f64::max)
}

/// A fitted microbenchmark: its bare measurement, a tool's figure for the
/// same where one exists, and the scenario that simulates it (two or three
/// tasks, a lap per round).
struct Bench {
    name: String,
    sets: &'static str,
    text: String,
    real: Box<dyn Fn() -> std::io::Result<Vec<u64>>>,
    peer: Option<Box<dyn Fn() -> Option<Peer>>>,
    /// Where the field is searched.
    range: (f64, f64),
}

fn task(name: &str, cpu: usize, program: &str) -> String {
    format!("[[task]]\nname = \"{name}\"\ncpu = {cpu}\nmask = \"{cpu}\"\nprogram = {program}\n")
}

fn pipe_rtt(a: usize, b: usize, n: u64) -> String {
    let ping = format!("[{{ loop = {{ n = {n}, body = [{{ pipe_write = {{ pipe = \"a\", bytes = 4 }} }}, {{ pipe_read = {{ pipe = \"b\", bytes = 4 }} }}, {{ lap = {{ metric = \"rtt\" }} }}] }} }}]");
    let pong = format!("[{{ loop = {{ n = {n}, body = [{{ pipe_read = {{ pipe = \"a\", bytes = 4 }} }}, {{ pipe_write = {{ pipe = \"b\", bytes = 4 }} }}] }} }}]");
    task("ping", a, &ping) + &task("pong", b, &pong)
}

fn futex_rtt(a: usize, b: usize, n: u64, busy: bool) -> String {
    // A call and its reply: one futex wake each way, and neither side can
    // run a round ahead (two generation futexes can: once one side is a
    // round ahead, every wait finds its word moved and neither blocks).
    let ping = format!("[{{ loop = {{ n = {n}, body = [{{ call = {{ port = \"p\", bytes = 8 }} }}, {{ lap = {{ metric = \"rtt\" }} }}] }} }}]");
    let pong = format!("[{{ loop = {{ n = {n}, body = [{{ serve = {{ port = \"p\" }} }}, {{ reply = {{ bytes = 8 }} }}] }} }}]");
    let mut t = task("ping", a, &ping) + &task("pong", b, &pong);
    if busy {
        // Busy for longer than the ping-pong takes on a slow VM (~100 us a
        // round), then done: the run ends without waiting for a deadline.
        let spin = format!(
            "[{{ loop = {{ n = {}, body = [{{ run = 100000 }}] }} }}]",
            n * 2
        );
        t += &task("spinner", b, &spin);
    }
    t
}

/// hackbench's sender and receiver, one of each: `batches` × 1000
/// messages of 100 B from `a` to `b`, a lap per 1000 reads.
fn pipe_stream(a: usize, b: usize, batches: u64) -> String {
    let sender = format!(
        "[{{ loop = {{ n = {}, body = [{{ pipe_write = {{ pipe = \"s\", bytes = 100 }} }}] }} }}]",
        batches * 1000
    );
    let receiver = format!("[{{ loop = {{ n = {batches}, body = [{{ lap_start = {{ metric = \"rtt\" }} }}, {{ loop = {{ n = 1000, body = [{{ pipe_read = {{ pipe = \"s\", bytes = 100 }} }}] }} }}, {{ lap = {{ metric = \"rtt\" }} }}] }} }}]");
    task("sender", a, &sender) + &task("receiver", b, &receiver)
}

fn spawn_join(n: u64) -> String {
    format!(
        "[programs]\nchild = [{{ run = 1000 }}]\n{}",
        task("parent", 0, &format!("[{{ loop = {{ n = {n}, body = [{{ lap_start = {{ metric = \"rtt\" }} }}, {{ spawn = {{ program = \"child\" }} }}, \"join\", {{ lap = {{ metric = \"rtt\" }} }}] }} }}]"))
    )
}

/// The scenario of `text` on `machine` under `linux`.
fn scenario(
    name: &str,
    text: &str,
    machine: &Topology,
    reg: &Registry,
) -> Result<schedlab_scenarios::Scenario, Error> {
    let params =
        Params::new([("policy".to_string(), "linux".to_string())]).with_registry(reg.clone());
    let full =
        format!("name = \"{name}\"\nrun_ms = 60000\n[topology]\npreset = \"amd-2x8\"\n{text}");
    file::load_str_on(
        &full,
        std::path::Path::new(name),
        params,
        Some(machine.clone()),
    )
    .map_err(|e| Error::Input(format!("calibrate's own scenario {name}: {e}")))
}

/// The simulated median lap of `text` under `cost`, over seeds 1..=3.
pub fn sim_median(s: &schedlab_scenarios::Scenario, cost: &CostModel) -> f64 {
    let mut spec = s.spec.clone();
    spec.cost = *cost;
    let mut all = Vec::new();
    for seed in 1..=3 {
        let o = Sim::new(&spec, seed).run();
        all.extend(o.laps.get("rtt").cloned().unwrap_or_default());
    }
    percentile(&all, 0.5)
}

/// The value in `lo..=hi` whose response `f` equals `target`: the first
/// crossing on a grid of 16 points even in log space, then bisection
/// inside it; `None` when no point of the grid reaches the target from
/// below. `f` need not rise everywhere: a simulated median is a median of
/// a whole schedule, and nothing promises it rises with one cost, so the
/// range's far end alone does not say what lies between. (A response
/// that fell flat once, whatever the cost, was the scenario's, not the
/// fit's: see `futex_rtt`.)
pub fn fit(lo: f64, hi: f64, target: f64, f: impl Fn(f64) -> f64) -> Option<f64> {
    const GRID: usize = 16;
    let (llo, lhi) = (lo.ln(), hi.ln());
    let at = |i: usize| llo + (lhi - llo) * i as f64 / (GRID - 1) as f64;
    if target < f(lo) {
        return None;
    }
    let crossing = (1..GRID).find(|&i| f(at(i).exp()) >= target)?;
    let (mut a, mut b) = (at(crossing - 1), at(crossing));
    for _ in 0..20 {
        let m = (a + b) / 2.0;
        if f(m.exp()) < target {
            a = m;
        } else {
            b = m;
        }
    }
    Some(((a + b) / 2.0).exp())
}

/// Sets the fitted field `sets` of `c` to `v` (ns, rounded; lines as
/// they are).
fn set_field(c: &mut CostModel, sets: &str, v: f64) {
    let ns = v.round() as u64;
    match sets {
        "context_switch_ns" => c.context_switch_ns = ns,
        "wake_from_idle_ns[0]" => c.wake_from_idle_ns[0] = ns,
        "ipi_ns" => c.ipi_ns = ns,
        "spawn_ns" => c.spawn_ns = ns,
        "lines_per_handoff" => c.lines_per_handoff = v,
        other => unreachable!("no fitted field {other}"),
    }
}

/// The field `sets` of `c`.
fn get_field(c: &CostModel, sets: &str) -> f64 {
    match sets {
        "context_switch_ns" => c.context_switch_ns as f64,
        "wake_from_idle_ns[0]" => c.wake_from_idle_ns[0] as f64,
        "ipi_ns" => c.ipi_ns as f64,
        "spawn_ns" => c.spawn_ns as f64,
        "lines_per_handoff" => c.lines_per_handoff,
        other => unreachable!("no fitted field {other}"),
    }
}

/// What calibration found: the cost file, and notes on what it kept at
/// its estimate and why.
#[derive(Debug)]
pub struct Calibration {
    pub file: CostsFile,
    pub notes: Vec<String>,
}

impl Calibration {
    /// The cost file's text: a header, the notes as comments, the TOML.
    pub fn text(&self) -> String {
        let mut text = format!(
            "# schedlab calibrate: this machine's costs, fitted to microbenchmarks only.\n# Fields no measurement names below keep their estimates (schedlab_sim::CostModel's docs).\n{}",
            self.notes.iter().map(|n| format!("# {n}\n")).collect::<String>()
        );
        text.push_str(&self.file.to_toml());
        text
    }
}

/// The calibration (module doc) of `machine`, `rounds` round trips per
/// microbenchmark (at least 10).
pub fn calibrate(
    machine: &Topology,
    rounds: u64,
    reg: &Registry,
    progress: &dyn Progress,
) -> Result<Calibration, Error> {
    let info = Machine::read(machine);
    let n = rounds.max(10);
    let mut c = Calibration {
        file: CostsFile {
            measured: Provenance {
                date: today(),
                kernel: info.kernel.clone(),
                cpu_model: info.model.clone(),
                topology: machine.name().to_string(),
                shape: Shape::of(machine),
            },
            cost: CostModel::default(),
            measurements: Vec::new(),
        },
        notes: Vec::new(),
    };
    progress.begin("calibrate", 10);
    line_handoffs(machine, n, &mut c);
    progress.tick();
    let bw = copy_bandwidth();
    c.file.cost.memory_bytes_per_ns = bw;
    c.file.measurements.push(Measurement {
        name: "memory copy, one thread, 256 MiB (best of 3)".into(),
        sets: "memory_bytes_per_ns".into(),
        unit: "bytes/ns".into(),
        median: bw,
        p25: bw,
        p75: bw,
        samples: 3,
        value: bw,
        mean: None,
        peer: None,
    });
    progress.tick();
    timer_lateness(n, &mut c)?;
    progress.tick();
    pipe_syscalls(n, &mut c)?;
    fitted(machine, n, reg, progress, &mut c)?;
    progress.end();
    Ok(c)
}

/// The cache line handed off, per class of CPU pair the machine has: sets
/// `line_ns` directly; a class it lacks keeps its estimate, with a note.
fn line_handoffs(machine: &Topology, n: u64, c: &mut Calibration) {
    let pairs = pairs(machine);
    for &(level, x, y) in pairs.iter().filter(|p| p.0 != Level::Same) {
        let d = Dist::of(&line_bounce(x.index(), y.index(), n * 20));
        let slot = match level {
            Level::Smt => &mut c.file.cost.line_ns.smt,
            Level::Llc => &mut c.file.cost.line_ns.llc,
            Level::Node => &mut c.file.cost.line_ns.node,
            _ => &mut c.file.cost.line_ns.machine,
        };
        *slot = d.median;
        c.file.measurements.push(measure(
            &format!(
                "cache line handed off, {} (cpu{} and cpu{})",
                level.name(),
                x.index(),
                y.index()
            ),
            &format!("line_ns.{}", level_key(level)),
            "ns",
            &d,
            d.median,
        ));
    }
    for level in [Level::Smt, Level::Llc, Level::Node, Level::Machine] {
        if !pairs.iter().any(|p| p.0 == level) {
            c.notes.push(format!(
                "line_ns.{}: no CPU pair at that distance here; kept the estimate",
                level_key(level)
            ));
        }
    }
}

/// How late a 1 ms sleep wakes: sets `timer_late` (min and mean)
/// directly; cyclictest's average beside it when installed.
fn timer_lateness(n: u64, c: &mut Calibration) -> Result<(), Error> {
    let late = bare::sleep_lateness(0, 400.min(n)).map_err(bench_failed("timer lateness"))?;
    let d = Dist::of(&late);
    let mean = d.mean;
    c.file.cost.timer_late = Lateness {
        min_ns: late.iter().copied().min().unwrap_or(0),
        mean_ns: mean as u64,
    };
    let mut m = measure(
        "timer lateness, a 1 ms sleep (sets min and mean)",
        "timer_late",
        "ns",
        &d,
        mean,
    );
    m.mean = Some(mean);
    m.peer = cyclictest_avg_ns(0, 400.min(n)).map(|v| Peer {
        tool: "cyclictest -q -r -i 1000 (Avg)".into(),
        value: v,
    });
    c.file.measurements.push(m);
    Ok(())
}

/// A pipe's write and read, no wake: sets `syscall_ns` (half the median)
/// directly, the cost the simulator charges each pipe or futex call.
fn pipe_syscalls(n: u64, c: &mut Calibration) -> Result<(), Error> {
    let laps = bare::pipe_write_reads(0, n).map_err(bench_failed("a pipe's system calls"))?;
    let d = Dist::of(&laps);
    c.file.cost.syscall_ns = (d.median / 2.0).round() as u64;
    c.file.measurements.push(measure(
        "a pipe's write and read, one thread, no wake (bare)",
        "syscall_ns",
        "ns",
        &d,
        c.file.cost.syscall_ns as f64,
    ));
    Ok(())
}

/// A bare benchmark's failure as calibration's error.
fn bench_failed(what: &str) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::Input(format!("calibrate: {what}: {e}"))
}

/// The range a fitted time is searched in, ns.
const FIT_RANGE: (f64, f64) = (50.0, 2_000_000.0);

/// Loops of perf's `sched pipe` at the least: its figure is a mean over
/// the whole run, the start of its second process included.
const PERF_LOOPS: u64 = 20_000;

/// perf's `sched pipe` figure, ns per round trip, started on `cpu`.
fn perf_pipe(cpu: Option<usize>, n: u64) -> Option<Peer> {
    let tool = match cpu {
        Some(c) => format!("taskset -c {c} perf bench sched pipe -l {n} (usecs/op)"),
        None => format!("perf bench sched pipe -l {n} (usecs/op)"),
    };
    perf_pipe_us(cpu, n).map(|us| Peer {
        tool,
        value: us * 1e3,
    })
}

/// The microbenchmarks whose fields are fitted, in the order of the
/// module doc's table, on CPU pair `other` (none on one CPU).
fn benches(other: Option<(usize, usize)>, n: u64, notes: &mut Vec<String>) -> Vec<Bench> {
    // perf's figure is a mean over its run, process start included: as
    // many loops as its own sensible minimum, for both.
    let loops = n.max(PERF_LOOPS);
    let mut benches = vec![Bench {
        name: "pipe round trip, same CPU (perf's sched pipe, bare)".into(),
        sets: "context_switch_ns",
        text: pipe_rtt(0, 0, n),
        real: Box::new(move || bare::pipe_round_trips(Pin::One(0), loops)),
        peer: Some(Box::new(move || perf_pipe(Some(0), loops))),
        range: FIT_RANGE,
    }];
    match other {
        Some((x, y)) => {
            for (busy, sets, state) in [
                (false, "wake_from_idle_ns[0]", "idle"),
                (true, "ipi_ns", "busy"),
            ] {
                benches.push(Bench {
                    name: format!(
                        "futex wake to running, wakee's CPU {state} (cpu{x} to cpu{y}, bare)"
                    ),
                    sets,
                    text: futex_rtt(x, y, n, busy),
                    real: Box::new(move || bare::futex_round_trips(x, y, n, busy)),
                    peer: None,
                    range: FIT_RANGE,
                });
            }
        }
        None => notes.push(
            "one CPU: no cross-CPU wake to measure; wake_from_idle_ns and ipi_ns kept".into(),
        ),
    }
    let spawns = 300.min(n);
    benches.push(Bench {
        name: "thread spawn and join (pthread_create, bare)".into(),
        sets: "spawn_ns",
        text: spawn_join(spawns),
        real: Box::new(move || bare::spawn_joins(0, spawns)),
        peer: None,
        range: FIT_RANGE,
    });
    if let Some((x, y)) = other {
        let batches = (n / 20).max(10);
        benches.push(Bench {
            name: format!(
                "pipe stream, 1000 messages of 100 B from cpu{x} to cpu{y} (hackbench's sender and receiver, bare)"
            ),
            sets: "lines_per_handoff",
            text: pipe_stream(x, y, batches),
            real: Box::new(move || bare::pipe_stream(x, y, batches, 1000, 100)),
            peer: None,
            range: (0.1, 100.0),
        });
    }
    benches
}

/// The fitted fields, each with the ones before it set, then the pipe
/// round trip across a pair as a check.
fn fitted(
    machine: &Topology,
    n: u64,
    reg: &Registry,
    progress: &dyn Progress,
    c: &mut Calibration,
) -> Result<(), Error> {
    let other = pairs(machine)
        .iter()
        .find(|p| p.0 != Level::Same)
        .map(|p| (p.1.index(), p.2.index()));
    for b in &benches(other, n, &mut c.notes) {
        let laps = (b.real)().map_err(bench_failed(&b.name))?;
        let d = Dist::of(&laps);
        let s = scenario("bench", &b.text, machine, reg)?;
        let cost = c.file.cost;
        let sim = |v: f64| {
            let mut c = cost;
            set_field(&mut c, b.sets, v);
            sim_median(&s, &c)
        };
        let (lo, hi) = b.range;
        let v = match fit(lo, hi, d.median, sim) {
            Some(v) => v,
            None => {
                // Out of reach: the end of the range nearest the target,
                // which leaves the simulation closest to the machine.
                let (end, floor) = if d.median < sim(lo) {
                    (lo, "below")
                } else {
                    (hi, "above")
                };
                c.notes.push(format!(
                    "{}: the real median, {:.0} ns, is {floor} what the simulation reaches with {} anywhere in {lo}..{hi}; set to {end}, the nearest",
                    b.name, d.median, b.sets
                ));
                end
            }
        };
        set_field(&mut c.file.cost, b.sets, v);
        let value = get_field(&c.file.cost, b.sets);
        let mut m = measure(&b.name, b.sets, "ns", &d, value);
        if let Some(peer) = &b.peer {
            m.mean = Some(d.mean);
            m.peer = peer();
        }
        c.file.measurements.push(m);
        progress.tick();
    }
    if other.is_some() {
        let loops = n.max(PERF_LOOPS);
        let laps =
            bare::pipe_round_trips(Pin::Free, loops).map_err(bench_failed("pipe anywhere"))?;
        let d = Dist::of(&laps);
        let mut m = measure(
            "pipe round trip, anywhere (perf's sched pipe, bare; a check)",
            "nothing",
            "ns",
            &d,
            0.0,
        );
        m.mean = Some(d.mean);
        m.peer = perf_pipe(None, loops);
        c.file.measurements.push(m);
    }
    Ok(())
}

fn measure(name: &str, sets: &str, unit: &str, d: &Dist, value: f64) -> Measurement {
    Measurement {
        name: name.into(),
        sets: sets.into(),
        unit: unit.into(),
        median: d.median,
        p25: d.p25,
        p75: d.p75,
        samples: d.samples,
        value,
        mean: None,
        peer: None,
    }
}

fn level_key(l: Level) -> &'static str {
    match l {
        Level::Same | Level::Smt => "smt",
        Level::Llc => "llc",
        Level::Node => "node",
        Level::Machine => "machine",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fit on synthetic measurements gives back the values put in: a
    /// "real" median made by simulating with a known context switch is
    /// fitted back to that context switch.
    #[test]
    fn the_fit_gives_back_the_value_put_in() {
        let reg = Registry::builtin();
        let machine = schedlab_topology::presets::preset("amd-2x8").unwrap();
        for want in [900u64, 2_500, 7_000] {
            let s = scenario("pipe", &pipe_rtt(0, 0, 200), &machine, &reg).unwrap();
            let truth = CostModel {
                context_switch_ns: want,
                ..CostModel::default()
            };
            let target = sim_median(&s, &truth);
            let got = fit(50.0, 2_000_000.0, target, |v| {
                sim_median(
                    &s,
                    &CostModel {
                        context_switch_ns: v as u64,
                        ..CostModel::default()
                    },
                )
            })
            .expect("reachable");
            let err = (got - want as f64).abs() / want as f64;
            assert!(
                err < 0.05,
                "put in {want} ns, fitted {got:.0} ns (target median {target:.0})"
            );
        }
    }

    /// A response that rises then falls again (a simulated path that
    /// turns cheaper when one cost outgrows another) is fitted where it
    /// first crosses the target, though the range's far end lies below it.
    #[test]
    fn the_fit_finds_the_first_crossing_of_a_response_that_falls_again() {
        let f = |v: f64| if v < 1_000.0 { v } else { 2_000.0 - v };
        let v = fit(10.0, 100_000.0, 500.0, f).expect("reached on the way up");
        assert!((v - 500.0).abs() < 1.0, "fitted {v}, expected 500");
    }

    #[test]
    fn an_unreachable_target_is_no_fit() {
        assert_eq!(fit(1.0, 10.0, 100.0, |v| v), None, "above the range");
        assert_eq!(fit(1.0, 10.0, 0.5, |v| v), None, "below the range");
        let v = fit(1.0, 100.0, 42.0, |v| v).unwrap();
        assert!((v - 42.0).abs() < 0.01, "{v}");
    }
}
