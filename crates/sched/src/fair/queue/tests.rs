//! The queue's rules worked by hand from `kernel/sched/fair.c`: weights of
//! nice 0 (1024) throughout, so `V` is the plain mean of the vruntimes and
//! a lag scales by `(W + w) / W` on placement.

use super::*;
use crate::fair::features::{FeatureSet, Kernel};

#[derive(Clone, Copy, Debug)]
struct E {
    k: u32,
    e: Entity,
}

impl Queued for E {
    fn key(&self) -> u32 {
        self.k
    }
    fn entity(&self) -> &Entity {
        &self.e
    }
    fn entity_mut(&mut self) -> &mut Entity {
        &mut self.e
    }
}

const SLICE: u64 = 2_800_000;

fn ent(k: u32, v: i64) -> E {
    let mut e = Entity::new(0, SLICE);
    e.vruntime = v;
    e.deadline = v + e.vslice();
    E { k, e }
}

fn cfg(kernel: Kernel, features: &str) -> FairConfig {
    let mut c = FairConfig::for_cpus(16);
    c.features = FeatureSet::of(kernel)
        .parse(features)
        .expect("known features");
    c
}

/// A (key 1) ran ahead to v = 1000 and blocks; B (key 2) waits at v = 0.
/// `V` with A in it is 500, so A is not eligible.
fn a_blocks(c: &FairConfig) -> (FairQueue<E>, Option<E>) {
    let mut q = FairQueue::default();
    q.queued.push(ent(2, 0));
    let left = q.block(ent(1, 1000), c);
    (q, left)
}

#[test]
fn a_delayed_task_keeps_v_up() {
    let c = cfg(Kernel::L6_19, "");
    let (q, left) = a_blocks(&c);
    assert!(left.is_none(), "DELAY_DEQUEUE keeps an ineligible A");
    assert_eq!(q.avg(None).v(), 500, "A still counts in V: (0 + 1000) / 2");
    assert_eq!(q.queued.len(), 1, "but it is not runnable");
    let off = cfg(Kernel::L6_19, "NO_DELAY_DEQUEUE");
    let (q, left) = a_blocks(&off);
    let a = left.expect("without DELAY_DEQUEUE it leaves");
    assert_eq!(a.e.vlag, -500, "its lag V - v = 500 - 1000");
    assert_eq!(q.avg(None).v(), 0, "and V is B's alone");
}

#[test]
fn an_eligible_task_is_not_delayed() {
    let c = cfg(Kernel::L6_19, "");
    let mut q = FairQueue::default();
    q.queued.push(ent(2, 1000));
    let left = q.block(ent(1, 0), &c);
    assert_eq!(
        left.map(|a| a.e.vlag),
        Some(500),
        "v = 0 <= V = 500: it leaves, lag 500"
    );
}

#[test]
fn a_wake_requeues_a_delayed_task_where_it_was() {
    let c = cfg(Kernel::L6_19, "");
    let (mut q, _) = a_blocks(&c);
    // B runs 300 ns: v = 300, V = (300 + 1000) / 2 = 650.
    let mut b = q.take(0);
    b.e.vruntime = 300;
    let i = q.delayed_at(1).expect("A is delayed");
    let at = q.requeue_delayed(i, Some(&b.e), &c);
    let a = q.queued[at].e;
    assert_eq!(a.vruntime, 1000, "lag 650 - 1000 < 0: A stays where it was");
    assert_eq!(
        a.deadline,
        1000 + a.vslice(),
        "deadline untouched: no placement"
    );
    // Without DELAY_DEQUEUE, A left with lag -500 and is placed again
    // against B alone: 300 - (-500 * 2048 / 1024) = 1300.
    let off = cfg(Kernel::L6_19, "NO_DELAY_DEQUEUE");
    let (mut q, a) = a_blocks(&off);
    let mut b = q.take(0);
    b.e.vruntime = 300;
    q.enqueue(a.expect("left"), Some(&b.e), &off, false);
    assert_eq!(q.queued[0].e.vruntime, 1300);
}

