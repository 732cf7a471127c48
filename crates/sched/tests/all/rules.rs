//! The seed's host tests of the waker-streak rule, by their names, on the
//! seed's AMD bench shape (`amd-2x8`: LLC 0 = cpu0-7, LLC 1 = cpu8-15,
//! siblings 2k and 2k+1). Written in terms of `WAKER_RUN` as the seed's were.

use schedlab_sched::testhost::TestHost;
use schedlab_sched::{Holding, Policy, TaskId, TaskSpec, WakerStreakRule, WAKER_RUN};
use schedlab_topology::{CpuId, CpuSet, Level};

fn cpu(i: usize) -> CpuId {
    CpuId::new(i)
}

/// amd-2x8 with the rule at WAKER_RUN and balancing off, so nothing but
/// the rule moves a task.
fn host() -> TestHost<WakerStreakRule> {
    TestHost::quiet_with("amd-2x8", WakerStreakRule::default(), |_| {})
}

/// A task started on `home`, now parked there.
fn parked_on<P: Policy>(h: &mut TestHost<P>, home: usize, mask: Option<CpuSet>) -> TaskId {
    let mut spec = TaskSpec::fair(0);
    spec.mask = mask;
    let t = h.spawn(cpu(home), spec);
    assert_eq!(
        h.where_is(t),
        Some((cpu(home), Holding::Running)),
        "{t:?} should start on cpu{home}"
    );
    h.block(cpu(home));
    t
}

/// A waker thread pinned on `at`, running.
fn waker_on<P: Policy>(h: &mut TestHost<P>, at: usize) -> TaskId {
    h.spawn_pinned(cpu(at), TaskSpec::fair(0))
}

/// One parked wake of `t` from `from`'s thread, then `t` parks again
/// wherever it ran. Returns the CPU it ran on.
fn round<P: Policy>(h: &mut TestHost<P>, from: usize, t: TaskId) -> CpuId {
    h.wake(cpu(from), t);
    let (c, how) = h.where_is(t).expect("held");
    assert_eq!(how, Holding::Running, "{t:?} should run after its wake");
    h.block(c);
    c
}

#[test]
fn a_run_of_8_moves() {
    let mut h = host();
    let t = parked_on(&mut h, 8, None);
    waker_on(&mut h, 1);
    for i in 1..WAKER_RUN {
        let c = round(&mut h, 1, t);
        assert_eq!(
            c,
            cpu(8),
            "wake {i} of {WAKER_RUN} from LLC 0 must leave the task home"
        );
    }
    let c = round(&mut h, 1, t);
    assert_eq!(
        h.sh.topology().level_between(c, cpu(1)),
        Level::Llc,
        "wake {WAKER_RUN} must move the task into the waker's LLC, found it on {c:?}"
    );
    assert_eq!(h.counters().moves_waker_rule, 1, "exactly one move");
    // Ordinary placement keeps it there.
    for _ in 0..3 * WAKER_RUN {
        assert_eq!(round(&mut h, 1, t), c, "after the move the task stays");
    }
    assert_eq!(h.counters().moves_waker_rule, 1, "still exactly one move");
}

#[test]
fn a_wake_from_home_breaks_the_run() {
    let mut h = host();
    let t = parked_on(&mut h, 8, None);
    waker_on(&mut h, 1);
    waker_on(&mut h, 10);
    for _ in 1..WAKER_RUN {
        round(&mut h, 1, t);
    }
    round(&mut h, 10, t);
    assert_eq!(
        h.cpus[8].task_state(&h.sh, t).unwrap().run(),
        1,
        "a wake from home starts a run of one from home's LLC"
    );
    for i in 1..WAKER_RUN {
        assert_eq!(
            round(&mut h, 1, t),
            cpu(8),
            "far wake {i} after the break must not move"
        );
    }
    let c = round(&mut h, 1, t);
    assert_ne!(c, cpu(8), "a new full run of {WAKER_RUN} moves it");
    assert_eq!(h.counters().moves_waker_rule, 1);
}

#[test]
fn masked_out_stays_home() {
    let mut h = host();
    let llc1 = CpuSet::range(8, 16);
    let t = parked_on(&mut h, 8, Some(llc1));
    waker_on(&mut h, 1);
    for i in 0..4 * WAKER_RUN {
        assert_eq!(
            round(&mut h, 1, t),
            cpu(8),
            "wake {i}: a task whose mask is LLC 1 never moves to LLC 0"
        );
    }
    assert_eq!(h.counters().moves_waker_rule, 0);
    assert!(
        h.cpus[8].task_state(&h.sh, t).unwrap().run() >= WAKER_RUN,
        "the wakes were counted"
    );
}

#[test]
fn two_runs_ending_in_one_drain_go_to_two_cpus() {
    let mut h = host();
    let a = parked_on(&mut h, 8, None);
    let b = parked_on(&mut h, 8, None);
    waker_on(&mut h, 1);
    for _ in 1..WAKER_RUN {
        round(&mut h, 1, a);
        round(&mut h, 1, b);
    }
    // Both final wakes reach cpu8's mailbox before it drains.
    h.post_wake(cpu(1), a);
    h.post_wake(cpu(1), b);
    h.settle();
    let (ca, cb) = (h.cpu_of(a), h.cpu_of(b));
    assert_eq!(h.counters().moves_waker_rule, 2, "both runs move");
    assert_ne!(ca, cb, "a burst of moves must spread: both went to {ca:?}");
    for c in [ca, cb] {
        assert_eq!(
            h.sh.topology().level_between(c, cpu(1)),
            Level::Llc,
            "{c:?} is not in the waker's LLC"
        );
    }
}

