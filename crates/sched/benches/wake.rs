//! The wake placement decision (docs/ARCHITECTURE.md, speed), on amd-2x8 (16 CPUs,
//! LLCs of 8), genoa-96 (192 CPUs, LLCs of 16) and max-1024 (LLCs of 16):
//!
//! * `decide_stay`: a parked wake from the task's own LLC: the streak count
//!   and the policy's answer (stay home);
//! * `decide_move_first`: a run at WAKER_RUN from another LLC whose first
//!   scanned CPU is a free core: the count and the move's target;
//! * `decide_move_scan`: the same when every CPU of the waker's LLC is busy
//!   but the last one scanned, so the scan reads the whole LLC;
//! * `linux_prev_idle`: `linux`'s decision (on the waker) for a sync wake
//!   whose prev is idle: `wake_affine`, then `select_idle_sibling` returns
//!   at its first check;
//! * `linux_scan`: the same when prev's whole LLC is busy but the last CPU
//!   `select_idle_cpu` reaches, so the scan reads the LLC (SIS_UTIL allows
//!   all of it: no utilization has built up);
//! * `wake_cycle`: a whole parked wake on the owner, for scale: delivery
//!   (CAS + mailbox push), the drain, `handle_wake` (count, decide,
//!   enqueue with `place_entity`), and putting the task back to sleep.
//!
//! `cargo bench -p schedlab-sched --bench wake`

use divan::{black_box, Bencher};
use schedlab_sched::linux::{Linux, LinuxTask};
use schedlab_sched::policy::Decision;
use schedlab_sched::testhost::TestHost;
use schedlab_sched::{
    Balance, Config, CpuSched, Effects, Home, Policy, Shared, Task, TaskData, TaskId, TaskSpec,
    Wake, WakeCause, WakerStreak, WakerStreakRule, WAKER_RUN,
};
use schedlab_topology::{preset, CpuId, CpuSet};

const MACHINES: &[&str] = &["amd-2x8", "genoa-96", "max-1024"];

fn main() {
    eprintln!(
        "memory: Task (owned, travels with the task: a {} B handle to {} B); shared per task slot {} B; shared per CPU {} B; CpuSched (owned, empty) {} B",
        std::mem::size_of::<Task<WakerStreak>>(),
        std::mem::size_of::<TaskData<WakerStreak>>(),
        Shared::<WakerStreak>::BYTES_PER_TASK_SLOT,
        Shared::<WakerStreak>::BYTES_PER_CPU,
        std::mem::size_of::<CpuSched<WakerStreakRule>>(),
    );
    divan::main();
}

struct Fixture {
    h: TestHost<Home>,
    /// The parked task's entity, as the deciding CPU holds it (copied per
    /// decision: a decision may write its state).
    parked: Task<WakerStreak>,
    task: TaskId,
    home: CpuId,
    near_waker: CpuId,
    far_waker: CpuId,
}

/// A task parked on the first CPU of the second LLC with a run of
/// WAKER_RUN from LLC 0 (counted under `home`, which never moves it), a
/// waker thread in each LLC, and, with `crowd`, every CPU of LLC 0 busy
/// except the waker's core and the last CPU its scan reaches.
fn fixture(name: &str, crowd: bool) -> Fixture {
    let topo = preset(name).unwrap();
    let mut cfg = Config::for_topology(&topo);
    cfg.balance = Balance::OFF;
    let llc0 = topo.llcs()[0].cpus;
    let llc1 = topo.llcs()[1].cpus;
    let home = llc1.first().unwrap();
    let far_waker = llc0.first().unwrap();
    let near_waker = llc1.iter().nth(2).unwrap();
    let mut h = TestHost::new(topo, cfg, Home);
    let task = h.spawn(home, TaskSpec::fair(0));
    assert_eq!(h.cpu_of(task), home);
    h.block(home);
    h.spawn_pinned(far_waker, TaskSpec::fair(0));
    h.spawn_pinned(near_waker, TaskSpec::fair(0));
    for _ in 0..WAKER_RUN {
        h.wake(far_waker, task);
        h.block(home);
    }
    if crowd {
        let waker_core = *h.sh.topology().core_cpus(far_waker);
        let last = llc0.iter_from(far_waker).last().unwrap();
        for c in llc0.iter() {
            if !waker_core.contains(c) && c != last {
                h.spawn_pinned(c, TaskSpec::fair(0).with_mask(CpuSet::single(c)));
            }
        }
    }
    let parked = h.sh.parked_task(task).expect("parked");
    Fixture {
        h,
        parked,
        task,
        home,
        near_waker,
        far_waker,
    }
}

fn decide(f: &Fixture, policy: &mut WakerStreakRule, waker: CpuId) -> Decision {
    let mut streak = *f.parked.state();
    streak.observe(f.h.sh.topology().llc_id(waker));
    black_box(streak);
    let m = f.h.sh.machine(f.home, 0);
    let wake = Wake {
        task: f.task,
        prev: f.home,
        prev_busy: false,
        cause: WakeCause::from(waker),
    };
    let mut task = f.parked.clone();
    policy.place(&m, &wake, &mut task)
}

