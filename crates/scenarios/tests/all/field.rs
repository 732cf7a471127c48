//! The field workloads built in (`hackbench`), held to what the tools do.

use schedlab_scenarios::{catalog, Params};
use schedlab_sim::Sim;

fn params(kv: &[&str]) -> Params {
    Params::parse(&kv.iter().map(|s| s.to_string()).collect::<Vec<_>>()).expect("k=v")
}

/// Every child of every group runs to its end (each receiver reads all
/// `fds * loops` messages: it could not exit otherwise), the clock starts
/// only after every child is ready, and the figure is that one lap.
#[test]
fn hackbench_runs_every_group_to_the_end() {
    let s = catalog::build("hackbench", None, params(&["groups=2", "fds=3", "loops=4"])).unwrap();
    for seed in 1..=3 {
        let o = Sim::new(&s.spec, seed).run();
        let children: Vec<_> = o
            .tasks
            .iter()
            .filter(|(n, _)| n.starts_with("main."))
            .collect();
        assert_eq!(
            children.len(),
            2 * 3 * 2,
            "seed {seed}: 2 groups of 3 senders and 3 receivers"
        );
        assert!(
            children.iter().all(|(_, t)| t.exited_at.is_some()),
            "seed {seed}: every child exits"
        );
        let laps = &o.laps["total"];
        assert_eq!(laps.len(), 1, "seed {seed}: one Time");
        let first_exit = children
            .iter()
            .filter_map(|(_, t)| t.exited_at)
            .min()
            .unwrap();
        let end = o.tasks["main"].exited_at.expect("main exits");
        assert!(
            laps[0] > 0 && laps[0] <= end && end - laps[0] <= first_exit,
            "seed {seed}: the clock starts before the first child finishes and stops at the last reap: lap {} ns, first exit {first_exit}, main's exit {end}",
            laps[0]
        );
        let fig = s.figures[0].1.compute(&o);
        assert!(
            (fig - laps[0] as f64 / 1e6).abs() < 1e-9,
            "total_ms is the lap in ms"
        );
    }
}

/// More loops take longer (not in proportion: the longer the run, the
/// more messages a receiver finds waiting in its pipe at each wake).
#[test]
fn hackbench_time_grows_with_its_loops() {
    let t = |loops: u64| {
        let l = format!("loops={loops}");
        let s = catalog::build("hackbench", None, params(&["groups=1", "fds=8", &l])).unwrap();
        s.figures[0].1.compute(&Sim::new(&s.spec, 1).run())
    };
    let (a, b, c) = (t(20), t(40), t(60));
    assert!(a < b && b < c, "loops 20/40/60: {a:.3}/{b:.3}/{c:.3} ms");
}

#[test]
fn hackbench_rejects_what_it_cannot_run() {
    for bad in ["groups=0", "mode=fibers", "fds=0"] {
        let e = catalog::build("hackbench", None, params(&[bad])).err();
        assert!(e.is_some(), "{bad} must be an error");
    }
}

/// schbench: every worker is spawned and serves requests; a request takes
/// at least its sleep and its work; the wakeup latency is measured from
/// the message thread's wake, so with idle CPUs to spare its median is a
/// wake-to-run time, µs, not a request's ms; and rps is the requests over
/// the run.
#[test]
fn schbench_measures_wake_to_run_and_requests() {
    let s = catalog::build(
        "schbench",
        None,
        params(&["message_threads=2", "workers=3", "run_ms=100"]),
    )
    .unwrap();
    // The work of one request: 5 multiplications of 104 x 104 (256 KiB
    // over 24 B per element pair), 1 ns per multiply-add.
    let work_ns = 5 * 104u64.pow(3);
    for seed in 1..=3 {
        let o = Sim::new(&s.spec, seed).run();
        let workers = o.tasks.keys().filter(|n| n.contains(".m")).count();
        assert_eq!(
            workers,
            6,
            "seed {seed}: 2 x 3 workers: {:?}",
            o.tasks.keys()
        );
        let req = &o.laps["request"];
        let min = *req.iter().min().unwrap();
        assert!(
            min >= work_ns + 100_000,
            "seed {seed}: a request is its 100 µs sleep and {work_ns} ns of work at least, found {min}"
        );
        let wake = &o.laps["wakeup"];
        assert!(
            wake.len() >= req.len(),
            "seed {seed}: a wakeup before every request"
        );
        let fig = |n: &str| {
            let f = &s.figures.iter().find(|(k, _)| k == n).unwrap().1;
            f.compute(&o)
        };
        let p50 = fig("wakeup_p50_us");
        assert!(
            p50 > 0.5 && p50 < 50.0,
            "seed {seed}: 8 threads on 16 CPUs wake in µs: p50 {p50} µs"
        );
        let rps = fig("rps");
        let want = o.counts["requests"] as f64 / (o.end_ns as f64 / 1e9);
        assert!(
            (rps - want).abs() < 1e-6,
            "seed {seed}: rps {rps} = requests over the run {want}"
        );
    }
}

/// One hackbench run's children: (name, process) for each.
fn hackbench_processes(mode: &str, seed: u64) -> (schedlab_sim::Outcome, Vec<(String, String)>) {
    let m = format!("mode={mode}");
    let s = catalog::build(
        "hackbench",
        Some("amd-2x8"),
        params(&[&m, "groups=1", "fds=2", "loops=20000", "policy=linux-cas"]),
    )
    .unwrap();
    let o = Sim::new(&s.spec, seed).run();
    let kids = o
        .tasks
        .iter()
        .filter(|(n, _)| n.starts_with("main."))
        .map(|(n, t)| (n.clone(), t.process.clone()))
        .collect();
    (o, kids)
}

