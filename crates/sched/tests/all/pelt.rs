//! PELT in the scheduler: each CPU's fair queue signal, updated where Linux
//! updates it (enqueue, dequeue, tick, switch) and published for other CPUs
//! (the `linux` policy's SIS_UTIL and wake_affine_weight read it).

use schedlab_sched::testhost::TestHost;
use schedlab_sched::TaskSpec;
use schedlab_topology::CpuId;

#[test]
fn a_busy_cpu_publishes_full_utilization_and_an_idle_one_none() {
    let mut h = TestHost::quiet("amd-2x8", |_| {});
    let t = h.spawn_pinned(CpuId::new(3), TaskSpec::fair(0));
    h.advance(1_000_000_000);
    let m = h.sh.machine(CpuId::new(0), h.now);
    let busy = m.util(CpuId::new(3));
    assert!(
        (1000..=1024).contains(&busy),
        "cpu3 ran a spinner for 1 s: util_avg about 1024, got {busy}"
    );
    assert!(
        (1000..=1024).contains(&m.load_avg(CpuId::new(3))),
        "one nice-0 task always runnable: load_avg about 1024, got {}",
        m.load_avg(CpuId::new(3))
    );
    assert_eq!(m.util(CpuId::new(5)), 0, "cpu5 never ran anything");
    let task = h.cpus[3].task(&h.sh, t).expect("held");
    assert!(
        task.pelt().util_avg >= 1000,
        "the task's own signal too: {}",
        task.pelt().util_avg
    );
}

#[test]
fn a_task_that_sleeps_leaves_a_decaying_utilization_behind() {
    let mut h = TestHost::quiet("amd-2x8", |_| {});
    let t = h.spawn_pinned(CpuId::new(3), TaskSpec::fair(0));
    h.advance(500_000_000);
    h.block(CpuId::new(3));
    let at_park = h.sh.machine(CpuId::new(0), h.now).util(CpuId::new(3));
    // Time passes with nothing on cpu3; a wake brings its queue up to date.
    h.advance(32 * 1_048_576);
    h.irq_wake(CpuId::new(3), t);
    let later = h.sh.machine(CpuId::new(0), h.now).util(CpuId::new(3));
    assert!(
        later < at_park * 3 / 4,
        "after about 32 ms idle the queue's util must have decayed (about half): {at_park} -> {later}"
    );
}
