//! The kernel's wake placement decided again by the model's
//! `select_task_rq_fair()` ([`schedlab_sim::sched::linux::Linux`], the
//! code the simulator runs for `linux`), from the kernel's state at each
//! recorded wake.
//!
//! The state is rebuilt from the record, event by event:
//!
//! * **which CPUs run what**: each CPU's running thread from its last
//!   `sched_switch` (0: idle; a thread outside the recording counts as
//!   busy), and the recording's runnable threads on each (woken there,
//!   switched out preempted, moved there by `sched_migrate_task`);
//!   `nr_running` is their count, plus one for a foreign thread running;
//! * **idle** (`available_idle_cpu()`): nothing running and nothing queued;
//! * **`prev_cpu`**: `sched_waking`'s `target_cpu`, the wakee's CPU before
//!   the kernel chose;
//! * **the waker**: the CPU `sched_waking` fired on and its `common_pid`;
//!   `record_wakee()` runs on that thread's state (kept for every thread
//!   the record names as a waker), so `wake_wide()` reads the flips the
//!   kernel's would have (the same rule over the same wakes);
//! * **PELT**: each recorded thread's signal and each CPU's, updated with
//!   the model's own [`SchedAvg`] at every event that changes them
//!   (running, runnable or blocked; nice 0's weight).
//!
//! Each wake of a recorded thread that had blocked (a `sched_waking` then
//! its `sched_wakeup`) is decided, and the model's CPU is held against the
//! kernel's (`sched_wakeup`'s `target_cpu`). The kernel's choice, not the
//! model's, is then what the state goes on from.
//!
//! Simplified, and said where it shows: a sync wake (`WF_SYNC`: a pipe's
//! or a socket's writer) is not marked in the record, so each wake is
//! decided both ways and both are counted (`same`, with no wake taken as
//! sync; `same_if_sync`, with every one); a wake of a thread still on its
//! queue (`DELAY_DEQUEUE`'s delayed tasks, `ttwu_runnable()`) skips
//! `select_task_rq_fair()` in the kernel and here is decided anyway,
//! unless the record shows it runnable; a CPU's load from threads outside
//! the recording is only the one it runs; every mask is the whole machine.

use std::collections::BTreeMap;

use schedlab_sim::sched::linux::{
    wake_affine_idle, Affine, AffineView, Linux, LinuxTask, LLC_IMBALANCE_PCT,
};
use schedlab_sim::sched::pelt::SchedAvg;
use schedlab_sim::sched::policy::{Decision, Policy, Wake};
use schedlab_sim::sched::task::{Task, TaskId};
use schedlab_sim::sched::{Config, Delivery, Shared, WakeCause};
use schedlab_sim::PrevState;
use schedlab_topology::{CpuId, Topology};
use serde::Serialize;

use schedlab_sim::sched::fair::FairConfig;

use super::{At, Ev, Shadow};

/// Nice 0's weight, every thread's here.
const WEIGHT: u64 = 1024;

/// How the model's wake placement compares with the kernel's.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Placement {
    /// Wakes decided.
    pub wakes: u64,
    /// The model chose the kernel's CPU, no wake taken as sync.
    pub same: u64,
    /// The same, every wake taken as sync.
    pub same_if_sync: u64,
    /// Wakes the kernel placed off the wakee's previous CPU, and of them
    /// those the model (not sync) moved too.
    pub kernel_moved: u64,
    pub model_moved: u64,
    /// The wakes placed apart (not sync), by the step of the model's that
    /// chose its CPU (`target`, `affine(idle)` or `affine(weight)`: which
    /// branch of `wake_affine()`, `prev`, `recent`, `idle_cpu`,
    /// `idle_core`, `idle_smt`) and whether the kernel kept the wakee on
    /// its previous CPU (`STEP kernel-stayed`) or moved it (`STEP
    /// kernel-moved`): where to look for the mechanism.
    pub apart_by: BTreeMap<String, u64>,
}

