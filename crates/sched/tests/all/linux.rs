//! `linux` on the test host: select_idle_sibling's order, decided on the
//! waker's CPU. amd-2x8: LLC 0 = cpu0-7, LLC 1 = cpu8-15, siblings 2k and
//! 2k+1. The woken task may run only in LLC 1, so `want_affine` is false
//! (this CPU is not in its mask) and the target is prev, cpu8.

use schedlab_sched::linux::{reason, Linux};
use schedlab_sched::testhost::TestHost;
use schedlab_sched::{PlaceReason, TaskId, TaskSpec, Trace};
use schedlab_topology::{CpuId, CpuSet};

fn cpu(i: usize) -> CpuId {
    CpuId::new(i)
}

fn host() -> TestHost<Linux> {
    TestHost::quiet_with("amd-2x8", Linux::default(), |_| {})
}

/// A task parked on cpu8 that may run in LLC 1 only, and a waker thread on
/// cpu1; `busy` CPUs each run a pinned spinner.
fn setup(busy: &[usize]) -> (TestHost<Linux>, TaskId) {
    let mut h = host();
    let llc1: CpuSet = (8..16).map(cpu).collect();
    let t = h.spawn(cpu(8), TaskSpec::fair(0).with_mask(llc1));
    h.block(cpu(8));
    h.spawn_pinned(cpu(1), TaskSpec::fair(0));
    for &c in busy {
        h.spawn_pinned(cpu(c), TaskSpec::fair(0));
    }
    (h, t)
}

fn last_place(h: &TestHost<Linux>, t: TaskId) -> Option<(CpuId, PlaceReason)> {
    h.trace.iter().rev().find_map(|(_, _, e)| match e {
        Trace::Place {
            task, cpu, reason, ..
        } if *task == t => Some((*cpu, *reason)),
        _ => None,
    })
}

#[test]
fn an_idle_prev_is_the_target() {
    let (mut h, t) = setup(&[]);
    h.wake(cpu(1), t);
    assert_eq!(
        h.cpu_of(t),
        cpu(8),
        "prev is idle: the task goes back to it"
    );
    assert_eq!(
        last_place(&h, t).map(|(_, r)| r),
        Some(reason::TARGET),
        "placed as the target, decided on the waker (cpu1)"
    );
}

#[test]
fn a_busy_prev_with_idle_cores_in_its_llc_gets_an_idle_core() {
    // cpu8 busy; cpu9 (its sibling) idle; cores 10-11 .. 14-15 idle.
    let (mut h, t) = setup(&[8]);
    h.wake(cpu(1), t);
    assert_eq!(
        last_place(&h, t),
        Some((cpu(10), reason::IDLE_CORE)),
        "the idle-core search from target + 1 finds core 10-11 first"
    );
}

#[test]
fn with_no_idle_core_an_idle_sibling_of_prev_is_next() {
    // Every core of LLC 1 has a busy thread; cpu9, prev's sibling, is idle.
    let (mut h, t) = setup(&[8, 10, 12, 14]);
    h.wake(cpu(1), t);
    assert_eq!(
        last_place(&h, t),
        Some((cpu(9), reason::IDLE_SMT)),
        "select_idle_smt(prev) before the scan"
    );
}

/// `recent_used_cpu` is written (`= prev`) only once the target and prev
/// checks have failed: a wake that finds prev busy records it.
#[test]
fn a_recently_used_idle_cpu_is_taken_before_any_scan() {
    // Wake 1: prev (cpu8) busy -> recent_used_cpu := 8, an idle core: 10.
    let (mut h, t) = setup(&[8]);
    h.wake(cpu(1), t);
    assert_eq!(h.cpu_of(t), cpu(10));
    // cpu8's spinner exits; t parks on cpu10, which then gets busy.
    h.exit(cpu(8));
    h.block(cpu(10));
    h.spawn_pinned(cpu(10), TaskSpec::fair(0));
    // Wake 2: prev (cpu10) busy; recent (cpu8) idle, in the LLC and mask.
    h.wake(cpu(1), t);
    assert_eq!(
        last_place(&h, t),
        Some((cpu(8), reason::RECENT)),
        "prev busy: the recently used cpu8 before any scan"
    );
}

/// SIS_UTIL's own documented limit (Chen Yu's posting, limitation [2]): an
/// LLC whose utilization passes 85% is not scanned, so a lone idle CPU in
/// it goes unseen and the task stays on its busy prev.
#[test]
fn an_llc_past_85_percent_is_not_scanned() {
    // cpu8..cpu14 busy for a second (about 7/8 = 87.5% of LLC 1), cpu15
    // idle; no idle core (cpu14 is cpu15's sibling), cpu9 busy too.
    let (mut h, t) = setup(&[8, 9, 10, 11, 12, 13, 14]);
    h.advance(1_000_000_000);
    h.wake(cpu(1), t);
    assert_eq!(
        last_place(&h, t),
        Some((cpu(8), reason::TARGET)),
        "no scan past 85%: the task queues on prev, cpu15 unseen"
    );
}
