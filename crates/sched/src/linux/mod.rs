//! `linux`: Linux 6.19's fair-class wake placement (`kernel/sched/fair.c`),
//! decided where Linux decides it: on the waker's CPU, in
//! `try_to_wake_up()`, with one hop to the target (`ttwu_queue_wakelist()`)
//! or a local enqueue.
//!
//! `select_task_rq_fair()` for a wake (`WF_TTWU`, no energy model):
//!
//! 1. [`record_wakee`] on the waker's own state (flips, halved once a
//!    second);
//! 2. `want_affine` = `!`[`wake_wide`]` && ` this CPU is in the task's mask;
//! 3. want_affine and this CPU is not prev: [`wake_affine`] between this CPU
//!    and prev ([`wake_affine_idle`], then [`wake_affine_weight`] with the
//!    `imbalance_pct` bias); else the target is prev;
//! 4. `select_idle_sibling(p, prev, target)`: target if idle; prev if it
//!    shares the LLC with target and is idle; `recent_used_cpu` if it
//!    shares it, is idle and in the mask; with SMT and no idle core in the
//!    LLC, an idle SMT sibling of prev; `select_idle_cpu()`: the idle-core
//!    search while the LLC has idle cores, else up to SIS_UTIL's scan depth
//!    ([`update_idle_cpu_scan`]) of idle CPUs, wrapping from target + 1;
//!    else target.
//!
//! "Idle" is `available_idle_cpu()`: nothing runs or waits there and no
//! wake is on its way to it, which in this model is a CPU asleep with no
//! kick on its way (`sleeping_unrung`), or the deciding CPU itself when it
//! has nothing to run (awake only to take this wake in).
//!
//! ## Simplified, and why
//!
//! * **Sync wakes** (`WF_SYNC`) come from the host (`WakeCause::sync`: the
//!   simulator marks port and pipe wakes, as Linux's sockets and pipes do).
//!   `task_h_load(current)` in the sync case is this CPU's published
//!   `load_avg`, exact when the waker runs alone there (the case sync
//!   wakes are for).
//! * **Domains**: every level up to the machine counts as `SD_WAKE_AFFINE`
//!   (Linux sets it on SMT, MC and NUMA levels within `RECLAIM_DISTANCE`);
//!   no `SD_BALANCE_WAKE` slow path (off by default in Linux too).
//! * **`has_idle_cores`** is read by looking at the LLC's cores when the
//!   wake is placed, not kept as Linux's hint; **SIS_UTIL's depth** is
//!   computed from the LLC's published utilization at the wake, not at the
//!   last periodic balance. Both are the values Linux's hints converge to,
//!   fresher than Linux has them.
//! * No per-CPU kthread stacking case (the model has no kthreads), no
//!   asymmetric capacity, no clusters, no core-scheduling cookie match.
//! * `task_h_load()` is the task's own `load_avg` (no cgroups).
//! * A wake with no waker thread (an interrupt, a timer) records no wakee:
//!   Linux's `record_wakee()` then charges whatever task the interrupt
//!   interrupted.
//!
//! Fork placement is Linux's too: [`fork`] (`sched_balance_find_dst_cpu()`),
//! the spawn rule `linux` comes with ([`Policy::spawn_rule`]: a scenario
//! takes it unless its user names another spawn rule; `spawn = "linux"`
//! gives it to any policy). So is its load balancer ([`balance`], with the
//! decisions in [`lb`]): `linux` brings `balance = "linux"`, and
//! `linux-cas` (the same wake path; 7.2's cache-aware scheduling lives in
//! the balancer, [`cas`]) brings `balance = "linux-cas"`, unless the user
//! names a balancer.

pub mod balance;
pub mod cache;
pub mod cas;
pub mod fork;
pub mod lb;

use schedlab_topology::{CpuId, CpuSet};

use crate::config::{BalanceKind, CasTunables, SpawnPolicy};
use crate::effects::PlaceReason;
use crate::fair::FeatureSet;
use crate::park::Delivery;
use crate::policy::{Decides, Decision, Machine, Policy, PolicyState, Wake};
use crate::task::{Task, TaskId};

/// `HZ` = 1000 (x86_64_defconfig): `record_wakee()`'s decay is once per
/// `HZ` jiffies, one second.
pub const FLIP_DECAY_NS: u64 = 1_000_000_000;
/// `sd->imbalance_pct` of an LLC (MC) domain, 117; SMT domains use 110.
pub const LLC_IMBALANCE_PCT: u64 = 117;
/// `SCHED_CAPACITY_SCALE`: every CPU's capacity here.
pub const CAPACITY: u64 = 1024;

