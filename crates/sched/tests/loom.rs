//! loom models of the park word, the mailbox and the doorbell.
//!
//! Run with (CI does, with a preemption bound):
//!
//! ```sh
//! LOOM_MAX_PREEMPTIONS=2 RUSTFLAGS="--cfg loom" cargo test -p schedlab-sched --release --test loom
//! ```
//!
//! Each model builds a tiny machine inside `loom::model`, so every atomic and
//! lock the scheduler touches is loom's (through `sync`), and lets the real
//! entry points race on real threads.
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use schedlab_sched::{
    Balance, Config, CpuSched, Effects, Holding, Home, OnWaker, Policy, PolicyState, Shared,
    Switch, TaskId, TaskSpec, WakerStreakRule,
};
use schedlab_topology::{CpuId, CpuSet, Shape, Siblings};

fn cpu(i: usize) -> CpuId {
    CpuId::new(i)
}

type Machine<P> = (Arc<Shared<<P as Policy>::TaskState>>, Vec<CpuSched<P>>);

fn machine<P: Policy>(n: usize, newidle: bool, policy: P) -> Machine<P> {
    let topo = Shape {
        nodes: 1,
        llcs_per_node: 1,
        cores_per_llc: n,
        threads_per_core: 1,
        siblings: Siblings::Adjacent,
    }
    .build("loom")
    .unwrap();
    let mut cfg = Config::for_topology(&topo);
    cfg.balance = Balance {
        newidle,
        periodic: false,
        migration_cost_ns: 0,
        ..Balance::OFF
    };
    let sh = Shared::new(topo, cfg, 8);
    let cpus = CpuSched::for_machine(&sh, policy);
    (Arc::new(sh), cpus)
}

/// A task pinned to `c`, running there.
fn running_on<P: Policy>(sh: &Shared<P::TaskState>, cpus: &mut [CpuSched<P>], c: usize) -> TaskId {
    let t = cpus[c]
        .spawn(sh, TaskSpec::fair(0).with_mask(CpuSet::single(cpu(c))), 0)
        .unwrap()
        .task;
    let fx = cpus[c].pass(sh, 0, 0);
    assert_eq!(fx.switch, Some(Switch::Run(t)));
    t
}

fn kicked(fx: &Effects, c: usize) -> bool {
    fx.kicks.iter().any(|k| k.cpu == cpu(c)) || fx.resched
}

fn holdings<P: Policy>(sh: &Shared<P::TaskState>, c: &CpuSched<P>, t: TaskId) -> Vec<Holding> {
    c.holdings(sh)
        .into_iter()
        .filter(|(id, _)| *id == t)
        .map(|(_, h)| h)
        .collect()
}

/// What [`wake_racing_park`] leaves: cpu0 and its task, the park's and
/// the wake's effects.
struct Race<P: Policy> {
    sh: Arc<Shared<P::TaskState>>,
    c0: CpuSched<P>,
    t: TaskId,
    fx0: Effects,
    fx1: Effects,
}

/// `t` runs on cpu0 and blocks while cpu1's running thread wakes it; if
/// the CPU went idle and the wake kicked it, cpu0 runs its pass.
fn wake_racing_park<P: Policy + Send + 'static>(policy: P) -> Race<P>
where
    P::TaskState: Send + Sync,
{
    let (sh, mut cpus) = machine(2, false, policy);
    let t = running_on(&sh, &mut cpus, 0);
    running_on(&sh, &mut cpus, 1); // the waker's thread
    let mut c1 = cpus.pop().unwrap();
    let mut c0 = cpus.pop().unwrap();
    let sh1 = sh.clone();
    let waker = thread::spawn(move || {
        let fx = c1.wake(&sh1, t, 1);
        (c1, fx)
    });
    let fx0 = c0.block(&sh, 1, 0);
    let (_c1, fx1) = waker.join().unwrap();
    if fx0.switch != Some(Switch::Run(t)) && kicked(&fx1, 0) {
        let _ = c0.pass(&sh, 2, 0);
    }
    Race {
        sh,
        c0,
        t,
        fx0,
        fx1,
    }
}