/// For each `Ev::Wakeup` of `evs`, in order: whether its thread was still
/// on a queue in the model's fair class `cfg` (queued, running, or
/// delayed under `DELAY_DEQUEUE`), so the kernel woke it where it was
/// (`ttwu_runnable()`) without `select_task_rq_fair()`.
pub fn on_queue_at_wakes(evs: &[Ev], ours: &dyn Fn(i32) -> bool, cfg: FairConfig) -> Vec<bool> {
    let mut s = Shadow::new(cfg, ours);
    let mut out = Vec::new();
    for ev in evs {
        if let Ev::Wakeup { task, .. } = *ev {
            out.push(s.at(task) != At::Blocked);
        }
        s.step(ev);
    }
    out
}

/// The recording's state the decisions read (module doc).
pub(super) struct State<'t> {
    pub(super) topo: &'t Topology,
    /// The machine the model's policy reads, shown the state before each
    /// decided wake.
    sh: Shared<LinuxTask>,
    pub(super) ours: &'t dyn Fn(i32) -> bool,
    /// The kernel's running thread per CPU (0: idle).
    pub(super) running: Vec<i32>,
    /// The recording's runnable threads, by CPU.
    pub(super) runnable: BTreeMap<i32, usize>,
    /// `LinuxTask` per thread the record names as a waker or wakee.
    linux: BTreeMap<i32, LinuxTask>,
    pub(super) task_avg: BTreeMap<i32, SchedAvg>,
    pub(super) cpu_avg: Vec<SchedAvg>,
    /// A `sched_waking` waiting for its `sched_wakeup`: (waker's CPU,
    /// waker, prev).
    pub(super) waking: BTreeMap<i32, (usize, i32, usize)>,
    out: Placement,
}

/// What else reads the rebuilt state as the walk goes: shown each switch
/// and each move before the state takes it in (`evs[i]` is the event).
pub(super) trait Watch {
    fn switch(&mut self, s: &mut State, sw: (u64, usize, i32, PrevState, i32));
    fn migrate(&mut self, s: &mut State, evs: &[Ev], i: usize, mv: (u64, i32, usize, usize));
}

/// Nothing else watches.
impl Watch for () {
    fn switch(&mut self, _: &mut State, _: (u64, usize, i32, PrevState, i32)) {}
    fn migrate(&mut self, _: &mut State, _: &[Ev], _: usize, _: (u64, i32, usize, usize)) {}
}

/// The model's wake placement beside the kernel's over `evs` (in time
/// order) on `topo`; `ours` says which threads the recording is of.
/// `on_queue` holds, per `Ev::Wakeup` in order, whether its thread was
/// still on a queue ([`super::on_queue_at_wakes`]): such a wake is not
/// decided.
pub fn compare(
    evs: &[Ev],
    ours: &dyn Fn(i32) -> bool,
    topo: &Topology,
    on_queue: &[bool],
) -> Placement {
    walk(evs, ours, topo, on_queue, &mut ())
}

/// [`compare`], with `watch` shown the state at each switch and move.
pub(super) fn walk(
    evs: &[Ev],
    ours: &dyn Fn(i32) -> bool,
    topo: &Topology,
    on_queue: &[bool],
    watch: &mut dyn Watch,
) -> Placement {
    let n = topo.num_cpus();
    let start = evs.first().map_or(0, |ev| match *ev {
        Ev::Waking { at, .. }
        | Ev::Wakeup { at, .. }
        | Ev::Switch { at, .. }
        | Ev::Migrate { at, .. } => at,
    });
    let mut s = State {
        topo,
        sh: Shared::new(topo.clone(), Config::for_topology(topo), 1),
        ours,
        running: vec![0; n],
        runnable: BTreeMap::new(),
        linux: BTreeMap::new(),
        task_avg: BTreeMap::new(),
        cpu_avg: vec![SchedAvg::starting(start); n],
        waking: BTreeMap::new(),
        out: Placement::default(),
    };
    let mut wakeups = 0;
    for (i, ev) in evs.iter().enumerate() {
        match *ev {
            Ev::Waking {
                cpu,
                task,
                waker,
                prev,
                ..
            } => {
                if (s.ours)(task) && cpu < n && prev < n {
                    s.waking.insert(task, (cpu, waker, prev));
                }
            }
            Ev::Wakeup {
                at,
                task,
                target,
                new,
                ..
            } => {
                let queued = on_queue.get(wakeups).copied().unwrap_or(false);
                wakeups += 1;
                s.wakeup(at, task, target, new || queued);
            }
            Ev::Switch {
                at,
                cpu,
                prev,
                prev_state,
                next,
                ..
            } => {
                watch.switch(&mut s, (at, cpu, prev, prev_state, next));
                s.switch(at, cpu, prev, prev_state, next);
            }
            Ev::Migrate { at, task, from, to } => {
                watch.migrate(&mut s, evs, i, (at, task, from, to));
                if let Some(&from) = s.runnable.get(&task) {
                    s.touch(at, &[task], &[from, to]);
                    s.runnable.insert(task, to);
                }
            }
        }
    }
    s.out
}

