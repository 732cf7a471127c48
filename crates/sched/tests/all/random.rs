//! Random machines and random operation sequences with the invariant checker
//! on after every pass: no task lost or held twice, park words agree with
//! holders, masks hold. proptest prints the failing case (its input is the
//! seed that reproduces it).

use proptest::prelude::*;
use schedlab_sched::testhost::TestHost;
use schedlab_sched::{
    Balance, Config, Holding, Home, OnWaker, Policy, SpawnPolicy, TaskId, TaskSpec, WakerStreakRule,
};
use schedlab_topology::{CpuId, CpuSet, Shape, Siblings};

#[derive(Clone, Debug)]
enum Op {
    Spawn {
        on: usize,
        mask: Option<u64>,
        rt: bool,
    },
    Wake {
        from: usize,
        task: usize,
        irq: bool,
    },
    Block {
        cpu: usize,
    },
    Yield {
        cpu: usize,
    },
    Exit {
        cpu: usize,
    },
    Sleep {
        cpu: usize,
        us: u64,
    },
    SetMask {
        from: usize,
        task: usize,
        mask: u64,
    },
    Kill {
        from: usize,
        task: usize,
    },
    Stop {
        from: usize,
        task: usize,
    },
    Cont {
        from: usize,
        task: usize,
    },
    Advance {
        us: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (any::<usize>(), proptest::option::of(any::<u64>()), proptest::bool::weighted(0.1))
            .prop_map(|(on, mask, rt)| Op::Spawn { on, mask, rt }),
        6 => (any::<usize>(), any::<usize>(), any::<bool>()).prop_map(|(from, task, irq)| Op::Wake { from, task, irq }),
        5 => any::<usize>().prop_map(|cpu| Op::Block { cpu }),
        1 => any::<usize>().prop_map(|cpu| Op::Yield { cpu }),
        1 => any::<usize>().prop_map(|cpu| Op::Exit { cpu }),
        1 => (any::<usize>(), 1u64..5000).prop_map(|(cpu, us)| Op::Sleep { cpu, us }),
        1 => (any::<usize>(), any::<usize>(), any::<u64>()).prop_map(|(from, task, mask)| Op::SetMask { from, task, mask }),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(from, task)| Op::Kill { from, task }),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(from, task)| Op::Stop { from, task }),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(from, task)| Op::Cont { from, task }),
        3 => (1u64..3000).prop_map(|us| Op::Advance { us }),
    ]
}

fn machine() -> impl Strategy<Value = (Shape, u8, bool, bool)> {
    (
        1usize..=2,
        1usize..=3,
        1usize..=3,
        1usize..=2,
        any::<bool>(),
        0u8..=9,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(nodes, llcs, cores, threads, split, k, rotate, balance)| {
            let shape = Shape {
                nodes,
                llcs_per_node: llcs,
                cores_per_llc: cores,
                threads_per_core: threads,
                siblings: if split {
                    Siblings::Split
                } else {
                    Siblings::Adjacent
                },
            };
            (shape, k, rotate, balance)
        })
}

fn mask_of(bits: u64, n: usize) -> CpuSet {
    let m: CpuSet = (0..n)
        .filter(|i| bits >> (i % 64) & 1 == 1)
        .map(CpuId::new)
        .collect();
    if m.is_empty() {
        CpuSet::first_n(n)
    } else {
        m
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn invariants_hold_under_random_operations((shape, k, rotate, balance) in machine(), on_waker in any::<bool>(), ops in proptest::collection::vec(op(), 1..120)) {
        let topo = shape.build("random").unwrap();
        let mut cfg = Config::for_topology(&topo);
        cfg.spawn = if rotate { SpawnPolicy::Rotate } else { SpawnPolicy::Near };
        cfg.balance = if balance { Balance::ON } else { Balance::OFF };
        let rule = WakerStreakRule { waker_run: k.max(1), flags: false };
        match (k, on_waker) {
            (0, false) => run_ops(TestHost::new(topo, cfg, Home), ops)?,
            (0, true) => run_ops(TestHost::new(topo, cfg, OnWaker(Home)), ops)?,
            (_, false) => run_ops(TestHost::new(topo, cfg, rule), ops)?,
            (_, true) => run_ops(TestHost::new(topo, cfg, OnWaker(rule)), ops)?,
        }
    }
}

/// Runs `ops` on `h`, checking the invariants after each.
fn run_ops<P: Policy>(mut h: TestHost<P>, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let n = h.cpus.len();
    let mut tasks: Vec<TaskId> = Vec::new();
    for op in ops {
        let live = |h: &TestHost<P>, t: TaskId| h.where_is(t).is_some();
        match op {
            Op::Spawn { on, mask, rt } => {
                let mut spec = if rt {
                    TaskSpec::rt(5)
                } else {
                    TaskSpec::fair((on % 7) as i8 - 3)
                };
                spec.mask = mask.map(|m| mask_of(m, n));
                tasks.push(h.spawn(CpuId::new(on % n), spec));
            }
            Op::Wake { from, task, irq } if !tasks.is_empty() => {
                let t = tasks[task % tasks.len()];
                if irq {
                    h.irq_wake(CpuId::new(from % n), t)
                } else {
                    h.wake(CpuId::new(from % n), t)
                }
            }
            Op::Block { cpu } if h.running[cpu % n].is_some() => h.block(CpuId::new(cpu % n)),
            Op::Yield { cpu } if h.running[cpu % n].is_some() => h.yield_now(CpuId::new(cpu % n)),
            Op::Exit { cpu } if h.running[cpu % n].is_some() => h.exit(CpuId::new(cpu % n)),
            Op::Sleep { cpu, us } if h.running[cpu % n].is_some() => {
                let at = h.now + us * 1000;
                h.sleep_until(CpuId::new(cpu % n), at)
            }
            Op::SetMask { from, task, mask } if !tasks.is_empty() => {
                let t = tasks[task % tasks.len()];
                if live(&h, t) {
                    h.set_mask(CpuId::new(from % n), t, mask_of(mask, n))
                }
            }
            Op::Kill { from, task } if !tasks.is_empty() => {
                let t = tasks[task % tasks.len()];
                let fx = h.cpus[from % n].kill(&h.sh, t, h.now);
                h.apply(CpuId::new(from % n), fx);
                h.settle();
            }
            Op::Stop { from, task } if !tasks.is_empty() => {
                let t = tasks[task % tasks.len()];
                let fx = h.cpus[from % n].stop(&h.sh, t, h.now);
                h.apply(CpuId::new(from % n), fx);
                h.settle();
            }
            Op::Cont { from, task } if !tasks.is_empty() => {
                let t = tasks[task % tasks.len()];
                let fx = h.cpus[from % n].cont(&h.sh, t, h.now);
                h.apply(CpuId::new(from % n), fx);
                h.settle();
            }
            Op::Advance { us } => h.advance(us * 1000),
            _ => {}
        }
        prop_assert!(h.invariants().is_ok(), "{:?}", h.invariants());
    }
    // Every runnable task the machine holds runs somewhere eventually:
    // no CPU idles while a task waits in its queue.
    h.advance(10_000_000);
    for c in &h.cpus {
        let queued = c
            .holdings(&h.sh)
            .into_iter()
            .filter(|(_, how)| *how == Holding::Queued)
            .count();
        prop_assert!(
            !(queued > 0 && c.current().is_none()),
            "{:?} idles with {queued} queued",
            c.id()
        );
    }
    Ok(())
}