/// A wake racing a park is never lost and never queues the task twice.
#[test]
fn a_wake_racing_a_park_is_never_lost() {
    loom::model(|| {
        let Race {
            sh,
            c0,
            t,
            fx0,
            fx1,
        } = wake_racing_park(Home);
        assert_eq!(
            c0.current(),
            Some(t),
            "the wake was lost: park returned {:?}, the waker sent {:?}",
            fx0.switch,
            fx1.kicks
        );
        assert_eq!(
            holdings(&sh, &c0, t),
            [Holding::Running],
            "the task must be held exactly once"
        );
        assert_eq!(c0.queued(), 0, "and queued nowhere");
    });
}

/// With flags counted (`waker-streak:K:flags`), the flag's waker LLC rides
/// in the park word: a wake racing a park is still never lost, and it
/// reaches the streak exactly once, as a consumed flag or as a parked wake.
#[test]
fn a_counted_flag_racing_a_park_counts_once() {
    loom::model(|| {
        let rule = WakerStreakRule {
            waker_run: 8,
            flags: true,
        };
        let Race { sh, c0, t, fx0, .. } = wake_racing_park(rule);
        assert_eq!(c0.current(), Some(t), "the wake was lost");
        let run = c0
            .task(&sh, t)
            .and_then(|task| task.state().streak())
            .map(|s| s.run());
        assert_eq!(
            run,
            Some(1),
            "one wake, counted once (park returned at once: {})",
            fx0.switch == Some(Switch::Run(t))
        );
        assert_eq!(
            sh.task_word(t).pending,
            false,
            "the flag is consumed or never set"
        );
    });
}

/// Two wakers racing for one parked task: exactly one message, one enqueue.
#[test]
fn two_wakers_post_one_wake() {
    loom::model(|| {
        let (sh, mut cpus) = machine(3, false, Home);
        let t = running_on(&sh, &mut cpus, 0);
        let fx = cpus[0].block(&sh, 1, 0);
        assert!(matches!(fx.switch, Some(Switch::Idle { .. })));
        running_on(&sh, &mut cpus, 1);
        running_on(&sh, &mut cpus, 2);
        let mut c2 = cpus.pop().unwrap();
        let mut c1 = cpus.pop().unwrap();
        let mut c0 = cpus.pop().unwrap();
        let (sa, sb) = (sh.clone(), sh.clone());
        let a = thread::spawn(move || c1.wake(&sa, t, 2));
        let b = thread::spawn(move || c2.wake(&sb, t, 2));
        // The owner may already be draining while the wakes land.
        let early = c0.pass(&sh, 2, 0);
        let (fa, fb) = (a.join().unwrap(), b.join().unwrap());
        let posts = [&fa, &fb]
            .iter()
            .flat_map(|f| f.trace.iter())
            .filter(|e| {
                matches!(
                    e,
                    schedlab_sched::Trace::Wake {
                        delivery: schedlab_sched::Delivery::Post { .. },
                        ..
                    }
                )
            })
            .count();
        assert_eq!(posts, 1, "exactly one of two racing wakes posts");
        if early.switch != Some(Switch::Run(t)) {
            assert!(
                kicked(&fa, 0) || kicked(&fb, 0),
                "the posting waker must kick the idle owner"
            );
            let _ = c0.pass(&sh, 3, 0);
        }
        assert_eq!(holdings(&sh, &c0, t), [Holding::Running]);
        assert_eq!(c0.counters().wakes_parked, 1, "one wake handled");
    });
}

