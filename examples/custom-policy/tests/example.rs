//! The example policy on the scheduler's test host and in the simulator.

use schedlab_example_policy::{registry, LlcSteal, PrevOrWakersLlc, TO_WAKERS_LLC};
use schedlab_scenarios::{catalog, Params};
use schedlab_sched::testhost::TestHost;
use schedlab_sched::{Balance, BalanceKind, Balancer, Builtin, Config, Holding, TaskSpec};
use schedlab_sim::Sim;
use schedlab_topology::{preset, CpuId, CpuSet};

fn cpu(i: usize) -> CpuId {
    CpuId::new(i)
}

#[test]
fn an_idle_prev_keeps_the_task_and_a_busy_one_sends_it_to_the_wakers_llc() {
    // amd-2x8: LLC 0 = cpu0-7, LLC 1 = cpu8-15.
    let mut h = TestHost::quiet_with("amd-2x8", PrevOrWakersLlc, |_| {});
    let t = h.spawn(cpu(8), TaskSpec::fair(0));
    h.block(cpu(8));
    h.spawn_pinned(cpu(1), TaskSpec::fair(0)); // the waker's thread
    h.wake(cpu(1), t);
    assert_eq!(
        h.where_is(t),
        Some((cpu(8), Holding::Running)),
        "prev (cpu8) is idle: the task must go back there"
    );
    h.block(cpu(8));
    h.spawn_pinned(cpu(8), TaskSpec::fair(0)); // now prev is busy
    h.wake(cpu(1), t);
    let (at, _) = h.where_is(t).expect("held");
    assert!(
        h.sh.topology().llc_cpus(cpu(1)).contains(at) && at != cpu(1),
        "prev is busy: the task must go to an idle CPU of the waker's LLC, went to {at:?}"
    );
    assert_eq!(
        h.counters().moves_policy,
        1,
        "one move, counted as the policy's"
    );
    assert!(
        h.trace.iter().any(|(_, _, e)| matches!(
            e,
            schedlab_sched::Trace::Place { reason, .. } if *reason == TO_WAKERS_LLC
        )),
        "the move is traced with the policy's reason"
    );
}

#[test]
fn the_registry_runs_it_in_the_simulator() {
    let p = Params::parse(&["policy=example".to_string()])
        .unwrap()
        .with_registry(registry());
    let s = catalog::build("split_pair", None, p).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.spec.policy.name(), "example");
    let o = Sim::new(&s.spec, 1).run();
    assert!(o.events > 0, "the run must do something");
    let unknown = Params::parse(&["policy=example".to_string()]).unwrap();
    assert!(
        catalog::build("split_pair", None, unknown).is_err(),
        "without the registry the name is unknown"
    );
}

const MS: u64 = 1_000_000;

/// Three tasks queued on cpu0 of amd-2x8 (LLC 0 = cpu0-7, LLC 1 =
/// cpu8-15), allowed anywhere; then cpu12 (LLC 1) goes newly idle, then
/// cpu4 (LLC 0). Returns how many steals each idle left behind.
fn steals<B: Balancer>() -> (u64, u64) {
    let topo = preset("amd-2x8").expect("a preset");
    let mut cfg = Config::for_topology(&topo);
    cfg.balance = Balance {
        periodic: false,
        ..Balance::ON
    };
    let mut h: TestHost<PrevOrWakersLlc, B> = TestHost::with_balancer(topo, cfg, PrevOrWakersLlc);
    let ids: Vec<_> = (0..3)
        .map(|_| h.spawn_pinned(cpu(0), TaskSpec::fair(0)))
        .collect();
    for &t in &ids {
        h.set_mask(cpu(0), t, CpuSet::first_n(16));
    }
    h.advance(2 * MS);
    h.spawn_pinned(cpu(12), TaskSpec::fair(0));
    h.block(cpu(12));
    h.advance(MS);
    let far = h.counters().moves_steal;
    h.spawn_pinned(cpu(4), TaskSpec::fair(0));
    h.block(cpu(4));
    h.advance(MS);
    (far, h.counters().moves_steal - far)
}

#[test]
fn the_balancer_written_here_steals_inside_the_llc_and_never_across() {
    let (far, near) = steals::<LlcSteal>();
    assert_eq!(
        far, 0,
        "llc-steal: an idle CPU of LLC 1 must not take LLC 0's work"
    );
    assert_eq!(
        near, 1,
        "llc-steal: an idle CPU of LLC 0 must take one waiting task"
    );
    // Control: the seed's balancer, on the same steps, crosses the LLC.
    let (far, _) = steals::<Builtin>();
    assert_eq!(
        far, 1,
        "seed: the idle CPU of LLC 1 takes from the busiest CPU anywhere"
    );
}

#[test]
fn the_registry_runs_the_balancer_with_its_policy_and_the_users_choice_wins() {
    let build = |extra: &[&str]| {
        let mut args = vec!["policy=example+steal".to_string(), "pairs=16".to_string()];
        args.extend(extra.iter().map(|s| s.to_string()));
        let p = Params::parse(&args).unwrap().with_registry(registry());
        catalog::build("many_pairs", Some("amd-2x8"), p).unwrap_or_else(|e| panic!("{e}"))
    };
    let own = build(&[]);
    assert_eq!(
        own.spec.config.balance.kind,
        BalanceKind::Own,
        "the policy brings its balancer"
    );
    let seed = build(&["balance=seed"]);
    assert_eq!(
        seed.spec.config.balance.kind,
        BalanceKind::Seed,
        "the user's balancer wins"
    );
    let a = Sim::new(&own.spec, 1).run();
    let b = Sim::new(&seed.spec, 1).run();
    assert!(a.events > 0 && b.events > 0, "both runs must do something");
    assert_ne!(
        a.trace_hash, b.trace_hash,
        "llc-steal and the seed's balancer must not run alike (same hash {:x})",
        a.trace_hash
    );
    let bad = Params::parse(&["policy=example".to_string(), "balance=own".to_string()])
        .unwrap()
        .with_registry(registry());
    let e =
        catalog::build("many_pairs", Some("amd-2x8"), bad).expect_err("example has no balancer");
    assert!(
        e.to_string().contains("brings no balancer"),
        "balance=own without one must say so: {e}"
    );
}