#[divan::bench(args = MACHINES)]
fn decide_stay(b: Bencher, name: &str) {
    let f = fixture(name, false);
    let mut p = WakerStreakRule::default();
    assert_eq!(decide(&f, &mut p, f.near_waker), Decision::Stay);
    b.bench_local(|| decide(black_box(&f), &mut p, black_box(f.near_waker)));
}

#[divan::bench(args = MACHINES)]
fn decide_move_first(b: Bencher, name: &str) {
    let f = fixture(name, false);
    let mut p = WakerStreakRule::default();
    assert!(matches!(
        decide(&f, &mut p, f.far_waker),
        Decision::Send(..)
    ));
    b.bench_local(|| decide(black_box(&f), &mut p, black_box(f.far_waker)));
}

#[divan::bench(args = MACHINES)]
fn decide_move_scan(b: Bencher, name: &str) {
    let f = fixture(name, true);
    let mut p = WakerStreakRule::default();
    let d = decide(&f, &mut p, f.far_waker);
    let llc0 = f.h.sh.topology().llcs()[0].cpus;
    let last = llc0.iter_from(f.far_waker).last().unwrap();
    assert_eq!(
        d,
        Decision::Send(last, schedlab_sched::PlaceReason::WakerRule)
    );
    b.bench_local(|| decide(black_box(&f), &mut p, black_box(f.far_waker)));
}

#[divan::bench(args = MACHINES)]
fn wake_cycle(b: Bencher, name: &str) {
    let mut f = fixture(name, false);
    let cause = WakeCause::from(f.near_waker);
    let (home, task) = (f.home, f.task);
    b.bench_local(|| {
        let h = &mut f.h;
        let _ = h.sh.post_wake_for_bench(task, cause, f.near_waker);
        h.cpus[home.index()].take_mail_for_bench(&h.sh);
        let mut fx = Effects::default();
        h.cpus[home.index()].handle_wake_for_bench(&h.sh, task, cause, 0, &mut fx);
        h.cpus[home.index()].repark(&h.sh, task);
        let _ = black_box(fx);
    });
}

/// A task parked on the first CPU of LLC 1 under `linux`, a waker thread
/// on the first CPU of LLC 0; with `crowd`, every CPU of LLC 1 busy but the
/// last one the scan from prev + 1 reaches.
fn linux_fixture(name: &str, crowd: bool) -> (TestHost<Linux>, Task<LinuxTask>, Wake, CpuId) {
    let topo = preset(name).unwrap();
    let mut cfg = Config::for_topology(&topo);
    cfg.balance = Balance::OFF;
    let llc1 = topo.llcs()[1].cpus;
    let home = llc1.first().unwrap();
    let waker = topo.llcs()[0].cpus.first().unwrap();
    let mut h = TestHost::new(topo, cfg, Linux::default());
    let task = h.spawn(home, TaskSpec::fair(0).with_mask(llc1));
    h.block(home);
    h.spawn_pinned(waker, TaskSpec::fair(0));
    if crowd {
        let last = llc1.iter_from(home).last().unwrap();
        for c in llc1.iter().filter(|&c| c != last) {
            h.spawn_pinned(c, TaskSpec::fair(0));
        }
    }
    let parked = h.sh.parked_task(task).expect("parked");
    let wake = Wake {
        task,
        prev: home,
        prev_busy: crowd,
        cause: WakeCause {
            waker: Some(waker),
            sync: true,
        },
    };
    (h, parked, wake, waker)
}

#[divan::bench(args = MACHINES)]
fn linux_prev_idle(b: Bencher, name: &str) {
    let (h, parked, wake, waker) = linux_fixture(name, false);
    let mut p = Linux::default();
    let m = h.sh.machine(waker, 0);
    let d = p.place(&m, &wake, &mut parked.clone());
    assert!(matches!(d, Decision::Send(c, _) if c == wake.prev), "{d:?}");
    b.bench_local(|| {
        let mut t = parked.clone();
        p.place(black_box(&m), black_box(&wake), &mut t)
    });
}

#[divan::bench(args = MACHINES)]
fn linux_scan(b: Bencher, name: &str) {
    let (h, parked, wake, waker) = linux_fixture(name, true);
    let mut p = Linux::default();
    let m = h.sh.machine(waker, 0);
    let llc1 = h.sh.topology().llcs()[1].cpus;
    let last = llc1.iter_from(wake.prev).last().unwrap();
    let d = p.place(&m, &wake, &mut parked.clone());
    assert!(
        matches!(d, Decision::Send(c, _) if c == last),
        "{d:?}, expected {last:?}"
    );
    b.bench_local(|| {
        let mut t = parked.clone();
        p.place(black_box(&m), black_box(&wake), &mut t)
    });
}
