//! Core scheduling and reschedule IPIs (seed-004, docs/REFERENCES.md) on the simulator.
//!
//! The figure is resched IPIs per CPU per second of the cookied pair, over
//! 2 s of simulated time, one value per seed. A seed is a timing of the
//! guest's vCPU ticks (the `guest` cost preset: ticks out of phase, and
//! every timer expiry late by KVM's measured injection latency, min
//! 0.47 µs, mean 0.71 µs), as a boot is on the selftest's QEMU guest. The
//! model reads (40 seeds):
//!
//! * without the re-pick renewal: median about 650, mean about 990, from
//!   167 to about 6070, 12 of 40 seeds above the selftest's failure line
//!   of 1000;
//! * with it: 167 to 200 on every seed.
//!
//! Linux measured 808-2123 (6 of 7 runs above 1000) and 224-271. The
//! storm's mechanism is Linux's (coresched's module doc, and its
//! `two_expired_repicks_trade_reschedules_...` test); how often a seed's
//! timing puts both siblings in it at once is the model's, and is stated
//! beside Linux's figures here, not tuned toward them.

use proptest::prelude::*;
use schedlab_scenarios::{catalog, Builder, Params, Scenario};
use schedlab_sim::sched::{Balance, TaskSpec};
use schedlab_sim::{Op, Sim};
use schedlab_topology::{preset, CpuId, CpuSet};

/// The selftest's failure line.
const LINE: f64 = 1000.0;
const SEEDS: u64 = 40;

fn scenario(params: &[&str]) -> Scenario {
    let p = Params::parse(&params.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    catalog::build("cs_spinners", None, p).unwrap()
}

fn ipis(s: &Scenario, seed: u64) -> f64 {
    let o = Sim::new(&s.spec, seed).run();
    s.figures[0].1.compute(&o)
}

/// `(seed, figure)` for seeds 1..=SEEDS.
fn across_seeds(params: &[&str]) -> Vec<(u64, f64)> {
    let s = scenario(params);
    (1..=SEEDS).map(|seed| (seed, ipis(&s, seed))).collect()
}

fn mean(v: &[(u64, f64)]) -> f64 {
    v.iter().map(|(_, x)| x).sum::<f64>() / v.len() as f64
}

#[test]
fn with_the_fix_every_seed_passes_the_selftest_and_without_it_the_siblings_storm() {
    let off = across_seeds(&["protect_on_repick=false"]);
    let on = across_seeds(&["protect_on_repick=true"]);
    let show = |v: &[(u64, f64)]| {
        v.iter()
            .map(|(s, x)| format!("seed {s}: {x:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (worst_seed, worst) = on
        .iter()
        .copied()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    assert!(
        worst < LINE,
        "with the fix the selftest must pass on every seed; seed {worst_seed} read {worst:.0} \
         resched IPIs per CPU per second (reproduce with --seed {worst_seed})"
    );
    let over = off.iter().filter(|(_, x)| *x > LINE).count();
    assert!(
        over >= 5,
        "without the fix, seeds whose timing puts both siblings in the exchange should storm \
         past {LINE}: {over} of {SEEDS} did ({})",
        show(&off)
    );
    let (m_off, m_on) = (mean(&off), mean(&on));
    assert!(
        m_off > 3.0 * m_on,
        "without the fix the mean over seeds should be 3x or more the fixed one: {m_off:.0} \
         against {m_on:.0}"
    );
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
