//! Core scheduling on the test host (`smt-2x2`: cores {0,1} and {2,3}):
//! forced idle, its pull of a task of the core's cookie, and the turns a
//! forced-idle sibling's work gets. The cookie invariant is checked after
//! every pass.

use schedlab_sched::testhost::TestHost;
use schedlab_sched::{Holding, TaskSpec};
use schedlab_topology::{CpuId, CpuSet};

const MS: u64 = 1_000_000;

fn cpu(i: usize) -> CpuId {
    CpuId::new(i)
}

fn host() -> TestHost {
    TestHost::quiet("smt-2x2", |c| c.core_sched = true)
}

fn cookied(mut spec: TaskSpec, cookie: u64) -> TaskSpec {
    spec.cookie = cookie;
    spec
}

#[test]
fn a_forced_idle_cpu_pulls_a_task_of_the_cores_cookie() {
    let mut h = host();
    // On the other core, cpu2 runs one cookie-1 task and has another
    // waiting, which may also run on cpu1.
    h.spawn_pinned(cpu(2), cookied(TaskSpec::fair(0), 1));
    let spare = h.spawn_pinned(cpu(2), cookied(TaskSpec::fair(0), 1));
    h.set_mask(cpu(2), spare, CpuSet::from_iter([cpu(1), cpu(2)]));
    assert_eq!(h.where_is(spare), Some((cpu(2), Holding::Queued)));
    // cpu1 runs a cookie-2 task; then an RT cookie-1 task on its sibling
    // cpu0 makes cookie 1 the core's, and forces cpu1 idle.
    let other = h.spawn_pinned(cpu(1), cookied(TaskSpec::fair(0), 2));
    let rt = h.spawn_pinned(cpu(0), cookied(TaskSpec::rt(10), 1));
    assert_eq!(h.where_is(rt), Some((cpu(0), Holding::Running)));
    assert_eq!(
        h.where_is(spare),
        Some((cpu(1), Holding::Running)),
        "forced idle, cpu1 should have pulled the waiting cookie-1 task from cpu2 and run it"
    );
    assert_eq!(
        h.where_is(other),
        Some((cpu(1), Holding::Queued)),
        "the cookie-2 task waits"
    );
    assert_eq!(h.counters().moves_steal, 1);
}

#[test]
fn a_forced_idle_siblings_work_gets_turns() {
    let mut h = host();
    let a = h.spawn_pinned(cpu(0), cookied(TaskSpec::fair(0), 1));
    let b = h.spawn_pinned(cpu(1), cookied(TaskSpec::fair(0), 2));
    h.advance(200 * MS);
    let (ra, rb) = (h.runtime[&a], h.runtime[&b]);
    // Only one cookie runs at a time, so the two share one core's time.
    assert!(
        ra + rb <= 200 * MS,
        "siblings never run two cookies at once: {ra} + {rb} ns in 200 ms"
    );
    for (name, r) in [("a", ra), ("b", rb)] {
        assert!(
            r > 60 * MS,
            "each task should get turns (about half the core): {name} ran {} ms of 200",
            r / MS
        );
    }
}
