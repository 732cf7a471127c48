//! Workloads from the field, built in: `hackbench` (rt-tests'
//! `hackbench.c`, the pipe mode every LKML scheduler patch quotes).
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
//! * figure `total_ms`: the clock, what hackbench prints as `Time:`.
//!
//! Simplified: every write and read moves the whole message at once
//! (hackbench loops on short writes, which a pipe with room never makes);
//! `mode = process` and `mode = thread` run alike until the model has
//! processes (a process's own address space and data: the warmth issue),
//! and the parameter is kept so a scenario can already say which it means.

use schedlab_sim::sched::TaskSpec;
use schedlab_sim::{Figure, Op};

use crate::catalog::{futex_wait, futex_wake, lap, repeat};
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

/// hackbench's size: `(groups, fds, loops)`.
pub(crate) type Size = (u64, u64, u64);

/// hackbench in pipe mode, its parameters defaulting to `size` (the tool's
/// own defaults are 10 groups of 20 fds, 100 loops).
pub(crate) fn hackbench(b: &mut Builder, p: &mut Params, size: Size) -> Result<(), ScenarioError> {
    let groups: u64 = p.get("groups", size.0)?;
    let fds: u64 = p.get("fds", size.1)?;
    let loops: u64 = p.get("loops", size.2)?;
    let datasize: u64 = p.get("datasize", 100)?;
    let mode: String = p.get("mode", "process".to_string())?;
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
            main.push(Op::Spawn { program: name });
        }
        let sends = (0..fds).map(|r| pipe_write(&pipe(r), datasize)).collect();
        let name = format!("g{g}.sender");
        b.program(&name, start(vec![repeat(loops, sends)]));
        main.extend((0..fds).map(|_| Op::Spawn {
            program: name.clone(),
        }));
    }
    main.push(pipe_read("ready", children));
    main.push(Op::LapStart {
        metric: "total".into(),
    });
    main.push(futex_wake(
        "wake",
        u32::try_from(children).unwrap_or(u32::MAX),
    ));
    main.extend((0..children).map(|_| Op::Join));
    main.push(lap("total"));
    let all = *b.topology().cpus();
    b.task("main", 0, None, TaskSpec::fair(0), main)
        .start_in(all);
    b.run_ns(60_000_000_000);
    b.figure(
        "total_ms",
        Figure::LapP50Ms {
            metric: "total".into(),
        },
    );
    Ok(())
}
