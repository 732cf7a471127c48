//! The shadow's rules, each against a schedule worked by hand.

use super::events::PRIO;
use super::*;
use schedlab_sim::sched::fair::{FeatureSet, Kernel};

const MS: u64 = 1_000_000;
const US: u64 = 1_000;

/// The model's base fair class on two CPUs, with `DELAY_DEQUEUE` and
/// `DELAY_ZERO` when asked.
fn rules(delay_dequeue: bool) -> FairConfig {
    let mut c = FairConfig::for_cpus(2);
    let extra = if delay_dequeue {
        "DELAY_DEQUEUE,DELAY_ZERO"
    } else {
        ""
    };
    c.features = FeatureSet::default().parse(extra).expect("known");
    c
}

/// 6.19's fair class with the reworked `NEXT_BUDDY` on, at 1000 Hz.
fn with_buddy() -> FairConfig {
    let mut c = FairConfig::for_cpus(2);
    c.features = FeatureSet::of(Kernel::L6_19)
        .parse("NEXT_BUDDY")
        .expect("known");
    c
}

fn wake(at: u64, task: i32, new: bool, kernel_resched: Option<bool>) -> Ev {
    Ev::Wakeup {
        at,
        cpu: 0,
        task,
        prio: PRIO,
        target: 0,
        new,
        by_task: true,
        kernel_resched,
        resched_before: false,
    }
}

fn switch(at: u64, prev: i32, prev_state: PrevState, next: i32) -> Ev {
    Ev::Switch {
        at,
        cpu: 0,
        prev,
        prev_prio: PRIO,
        prev_state,
        next,
        next_prio: PRIO,
    }
}

/// Two tasks on one CPU, slice 1.4 ms (two CPUs' base slice). A starts
/// alone (v 0, deadline 0.7 ms: a new task's half slice); B joins at
/// 100 µs at V = 100 µs (deadline 0.8 ms). At 1 ms A has v 1 ms (its
/// deadline renewed to 2.4 ms), V is 0.55 ms: A is not eligible, B is
/// picked. B runs 100 µs and blocks: V 0.6 ms, its lag 0.4 ms. A alone
/// is picked. B wakes at 1.2 ms: placed 0.4 ms x (1024 + 1024) / 1024
/// = 0.8 ms before V = 1.1 ms, so at 0.3 ms; V becomes 0.7 ms, A (1.1
/// ms) is not eligible and B is the pick: the wake preempts.
fn follows_the_rules() -> Vec<Ev> {
    use PrevState::*;
    vec![
        wake(0, 1, true, None),
        switch(0, 0, Runnable, 1),
        wake(100 * US, 2, true, None),
        switch(MS, 1, Runnable, 2),
        switch(MS + 100 * US, 2, Blocked, 1),
        wake(MS + 200 * US, 2, false, Some(true)),
    ]
}

#[test]
fn a_schedule_that_follows_the_model_s_rules_agrees_with_them() {
    let a = compare(&follows_the_rules(), &|_| true, rules(false));
    let want = Agreement {
        picks: 3,
        picks_same: 3,
        wakes: 1,
        wakes_both: 1,
        ..Agreement::default()
    };
    assert_eq!(
        a, want,
        "expected every pick and the wake's preemption to agree"
    );
}

/// The same schedule, but the kernel idles for 50 µs at 1.1 ms with A
/// queued, and does not preempt at B's wake (placed at 0.25 ms, V 0.65
/// ms, A at 1.05 ms not eligible): one pick and one wake differ.
#[test]
fn a_kernel_that_decides_otherwise_is_counted_against_the_model() {
    let mut evs = follows_the_rules();
    evs[4] = switch(MS + 100 * US, 2, PrevState::Blocked, 0);
    evs[5] = wake(MS + 200 * US, 2, false, Some(false));
    evs.insert(5, switch(MS + 150 * US, 0, PrevState::Runnable, 1));
    let a = compare(&evs, &|_| true, rules(false));
    assert_eq!(
        (a.picks, a.picks_same, a.picks_tie),
        (4, 3, 0),
        "expected the idle pick to differ: {a:?}"
    );
    assert_eq!(
        (a.wakes, a.wakes_model_only, a.wakes_kernel_only),
        (1, 1, 0),
        "expected the model alone to preempt: {a:?}"
    );
    // A thread outside the recording is in no queue: B's wake and the
    // switch to B are not compared.
    let a_only = compare(&evs, &|t| t == 1, rules(false));
    assert_eq!(
        (a_only.wakes, a_only.picks),
        (0, 3),
        "expected only the picks of A or idle: {a_only:?}"
    );
}

