//! Workloads from the field, built in: `sched_pipe` (perf's `bench sched
//! pipe`), `hackbench` (rt-tests' `hackbench.c`, the pipe mode every LKML
//! scheduler patch quotes),
//! `schbench` (Chris Mason's `schbench.c`, the wakeup-latency benchmark of
//! the EEVDF and cache-aware-scheduling threads) and `stream` (John
//! McCalpin's `stream.c` under OpenMP, the memory-bound benchmark
//! cache-aware scheduling left unchanged).
//!
//! ## sched_pipe
//!
//! What `perf bench sched pipe -l L` does (`worker_thread()` of
//! tools/perf/bench/sched-pipe.c, processes, its default): two processes
//! and two pipes; one writes a 4-byte int to the other and reads the
//! other's answer, `loops` times; the other reads and writes back.
//!
//! * the first process (starting on CPU 0, where the kernel put perf)
//!   forks the second, which the kernel places, then waits for it at the
//!   end;
//! * `cpu`: both pinned to this CPU, as `taskset -c CPU perf bench sched
//!   pipe` (a forked child inherits the mask); default: unpinned;
//! * figure `usecs_per_op`: the mean round trip, what perf prints (its
//!   total time over its loops).
//!
//! ## hackbench
//!
//! What `hackbench -p -g G -f F -l L -s S` does, op for op:
//!
//! * each of `groups` groups has `fds` receivers, each reading its own
//!   pipe, and `fds` senders; each sender writes one `datasize`-byte
//!   message to every receiver of its group, in order, `loops` times; each
//!   receiver reads `fds * loops` messages;
//! * the main thread creates every group's receivers, then its senders (the
//!   order `group()` creates them); each child writes a byte to the ready
//!   pipe and waits on the wake fd; when the main thread has read every
//!   ready byte it starts the clock and writes the wake fd once, which
//!   wakes every child (here a futex woken for all, with the same
//!   everyone-at-once wake); it then reaps every child and stops the clock;
//! * figure `total_ms`: the clock, what hackbench prints as `Time:`;
//!   `end_llcs`: how many LLCs the children last ran in.
//!
//! * `mode`: `process` (the tool's default) makes each child with
//!   `fork()`, a process of its own; `thread` (`-T`) with
//!   `pthread_create()`, so every child of every group is a thread of the
//!   one hackbench process (`create_worker()`); the main thread reaps
//!   them with `wait()` (any child) or `pthread_join()` in creation order
//!   (`reap_worker()`). Cache-aware scheduling
//!   sees the difference: it gathers the threads of one process, and a
//!   process of one thread has no preference (`invalid_llc_nr()`).
//!
//! Simplified: every write and read moves the whole message at once
//! (hackbench loops on short writes, which a pipe with room never makes);
//! a fork costs what a thread's creation does (setup is outside the clock).

//! ## schbench
//!
//! What `schbench -m M -t T -s S -n N -F F` does in its default mode
//! (`message_thread()`, `run_msg_thread()`, `msg_and_wait()`,
//! `worker_thread()`, `do_work()` of schbench.c):
//!
//! * each of `message_threads` message threads starts `workers` workers,
//!   every one a thread (`pthread_create()`) of the one schbench process;
//! * a worker puts itself on its message thread's list, posts the message
//!   thread's futex and waits on its own; the message thread, woken, wakes
//!   every worker on its list (stamping each with the wake's time) and
//!   waits again. A woken worker's **wakeup latency** is the time from that
//!   stamp to running again; then it sleeps `sleep_us` (schbench's
//!   "simulated networking") and does `operations` naive matrix
//!   multiplications over its `footprint_kb` cache footprint: the time
//!   from before the sleep to the end of the work is its **request
//!   latency**; each such loop is a request;
//! * figures `wakeup_p50_us`, `wakeup_p99_us`, `request_p99_us`, and `rps`
//!   (requests over the run's length).
//!
//! The list is a condition variable (joining it and posting the message
//! thread's futex are one step, as schbench adds itself before it posts);
//! each worker's footprint is its working set (and its message thread's,
//! which the workers inherit it from). One multiplication of a
//! `k`×`k` matrix (`k` = √(footprint / 24 B), schbench's `matrix_size`) is
//! `k³` multiply-adds, charged at `ns_per_madd` (default 1 ns: an estimate
//! for schbench's unoptimized inner loop). Left out: `do_work()`'s per-CPU
//! spin lock (a worker spins on the lock of the CPU it runs on; it is
//! contended only when a worker is preempted inside its work), and the RPS
//! and pipe modes.

