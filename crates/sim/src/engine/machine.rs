//! The hardware: CPUs running segments of work, SMT siblings slowing each
//! other, each CPU's tick on its own phase, and what a switch costs (the
//! context switch, the refill of a working set after a migration or after
//! another task used the core). Arithmetic over the cost model; the
//! scheduler is not called from here.

use rand::RngCore;
use schedlab_sched::Balancer;
use schedlab_sched::{Policy, TaskId};
use schedlab_topology::{CpuId, Level, Topology};

use super::{Engine, Ev};

/// What a CPU is doing, physically.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum SegKind {
    /// The running task's compute; at its end the program goes on.
    Task,
    /// The running task's block path; at its end it calls `block`.
    BlockPath,
    /// Switching to the running task.
    Switch,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Segment {
    pub kind: SegKind,
    pub task: TaskId,
    pub start: u64,
    pub end: u64,
    /// Solo ns of work in the segment.
    pub work: u64,
}

#[derive(Debug, Default)]
pub(crate) struct HwCpu {
    /// What the scheduler said this CPU runs.
    pub current: Option<TaskId>,
    pub seg: Option<Segment>,
    pub token: u64,
    /// A tick event is on its way (one per CPU at a time).
    pub tick_armed: bool,
    /// The task that last ran here, for context-switch cost.
    pub last: Option<TaskId>,
    /// A kick event is on its way.
    pub kick_pending: bool,
    pub timer: Option<u64>,
    pub busy_ns: u64,
    /// Time with no segment (idle, or in a pass between segments).
    pub idle_ns: u64,
    /// Its time is accounted up to here: segments follow one another.
    pub accounted_to: u64,
    /// Until then the CPU is still switching to idle (busy for its sibling).
    pub idle_switch_until: u64,
}

/// Each CPU's SMT siblings, itself excluded.
pub(crate) fn siblings(topo: &Topology) -> Vec<Vec<CpuId>> {
    topo.cpu_ids()
        .map(|c| topo.core_cpus(c).iter().filter(|&s| s != c).collect())
        .collect()
}

/// Wall time of `work` solo ns started at `now` on a CPU whose siblings
/// are busy until `busy_until`: `slow` times slower until then, full speed
/// after.
pub(crate) fn smt_wall(work: u64, now: u64, busy_until: u64, slow: f64) -> u64 {
    let window = busy_until.saturating_sub(now) as f64;
    if window <= 0.0 {
        work
    } else if work as f64 * slow <= window {
        (work as f64 * slow) as u64
    } else {
        (window + (work as f64 - window / slow)) as u64
    }
}

/// The work left of a segment cut at `now`, in proportion to its wall
/// time.
pub(crate) fn work_left(seg: &Segment, now: u64) -> u64 {
    if seg.end > seg.start {
        let (left, wall) = (seg.end - now.min(seg.end), seg.end - seg.start);
        match seg.work.checked_mul(left) {
            Some(p) => p / wall,
            None => (seg.work as u128 * left as u128 / wall as u128) as u64,
        }
    } else {
        0
    }
}

/// The next tick of a CPU with `phase` after `now`, on its grid.
pub(crate) fn next_tick(now: u64, tick: u64, phase: u64) -> u64 {
    let next = ((now + tick - phase) / tick) * tick + phase;
    if next <= now {
        next + tick
    } else {
        next
    }
}

impl<P: Policy, B: Balancer> Engine<P, B> {
    /// An interrupt or a pass on a busy CPU delays what it runs.
    pub(super) fn extend_current(&mut self, cpu: CpuId, ns: u64) {
        let h = &mut self.hw[cpu.index()];
        if let Some(seg) = h.seg.as_mut() {
            seg.end += ns;
            h.token += 1;
            let (end, token) = (seg.end, h.token);
            self.push(end, Ev::SegDone { cpu, token });
        }
    }