/// The per-task state Linux keeps for placement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinuxTask {
    /// `wakee_flips`: how often this task, as a waker, switched wakee.
    pub wakee_flips: u32,
    /// `wakee_flip_decay_ts`, ns.
    pub flip_decay_ts: u64,
    /// `last_wakee`.
    pub last_wakee: Option<TaskId>,
    /// `recent_used_cpu`.
    pub recent_used_cpu: Option<CpuId>,
}

impl PolicyState for LinuxTask {
    fn bits(&self) -> u64 {
        self.wakee_flips as u64
    }
}

/// `record_wakee()`, on the waker's own state at `now`.
pub fn record_wakee(waker: &mut LinuxTask, wakee: TaskId, now: u64) {
    if now > waker.flip_decay_ts + FLIP_DECAY_NS {
        waker.wakee_flips >>= 1;
        waker.flip_decay_ts = now;
    }
    if waker.last_wakee != Some(wakee) {
        waker.last_wakee = Some(wakee);
        waker.wakee_flips += 1;
    }
}

/// `wake_wide()`: an M:N relation wider than the LLC: spread.
pub fn wake_wide(waker_flips: u32, wakee_flips: u32, llc_size: u32) -> bool {
    let (master, slave) = if waker_flips < wakee_flips {
        (wakee_flips, waker_flips)
    } else {
        (waker_flips, wakee_flips)
    };
    !(slave < llc_size || master < slave.saturating_mul(llc_size))
}

/// What `wake_affine_idle()` and `wake_affine_weight()` read of two CPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AffineView {
    pub this_idle: bool,
    pub prev_idle: bool,
    pub share_cache: bool,
    /// Tasks on this CPU (`nr_running`), for the sync case.
    pub this_nr_running: u32,
    /// `cpu_load()` of each.
    pub this_load: u64,
    pub prev_load: u64,
    /// `task_h_load(p)` and `task_h_load(current)`.
    pub task_load: u64,
    pub current_load: u64,
    pub imbalance_pct: u64,
}

/// Which of the two CPUs `wake_affine` chose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Affine {
    This,
    Prev,
    /// No answer (`nr_cpumask_bits`).
    None,
}

/// `wake_affine_idle()`.
pub fn wake_affine_idle(v: &AffineView, sync: bool) -> Affine {
    if v.this_idle && v.share_cache {
        return if v.prev_idle {
            Affine::Prev
        } else {
            Affine::This
        };
    }
    if sync && v.this_nr_running == 1 {
        return Affine::This;
    }
    if v.prev_idle {
        return Affine::Prev;
    }
    Affine::None
}

/// `wake_affine_weight()` (with `WA_BIAS`): this CPU when its load with
/// the task, times 100, is below prev's without it, times half the
/// imbalance bias; capacities are equal here.
pub fn wake_affine_weight(v: &AffineView, sync: bool) -> Affine {
    let mut this_eff = v.this_load as i128;
    if sync {
        if v.current_load as i128 > this_eff {
            return Affine::This;
        }
        this_eff -= v.current_load as i128;
    }
    this_eff += v.task_load as i128;
    this_eff *= 100;
    this_eff *= CAPACITY as i128;
    let mut prev_eff = v.prev_load as i128 - v.task_load as i128;
    prev_eff *= 100 + (v.imbalance_pct as i128 - 100) / 2;
    prev_eff *= CAPACITY as i128;
    if sync {
        prev_eff += 1;
    }
    if this_eff < prev_eff {
        Affine::This
    } else {
        Affine::None
    }
}

/// `wake_affine()` with `WA_IDLE` and `WA_WEIGHT`: this CPU or prev.
pub fn wake_affine(v: &AffineView, sync: bool, wa_idle: bool) -> Affine {
    let mut target = if wa_idle {
        wake_affine_idle(v, sync)
    } else {
        Affine::None
    };
    if target == Affine::None {
        target = wake_affine_weight(v, sync);
    }
    if target == Affine::This {
        Affine::This
    } else {
        Affine::Prev
    }
}

