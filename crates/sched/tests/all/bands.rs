//! The bands on one CPU: EEVDF shares, lag placement, wake-up preemption and
//! its protection, and RT over fair.

use schedlab_sched::fair::{calc_delta_fair, weight_of, Features};
use schedlab_sched::testhost::TestHost;
use schedlab_sched::{Config, Holding, TaskId, TaskSpec};
use schedlab_topology::CpuId;

const MS: u64 = 1_000_000;

fn cpu0() -> CpuId {
    CpuId::new(0)
}

fn host_with(f: impl FnOnce(&mut Config)) -> TestHost {
    TestHost::quiet("amd-2x8", f)
}

fn host() -> TestHost {
    host_with(|_| {})
}

fn running(h: &TestHost) -> TaskId {
    h.running[0].expect("cpu0 runs something")
}

#[test]
fn nice_0_and_nice_5_share_by_weight_within_1_percent() {
    let mut h = host();
    let a = h.spawn_pinned(cpu0(), TaskSpec::fair(0));
    let b = h.spawn_pinned(cpu0(), TaskSpec::fair(5));
    h.advance(1_000 * MS);
    let (ra, rb) = (h.runtime[&a] as f64, h.runtime[&b] as f64);
    assert!(
        (ra + rb - 1e9).abs() < 1.0,
        "the CPU was busy all second: {ra} + {rb}"
    );
    let want = weight_of(0) as f64 / weight_of(5) as f64;
    let got = ra / rb;
    assert!(
        (got / want - 1.0).abs() < 0.01,
        "nice 0 : nice 5 should run {want:.3} : 1 (weights 1024 : 335), ran {got:.3} : 1 ({ra} ns against {rb} ns)"
    );
}

#[test]
fn three_equal_tasks_share_equally() {
    let mut h = host();
    let ids: Vec<_> = (0..3)
        .map(|_| h.spawn_pinned(cpu0(), TaskSpec::fair(0)))
        .collect();
    h.advance(600 * MS);
    for id in &ids {
        let r = h.runtime[id] as f64 / 600e6;
        assert!(
            (r - 1.0 / 3.0).abs() < 0.01,
            "{id:?} ran {r:.4} of the CPU, expected 1/3"
        );
    }
}

/// A task that slept with lag comes back at `V - lag * (W + w) / W`.
#[test]
fn a_waking_task_with_lag_is_placed_as_linux_places_it() {
    let mut h = host();
    let a = h.spawn_pinned(cpu0(), TaskSpec::fair(0));
    let b = h.spawn_pinned(cpu0(), TaskSpec::fair(0));
    // Run until b has just been picked, then block it at once: it leaves
    // with positive lag (a ran ahead of it).
    let mut guard = 0;
    while running(&h) != b {
        h.advance(MS);
        guard += 1;
        assert!(guard < 100, "b never ran");
    }
    h.block(cpu0());
    let vlag = h.cpus[0].entity_of(&h.sh, b).unwrap().vlag;
    assert!(vlag > 0, "b left owed service, vlag {vlag}");
    h.advance(3 * MS);
    let va = h.cpus[0].entity_of(&h.sh, a).unwrap().vruntime;
    // An interrupt wakes b: a is the only entity, weight 1024, so V = v_a
    // and the lag scales by (1024 + 1024) / 1024.
    h.irq_wake(cpu0(), b);
    let eb = h.cpus[0].entity_of(&h.sh, b).unwrap();
    assert_eq!(
        eb.vruntime,
        va - 2 * vlag,
        "place_entity: v = V - vlag (W + w) / W with V = {va}, vlag = {vlag}"
    );
    assert_eq!(
        eb.deadline,
        eb.vruntime + calc_delta_fair(eb.slice, eb.weight)
    );
}