//! ## stream
//!
//! What `stream.c` built with OpenMP does: `threads` threads of one
//! process (`OMP_NUM_THREADS`) run its four kernels (Copy, Scale, Add,
//! Triad), each a `#pragma omp parallel for` over three arrays of
//! `STREAM_ARRAY_SIZE` (10,000,000) doubles, `NTIMES` (10) times; each
//! kernel ends at the parallel region's implicit barrier.
//!
//! * each thread's working set is its slice of the three arrays (240 MB
//!   over `threads`), its own: **nothing is shared between threads**
//!   (the process declares no shared data);
//! * a kernel is `kernel_us` of run per thread (default 1000: an estimate,
//!   the arrays stream from memory whatever the LLC), then the barrier;
//! * figure `kernel_us`: the p50 time from one barrier to the next, as
//!   thread 0 sees it (stream reports the best rate per kernel).
//!
//! Simplified: OpenMP's barrier spins (`GOMP_SPINCOUNT`) before it sleeps;
//! here it sleeps at once.

use schedlab_sim::sched::TaskSpec;
use schedlab_sim::{Figure, Op};

use crate::ops::{futex_wait, futex_wake, lap, repeat};
use crate::{Builder, Params, ScenarioError};

fn pipe_write(pipe: &str, bytes: u64) -> Op {
    Op::PipeWrite {
        pipe: pipe.into(),
        bytes,
    }
}

fn pipe_read(pipe: &str, bytes: u64) -> Op {
    Op::PipeRead {
        pipe: pipe.into(),
        bytes,
    }
}

/// perf's `sched pipe` (module doc).
pub(crate) fn sched_pipe(b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let loops: u64 = p.get("loops", 20_000)?;
    if loops == 0 {
        return Err(ScenarioError(
            "sched_pipe loops = 0: expected at least 1".into(),
        ));
    }
    let cpu: Option<usize> = match p.get("cpu", String::from("none"))?.as_str() {
        "none" => None,
        c => Some(c.parse().map_err(|_| {
            ScenarioError(format!(
                "sched_pipe cpu {c:?}: expected a CPU number or none"
            ))
        })?),
    };
    if let Some(c) = cpu.filter(|&c| c >= b.topology().num_cpus()) {
        return Err(ScenarioError(format!(
            "sched_pipe cpu {c}: this machine has cpu0..cpu{}",
            b.topology().num_cpus() - 1
        )));
    }
    let mask = cpu.map(|c| schedlab_topology::CpuSet::single(schedlab_topology::CpuId::new(c)));
    // perf forks its second process, which the kernel places (and which
    // inherits the first's mask), then waits for it.
    let pong = vec![repeat(loops, vec![pipe_read("a", 4), pipe_write("b", 4)])];
    b.program("pong", pong);
    let ping = vec![
        Op::Fork {
            program: "pong".into(),
        },
        // The first lap starts after the fork (perf's clock starts before
        // it: one fork's cost over its loops).
        Op::LapStart {
            metric: "rtt".into(),
        },
        repeat(
            loops,
            vec![pipe_write("a", 4), pipe_read("b", 4), lap("rtt")],
        ),
        Op::Join,
    ];
    b.task("ping", cpu.unwrap_or(0), mask, TaskSpec::fair(0), ping)
        .in_process("ping");
    b.run_ns(60_000_000_000);
    b.figure(
        "usecs_per_op",
        Figure::LapMeanUs {
            metric: "rtt".into(),
        },
    );
    Ok(())
}

/// hackbench's size: `(groups, fds, loops)`.
pub(crate) type Size = (u64, u64, u64);

/// hackbench in pipe mode, its parameters defaulting to `size` (the tool's
/// own defaults are 10 groups of 20 fds, 100 loops).
pub(crate) fn hackbench(b: &mut Builder, p: &mut Params, size: Size) -> Result<(), ScenarioError> {
    hackbench_in(b, p, size, "process")
}