#[test]
fn delay_zero_clips_a_positive_lag_on_wake_and_at_the_pick() {
    let c = cfg(Kernel::L6_19, "");
    let (mut q, _) = a_blocks(&c);
    // B runs until v = 1500: V = 1250 > 1000, A is owed 250.
    let mut b = q.take(0);
    b.e.vruntime = 1500;
    let i = q.delayed_at(1).unwrap();
    let at = q.requeue_delayed(i, Some(&b.e), &c);
    assert_eq!(
        q.queued[at].e.vruntime, 1500,
        "lag 250 dropped: placed at V = B's 1500"
    );
    assert_eq!(q.queued[at].e.vlag, 0);
    let no_zero = cfg(Kernel::L6_19, "NO_DELAY_ZERO");
    let (mut q, _) = a_blocks(&no_zero);
    let mut b = q.take(0);
    b.e.vruntime = 1500;
    let i = q.delayed_at(1).unwrap();
    let at = q.requeue_delayed(i, Some(&b.e), &no_zero);
    assert_eq!(
        q.queued[at].e.vruntime, 1000,
        "NO_DELAY_ZERO: it keeps its place, and its credit"
    );
    // At the pick: A finished while owed 250 leaves with lag 0.
    let (mut q, _) = a_blocks(&c);
    let mut b = q.take(0);
    b.e.vruntime = 1500;
    let a = q.finish_delayed(0, Some(&b.e), &c);
    assert_eq!(a.e.vlag, 0, "DELAY_ZERO: 250 clipped to 0");
    let (mut q, _) = a_blocks(&no_zero);
    let mut b = q.take(0);
    b.e.vruntime = 1500;
    assert_eq!(q.finish_delayed(0, Some(&b.e), &no_zero).e.vlag, 250);
}

#[test]
fn a_pick_that_lands_on_a_delayed_task_finishes_it_and_picks_again() {
    let c = cfg(Kernel::L6_19, "");
    let mut q = FairQueue::default();
    // Delayed A at v = 0 with the earliest deadline; B queued at v = 100.
    let mut a = ent(1, 0);
    a.e.deadline = 10;
    q.delayed.push(a);
    q.queued.push(ent(2, 100));
    assert_eq!(
        q.pick(None, &c),
        Choice::Delayed(0),
        "A: eligible, earliest deadline"
    );
    let a = q.finish_delayed(0, None, &c);
    assert_eq!(a.e.vlag, 0, "V = 50: its lag 50, clipped by DELAY_ZERO");
    assert_eq!(q.pick(None, &c), Choice::Queued(0), "then B");
}

#[test]
fn a_delayed_task_never_becomes_the_running_one() {
    let c = cfg(Kernel::L6_19, "");
    let mut q: FairQueue<E> = FairQueue::default();
    q.delayed.push(ent(1, 0));
    assert_eq!(
        q.pick(None, &c),
        Choice::Delayed(0),
        "alone, it is picked, to be finished"
    );
    q.finish_delayed(0, None, &c);
    assert_eq!(
        q.pick(None, &c),
        Choice::Nothing,
        "and nothing is left to run"
    );
}

