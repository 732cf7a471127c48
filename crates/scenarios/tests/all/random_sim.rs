//! Random machines and random workloads on the simulator with the invariant
//! checker on after every event (it panics naming the event, the broken
//! invariant and the seed). proptest prints the failing input.

use proptest::prelude::*;
use schedlab_scenarios::Builder;
use schedlab_sim::sched::{Balance, BuiltinPolicy, OnWaker, TaskSpec, WakerStreakRule};
use schedlab_sim::PolicyRef;
use schedlab_sim::{Op, Sim};
use schedlab_topology::{CpuId, CpuSet, Shape, Siblings};

fn op(depth: u32) -> BoxedStrategy<Op> {
    let leaf = prop_oneof![
        (1u64..50_000).prop_map(Op::Run),
        (0u64..4, 1u64..5000).prop_map(|(p, b)| Op::Call {
            port: format!("p{p}"),
            bytes: b
        }),
        (0u64..4).prop_map(|p| Op::Serve {
            port: format!("p{p}")
        }),
        (1u64..5000).prop_map(|b| Op::Reply { bytes: b }),
        (0u64..2, 1u64..30000).prop_map(|(p, b)| Op::PipeWrite {
            pipe: format!("x{p}"),
            bytes: b
        }),
        (0u64..2, 1u64..30000).prop_map(|(p, b)| Op::PipeRead {
            pipe: format!("x{p}"),
            bytes: b
        }),
        (0u64..2).prop_map(|f| Op::FutexWait {
            futex: format!("f{f}")
        }),
        (0u64..2, 1u32..4).prop_map(|(f, n)| Op::FutexWake {
            futex: format!("f{f}"),
            n
        }),
        Just(Op::Lock { lock: "l".into() }),
        Just(Op::Unlock { lock: "l".into() }),
        (1u64..200_000).prop_map(Op::Sleep),
        (1u64..100_000).prop_map(Op::Io),
        Just(Op::Spawn {
            program: "child".into()
        }),
        Just(Op::Join),
        Just(Op::JoinAny),
        Just(Op::Yield),
        Just(Op::Leave),
    ];
    if depth == 0 {
        return leaf.boxed();
    }
    prop_oneof![
        4 => leaf,
        1 => (1u64..30, proptest::collection::vec(op(depth - 1), 1..6)).prop_map(|(n, body)| Op::Loop { n, body }),
    ]
    .boxed()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn the_simulator_keeps_the_invariants(
        nodes in 1usize..=2, llcs in 1usize..=2, cores in 1usize..=3, threads in 1usize..=2, split in any::<bool>(),
        k in 0u8..=8, balance in any::<bool>(), seed in any::<u64>(),
        tasks in proptest::collection::vec((0usize..64, any::<u64>(), -5i8..5, proptest::collection::vec(op(2), 1..16)), 1..12),
    ) {
        let topo = Shape { nodes, llcs_per_node: llcs, cores_per_llc: cores, threads_per_core: threads,
            siblings: if split { Siblings::Split } else { Siblings::Adjacent } }.build("random").unwrap();
        let n = topo.num_cpus();
        let mut b = Builder::new("random", topo);
        // k = 0 is home; an odd k runs the rule decided on the waker's CPU
        // (one hop), an even k on the owner (two).
        b.policy(match k {
            0 => BuiltinPolicy::Home.into(),
            k if k % 2 == 1 => PolicyRef::new("waker-streak@waker", OnWaker(WakerStreakRule { waker_run: k, flags: false })),
            k => BuiltinPolicy::WakerStreak { waker_run: k, flags: false }.into(),
        });
        b.config().balance = if balance { Balance::ON } else { Balance::OFF };
        b.run_ns(20_000_000);
        b.program("child", vec![Op::Run(10_000), Op::Exit]);
        for (i, (cpu, mask_bits, nice, prog)) in tasks.into_iter().enumerate() {
            let cpu = cpu % n;
            let mask: CpuSet = (0..n).filter(|c| mask_bits >> (c % 64) & 1 == 1 || *c == cpu).map(CpuId::new).collect();
            b.task(&format!("t{i}"), cpu, Some(mask), TaskSpec::fair(nice), prog);
        }
        let mut s = b.build(Default::default());
        s.spec.check_invariants = true;
        let o = Sim::new(&s.spec, seed).run();
        prop_assert!(o.end_ns <= 20_000_000);
        prop_assert!(o.events > 0);
    }
}