/// hackbench whose `mode` defaults to `mode` (`thread`: `hackbench -T`).
pub(crate) fn hackbench_in(
    b: &mut Builder,
    p: &mut Params,
    size: Size,
    mode: &str,
) -> Result<(), ScenarioError> {
    let groups: u64 = p.get("groups", size.0)?;
    let fds: u64 = p.get("fds", size.1)?;
    let loops: u64 = p.get("loops", size.2)?;
    let datasize: u64 = p.get("datasize", 100)?;
    let mode: String = p.get("mode", mode.to_string())?;
    if mode != "process" && mode != "thread" {
        return Err(ScenarioError(format!(
            "hackbench mode {mode:?}: expected process or thread"
        )));
    }
    for (name, v) in [
        ("groups", groups),
        ("fds", fds),
        ("loops", loops),
        ("datasize", datasize),
    ] {
        if v == 0 {
            return Err(ScenarioError(format!(
                "hackbench {name} = 0: expected at least 1"
            )));
        }
    }
    let children = groups * fds * 2;
    if children > 4000 {
        return Err(ScenarioError(format!(
            "hackbench with {children} children: at most 4000 (lower groups or fds)"
        )));
    }
    // hackbench's `create_worker()`: fork() or pthread_create().
    let child = |program: String| match mode.as_str() {
        "thread" => Op::Spawn { program },
        _ => Op::Fork { program },
    };
    let start = |mut ops: Vec<Op>| {
        let mut v = vec![pipe_write("ready", 1), futex_wait("wake")];
        v.append(&mut ops);
        v
    };
    let mut main = Vec::new();
    for g in 0..groups {
        let pipe = |r: u64| format!("g{g}.fd{r}");
        for r in 0..fds {
            let name = format!("g{g}.receiver{r}");
            b.program(
                &name,
                start(vec![repeat(
                    fds * loops,
                    vec![pipe_read(&pipe(r), datasize)],
                )]),
            );
            main.push(child(name));
        }
        let sends = (0..fds).map(|r| pipe_write(&pipe(r), datasize)).collect();
        let name = format!("g{g}.sender");
        b.program(&name, start(vec![repeat(loops, sends)]));
        main.extend((0..fds).map(|_| child(name.clone())));
    }
    main.push(pipe_read("ready", children));
    main.push(Op::LapStart {
        metric: "total".into(),
    });
    main.push(futex_wake(
        "wake",
        u32::try_from(children).unwrap_or(u32::MAX),
    ));
    // `reap_worker()`: wait() for any child, or pthread_join() in order.
    let reap = if mode == "thread" {
        Op::Join
    } else {
        Op::JoinAny
    };
    main.extend((0..children).map(|_| reap.clone()));
    main.push(lap("total"));
    let all = *b.topology().cpus();
    b.task("main", 0, None, TaskSpec::fair(0), main)
        .start_in(all)
        .in_process("hackbench");
    b.run_ns(60_000_000_000);
    b.figure(
        "total_ms",
        Figure::LapP50Ms {
            metric: "total".into(),
        },
    );
    // Where the children last ran: how many LLCs (cache-aware scheduling
    // gathers a thread-mode group's into one).
    b.figure(
        "end_llcs",
        Figure::EndLlcs {
            prefix: "main.".into(),
        },
    );
    Ok(())
}

/// schbench's size: `(message_threads, workers)` per message thread.
pub(crate) type SchSize = (u64, u64);