#[test]
fn the_reworked_next_buddy_holds_a_sync_wake_until_the_waker_has_run() {
    // The waker C runs at v = 0, deadline 5000, not protected; W wakes at
    // v = 0 with an earlier deadline, 1000: eligible.
    let c = cfg(Kernel::L6_19, "NEXT_BUDDY");
    let now = 1_000_000;
    let setup = || {
        let mut q = FairQueue::default();
        let mut w = ent(2, 0);
        w.e.deadline = 1000;
        q.queued.push(w);
        let mut cur = ent(1, 0);
        cur.e.deadline = 5000;
        cur.e.exec_start = now;
        (q, cur)
    };
    let (mut q, mut cur) = setup();
    let sync = WakeFlags {
        sync: true,
        in_task: true,
        ..WakeFlags::default()
    };
    assert!(
        !q.wakeup_preempt(0, &mut cur.e, &c, now, sync),
        "sync, the waker charged just now: preempt_sync() says no"
    );
    assert_eq!(q.next, Some(2), "but W is the next buddy");
    assert_eq!(
        q.pick(Some(&cur.e), &c),
        Choice::Queued(0),
        "and PICK_BUDDY runs it next"
    );
    let (mut q, mut cur) = setup();
    cur.e.exec_start = now - 500_000;
    assert!(
        q.wakeup_preempt(0, &mut cur.e, &c, now, sync),
        "the waker ran sysctl_sched_migration_cost: preempt"
    );
    let (mut q, mut cur) = setup();
    cur.e.exec_start = now - 200_000;
    let selected = WakeFlags {
        selected: true,
        ..sync
    };
    assert!(
        q.wakeup_preempt(0, &mut cur.e, &c, now, selected),
        "WF_RQ_SELECTED: a quarter of it (125 us) is enough"
    );
    let (mut q, mut cur) = setup();
    let plain = WakeFlags {
        in_task: true,
        ..WakeFlags::default()
    };
    assert!(
        q.wakeup_preempt(0, &mut cur.e, &c, now, plain),
        "not sync: the buddy is picked: preempt"
    );
    let (mut q, mut cur) = setup();
    let fork = WakeFlags {
        fork: true,
        ..plain
    };
    assert!(
        !q.wakeup_preempt(0, &mut cur.e, &c, now, fork),
        "the rework: a fork never preempts"
    );
    let (mut q, mut cur) = setup();
    let off = cfg(Kernel::L6_19, "");
    assert!(
        q.wakeup_preempt(0, &mut cur.e, &off, now, sync),
        "NO_NEXT_BUDDY: the pick decides, and W's earlier deadline wins it"
    );
    assert_eq!(q.next, None);
}

#[test]
fn an_earlier_buddy_stays() {
    let c = cfg(Kernel::L6_19, "NEXT_BUDDY");
    let mut q = FairQueue::default();
    let mut old = ent(3, 0);
    old.e.deadline = 500;
    q.queued.push(old);
    q.next = Some(3);
    let mut w = ent(2, 0);
    w.e.deadline = 1000;
    q.queued.push(w);
    let mut cur = ent(1, 0);
    cur.e.deadline = 5000;
    q.wakeup_preempt(1, &mut cur.e, &c, 0, WakeFlags::default());
    assert_eq!(
        q.next,
        Some(3),
        "set_preempt_buddy(): the earlier deadline keeps the buddy"
    );
}

#[test]
fn a_shorter_slice_ignores_the_protection() {
    let c = cfg(Kernel::L6_19, "");
    let mut cur = ent(1, 0);
    cur.e.deadline = 5000;
    cur.e.vprot = 4000;
    let mut short = ent(2, 0);
    short.e.slice = SLICE / 4;
    short.e.deadline = 1000;
    let mut q = FairQueue::default();
    q.queued.push(short);
    assert!(
        q.wakeup_preempt(0, &mut cur.e, &c, 0, WakeFlags::default()),
        "PREEMPT_SHORT: protected, yet preempted"
    );
    assert_eq!(cur.e.vprot, cur.e.vruntime, "cancel_protect_slice()");
    let mut cur = ent(1, 0);
    cur.e.deadline = 5000;
    cur.e.vprot = 4000;
    let mut q = FairQueue::default();
    q.queued.push(short);
    let no = cfg(Kernel::L6_19, "NO_PREEMPT_SHORT");
    assert!(
        !q.wakeup_preempt(0, &mut cur.e, &no, 0, WakeFlags::default()),
        "protected: not preempted"
    );
}

#[test]
fn update_curr_asks_once_protection_ends_since_6_17() {
    let mut cur = ent(1, 0).e;
    cur.exec_start = 0;
    cur.vprot = 100;
    let new = cfg(Kernel::L6_19, "");
    let old = cfg(Kernel::L6_12, "");
    let (mut a, mut b) = (cur, cur);
    assert!(
        update_curr(&mut a, 200, true, &new),
        "v = 200 > vprot: 6.19 asks"
    );
    assert!(
        !update_curr(&mut b, 200, true, &old),
        "6.12 waits for the deadline"
    );
    let mut c = cur;
    assert!(
        !update_curr(&mut c, 200, false, &new),
        "alone: nobody to give way to"
    );
}