/// `update_idle_cpu_scan()`: how many CPUs `select_idle_cpu()` may scan in
/// an LLC of `llc_weight` CPUs whose utilizations sum to `sum_util`.
pub fn update_idle_cpu_scan(llc_weight: u64, sum_util: u64, pct: u64) -> u64 {
    let x = sum_util / llc_weight;
    let tmp = (x * x * pct * pct / (10_000 * CAPACITY)).min(CAPACITY);
    (CAPACITY - tmp) * llc_weight / CAPACITY
}

/// Linux 6.19's wake placement. Switches for the mutation controls and for
/// studies: `wa_idle` (Linux's `WA_IDLE`), `sis_util` (`SIS_UTIL`).
#[derive(Clone, Copy, Debug)]
pub struct Linux {
    pub wa_idle: bool,
    pub sis_util: bool,
    /// Cache-aware scheduling (`linux-cas`): the balancer it brings.
    pub cas: Option<CasTunables>,
    /// `linux-cas-wake`: wakes steered toward the preferred LLC too
    /// ([`cas::select_cache_cpu`]).
    pub cas_wake: bool,
    /// The waker's flips, taken in `wake_posted` for the `place` that
    /// follows on the same CPU in the same wake.
    waker_flips: u32,
}

impl Linux {
    /// `linux-cas`: the same wake path, with cache-aware scheduling's
    /// balancer.
    pub fn cas(tun: CasTunables) -> Linux {
        Linux {
            cas: Some(tun),
            ..Linux::default()
        }
    }

    /// `linux-cas-wake`: `linux-cas` whose wake path also steers a task
    /// toward its process's preferred LLC ([`cas::select_cache_cpu`]), with the
    /// balance path's guards unchanged.
    pub fn cas_wake(tun: CasTunables) -> Linux {
        Linux {
            cas_wake: true,
            ..Linux::cas(tun)
        }
    }
}

impl Default for Linux {
    fn default() -> Linux {
        Linux {
            wa_idle: true,
            sis_util: true,
            cas: None,
            cas_wake: false,
            waker_flips: 0,
        }
    }
}

/// Why `linux` placed a task where it did: the step that chose it.
pub mod reason {
    use crate::effects::PlaceReason;
    pub const TARGET: PlaceReason = PlaceReason::Custom("target");
    pub const AFFINE: PlaceReason = PlaceReason::Custom("affine");
    pub const PREV: PlaceReason = PlaceReason::Custom("prev");
    pub const RECENT: PlaceReason = PlaceReason::Custom("recent");
    pub const IDLE_SMT: PlaceReason = PlaceReason::Custom("idle_smt");
    pub const IDLE_CORE: PlaceReason = PlaceReason::Custom("idle_core");
    pub const IDLE_CPU: PlaceReason = PlaceReason::Custom("idle_cpu");
}

impl Linux {
    /// `available_idle_cpu()`: asleep with no wake on its way, or the
    /// deciding CPU itself with nothing to run (it is awake only to take
    /// this wake in, as Linux's idle task handles a timer interrupt).
    fn idle(m: &Machine<'_>, cpu: CpuId) -> bool {
        m.sleeping_unrung(cpu) || (cpu == m.cpu() && m.load(cpu) == 0)
    }

    /// `test_idle_cores()`: some core of the LLC has every thread idle.
    fn has_idle_cores(m: &Machine<'_>, cpu: CpuId) -> bool {
        let topo = m.topology();
        topo.llc_cpus(cpu)
            .iter()
            .any(|c| topo.core_siblings(c).iter().all(|&s| Self::idle(m, s)))
    }

    /// `select_idle_cpu()` over the LLC of `target`, in the task's mask.
    fn select_idle_cpu(
        &self,
        m: &Machine<'_>,
        mask: &CpuSet,
        has_idle_core: bool,
        target: CpuId,
    ) -> Option<(CpuId, PlaceReason)> {
        let topo = m.topology();
        let llc = *topo.llc_cpus(target);
        let cpus = llc & *mask;
        let mut nr = if self.sis_util {
            let sum: u64 = llc.iter().map(|c| m.util(c) as u64).sum();
            let scan = update_idle_cpu_scan(llc.weight() as u64, sum, LLC_IMBALANCE_PCT);
            if scan == 0 {
                return None;
            }
            scan as i64 + 1
        } else {
            i64::MAX
        };
        let start = CpuId::new((target.index() + 1) % topo.num_cpus());
        let mut seen = CpuSet::new();
        for cpu in cpus.iter_from(start) {
            if has_idle_core {
                if seen.contains(cpu) {
                    continue;
                }
                let core = *topo.core_cpus(cpu);
                seen = seen | core;
                // `select_idle_core()`: the whole core idle.
                if core.iter().all(|s| Self::idle(m, s)) {
                    return Some((cpu, reason::IDLE_CORE));
                }
            } else {
                nr -= 1;
                if nr <= 0 {
                    return None;
                }
                if Self::idle(m, cpu) {
                    return Some((cpu, reason::IDLE_CPU));
                }
            }
        }
        None
    }