impl State<'_> {
    /// The recording's runnable threads on `cpu`, plus one for a thread
    /// outside it running there.
    pub(super) fn nr_running(&self, cpu: usize) -> u32 {
        let ours = self.runnable.values().filter(|&&c| c == cpu).count() as u32;
        let r = self.running[cpu];
        ours + u32::from(r != 0 && !self.runnable.contains_key(&r))
    }

    /// `available_idle_cpu()` as the record shows it: nothing running,
    /// nothing queued.
    fn idle(&self, cpu: usize) -> bool {
        self.running[cpu] == 0 && self.nr_running(cpu) == 0
    }

    /// The PELT signals of threads `tids` and CPUs `cpus` brought to `now`
    /// from the state they had since their last update: called before
    /// that state changes and before a signal is read, as the kernel
    /// updates a signal only when its inputs change or it is read
    /// (`update_load_avg()`).
    fn touch(&mut self, now: u64, tids: &[i32], cpus: &[usize]) {
        for tid in tids {
            let on_rq = self.runnable.contains_key(tid);
            let running = self.running.contains(tid);
            if let Some(avg) = self.task_avg.get_mut(tid) {
                avg.update_se(now, WEIGHT, on_rq, running);
            }
        }
        for &cpu in cpus {
            let nr = self.nr_running(cpu) as u64;
            let running = self.running[cpu] != 0;
            self.cpu_avg[cpu].update_cfs_rq(now, nr * WEIGHT, nr, running);
        }
    }

    fn switch(&mut self, at: u64, cpu: usize, prev: i32, prev_state: PrevState, next: i32) {
        if cpu >= self.running.len() {
            return;
        }
        self.touch(at, &[prev, next], &[cpu]);
        if prev != 0 && prev_state != PrevState::Runnable {
            self.runnable.remove(&prev);
        }
        self.running[cpu] = next;
        if next != 0 && (self.ours)(next) {
            self.runnable.insert(next, cpu);
        }
    }

    /// A wake: decided by the model when a `sched_waking` of a blocked
    /// thread came before it, then placed where the kernel put it.
    fn wakeup(&mut self, at: u64, task: i32, target: usize, new: bool) {
        let pending = self.waking.remove(&task);
        if let (Some((cpu, waker, prev)), false) = (pending, new) {
            if !self.runnable.contains_key(&task) && target < self.running.len() {
                self.show(at, task);
                let before = self.linux.get(&waker).copied().unwrap_or_default();
                let (mut w_plain, mut w_sync) = (before, before);
                let (plain, wakee, why) =
                    self.place(at, task, cpu, waker, &mut w_plain, prev, false);
                let (sync, _, _) = self.place(at, task, cpu, waker, &mut w_sync, prev, true);
                self.count(prev, target, plain, sync);
                if plain != target {
                    let kernel = if target == prev { "stayed" } else { "moved" };
                    let why = match why {
                        "affine" if self.affine_by_idle(cpu, prev) => "affine(idle)",
                        "affine" => "affine(weight)",
                        w => w,
                    };
                    *self
                        .out
                        .apart_by
                        .entry(format!("{why} kernel-{kernel}"))
                        .or_default() += 1;
                }
                // What the wake leaves: the waker's flips, the wakee's
                // recent_used_cpu (as the not-sync decision left them).
                if waker != 0 {
                    self.linux.insert(waker, w_plain);
                }
                self.linux.insert(task, wakee);
            }
        }
        if (self.ours)(task) && target < self.running.len() {
            let was = self.runnable.get(&task).copied();
            self.touch(at, &[task], &[target]);
            if let Some(c) = was.filter(|&c| c != target) {
                self.touch(at, &[], &[c]);
            }
            self.runnable.insert(task, target);
            self.task_avg
                .entry(task)
                .or_insert_with(|| SchedAvg::starting(at));
        }
    }

    fn count(&mut self, prev: usize, target: usize, plain: usize, sync: usize) {
        let o = &mut self.out;
        o.wakes += 1;
        o.same += u64::from(plain == target);
        o.same_if_sync += u64::from(sync == target);
        if target != prev {
            o.kernel_moved += 1;
        }
        o.model_moved += u64::from(plain != prev);
    }

    /// Whether `wake_affine_idle()` alone (not sync) chose this CPU for a
    /// wake on `this` from `prev`: this idle and prev not, in one LLC.
    /// Else the load branch, `wake_affine_weight()`, did.
    fn affine_by_idle(&self, this: usize, prev: usize) -> bool {
        let v = AffineView {
            this_idle: self.idle(this),
            prev_idle: self.idle(prev),
            share_cache: self.topo.llc_id(CpuId::new(this)) == self.topo.llc_id(CpuId::new(prev)),
            this_nr_running: self.nr_running(this),
            this_load: 0,
            prev_load: 0,
            task_load: 0,
            current_load: 0,
            imbalance_pct: LLC_IMBALANCE_PCT,
        };
        wake_affine_idle(&v, false) == Affine::This
    }

    /// Every CPU's PELT signal and `task`'s brought to `now`.
    pub(super) fn show_pelt(&mut self, now: u64, task: i32) {
        let cpus: Vec<usize> = (0..self.running.len()).collect();
        self.touch(now, &[task], &cpus);
    }

    /// Shows the machine the model's policy reads the state at `now`
    /// (every CPU's PELT and the wakee's brought to it), once per wake.
    fn show(&mut self, now: u64, task: i32) {
        self.show_pelt(now, task);
        for c in 0..self.running.len() {
            let nr = self.nr_running(c);
            let id = CpuId::new(c);
            self.sh.show_idle(id, self.idle(c));
            self.sh.publish_cpu(id, nr, nr, &self.cpu_avg[c]);
        }
    }

    /// The model's CPU for `task`'s wake by `waker` (its state
    /// `waker_state`, updated as `record_wakee()` does) on `cpu`, from
    /// `prev`, the wakee's placement state after it, and the step that
    /// chose.
    #[allow(clippy::too_many_arguments)]
    fn place(
        &self,
        at: u64,
        task: i32,
        cpu: usize,
        waker: i32,
        waker_state: &mut LinuxTask,
        prev: usize,
        sync: bool,
    ) -> (usize, LinuxTask, &'static str) {
        let m = self.sh.machine(CpuId::new(cpu), at);
        let mut policy = Linux::default();
        let (id, owner) = (TaskId(task as u32), CpuId::new(prev));
        let w = (waker != 0).then_some(waker_state);
        policy.wake_posted(&m, w, id, Delivery::Post { owner });
        let avg = self
            .task_avg
            .get(&task)
            .copied()
            .unwrap_or_else(|| SchedAvg::starting(at));
        let state = self.linux.get(&task).copied().unwrap_or_default();
        let mut t = Task::for_host(id, *self.topo.cpus(), state, avg);
        let wake = Wake {
            task: id,
            prev: owner,
            prev_busy: self.nr_running(prev) > 0,
            cause: WakeCause {
                waker: (waker != 0).then_some(CpuId::new(cpu)),
                sync,
            },
        };
        let (chosen, why) = match policy.place(&m, &wake, &mut t) {
            Decision::Send(c, why) => (c.index(), why.name()),
            _ => (prev, "stay"),
        };
        (chosen, *t.state(), why)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use schedlab_topology::CpuSet;

    /// Two CPUs, no SMT, one LLC: this machine's shape.
    pub(in crate::shadow) fn two() -> Topology {
        let c = |i| CpuSet::single(CpuId::new(i));
        Topology::from_groups(
            "two",
            &[c(0), c(1)],
            &[CpuSet::first_n(2)],
            &[(0, CpuSet::first_n(2))],
        )
        .expect("a valid shape")
    }

    pub(in crate::shadow) fn sw(at: u64, cpu: usize, prev: i32, st: PrevState, next: i32) -> Ev {
        Ev::Switch {
            at,
            cpu,
            prev,
            prev_prio: 120,
            prev_state: st,
            next,
            next_prio: 120,
        }
    }

    /// A's wake of B (threads 10 and 11) from cpu0, B last on `prev`; the
    /// kernel put it on `target`.
    fn wake(at: u64, prev: usize, target: usize) -> [Ev; 2] {
        [
            Ev::Waking {
                at,
                cpu: 0,
                task: 11,
                waker: 10,
                prev,
            },
            Ev::Wakeup {
                at: at + 1,
                cpu: target,
                task: 11,
                prio: 120,
                target,
                new: false,
                by_task: true,
                kernel_resched: None,
                resched_before: false,
            },
        ]
    }

    fn ours(t: i32) -> bool {
        t == 10 || t == 11
    }

    /// Worked from `select_task_rq_fair()`: A runs on cpu0, B blocked on
    /// cpu1, which is idle. `wake_affine_idle()`: this CPU busy, prev idle:
    /// prev (and sync: this, as A runs alone there; then
    /// `select_idle_sibling()` finds the target busy and prev idle: prev).
    #[test]
    fn an_idle_prev_keeps_the_wakee_there_as_the_kernel_did() {
        let mut evs = vec![
            sw(1_000, 0, 0, PrevState::Runnable, 10),
            sw(1_100, 1, 0, PrevState::Runnable, 11),
            sw(2_000, 1, 11, PrevState::Blocked, 0),
        ];
        evs.extend(wake(3_000, 1, 1));
        let p = compare(&evs, &ours, &two(), &[false]);
        assert_eq!(
            p,
            Placement {
                wakes: 1,
                same: 1,
                same_if_sync: 1,
                kernel_moved: 0,
                model_moved: 0,
                apart_by: BTreeMap::new(),
            },
            "expected prev (cpu1) both ways"
        );
    }

    /// A runs on cpu0, B blocked on cpu0 too, cpu1 idle: this CPU is prev,
    /// so the target is prev; it is busy, and `select_idle_cpu()` (SIS_UTIL's
    /// depth 2 at this small a utilization) scans from cpu1: idle, chosen.
    #[test]
    fn a_busy_prev_sends_the_wakee_to_the_idle_cpu_as_the_kernel_did() {
        let mut evs = vec![
            sw(1_000, 0, 0, PrevState::Runnable, 11),
            sw(2_000, 0, 11, PrevState::Blocked, 10),
        ];
        evs.extend(wake(3_000, 0, 1));
        let p = compare(&evs, &ours, &two(), &[false]);
        assert_eq!(
            (p.wakes, p.same, p.kernel_moved, p.model_moved),
            (1, 1, 1, 1),
            "expected cpu1, moved off prev by both: {p:?}"
        );
        // The kernel keeping it on busy cpu0 is a disagreement.
        let mut evs = evs[..2].to_vec();
        evs.extend(wake(3_000, 0, 0));
        let p = compare(&evs, &ours, &two(), &[false]);
        assert_eq!((p.wakes, p.same), (1, 0), "{p:?}");
        assert_eq!(
            p.apart_by,
            [("idle_cpu kernel-stayed".to_string(), 1)].into(),
            "the model's idle-CPU scan chose, the kernel stayed"
        );
    }

    /// A wake of a thread still on its queue (delayed, say) goes through
    /// `ttwu_runnable()`: nothing is decided.
    #[test]
    fn a_wake_of_a_thread_still_queued_is_not_decided() {
        let mut evs = vec![
            sw(1_000, 0, 0, PrevState::Runnable, 11),
            sw(2_000, 0, 11, PrevState::Blocked, 10),
        ];
        evs.extend(wake(3_000, 0, 0));
        let p = compare(&evs, &ours, &two(), &[true]);
        assert_eq!(p.wakes, 0, "{p:?}");
    }
}