/// Protection (RUN_TO_PARITY) holds off a wake-up preemption until vprot.
///
/// As in Linux's `pick_eevdf()`, protection only shields a running entity
/// that is still eligible, so the woken task here has no lag (it does not
/// pull `V` below the running one) but a shorter slice, hence the earlier
/// deadline. Its arrival shortens the protection to its slice
/// (`update_protect_slice()`), and the first tick past `vprot` reschedules.
#[test]
fn protection_holds_off_a_wakeup_preemption_until_vprot() {
    for run_to_parity in [true, false] {
        let mut h = host_with(|c| {
            c.fair.features.on = c
                .fair
                .features
                .on
                .with(Features::RUN_TO_PARITY, run_to_parity)
        });
        let a = h.spawn_pinned(cpu0(), TaskSpec::fair(0));
        h.advance(MS / 2);
        let ea = h.cpus[0].entity_of(&h.sh, a).unwrap();
        assert!(
            ea.protected(),
            "a is inside its protected slice: v {} < vprot {}",
            ea.vruntime,
            ea.vprot
        );
        let mut short = TaskSpec::fair(0);
        short.slice_ns = Some(300_000);
        let b = h.spawn_pinned(cpu0(), short);
        let (ea, eb) = (
            h.cpus[0].entity_of(&h.sh, a).unwrap(),
            h.cpus[0].entity_of(&h.sh, b).unwrap(),
        );
        assert!(
            eb.deadline < ea.deadline,
            "b arrives with the earlier deadline"
        );
        if !run_to_parity {
            assert_eq!(
                running(&h),
                b,
                "without RUN_TO_PARITY the wake preempts at once"
            );
            continue;
        }
        assert_eq!(
            running(&h),
            a,
            "a protected current must not be preempted by the wake"
        );
        assert_eq!(
            ea.vprot,
            ea.vruntime + calc_delta_fair(300_000, ea.weight),
            "b's arrival limits a's protection to b's slice"
        );
        let vprot = ea.vprot;
        let mut guard = 0;
        while running(&h) == a {
            let before = h.cpus[0].entity_of(&h.sh, a).unwrap().vruntime;
            assert!(
                before < vprot,
                "a ran past vprot ({before} >= {vprot}) without being preempted"
            );
            h.advance(MS);
            guard += 1;
            assert!(guard < 50, "a was never preempted");
        }
        let after = h.cpus[0].entity_of(&h.sh, a).unwrap().vruntime;
        assert!(
            after >= vprot,
            "a was preempted before its protection ended ({after} < {vprot})"
        );
        assert_eq!(running(&h), b);
    }
}

#[test]
fn rt_preempts_fair_and_runs_fifo_within_a_priority() {
    let mut h = host();
    let f = h.spawn_pinned(cpu0(), TaskSpec::fair(0));
    assert_eq!(running(&h), f);
    let r1 = h.spawn_pinned(cpu0(), TaskSpec::rt(10));
    assert_eq!(running(&h), r1, "an RT task preempts fair work at once");
    let r2 = h.spawn_pinned(cpu0(), TaskSpec::rt(10));
    h.advance(20 * MS);
    assert_eq!(
        running(&h),
        r1,
        "FIFO: the first of a priority runs until it blocks"
    );
    let r3 = h.spawn_pinned(cpu0(), TaskSpec::rt(20));
    assert_eq!(running(&h), r3, "a higher priority preempts");
    h.block(cpu0());
    assert_eq!(running(&h), r1, "back to the first of priority 10");
    h.block(cpu0());
    assert_eq!(running(&h), r2);
    h.block(cpu0());
    assert_eq!(running(&h), f, "fair runs when no RT task is runnable");
    assert_eq!(
        h.runtime.get(&f).copied().unwrap_or(0),
        0,
        "fair got nothing while RT ran"
    );
}

#[test]
fn yield_gives_the_cpu_to_an_equal_task() {
    let mut h = host();
    let a = h.spawn_pinned(cpu0(), TaskSpec::fair(0));
    let b = h.spawn_pinned(cpu0(), TaskSpec::fair(0));
    let first = running(&h);
    h.yield_now(cpu0());
    let other = if first == a { b } else { a };
    assert_eq!(
        running(&h),
        other,
        "yield must hand the CPU to the other task"
    );
    assert_eq!(h.where_is(first).unwrap().1, Holding::Queued);
}

/// `switches.preempted` counts a running task switched out while still
/// runnable (here a yield, as Linux's `sched_switch` with `prev_state` R
/// counts it), and not a task that blocks.
#[test]
fn a_switch_away_from_a_runnable_task_is_counted_and_a_block_is_not() {
    let mut h = host();
    h.spawn_pinned(cpu0(), TaskSpec::fair(0));
    h.spawn_pinned(cpu0(), TaskSpec::fair(0));
    let count = |h: &TestHost| h.cpus[0].counters().switches_preempted;
    let before = count(&h);
    h.yield_now(cpu0());
    assert_eq!(
        count(&h),
        before + 1,
        "a yield to the other task is counted"
    );
    let fx = h.cpus[0].block(&h.sh, h.now, 0);
    h.apply(cpu0(), fx);
    h.settle();
    assert_eq!(
        count(&h),
        before + 1,
        "a block is a voluntary switch: not counted"
    );
}