    /// [`cas::select_cache_cpu`] for `task`, woken with `prev`.
    fn cache_cpu(
        &self,
        m: &Machine<'_>,
        tun: CasTunables,
        prev: CpuId,
        task: &Task<LinuxTask>,
    ) -> CpuId {
        let topo = m.topology();
        let pref = task.preferred_cpu().filter(|&c| task.mask().contains(c));
        let (share_cache, forbid) = match pref {
            Some(c) => {
                let (src, dst) = (topo.llc_ordinal(prev), topo.llc_ordinal(c));
                let smt = topo.max_threads_per_core() as u64;
                let hint = cas::can_migrate_llc(
                    &tun,
                    smt,
                    m.llc_stats(src),
                    m.llc_stats(dst),
                    task.pelt().util_avg,
                    true,
                );
                (src == dst, hint == cas::LlcMig::Forbid)
            }
            None => (false, false),
        };
        let v = cas::CacheView {
            pinned: task.mask().weight() == 1,
            pref,
            share_cache,
            forbid,
        };
        cas::select_cache_cpu(&v, prev)
    }

    /// `select_idle_sibling(p, prev, target)`; updates `recent_used_cpu`.
    fn select_idle_sibling(
        &self,
        m: &Machine<'_>,
        st: &mut LinuxTask,
        mask: &CpuSet,
        prev: CpuId,
        target: CpuId,
        target_reason: PlaceReason,
    ) -> (CpuId, PlaceReason) {
        let topo = m.topology();
        let share = |a: CpuId, b: CpuId| topo.llc_id(a) == topo.llc_id(b);
        if Self::idle(m, target) {
            return (target, target_reason);
        }
        if prev != target && share(prev, target) && Self::idle(m, prev) {
            return (prev, reason::PREV);
        }
        let recent = st.recent_used_cpu.replace(prev);
        if let Some(r) = recent {
            if r != prev && r != target && share(r, target) && Self::idle(m, r) && mask.contains(r)
            {
                return (r, reason::RECENT);
            }
        }
        // `sched_smt_active()`: SMT on this machine (the target's core, not
        // a walk over every core).
        let smt = topo.core_cpus(target).weight() > 1;
        let mut has_idle_core = false;
        if smt {
            has_idle_core = Self::has_idle_cores(m, target);
            if !has_idle_core && share(prev, target) {
                // `select_idle_smt()`: an idle sibling of prev.
                if let Some(s) = topo
                    .core_cpus(prev)
                    .iter()
                    .find(|&s| s != prev && mask.contains(s) && Self::idle(m, s))
                {
                    return (s, reason::IDLE_SMT);
                }
            }
        }
        self.select_idle_cpu(m, mask, has_idle_core, target)
            .unwrap_or((target, target_reason))
    }
}

impl Policy for Linux {
    type TaskState = LinuxTask;
    const DECIDES: Decides = Decides::Waker;

    fn name(&self) -> &str {
        match (self.cas, self.cas_wake) {
            (Some(_), true) => "linux-cas-wake",
            (Some(_), false) => "linux-cas",
            _ => "linux",
        }
    }

    fn wake_posted(
        &mut self,
        m: &Machine<'_>,
        waker: Option<&mut LinuxTask>,
        wakee: TaskId,
        delivery: Delivery,
    ) {
        // `select_task_rq_fair()` runs only for a task that is not on a
        // queue: a wake that finds it parked.
        self.waker_flips = 0;
        if let (Some(w), Delivery::Post { .. }) = (waker, delivery) {
            record_wakee(w, wakee, m.now());
            self.waker_flips = w.wakee_flips;
        }
    }

    /// `select_task_rq_fair()` for `WF_FORK`: [`fork::LinuxFork`], as the
    /// machine's rule, so `spawn = ...` can still name another for a study.
    fn spawn_rule(&self) -> Option<SpawnPolicy> {
        Some(SpawnPolicy::Linux)
    }