    /// Accounts `seg` on `cpu` up to `until`: its time is busy, the gap
    /// since the CPU's last segment idle. Segments of one CPU never
    /// overlap (checked with the invariants).
    pub(super) fn account(&mut self, cpu: CpuId, seg: &Segment, until: u64) {
        let ns = until.saturating_sub(seg.start);
        let h = &mut self.hw[cpu.index()];
        if self.check {
            assert!(
                seg.start >= h.accounted_to && until >= seg.start,
                "accounting: a segment of {cpu:?} from {} to {until} overlaps its last, which ended at {} (seed {})",
                seg.start,
                h.accounted_to,
                self.rec.out.seed
            );
        }
        h.idle_ns += seg.start.saturating_sub(h.accounted_to);
        h.accounted_to = until.max(h.accounted_to);
        h.busy_ns += ns;
        if let Some(t) = self.tasks.get_mut(&seg.task) {
            t.cpu_ns += ns;
        }
    }

    /// Accounts every CPU's live segment up to `end` and the idle time
    /// after its last; with the invariants on, checks the sums: per CPU,
    /// busy + idle is the run's length, and the CPU time of all tasks is
    /// the busy time of all CPUs.
    pub(super) fn close_accounts(&mut self, end: u64) {
        for c in 0..self.hw.len() {
            if let Some(seg) = self.hw[c].seg {
                self.account(CpuId::new(c), &seg, end.min(seg.end).max(seg.start));
            }
            let h = &mut self.hw[c];
            h.idle_ns += end.saturating_sub(h.accounted_to);
            h.accounted_to = h.accounted_to.max(end);
        }
        if !self.check {
            return;
        }
        for (c, h) in self.hw.iter().enumerate() {
            assert_eq!(
                h.busy_ns + h.idle_ns,
                h.accounted_to,
                "accounting: cpu{c} busy {} + idle {} is not the run's {} ns (seed {})",
                h.busy_ns,
                h.idle_ns,
                h.accounted_to,
                self.rec.out.seed
            );
        }
        let busy: u64 = self.hw.iter().map(|h| h.busy_ns).sum();
        let tasks: u64 = self.tasks.iter().map(|(_, t)| t.cpu_ns).sum();
        assert_eq!(
            busy, tasks,
            "accounting: the CPUs were busy {busy} ns, the tasks ran {tasks} ns (seed {})",
            self.rec.out.seed
        );
    }

    /// A segment cut short: its task keeps the work it has left.
    pub(super) fn preempt(&mut self, cpu: CpuId, seg: Segment) {
        self.account(cpu, &seg, self.now);
        let left = work_left(&seg, self.now);
        if let Some(t) = self.tasks.get_mut(&seg.task) {
            match seg.kind {
                SegKind::Task => t.pending_work += left,
                // A block path cut short is redone; a switch is paid again.
                SegKind::BlockPath => t.op_started = true,
                SegKind::Switch => {}
            }
        }
    }

    /// Starts a segment of `work` solo ns. It runs `smt_slowdown` slower
    /// while a sibling is busy, up to the known end of what that sibling
    /// does now; after that at full speed. (A sibling that starts work
    /// later is slowed by this segment in turn.)
    pub(super) fn start_seg(&mut self, cpu: CpuId, kind: SegKind, task: TaskId, work: u64) {
        let busy_until = self.siblings[cpu.index()]
            .iter()
            .map(|s| {
                let h = &self.hw[s.index()];
                h.seg.map_or(0, |g| g.end).max(h.idle_switch_until)
            })
            .max()
            .unwrap_or(0);
        let wall = smt_wall(work, self.now, busy_until, self.cost.smt_slowdown);
        let h = &mut self.hw[cpu.index()];
        h.token += 1;
        let token = h.token;
        h.seg = Some(Segment {
            kind,
            task,
            start: self.now,
            end: self.now + wall,
            work,
        });
        self.push(self.now + wall, Ev::SegDone { cpu, token });
    }

    /// Arms the CPU's next tick on its grid, unless one is on its way
    /// (a switch keeps the pending one: it is on the same grid).
    pub(super) fn arm_tick(&mut self, cpu: CpuId) {
        if self.hw[cpu.index()].tick_armed {
            return;
        }
        let tick = self.sh.config().fair.tick_ns;
        let next = next_tick(self.now, tick, self.tick_phase[cpu.index()]);
        // Late against its grid, never drifting: the next one is armed on
        // the grid again.
        let next = next + self.timer_late();
        self.hw[cpu.index()].tick_armed = true;
        self.push(next, Ev::Tick { cpu });
    }

