//! `DELAY_DEQUEUE` through the scheduler proper (the test host, amd-2x8,
//! Linux's balancer): a task that blocks while ineligible stays on its
//! CPU's queue (`Holding::Delayed`), the balancer does not move it, a wake
//! puts it back where it waited without a placement, and with the feature
//! off it leaves at once. Worked from `dequeue_entity()`'s `sched_delayed`
//! branch, `ttwu_runnable()` and `can_migrate_task()` in
//! `kernel/sched/fair.c` (6.12 on; the `migrate_load` exception is not
//! modelled: the module doc of `schedlab_sched::fair`).

use schedlab_sched::fair::{FeatureSet, Kernel};
use schedlab_sched::linux::Linux;
use schedlab_sched::testhost::TestHost;
use schedlab_sched::{Balance, BalanceKind, Holding, PlaceReason, TaskId, TaskSpec, Trace};
use schedlab_topology::{CpuId, CpuSet};

fn cpu(i: usize) -> CpuId {
    CpuId::new(i)
}

fn host(features: FeatureSet) -> TestHost<Linux> {
    TestHost::quiet_with("amd-2x8", Linux::default(), |c| {
        c.balance = Balance {
            migration_cost_ns: 500_000,
            ..Balance::with(BalanceKind::Linux)
        };
        c.fair.features = features;
    })
}

/// `t1`, `t2` and `t3` on cpu0, `t1` allowed anywhere and the others
/// pinned there; `t1` has run 1 ms ahead of the others (past `V`:
/// ineligible) and blocks.
fn t1_blocks_ineligible(h: &mut TestHost<Linux>) -> (TaskId, TaskId) {
    let t1 = h.spawn_pinned(cpu(0), TaskSpec::fair(0));
    let t2 = h.spawn_pinned(cpu(0), TaskSpec::fair(0));
    let t3 = h.spawn_pinned(cpu(0), TaskSpec::fair(0));
    assert_eq!(h.where_is(t1), Some((cpu(0), Holding::Running)));
    h.advance(1_000_000);
    assert_eq!(
        h.where_is(t1),
        Some((cpu(0), Holding::Running)),
        "t1 is still protected after 1 ms (its slice is longer)"
    );
    let all: CpuSet = (0..16).map(cpu).collect();
    h.set_mask(cpu(0), t1, all);
    assert_eq!(h.cpu_of(t3), cpu(0));
    h.block(cpu(0));
    (t1, t2)
}

fn places(h: &TestHost<Linux>, t: TaskId) -> Vec<PlaceReason> {
    h.trace
        .iter()
        .filter_map(|(_, _, e)| match e {
            Trace::Place { task, reason, .. } if *task == t => Some(*reason),
            _ => None,
        })
        .collect()
}

#[test]
fn a_task_that_blocks_ineligible_stays_queued_and_the_balancer_leaves_it() {
    let mut h = host(FeatureSet::of(Kernel::L6_19));
    let (t1, t2) = t1_blocks_ineligible(&mut h);
    assert_eq!(
        h.where_is(t1),
        Some((cpu(0), Holding::Delayed)),
        "t1 blocked 1 ms past V: delayed on cpu0 (sched_delayed), not dequeued"
    );
    assert_eq!(h.cpu_of(t2), cpu(0));
    assert_eq!(h.counters().fair_delayed, 1, "{:?}", h.counters());
    // cpu0 runs two tasks (one pinned there): its tick kicks the idle
    // balancer, which finds nothing it may move; the delayed task is not
    // runnable, so it is not among the candidates (`can_migrate_task()`).
    h.advance(3_000_000);
    let c = h.counters();
    assert!(
        c.lb_nohz_kicks >= 1,
        "cpu0's tick kicks the idle balancer: {c:?}"
    );
    assert_eq!(
        c.moves_balance, 0,
        "nothing movable, yet a balancer moved a task: {c:?}"
    );
    assert!(
        !places(&h, t1).contains(&PlaceReason::Balance),
        "a balancer moved the delayed task: {:?}",
        places(&h, t1)
    );
    assert_eq!(h.cpu_of(t1), cpu(0));
    h.check();
}

#[test]
fn a_wake_puts_the_delayed_task_back_without_a_placement() {
    let mut h = host(FeatureSet::of(Kernel::L6_19));
    let (t1, _t2) = t1_blocks_ineligible(&mut h);
    let before = places(&h, t1).len();
    h.wake(cpu(0), t1);
    let after = places(&h, t1);
    assert_eq!(
        &after[before..],
        &[PlaceReason::Delayed],
        "the wake requeues it where it waited (requeue_delayed_entity()), no select_task_rq: {after:?}"
    );
    assert_eq!(h.cpu_of(t1), cpu(0));
    assert_eq!(h.counters().wakes_delayed, 1, "{:?}", h.counters());
    h.check();
}

#[test]
fn without_delay_dequeue_the_task_leaves_at_once() {
    let set = FeatureSet::of(Kernel::L6_19)
        .parse("NO_DELAY_DEQUEUE")
        .unwrap();
    let mut h = host(set);
    let (t1, _t2) = t1_blocks_ineligible(&mut h);
    assert_eq!(
        h.where_is(t1).map(|(_, s)| s),
        Some(Holding::Parked),
        "NO_DELAY_DEQUEUE: a blocked task is dequeued"
    );
    assert_eq!(h.counters().fair_delayed, 0);
    h.wake(cpu(0), t1);
    assert!(
        !places(&h, t1).contains(&PlaceReason::Delayed),
        "{:?}",
        places(&h, t1)
    );
}