#[test]
fn the_6_18_stable_rework_preempts_an_ineligible_waker() {
    // The waker C at v = 3000; X (deadline 100) and W (9 ms) queued at 0:
    // V = 1000, C not eligible, and the pick is X, not W.
    let mut q = FairQueue::default();
    let mut x = ent(3, 0);
    x.e.deadline = 100;
    q.queued.push(x);
    let mut w = ent(2, 0);
    w.e.deadline = 9_000_000;
    q.queued.push(w);
    let wake = WakeFlags {
        in_task: true,
        ..WakeFlags::default()
    };
    let cur = ent(1, 3000);
    let mut c = cur;
    assert!(
        q.wakeup_preempt(1, &mut c.e, &cfg(Kernel::L6_18, "NO_NEXT_BUDDY"), 0, wake),
        "6.18 stable: the waker is no longer eligible: it gives way"
    );
    let mut c = cur;
    assert!(
        !q.wakeup_preempt(1, &mut c.e, &cfg(Kernel::L6_19, ""), 0, wake),
        "6.19 reverted it (15257cc2f905): the pick is X, not W"
    );
    let mut c = cur;
    let irq = WakeFlags::default();
    assert!(
        !q.wakeup_preempt(1, &mut c.e, &cfg(Kernel::L6_18, "NO_NEXT_BUDDY"), 0, irq),
        "not in_task(): no forced preemption"
    );
}

#[test]
fn a_moved_task_keeps_its_relative_deadline() {
    let c = cfg(Kernel::L6_19, "");
    let mut q = FairQueue::default();
    let mut a = ent(1, 1000);
    a.e.deadline = 1700;
    q.queued.push(a);
    q.queued.push(ent(2, 1000));
    let a = q.dequeue(1, None, &c, true).expect("queued");
    assert!(
        a.e.rel_deadline && a.e.deadline == 700,
        "700 past its vruntime"
    );
    let mut there = FairQueue::default();
    there.queued.push(ent(3, 50_000));
    there.enqueue(a, None, &c, false);
    let e = there.queued[1].e;
    assert_eq!(
        (e.vruntime, e.deadline),
        (50_000, 50_700),
        "lag 0 there, the same 700 ahead"
    );
    let no = cfg(Kernel::L6_19, "NO_PLACE_REL_DEADLINE");
    let mut q = FairQueue::default();
    q.queued.push(ent(1, 1000));
    assert!(!q.dequeue(1, None, &no, true).unwrap().e.rel_deadline);
    let mut q = FairQueue::default();
    q.queued.push(ent(1, 1000));
    assert!(
        !q.dequeue(1, None, &c, false).unwrap().e.rel_deadline,
        "not a migration"
    );
}

/// The queue's `V` sums (a loop per part) are [`Avg::of`] over its
/// entities in their order, with the same base: the same `V` to the
/// nanosecond, queued, delayed and running alike, and the fallback when
/// empty.
#[test]
fn the_queue_s_sums_are_avg_of_its_entities() {
    let mut q: FairQueue<E> = FairQueue {
        zero_v: -7,
        ..FairQueue::default()
    };
    let mut curr = Entity::new(5, SLICE);
    curr.vruntime = 1_333;
    let check = |q: &FairQueue<E>, curr: Option<&Entity>| {
        let a = q.avg(curr);
        let b = Avg::of(q.entities(curr), q.zero_v);
        assert_eq!(
            (a.base, a.sum, a.weight, a.v()),
            (b.base, b.sum, b.weight, b.v()),
            "expected the queue's sums to be Avg::of its entities ({} queued, {} delayed, running {})",
            q.queued.len(),
            q.delayed.len(),
            curr.is_some()
        );
    };
    check(&q, None);
    check(&q, Some(&curr));
    q.delayed.push(ent(1, 5_001));
    check(&q, None);
    check(&q, Some(&curr));
    q.queued.push(ent(2, -2_003));
    q.queued.push(E {
        k: 3,
        e: Entity::new(-3, SLICE),
    });
    check(&q, None);
    check(&q, Some(&curr));
}
