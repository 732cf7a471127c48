//! Linux's load balancer (`balance = "linux"`) on the test host, amd-2x8
//! (LLC 0 = cpu0-7, LLC 1 = cpu8-15, siblings 2k and 2k+1): a newly idle
//! CPU pulls, an idle CPU is balanced on its behalf after a busy tick kicks
//! the idle load balancer, and a cache-hot task moves only once balancing
//! has failed more than `cache_nice_tries` times.

use schedlab_sched::linux::Linux;
use schedlab_sched::testhost::TestHost;
use schedlab_sched::{Balance, BalanceKind, Holding, PlaceReason, TaskId, TaskSpec, Trace};
use schedlab_topology::{CpuId, CpuSet};

fn cpu(i: usize) -> CpuId {
    CpuId::new(i)
}

fn host(migration_cost_ns: u64) -> TestHost<Linux> {
    TestHost::quiet_with("amd-2x8", Linux::default(), |c| {
        c.balance = Balance {
            migration_cost_ns,
            ..Balance::with(BalanceKind::Linux)
        };
    })
}

/// Two tasks on cpu0, `t1` running and `t2` waiting; `t2` may run on
/// `t2_mask`.
fn two_on_cpu0(h: &mut TestHost<Linux>, t2_mask: CpuSet) -> (TaskId, TaskId) {
    let t1 = h.spawn_pinned(cpu(0), TaskSpec::fair(0));
    let t2 = h.spawn_pinned(cpu(0), TaskSpec::fair(0));
    h.set_mask(cpu(0), t1, (0..16).map(cpu).collect());
    h.set_mask(cpu(0), t2, t2_mask);
    (t1, t2)
}

fn balanced_to(h: &TestHost<Linux>, t: TaskId) -> Option<(u64, CpuId)> {
    h.trace.iter().find_map(|(at, _, e)| match e {
        Trace::Place {
            task,
            cpu,
            reason: PlaceReason::Balance,
            ..
        } if *task == t => Some((*at, *cpu)),
        _ => None,
    })
}

#[test]
fn a_newly_idle_sibling_pulls_the_waiting_task() {
    let mut h = host(500_000);
    let (_t1, t2) = two_on_cpu0(&mut h, (0..16).map(cpu).collect());
    // cpu1 runs a task that blocks at once: cpu1 goes newly idle with
    // `avg_idle` at its start (2 x the migration cost), far above the SMT
    // domain's balance cost, while cpu0 has a task waiting.
    h.spawn_pinned(cpu(1), TaskSpec::fair(0));
    h.block(cpu(1));
    assert_eq!(
        h.where_is(t2),
        Some((cpu(1), Holding::Running)),
        "the waiting task runs on the newly idle sibling (SMT siblings share the cache: no task_hot)"
    );
    assert!(h.counters().lb_pulls >= 1 && h.counters().moves_balance >= 1);
}

#[test]
fn a_busy_tick_kicks_the_idle_balancer_which_pulls_for_an_idle_cpu() {
    let mut h = host(500_000);
    let (_t1, t2) = two_on_cpu0(&mut h, (0..16).map(cpu).collect());
    // Nothing else runs: no CPU goes newly idle. cpu0's tick sees two tasks
    // and kicks the first idle CPU, which balances the idle CPUs.
    h.advance(3_000_000);
    assert!(
        h.counters().lb_nohz_kicks >= 1,
        "cpu0 ran two tasks: its tick kicks the idle load balancer"
    );
    let (at, to) = balanced_to(&h, t2).expect("the waiting task is pulled");
    assert_ne!(to, cpu(0));
    assert!(
        at <= 2_000_000,
        "pulled at {at} ns: expected within two ticks"
    );
}

#[test]
fn a_cache_hot_task_moves_across_llcs_only_after_balancing_failed() {
    // Every task is cache-hot for 10 s. cpu0 runs t1 (pinned there) with
    // t2 and t3 waiting, which may run on cpu0 or cpu8 only: only cpu8 can
    // take them, across the PKG domain (cache_nice_tries 1), and
    // `can_migrate_task()` refuses them until `nr_balance_failed` > 1.
    let mut h = host(10_000_000_000);
    let t1 = h.spawn_pinned(cpu(0), TaskSpec::fair(0));
    let (_, t2) = two_on_cpu0(&mut h, [cpu(0), cpu(8)].into_iter().collect());
    let t3 = h.spawn_pinned(cpu(0), TaskSpec::fair(0));
    h.set_mask(cpu(0), t3, [cpu(0), cpu(8)].into_iter().collect());
    h.advance(200_000_000);
    let first = [t2, t3]
        .iter()
        .filter_map(|&t| balanced_to(&h, t))
        .min()
        .expect("one of them moved once balancing had failed twice");
    assert_eq!(first.1, cpu(8));
    // cpu8 balances PKG every 16 ms (min_interval = 16) while idle; without
    // task_hot() (scripts/mutants/no-task-hot.patch) a task moves at the
    // first of those (16 ms); with it, only once two have failed.
    assert!(
        first.0 >= 30_000_000,
        "moved at {} ns: expected after two failed rounds 16 ms apart (task_hot)",
        first.0
    );
    assert_eq!(h.where_is(t1).map(|(c, _)| c), Some(cpu(0)));
}
