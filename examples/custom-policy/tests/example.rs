//! The example policy on the scheduler's test host and in the simulator.

use schedlab_example_policy::{registry, PrevOrWakersLlc, TO_WAKERS_LLC};
use schedlab_scenarios::{catalog, Params};
use schedlab_sched::testhost::TestHost;
use schedlab_sched::{Holding, TaskSpec};
use schedlab_sim::Sim;
use schedlab_topology::CpuId;

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