#[test]
fn a_move_stays_off_the_wakers_core() {
    let mut h = host();
    let t = parked_on(&mut h, 8, None);
    // The waker on cpu4; its sibling is cpu5, the first CPU of the scan.
    waker_on(&mut h, 4);
    for _ in 1..WAKER_RUN {
        round(&mut h, 4, t);
    }
    // As in request/reply, the waker parks before its wake is placed, so its
    // sibling looks like a free core.
    h.post_wake(cpu(4), t);
    h.block(cpu(4));
    h.settle();
    let c = h.cpu_of(t);
    assert_eq!(
        h.counters().moves_waker_rule,
        1,
        "the run must move the task"
    );
    assert!(
        c != cpu(4) && c != cpu(5),
        "the move must stay off the waker's core (cpu4, cpu5), went to {c:?}"
    );
    assert_eq!(c, cpu(6), "the next free core after the waker's");
}

#[test]
fn a_leaving_threads_wakes_leave_the_task_home() {
    let mut h = host();
    let t = parked_on(&mut h, 8, None);
    waker_on(&mut h, 1);
    for _ in 1..WAKER_RUN {
        round(&mut h, 1, t);
    }
    assert_eq!(h.cpus[8].task_state(&h.sh, t).unwrap().run(), WAKER_RUN - 1);
    h.begin_leaving(cpu(1));
    for i in 0..WAKER_RUN {
        assert_eq!(
            round(&mut h, 1, t),
            cpu(8),
            "wake {i} from a leaving thread must not move the task"
        );
    }
    assert_eq!(h.counters().moves_waker_rule, 0);
    assert_eq!(
        h.cpus[8].task_state(&h.sh, t).unwrap().run(),
        WAKER_RUN - 1,
        "a leaving thread's wakes name no waker and are not counted"
    );
}

#[test]
fn a_flagged_wake_is_not_counted_and_a_parked_one_is() {
    let mut h = host();
    let t = h.spawn(cpu(8), TaskSpec::fair(0));
    waker_on(&mut h, 1);
    h.wake(cpu(1), t); // t is running: a flag
    let c = h.counters();
    assert_eq!(
        (c.wakes_flagged, c.wakes_counted),
        (1, 0),
        "a wake of a running task is a flag"
    );
    assert_eq!(
        h.cpus[8].task_state(&h.sh, t).unwrap().run(),
        0,
        "a flag is seen by no one"
    );
    // The flag makes the next park return at once.
    h.block(cpu(8));
    assert_eq!(
        h.where_is(t),
        Some((cpu(8), Holding::Running)),
        "the pending wake must make the park return"
    );
    h.block(cpu(8));
    assert_eq!(h.where_is(t).unwrap().1, Holding::Parked);
    h.wake(cpu(1), t);
    assert_eq!(
        h.counters().wakes_counted,
        1,
        "a parked wake naming a waker is counted"
    );
    assert_eq!(h.cpus[8].task_state(&h.sh, t).unwrap().run(), 1);
}

#[test]
fn device_and_scheduler_wakes_name_no_waker() {
    let mut h = host();
    let t = parked_on(&mut h, 8, None);
    for _ in 0..2 * WAKER_RUN {
        h.irq_wake(cpu(1), t);
        h.block(cpu(8));
    }
    h.sleep_until_for(t);
    assert_eq!(
        h.counters().wakes_counted,
        0,
        "interrupt and deadline wakes are not counted"
    );
    assert_eq!(h.cpus[8].task_state(&h.sh, t).unwrap().run(), 0);
}

trait SleepHelper {
    fn sleep_until_for(&mut self, t: TaskId);
}

impl<P: Policy> SleepHelper for TestHost<P> {
    /// Runs `t`, sleeps it 1 ms, and lets the deadline wake it.
    fn sleep_until_for(&mut self, t: TaskId) {
        self.irq_wake(CpuId::new(1), t);
        let c = self.cpu_of(t);
        let at = self.now + 1_000_000;
        self.sleep_until(c, at);
        assert_eq!(self.where_is(t).unwrap().1, Holding::Parked);
        self.advance(2_000_000);
        assert_eq!(
            self.where_is(t).unwrap().1,
            Holding::Running,
            "the deadline must wake it"
        );
    }
}

#[test]
fn home_policy_never_moves() {
    let mut h = TestHost::quiet("amd-2x8", |_| {});
    let t = parked_on(&mut h, 8, None);
    waker_on(&mut h, 1);
    for _ in 0..4 * WAKER_RUN {
        assert_eq!(round(&mut h, 1, t), cpu(8));
    }
    assert_eq!(h.counters().moves_waker_rule, 0);
}

#[test]
fn rt_tasks_are_counted_but_not_moved() {
    let mut h = host();
    let t = h.spawn(cpu(8), TaskSpec::rt(10));
    h.block(cpu(8));
    waker_on(&mut h, 1);
    for _ in 0..2 * WAKER_RUN {
        assert_eq!(round(&mut h, 1, t), cpu(8));
    }
    assert_eq!(h.counters().moves_waker_rule, 0);
    assert_eq!(
        h.cpus[8].task_state(&h.sh, t).unwrap().run(),
        2 * WAKER_RUN,
        "counted all the same"
    );
}
