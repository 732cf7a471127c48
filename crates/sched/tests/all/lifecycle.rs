//! Spawn placement, balancing, affinity and the lifecycle entry points.

use schedlab_sched::testhost::TestHost;
use schedlab_sched::{Balance, Config, Holding, SpawnPolicy, TaskSpec, TaskState};
use schedlab_topology::{CpuId, CpuSet, Level};

const MS: u64 = 1_000_000;

fn cpu(i: usize) -> CpuId {
    CpuId::new(i)
}

fn host_with(f: impl FnOnce(&mut Config)) -> TestHost {
    TestHost::quiet("amd-2x8", f)
}

#[test]
fn near_spawns_on_a_free_core_of_the_spawners_llc() {
    let mut h = host_with(|c| c.spawn = SpawnPolicy::Near);
    let parent = h.spawn_pinned(cpu(9), TaskSpec::fair(0));
    let _ = parent;
    for _ in 0..3 {
        let child = h.spawn(cpu(9), TaskSpec::fair(0));
        let c = h.cpu_of(child);
        assert_eq!(
            h.sh.topology().level_between(c, cpu(9)),
            Level::Llc,
            "near: the spawner's LLC, got {c:?}"
        );
        assert_ne!(
            h.sh.topology().core_cpus(c),
            h.sh.topology().core_cpus(cpu(9)),
            "a free core, not the parent's"
        );
    }
}

#[test]
fn rotate_spawns_across_llcs() {
    let mut h = host_with(|c| c.spawn = SpawnPolicy::Rotate);
    h.spawn_pinned(cpu(0), TaskSpec::fair(0));
    let mut llcs = std::collections::BTreeSet::new();
    for _ in 0..6 {
        let child = h.spawn(cpu(0), TaskSpec::fair(0));
        llcs.insert(h.sh.topology().llc_id(h.cpu_of(child)));
    }
    assert_eq!(llcs.len(), 2, "rotate ignores LLCs: children land in both");
}

#[test]
fn exit_wakes_joiners_with_no_waker() {
    let mut h = host_with(|_| {});
    let parent = h.spawn_pinned(cpu(0), TaskSpec::fair(0));
    let child = h.spawn_pinned(cpu(8), TaskSpec::fair(0));
    let fx = h.cpus[0].join(&h.sh, child, h.now, 0);
    h.apply(cpu(0), fx);
    h.settle();
    assert_eq!(
        h.where_is(parent).unwrap().1,
        Holding::Parked,
        "join parks while the child lives"
    );
    h.exit(cpu(8));
    assert_eq!(h.sh.task_word(child).state, TaskState::Dead);
    assert_eq!(
        h.where_is(parent),
        Some((cpu(0), Holding::Running)),
        "the exit wakes the joiner"
    );
    assert_eq!(
        h.counters().wakes_counted,
        0,
        "an exiting thread's wake names no waker"
    );
    // Joining a dead task returns at once.
    let fx = h.cpus[0].join(&h.sh, child, h.now, 0);
    assert_eq!(fx.switch, Some(schedlab_sched::Switch::Run(parent)));
}

#[test]
fn kill_wakes_a_parked_task_to_run_to_its_exit() {
    let mut h = host_with(|_| {});
    let victim = h.spawn_pinned(cpu(3), TaskSpec::fair(0));
    h.block(cpu(3));
    let killer = h.spawn_pinned(cpu(0), TaskSpec::fair(0));
    let _ = killer;
    let fx = h.cpus[0].kill(&h.sh, victim, h.now);
    h.apply(cpu(0), fx);
    h.settle();
    assert!(h.sh.is_killed(victim));
    assert_eq!(
        h.where_is(victim),
        Some((cpu(3), Holding::Running)),
        "a killed task runs (to exit)"
    );
    h.exit(cpu(3));
    assert_eq!(h.sh.task_word(victim).state, TaskState::Dead);
}

#[test]
fn stop_holds_a_task_and_continue_releases_it() {
    let mut h = host_with(|_| {});
    let a = h.spawn_pinned(cpu(2), TaskSpec::fair(0));
    let fx = h.cpus[0].stop(&h.sh, a, h.now);
    h.apply(cpu(0), fx);
    h.settle();
    assert_eq!(
        h.where_is(a),
        Some((cpu(2), Holding::Held)),
        "a stopped task does not run"
    );
    h.advance(5 * MS);
    assert_eq!(h.running[2], None);
    let fx = h.cpus[0].cont(&h.sh, a, h.now);
    h.apply(cpu(0), fx);
    h.settle();
    assert_eq!(h.where_is(a), Some((cpu(2), Holding::Running)));
}

#[test]
fn a_mask_change_moves_a_running_and_a_queued_task_into_the_mask() {
    let mut h = host_with(|_| {});
    let a = h.spawn_pinned(cpu(1), TaskSpec::fair(0));
    let b = h.spawn_pinned(cpu(1), TaskSpec::fair(0));
    let new = CpuSet::range(8, 16);
    h.set_mask(cpu(0), a, new);
    h.set_mask(cpu(0), b, new);
    for t in [a, b] {
        let c = h.cpu_of(t);
        assert!(
            new.contains(c),
            "{t:?} must move into its new mask, is on {c:?}"
        );
    }
    assert_eq!(h.counters().moves_affinity, 2);
}

#[test]
fn a_parked_task_whose_mask_changed_wakes_inside_it() {
    let mut h = host_with(|_| {});
    let t = h.spawn(cpu(1), TaskSpec::fair(0));
    let home = h.cpu_of(t);
    h.block(home);
    h.set_mask(cpu(0), t, CpuSet::single(cpu(12)));
    h.irq_wake(cpu(0), t);
    assert_eq!(
        h.where_is(t),
        Some((cpu(12), Holding::Running)),
        "handle_wake refreshes affinity first"
    );
}