    /// What `task` pays before it runs on `cpu`: the context switch (not
    /// when it ran here last); its own set and its process's shared data
    /// where this LLC holds them cold (evicted, or never here: `warmth`);
    /// a new core's private caches after a migration; the core's private
    /// caches' refill after another task used them. Counts the migration.
    pub(super) fn switch_cost(&mut self, cpu: CpuId, t: TaskId) -> u64 {
        let c = cpu.index();
        let mut cost = 0;
        if self.hw[c].last != Some(t) {
            cost += self.jittered(self.cost.context_switch_ns);
        }
        self.hw[c].last = Some(t);
        let topo = self.sh.topology();
        let st = self.tasks.get_mut(&t).expect("a known task");
        let own = st.working_set.min(self.cost.refill_cap_bytes);
        let (prev, process) = (st.last_cpu, st.process);
        st.last_cpu = Some(cpu);
        // Its data in this LLC: the cold part is read from where it is
        // warm, or from memory (`warmth`).
        let l = topo.llc_ordinal(cpu);
        let shared = self.procs.get(process as usize).copied().unwrap_or(0);
        let fill = self.warmth.fill(l, t, own, process, shared, self.now);
        cost += self.cost.fill_ns(fill.node, fill.machine, fill.memory);
        let read = fill.read();
        if read > 0 {
            let st = self.tasks.get_mut(&t).expect("a known task");
            st.llc_refill_bytes += read;
            st.cold_starts += 1;
            let total = self.warmth.total(l);
            self.rec.llc_warm(self.now, l as u32, total);
        }
        if let Some(prev) = prev.filter(|&p| p != cpu) {
            self.tasks.get_mut(&t).expect("a known task").migrations += 1;
            // A new core's private caches: a sibling shares them; another
            // core reads the part of the set that was warm in this LLC
            // from it (the cold part came in above).
            cost += match topo.level_between(prev, cpu) {
                Level::Smt => self.cost.refill_ns(Level::Smt, own),
                _ => self.cost.refill_ns(Level::Llc, fill.own_warm),
            };
        }
        let st = self.tasks.get_mut(&t).expect("a known task");
        let core = topo.place(cpu).core as usize;
        if self.core_last[core].is_some_and(|o| o != t) {
            // Another task used this core's private caches since.
            cost += self.cost.refill_ns(
                Level::Llc,
                self.cost.core_footprint_bytes.min(st.working_set),
            );
        }
        self.core_last[core] = Some(t);
        cost
    }

    /// How late this timer expiry fires (`CostModel::timer_late`), from the
    /// machine's RNG stream; nothing is drawn when there is none.
    pub(super) fn timer_late(&mut self) -> u64 {
        let l = self.cost.timer_late;
        if l.is_none() {
            return 0;
        }
        let u = (self.hw_rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        l.at(u)
    }

    pub(super) fn jittered(&mut self, ns: u64) -> u64 {
        let j = self.cost.jitter;
        if j <= 0.0 {
            return ns;
        }
        let u = (self.hw_rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        (ns as f64 * (1.0 + j * (2.0 * u - 1.0))) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smt_wall_is_slow_inside_the_siblings_window_and_full_speed_after() {
        assert_eq!(smt_wall(100, 0, 0, 1.5), 100, "no sibling busy");
        assert_eq!(smt_wall(100, 0, 1000, 1.5), 150, "all inside the window");
        // 60 ns of window run 40 solo ns; 60 solo ns are left at full speed.
        assert_eq!(smt_wall(100, 0, 60, 1.5), 120);
    }

    #[test]
    fn work_left_is_in_proportion_to_the_wall_time_left() {
        let seg = Segment {
            kind: SegKind::Task,
            task: TaskId(0),
            start: 100,
            end: 300,
            work: 100,
        };
        assert_eq!(work_left(&seg, 200), 50);
        assert_eq!(work_left(&seg, 400), 0);
    }

    #[test]
    fn next_tick_stays_on_the_cpus_grid() {
        assert_eq!(next_tick(0, 1000, 250), 250);
        assert_eq!(next_tick(250, 1000, 250), 1250, "strictly after now");
        assert_eq!(next_tick(1999, 1000, 0), 2000);
    }
}
