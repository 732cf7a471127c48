//! Core scheduling and reschedule IPIs (seeds/004) on the simulator.
//!
//! What the model reads, per CPU per second of the cookied pair: with the
//! re-pick renewal off (Linux before the fix) 330-420 resched IPIs; with
//! it on 80-170 (a task installed from a sibling's selection still runs
//! unprotected until it is re-picked). Linux measured 808-2123 and 224-271
//! on a QEMU guest. The absolute thresholds (above / below 1000) are not
//! asserted here because the model does not reach them (see the closing
//! note); the claims below are the ones it supports.

use proptest::prelude::*;
use schedlab_scenarios::{catalog, Builder, Params, Scenario};
use schedlab_sim::sched::{Balance, TaskSpec};
use schedlab_sim::{Op, Sim};
use schedlab_topology::{preset, CpuId, CpuSet};

fn scenario(params: &[&str]) -> Scenario {
    let p = Params::parse(&params.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    catalog::build("cs_spinners", None, p).unwrap()
}

fn ipis(s: &Scenario, seed: u64) -> f64 {
    let o = Sim::new(&s.spec, seed).run();
    s.figures[0].1.compute(&o)
}

#[test]
fn without_the_repick_renewal_cookied_siblings_trade_resched_ipis() {
    for seed in 1..=3 {
        let off = ipis(&scenario(&["protect_on_repick=false"]), seed);
        let on = ipis(&scenario(&["protect_on_repick=true"]), seed);
        eprintln!("seed {seed}: {off:.1} resched IPIs per CPU per second without the fix, {on:.2} with it");
        assert!(
            off > 100.0,
            "seed {seed}: without the renewal the pair should storm, read {off:.1}/s"
        );
        assert!(
            on * 1.5 < off,
            "seed {seed}: the fix should cut the storm by a third or more: {off:.1} -> {on:.2}"
        );
    }
}

#[test]
fn without_cookies_the_switch_makes_no_difference() {
    for seed in 1..=3 {
        let off = ipis(
            &scenario(&["cookies=false", "protect_on_repick=false"]),
            seed,
        );
        let on = ipis(
            &scenario(&["cookies=false", "protect_on_repick=true"]),
            seed,
        );
        assert!(
            (off - on).abs() <= 1.0,
            "seed {seed}: without core scheduling the switch must not matter: {off} vs {on}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Random cookies on t14 and amd-2x8: the invariant checker (on after
    /// every event) refuses siblings running different cookies with no
    /// reschedule pending.
    #[test]
    fn core_scheduling_never_runs_mismatched_cookies(
        amd in any::<bool>(),
        tasks in proptest::collection::vec((0usize..16, 0u64..3, any::<bool>(), 1u64..400_000), 2..20),
        seed in any::<u64>(),
    ) {
        let topo = preset(if amd { "amd-2x8" } else { "t14" }).unwrap();
        let mut b = Builder::new("cookies", topo);
        b.config().core_sched = true;
        b.config().balance = Balance::ON;
        b.run_ns(30_000_000);
        for (i, (cpu, cookie, pinned, ns)) in tasks.into_iter().enumerate() {
            let mut spec = TaskSpec::fair(0);
            spec.cookie = cookie;
            let mask = pinned.then(|| CpuSet::single(CpuId::new(cpu)));
            let prog = vec![Op::Loop { n: 50, body: vec![Op::Run(ns), Op::Sleep(ns / 2 + 1)] }];
            b.task(&format!("t{i}"), cpu, mask, spec, prog);
        }
        let mut s = b.build(Default::default());
        s.spec.check_invariants = true;
        let o = Sim::new(&s.spec, seed).run();
        prop_assert!(o.events > 0);
    }
}