    /// Linux's load balancer ([`balance`]), with cache-aware scheduling for
    /// `linux-cas` ([`cas`]).
    /// `linux-cas-wake` keeps `linux-cas`'s balancer and its guards.
    fn balance_rule(&self) -> Option<BalanceKind> {
        Some(match self.cas {
            Some(t) => BalanceKind::LinuxCas(t),
            None => BalanceKind::Linux,
        })
    }

    /// Linux 6.19's fair class ([`FeatureSet::LINUX`]): delayed dequeue,
    /// the reworked buddy code with `NEXT_BUDDY` off, protection to the
    /// smallest slice.
    fn fair_features(&self) -> Option<FeatureSet> {
        Some(FeatureSet::LINUX)
    }

    fn place(&mut self, m: &Machine<'_>, wake: &Wake, task: &mut Task<LinuxTask>) -> Decision {
        let this = m.cpu();
        let prev = match self.cas.filter(|_| self.cas_wake) {
            Some(tun) => self.cache_cpu(m, tun, wake.prev, task),
            None => wake.prev,
        };
        let mask = task.mask();
        let st = *task.state();
        let llc_size = m.topology().llc_cpus(this).weight() as u32;
        let want_affine =
            !wake_wide(self.waker_flips, st.wakee_flips, llc_size) && mask.contains(this);
        let (target, why) = if want_affine && this != prev {
            let v = AffineView {
                this_idle: Self::idle(m, this),
                prev_idle: Self::idle(m, prev),
                share_cache: m.topology().llc_id(this) == m.topology().llc_id(prev),
                this_nr_running: m.load(this),
                this_load: m.load_avg(this) as u64,
                prev_load: m.load_avg(prev) as u64,
                task_load: task.pelt().load_avg,
                current_load: m.load_avg(this) as u64,
                imbalance_pct: LLC_IMBALANCE_PCT,
            };
            match wake_affine(&v, wake.cause.sync, self.wa_idle) {
                Affine::This => (this, reason::AFFINE),
                _ => (prev, reason::TARGET),
            }
        } else {
            (prev, reason::TARGET)
        };
        let mask = *mask;
        let (cpu, why) = self.select_idle_sibling(m, task.state_mut(), &mask, prev, target, why);
        if mask.contains(cpu) {
            // Prev too, so the trace carries the step that chose it.
            Decision::Send(cpu, why)
        } else {
            Decision::Stay
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v() -> AffineView {
        AffineView {
            this_idle: false,
            prev_idle: false,
            share_cache: true,
            this_nr_running: 1,
            this_load: 1024,
            prev_load: 1024,
            task_load: 512,
            current_load: 1024,
            imbalance_pct: LLC_IMBALANCE_PCT,
        }
    }

    #[test]
    fn record_wakee_counts_a_switch_of_wakee_and_halves_once_a_second() {
        let mut w = LinuxTask::default();
        record_wakee(&mut w, TaskId(1), 0);
        record_wakee(&mut w, TaskId(1), 10);
        assert_eq!(w.wakee_flips, 1, "the same wakee again is no flip");
        record_wakee(&mut w, TaskId(2), 20);
        record_wakee(&mut w, TaskId(1), 30);
        assert_eq!(w.wakee_flips, 3);
        // More than HZ jiffies after the last decay: halve, then count.
        record_wakee(&mut w, TaskId(2), FLIP_DECAY_NS + 31);
        assert_eq!(w.wakee_flips, 3 / 2 + 1);
        assert_eq!(w.flip_decay_ts, FLIP_DECAY_NS + 31);
    }

    /// `wake_wide()`: master = max, slave = min; wide only when slave >=
    /// factor and master >= slave * factor.
    #[test]
    fn wake_wide_needs_both_partners_past_the_llc_size() {
        assert!(!wake_wide(100, 7, 8), "slave 7 < factor 8: not wide");
        assert!(!wake_wide(63, 8, 8), "master 63 < 8 * 8: not wide");
        assert!(wake_wide(64, 8, 8), "64 >= 8 * 8 and 8 >= 8: wide");
        assert!(wake_wide(8, 64, 8), "symmetric in waker and wakee");
        assert!(!wake_wide(0, 0, 1), "no flips, LLC of one: 0 < 1, not wide");
    }

    #[test]
    fn wake_affine_idle_follows_its_four_cases() {
        let mut x = v();
        x.this_idle = true;
        x.prev_idle = true;
        assert_eq!(
            wake_affine_idle(&x, false),
            Affine::Prev,
            "both idle, cache shared: prev"
        );
        x.prev_idle = false;
        assert_eq!(
            wake_affine_idle(&x, false),
            Affine::This,
            "this idle, cache shared: this"
        );
        x.share_cache = false;
        assert_eq!(
            wake_affine_idle(&x, false),
            Affine::None,
            "this idle across caches: no answer"
        );
        assert_eq!(
            wake_affine_idle(&x, true),
            Affine::This,
            "sync with the waker alone: this"
        );
        x.prev_idle = true;
        assert_eq!(wake_affine_idle(&x, false), Affine::Prev, "prev idle: prev");
    }

    /// Worked from `wake_affine_weight()` with capacities 1024 and pct 117:
    /// this = (this_load + task) * 100 * 1024; prev = (prev_load - task) *
    /// (100 + 17/2 = 108) * 1024.
    #[test]
    fn wake_affine_weight_biases_toward_prev_by_half_the_imbalance() {
        let mut x = v();
        // this: (1024 + 512) * 100 = 153600; prev: (1024 - 512) * 108 = 55296.
        assert_eq!(wake_affine_weight(&x, false), Affine::None);
        // this: (0 + 512) * 100 = 51200; prev: (1024 - 512) * 108 = 55296.
        x.this_load = 0;
        assert_eq!(wake_affine_weight(&x, false), Affine::This);
        // 512 * 100 = 51200 against (986 - 512) * 108 = 51192: not below.
        x.prev_load = 986;
        assert_eq!(wake_affine_weight(&x, false), Affine::None);
        // Sync: current's load 1024 > this_load 0: this at once.
        assert_eq!(wake_affine_weight(&x, true), Affine::This);
    }

    #[test]
    fn wake_affine_chooses_prev_unless_this_won() {
        let mut x = v();
        x.prev_idle = true;
        assert_eq!(wake_affine(&x, false, true), Affine::Prev);
        x.prev_idle = false;
        x.this_load = 0;
        assert_eq!(
            wake_affine(&x, false, true),
            Affine::This,
            "WA_WEIGHT answers when WA_IDLE did not"
        );
        // This CPU idle and cache-affine, prev busy: WA_IDLE says this,
        // where WA_WEIGHT alone ((1024 + 512) * 100 against 512 * 108) says
        // no.
        let mut y = v();
        y.this_idle = true;
        assert_eq!(
            wake_affine(&y, false, true),
            Affine::This,
            "WA_IDLE decides"
        );
        assert_eq!(
            wake_affine(&y, false, false),
            Affine::Prev,
            "without WA_IDLE, prev"
        );
    }

    /// Mainline's integer arithmetic, worked by hand for a 112-CPU LLC at
    /// 25%: sum = 28672, x = 256, 256^2 * 117^2 / 10240000 = 87, y = 937,
    /// 937 * 112 / 1024 = 102.
    #[test]
    fn update_idle_cpu_scan_at_25_percent_of_112_cpus() {
        assert_eq!(update_idle_cpu_scan(112, 28_672, 117), 102);
        assert_eq!(update_idle_cpu_scan(112, 0, 117), 112, "idle: scan all");
        assert_eq!(
            update_idle_cpu_scan(112, 112 * 1024, 117),
            0,
            "full: scan none"
        );
    }

    /// Chen Yu's SIS_UTIL posting (LKML, April 2022) tabulates a 112-CPU
    /// LLC: 112, 112, 108, 103, 92, 80, 64, 47, 24, 0 CPUs at 0, 5, 15, ...
    /// 85% utilization. The posting computed it with its v3 formula in
    /// percent units (100 - x^2/72); mainline, merged from v4, works in
    /// capacity units with imbalance_pct 117, and its integer rounding
    /// lands within one CPU of every entry (112, 111, 108, 102, 93, 81, 65,
    /// 47, 25, 1).
    #[test]
    fn sis_util_matches_the_published_112_cpu_table() {
        let published = [112u64, 112, 108, 103, 92, 80, 64, 47, 24, 0];
        for (i, pct) in [0u64, 5, 15, 25, 35, 45, 55, 65, 75, 85].iter().enumerate() {
            let sum = pct * 112 * 1024 / 100;
            let nr = update_idle_cpu_scan(112, sum, 117);
            assert!(
                nr.abs_diff(published[i]) <= 1,
                "{pct}% of a 112-CPU LLC: mainline scans {nr}, the posting {}",
                published[i]
            );
        }
    }
}