/// `hackbench -T`: every child is a thread of the hackbench process
/// (`create_worker()`'s `pthread_create()`), so cache-aware scheduling
/// scans the process each epoch and keeps a preference (2 senders and 2
/// receivers fit an LLC of amd-2x8's 8 CPUs).
#[test]
fn hackbench_thread_mode_is_one_process_that_cache_aware_scheduling_scans() {
    for seed in 1..=2 {
        let (o, kids) = hackbench_processes("thread", seed);
        assert_eq!(kids.len(), 4, "seed {seed}: 2 senders, 2 receivers");
        for (n, p) in &kids {
            assert_eq!(
                p, "hackbench",
                "seed {seed}: {n} is a thread of hackbench's process"
            );
        }
        let scans = o.counters["cas.scans"];
        assert!(
            scans > 0 && o.counters["cas.invalid"] == 0,
            "seed {seed}: cache-aware scheduling scans the process and finds it fits: scans {scans}, invalid {}",
            o.counters["cas.invalid"]
        );
    }
}

/// hackbench's default mode: every child is `fork()`ed, a process of its
/// own, so cache-aware scheduling finds one thread per process and keeps
/// no preference (`invalid_llc_nr()`): it is inert.
#[test]
fn hackbench_process_mode_forks_processes_that_cache_aware_scheduling_leaves_alone() {
    for seed in 1..=2 {
        let (o, kids) = hackbench_processes("process", seed);
        let distinct: std::collections::BTreeSet<&String> = kids.iter().map(|(_, p)| p).collect();
        assert_eq!(
            distinct.len(),
            4,
            "seed {seed}: four children, four processes: {kids:?}"
        );
        assert!(
            !distinct.contains(&"hackbench".to_string()),
            "seed {seed}: none of them hackbench's own: {kids:?}"
        );
        assert_eq!(
            (o.counters["cas.scans"], o.counters["cas.to_pref"]),
            (0, 0),
            "seed {seed}: no preference, no move toward one"
        );
        assert!(
            o.counters["cas.invalid"] > 0,
            "seed {seed}: the one-thread processes are found invalid: {:?}",
            o.counters
        );
    }
}

/// stream: every thread runs all 4 x ntimes kernels, each ended by the
/// barrier, so thread 0 laps one kernel each time, and a kernel takes at
/// least its run; the threads are one process that shares nothing.
#[test]
fn stream_runs_every_kernel_behind_a_barrier() {
    let s = catalog::build(
        "stream",
        Some("amd-2x8"),
        params(&["threads=6", "ntimes=3", "kernel_us=200"]),
    )
    .unwrap();
    for seed in 1..=2 {
        let o = Sim::new(&s.spec, seed).run();
        let laps = &o.laps["kernel"];
        assert_eq!(laps.len(), 12, "seed {seed}: 4 kernels x 3, one lap each");
        assert!(
            laps.iter().all(|&l| l >= 200_000),
            "seed {seed}: a kernel takes at least its 200 us: {laps:?}"
        );
        let procs: std::collections::BTreeSet<&str> =
            o.tasks.values().map(|t| t.process.as_str()).collect();
        assert_eq!(procs.len(), 1, "seed {seed}: one process: {procs:?}");
        assert!(
            o.tasks.values().all(|t| t.exited_at.is_some()),
            "seed {seed}: all exit"
        );
    }
    assert_eq!(s.spec.processes.get("stream"), Some(&0), "nothing shared");
}

/// perf's `sched pipe`: the first process forks the second (a process of
/// its own), they make `loops` round trips, and `cpu` pins both where
/// `taskset -c` would: no other CPU does any work.
#[test]
fn sched_pipe_forks_its_partner_and_pins_both_where_asked() {
    let s = catalog::build(
        "sched_pipe",
        Some("amd-2x8"),
        params(&["loops=300", "cpu=3", "policy=linux"]),
    )
    .unwrap();
    for seed in 1..=2 {
        let o = Sim::new(&s.spec, seed).run();
        assert_eq!(
            o.laps["rtt"].len(),
            300,
            "seed {seed}: one lap per round trip"
        );
        let (ping, pong) = (&o.tasks["ping"], &o.tasks["ping.pong"]);
        assert_ne!(
            ping.process, pong.process,
            "seed {seed}: the partner is a forked process of its own"
        );
        let busy: Vec<usize> = (0..o.busy_ns.len()).filter(|&c| o.busy_ns[c] > 0).collect();
        assert_eq!(
            busy,
            vec![3],
            "seed {seed}: only cpu3 works: {:?}",
            o.busy_ns
        );
        let mean = o.laps["rtt"].iter().sum::<u64>() as f64 / 300.0 / 1e3;
        let fig = s.figures[0].1.compute(&o);
        assert!(
            (fig - mean).abs() < 1e-9,
            "seed {seed}: usecs_per_op is the mean round trip ({mean}), got {fig}"
        );
    }
    let Err(err) = catalog::build("sched_pipe", Some("amd-2x8"), params(&["cpu=99"])) else {
        panic!("a CPU the machine lacks is refused");
    };
    assert!(
        err.0.contains("cpu0..cpu15"),
        "names the CPUs there are: {}",
        err.0
    );
}