/// A (v 0), B (v 0) and C (v 50 µs, deadline 0.75 ms) on one CPU; A runs
/// 3 ms and blocks while ineligible (V 1.0167 ms). Without
/// `DELAY_DEQUEUE` A leaves: V over B and C is 25 µs and B (deadline
/// 0.7 ms) is picked. B runs 0.5 ms and the kernel preempts it for C:
/// without A, V is 0.275 ms, B is not eligible and C is the pick. With
/// `DELAY_DEQUEUE` A stays queued at 3 ms, V is 1.183 ms, B is eligible
/// and still protected (to 0.7 ms): the model keeps B, and C's deadline
/// is 50 µs from B's, not a tie.
#[test]
fn a_task_blocked_while_ineligible_holds_v_up_only_with_delay_dequeue() {
    use PrevState::*;
    let evs = vec![
        wake(0, 1, true, None),
        switch(0, 0, Runnable, 1),
        wake(0, 2, true, None),
        wake(100 * US, 3, true, None),
        switch(3 * MS, 1, Blocked, 2),
        switch(3 * MS + 500 * US, 2, Runnable, 3),
    ];
    let model = compare(&evs, &|_| true, rules(false));
    let delay = compare(&evs, &|_| true, rules(true));
    assert_eq!(
        (model.picks, model.picks_same),
        (3, 3),
        "without DELAY_DEQUEUE: {model:?}"
    );
    assert_eq!(
        (delay.picks, delay.picks_same, delay.picks_tie),
        (3, 2, 0),
        "with DELAY_DEQUEUE the model keeps B: {delay:?}"
    );
}

/// A starts alone, B joins (both v 0); at 1 ms A (v 1 ms, its deadline
/// renewed to 2.4 ms) is not eligible and B runs 1.5 ms: its deadline
/// renewed at the 2 ms tick (v 1 ms, deadline 2.4 ms), it blocks at v
/// 1.5 ms with V 1.25 ms, not eligible. A runs, protected to 2.4 ms, and
/// its 3 ms tick charges it to v 1.5 ms. B wakes at 3.5 ms:
///
/// * without `DELAY_DEQUEUE` B left with lag -0.25 ms; A is charged to v
///   2 ms and B placed 0.5 ms after it, at 2.5 ms: V 2.25 ms, A eligible
///   and protected: no preemption (even with `NEXT_BUDDY`: B, the buddy,
///   is not eligible);
/// * with it B stayed queued; `requeue_delayed_entity()` reads V with A as
///   the tick left it, 1.5 ms: B's lag is 0, it stays at 1.5 ms. The
///   check then charges A to 2 ms: V 1.75 ms, A is not eligible, B is
///   the pick: the kernel's preemption.
#[test]
fn a_task_woken_where_it_waited_delayed_preempts() {
    use PrevState::*;
    let evs = vec![
        wake(0, 1, true, None),
        switch(0, 0, Runnable, 1),
        wake(0, 2, true, None),
        switch(MS, 1, Runnable, 2),
        switch(2 * MS + 500 * US, 2, Blocked, 1),
        wake(3 * MS + 500 * US, 2, false, Some(true)),
    ];
    let mut buddy_alone = with_buddy();
    buddy_alone.features = buddy_alone.features.parse("NO_DELAY_DEQUEUE").unwrap();
    let mut v6_19 = FairConfig::for_cpus(2);
    v6_19.features = FeatureSet::of(Kernel::L6_19);
    for (name, r, both) in [
        ("the model's base", rules(false), 0),
        ("base + DELAY_DEQUEUE", rules(true), 1),
        ("6.19", v6_19, 1),
        ("6.19 + NEXT_BUDDY - DELAY_DEQUEUE", buddy_alone, 0),
        ("6.19 + NEXT_BUDDY", with_buddy(), 1),
    ] {
        let a = compare(&evs, &|_| true, r);
        assert_eq!(
            (
                a.picks,
                a.picks_same,
                a.wakes,
                a.wakes_both,
                a.wakes_kernel_only
            ),
            (3, 3, 1, both, 1 - both),
            "{name}: {a:?}"
        );
    }
}