#[test]
fn a_newly_idle_cpu_steals_queued_work_from_its_llc() {
    let mut h = host_with(|c| {
        c.balance = Balance {
            periodic: false,
            ..Balance::ON
        }
    });
    let llc0 = CpuSet::range(0, 8);
    // Three tasks queued on cpu0 (spawned there, allowed anywhere in LLC 0).
    let a = h.spawn_pinned(cpu(0), TaskSpec::fair(0));
    let mut ids = vec![a];
    for _ in 0..2 {
        let t = h.spawn_pinned(cpu(0), TaskSpec::fair(0));
        ids.push(t);
    }
    for &t in &ids[1..] {
        h.set_mask(cpu(0), t, CpuSet::single(cpu(0)) | llc0);
    }
    h.advance(2 * MS);
    // A CPU of LLC 0 goes idle (a short task there blocks): it asks cpu0.
    let s = h.spawn_pinned(cpu(4), TaskSpec::fair(0));
    let _ = s;
    h.block(cpu(4));
    h.advance(MS);
    assert!(
        h.counters().moves_steal >= 1,
        "a newly idle CPU should steal: {:?}",
        h.counters()
    );
    let spread = ids.iter().filter(|&&t| h.cpu_of(t) != cpu(0)).count();
    assert!(spread >= 1, "some queued task left cpu0");
}

#[test]
fn periodic_balance_pushes_queued_work_to_a_sleeper() {
    let mut h = host_with(|c| {
        c.balance = Balance {
            newidle: false,
            ..Balance::ON
        }
    });
    let ids: Vec<_> = (0..3)
        .map(|_| h.spawn_pinned(cpu(5), TaskSpec::fair(0)))
        .collect();
    for &t in &ids {
        h.set_mask(cpu(0), t, CpuSet::first_n(16));
    }
    h.advance(20 * MS);
    assert!(
        h.counters().moves_balance >= 2,
        "periodic balance should spread: {:?}",
        h.counters()
    );
    let cpus: std::collections::BTreeSet<_> = ids.iter().map(|&t| h.cpu_of(t)).collect();
    assert_eq!(cpus.len(), 3, "three CPU-bound tasks end on three CPUs");
}

#[test]
fn sleep_until_wakes_at_the_deadline_with_no_waker() {
    let mut h = host_with(|_| {});
    let t = h.spawn_pinned(cpu(6), TaskSpec::fair(0));
    h.sleep_until(cpu(6), 3 * MS);
    assert_eq!(h.where_is(t).unwrap().1, Holding::Parked);
    h.advance(2 * MS);
    assert_eq!(
        h.where_is(t).unwrap().1,
        Holding::Parked,
        "not before its deadline"
    );
    h.advance(MS);
    assert_eq!(
        h.where_is(t).unwrap().1,
        Holding::Running,
        "at its deadline"
    );
    assert_eq!(h.counters().wakes_counted, 0);
}

#[test]
fn a_wake_to_a_busy_home_is_forwarded_to_a_sleeper_in_its_llc() {
    let mut h = host_with(|_| {});
    let t = h.spawn(cpu(9), TaskSpec::fair(0));
    let home = h.cpu_of(t);
    h.block(home);
    // Home gets busy with a pinned task.
    h.spawn_pinned(home, TaskSpec::fair(0));
    h.irq_wake(cpu(0), t);
    let c = h.cpu_of(t);
    assert_ne!(c, home, "home is busy: the wake must be forwarded");
    assert_eq!(
        h.sh.topology().level_between(c, home),
        Level::Llc,
        "forwarded within home's LLC, got {c:?}"
    );
    assert_ne!(
        h.sh.topology().core_cpus(c),
        h.sh.topology().core_cpus(home),
        "to a free core first"
    );
    assert_eq!(h.counters().moves_forward, 1);
    assert_eq!(h.where_is(t).unwrap().1, Holding::Running);
}

/// The parking calls say what they did (`Effects::park`): the host need
/// not read it out of the switch.
#[test]
fn a_parking_call_says_whether_it_parked() {
    use schedlab_sched::Park;
    let mut h = host_with(|_| {});
    let a = h.spawn_pinned(cpu(1), TaskSpec::fair(0));
    let now = h.now;
    // A wake pending when it blocks (a flag): the park returns at once.
    h.post_wake(cpu(2), a);
    let fx = h.cpus[1].block(&h.sh, now, 0);
    assert_eq!(
        fx.park,
        Park::Returned,
        "a flagged block returns at once: {fx:?}"
    );
    h.apply(cpu(1), fx);
    h.settle();
    // No wake: it parks.
    let fx = h.cpus[1].block(&h.sh, now, 0);
    assert_eq!(fx.park, Park::Parked, "{fx:?}");
    h.apply(cpu(1), fx);
    h.wake(cpu(2), a);
    // A deadline already past returns at once; a later one parks.
    let now = h.now;
    let fx = h.cpus[1].sleep_until(&h.sh, now, now, 0);
    assert_eq!(fx.park, Park::Returned);
    h.apply(cpu(1), fx);
    let fx = h.cpus[1].sleep_until(&h.sh, now + MS, now, 0);
    assert_eq!(fx.park, Park::Parked);
    h.apply(cpu(1), fx);
    // Every other call: not asked.
    let fx = h.cpus[2].tick(&h.sh, now);
    assert_eq!(fx.park, Park::NotAsked);
}