/// Two thieves race to take one queued task: it ends on exactly one CPU,
/// and its park word names that CPU.
#[test]
fn two_moves_racing_end_on_one_cpu() {
    loom::model(|| {
        let (sh, mut cpus) = machine(3, true, Home);
        running_on(&sh, &mut cpus, 0);
        // Queued on cpu0 behind the running task, allowed on every CPU.
        let t = cpus[0]
            .spawn(&sh, TaskSpec::fair(0).with_mask(CpuSet::single(cpu(0))), 0)
            .unwrap()
            .task;
        let fx = cpus[0].set_mask(&sh, t, CpuSet::first_n(3), 0);
        assert!(fx.kicks.is_empty());
        let mut c2 = cpus.pop().unwrap();
        let mut c1 = cpus.pop().unwrap();
        let mut c0 = cpus.pop().unwrap();
        assert_eq!(holdings(&sh, &c0, t), [Holding::Queued]);
        let (sa, sb) = (sh.clone(), sh.clone());
        let a = thread::spawn(move || {
            let fx = c1.pass(&sa, 10, 0);
            (c1, fx)
        });
        let b = thread::spawn(move || {
            let fx = c2.pass(&sb, 10, 0);
            (c2, fx)
        });
        let f0 = c0.pass(&sh, 10, 0);
        let (mut c1, fa) = a.join().unwrap();
        let (mut c2, fb) = b.join().unwrap();
        // Carry out what is left, one CPU at a time, until quiet.
        let mut pending = vec![f0, fa, fb];
        for _ in 0..6 {
            let mut next = Vec::new();
            for fx in pending.drain(..) {
                for k in &fx.kicks {
                    let c = match k.cpu.index() {
                        0 => &mut c0,
                        1 => &mut c1,
                        _ => &mut c2,
                    };
                    next.push(c.pass(&sh, 11, 0));
                }
            }
            pending = next;
        }
        for c in [&mut c0, &mut c1, &mut c2] {
            let _ = c.pass(&sh, 12, 0);
        }
        let held: Vec<_> = [&c0, &c1, &c2]
            .iter()
            .filter(|c| !holdings(&sh, c, t).is_empty())
            .map(|c| c.id())
            .collect();
        assert_eq!(
            held.len(),
            1,
            "the task must end on exactly one CPU, found it on {held:?}"
        );
        assert_eq!(
            sh.task_word(t).owner,
            held[0],
            "the park word names its holder"
        );
    });
}

/// A policy that decides on the waker: the waker that wins the park word
/// takes the parked entity (waiting for the parker to store it) and sends
/// it home, racing a second wake and the park itself. The task is never
/// lost, never held twice, posted at most once, and its park word names
/// its holder.
#[test]
fn a_waker_side_placement_racing_a_second_wake_and_a_park() {
    loom::model(|| {
        let (sh, mut cpus) = machine(3, false, OnWaker(Home));
        let t = running_on(&sh, &mut cpus, 0);
        running_on(&sh, &mut cpus, 1);
        running_on(&sh, &mut cpus, 2);
        let mut c2 = cpus.pop().unwrap();
        let mut c1 = cpus.pop().unwrap();
        let mut c0 = cpus.pop().unwrap();
        let (sa, sb) = (sh.clone(), sh.clone());
        let a = thread::spawn(move || {
            let fx = c1.wake(&sa, t, 1);
            (c1, fx)
        });
        let b = thread::spawn(move || {
            let fx = c2.wake(&sb, t, 1);
            (c2, fx)
        });
        let f0 = c0.block(&sh, 1, 0);
        let (c1, fa) = a.join().unwrap();
        let (c2, fb) = b.join().unwrap();
        let places = [&fa, &fb]
            .iter()
            .flat_map(|f| f.trace.iter())
            .filter(|e| matches!(e, schedlab_sched::Trace::Place { .. }))
            .count();
        assert!(
            places <= 1,
            "at most one waker places the task, {places} did"
        );
        if f0.switch != Some(Switch::Run(t)) {
            // It parked; the winning waker sent it home: the owner adopts.
            let _ = c0.pass(&sh, 2, 0);
        }
        let held: Vec<_> = [&c0, &c1, &c2]
            .iter()
            .flat_map(|c| holdings(&sh, c, t).into_iter().map(move |h| (c.id(), h)))
            .collect();
        assert_eq!(
            held,
            [(cpu(0), Holding::Running)],
            "the task must run again on its CPU, held once (park returned {:?})",
            f0.switch
        );
        assert_eq!(
            sh.task_word(t).owner,
            cpu(0),
            "the park word names its holder"
        );
    });
}