/// schbench in its default mode; `first` is the figure to list first (a
/// suite row's).
pub(crate) fn schbench(
    b: &mut Builder,
    p: &mut Params,
    size: SchSize,
    first: &str,
) -> Result<(), ScenarioError> {
    let m: u64 = p.get("message_threads", size.0)?;
    let t: u64 = p.get("workers", size.1)?;
    let sleep_us: u64 = p.get("sleep_us", 100)?;
    let ops: u64 = p.get("operations", 5)?;
    let footprint_kb: u64 = p.get("footprint_kb", 256)?;
    let ns_per_madd: f64 = p.get("ns_per_madd", 1.0)?;
    if m == 0 || t == 0 || m * t > 4000 {
        return Err(ScenarioError(format!(
            "schbench with {m} message threads of {t} workers: expected 1 to 4000 threads in all"
        )));
    }
    if !(ns_per_madd.is_finite() && ns_per_madd >= 0.0) {
        return Err(ScenarioError(format!(
            "schbench ns_per_madd = {ns_per_madd}: expected a time of 0 or more"
        )));
    }
    let k = ((footprint_kb * 1024 / 24) as f64).sqrt() as u64;
    let work = (ops as f64 * (k * k * k) as f64 * ns_per_madd) as u64;
    let all = *b.topology().cpus();
    for j in 0..m {
        let (list, post) = (format!("m{j}.list"), format!("m{j}.futex"));
        let worker = format!("m{j}.worker");
        b.program(
            &worker,
            vec![Op::Loop {
                n: u64::MAX,
                body: vec![
                    futex_wake(&post, 1),
                    Op::CondWait {
                        cond: list.clone(),
                        lock: None,
                    },
                    Op::WakeLap {
                        metric: "wakeup".into(),
                    },
                    Op::LapStart {
                        metric: "request".into(),
                    },
                    Op::Sleep(sleep_us * 1000),
                    Op::Run(work),
                    lap("request"),
                    Op::Count {
                        metric: "requests".into(),
                        n: 1,
                    },
                ],
            }],
        );
        let mut prog: Vec<Op> = (0..t)
            .map(|_| Op::Spawn {
                program: worker.clone(),
            })
            .collect();
        prog.push(repeat(
            u64::MAX,
            vec![Op::CondBroadcast { cond: list }, futex_wait(&post)],
        ));
        // Every thread of schbench is a thread of its one process.
        b.task(&format!("msg{j}"), 0, None, TaskSpec::fair(0), prog)
            .start_in(all)
            .in_process("schbench");
        // Spawned workers inherit it (the message thread's own is small,
        // but it runs little).
        b.spec.tasks.last_mut().expect("just added").working_set = footprint_kb * 1024;
    }
    b.run_ns(200_000_000);
    let figures = [
        (
            "wakeup_p50_us",
            Figure::LapP50Us {
                metric: "wakeup".into(),
            },
        ),
        (
            "wakeup_p99_us",
            Figure::LapP99Us {
                metric: "wakeup".into(),
            },
        ),
        (
            "request_p99_us",
            Figure::LapP99Us {
                metric: "request".into(),
            },
        ),
        (
            "rps",
            Figure::PerSecond {
                metric: "requests".into(),
            },
        ),
    ];
    for (n, f) in figures.iter().filter(|(n, _)| *n == first) {
        b.figure(n, f.clone());
    }
    for (n, f) in figures.iter().filter(|(n, _)| *n != first) {
        b.figure(n, f.clone());
    }
    Ok(())
}

/// stream under OpenMP, `threads` defaulting to `threads`.
pub(crate) fn stream(b: &mut Builder, p: &mut Params, threads: u64) -> Result<(), ScenarioError> {
    let threads: u64 = p.get("threads", threads)?;
    let array: u64 = p.get("array_size", 10_000_000)?;
    let ntimes: u64 = p.get("ntimes", 10)?;
    let kernel_us: u64 = p.get("kernel_us", 1000)?;
    if threads == 0 || threads > 4000 || ntimes == 0 {
        return Err(ScenarioError(format!(
            "stream with {threads} threads and ntimes {ntimes}: expected 1 to 4000 threads and ntimes 1 or more"
        )));
    }
    let n = u32::try_from(threads).expect("bounded above");
    let kernel = vec![
        Op::Run(kernel_us * 1000),
        Op::Barrier {
            barrier: "omp".into(),
            n,
        },
    ];
    let all = *b.topology().cpus();
    let slice = 3 * 8 * array / threads;
    b.process("stream", 0);
    for i in 0..threads {
        let mut body = kernel.clone();
        if i == 0 {
            body.push(lap("kernel"));
        }
        let mut prog = Vec::new();
        if i == 0 {
            prog.push(Op::LapStart {
                metric: "kernel".into(),
            });
        }
        prog.push(repeat(4 * ntimes, body));
        b.task(&format!("omp{i}"), 0, None, TaskSpec::fair(0), prog)
            .start_in(all)
            .in_process("stream");
        b.spec.tasks.last_mut().expect("just added").working_set = slice;
    }
    b.run_ns(60_000_000_000);
    b.figure(
        "kernel_us",
        Figure::LapP50Us {
            metric: "kernel".into(),
        },
    );
    b.figure(
        "end_llcs",
        Figure::EndLlcs {
            prefix: "omp".into(),
        },
    );
    Ok(())
}
