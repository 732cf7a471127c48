//! Linux 7.2's cache-aware scheduling (`CONFIG_SCHED_CACHE`, Tim Chen,
//! Chen Yu, Peter Zijlstra; the `sched/cache:` commits applied to tip
//! `sched/core` in 2026), read in `kernel/sched/fair.c` of that tree: the
//! threads of one process share data, so the load balancer gathers them in
//! the LLC where the process ran most, and stops when that LLC is busy.
//!
//! * **Occupancy** (`account_mm_sched()`, `__update_mm_sched()`): every run
//!   of a thread adds its time to its process's per-CPU runtime and to the
//!   CPU's; both halve at each 10 ms epoch (`llc_epoch_period`).
//! * **Preferred LLC** (`task_cache_work()`, run once an epoch by a thread of
//!   the process at its tick): each LLC's occupancy is the sum over its
//!   CPUs of `1024 * process runtime / CPU runtime`
//!   (`fraction_mm_sched()`); the process's CPU (`sc_stat.cpu`) moves to
//!   the busiest CPU of the best LLC only when that LLC holds more than
//!   twice the current one's occupancy. `nr_running_avg` follows how many
//!   of its threads run at once ([`update_avg_scale`]).
//! * **Too many threads** ([`invalid_llc_nr`]): a process of one thread, or
//!   whose running threads (times SMT width) do not fit the LLC's CPUs,
//!   loses its preference; so does one not scanned for 5 epochs.
//! * **The guard** ([`can_migrate_llc`]): per-LLC utilization recorded by
//!   periodic balancing; moving toward the preferred LLC is refused when
//!   it would be busy (over `llc_overaggr_pct` = 50 % of its capacity, 75 %
//!   without SMT) and busier than the source by `llc_imb_pct` = 20 %;
//!   moving out is refused unless the preferred LLC is busy and busier
//!   than the destination by that much; both busy: the generic balancer
//!   decides. The balancer's side is in `linux::lb` (`llc_balance()`,
//!   `migrate_llc_task`, `migrate_degrades_llc()`).
//!
//! ## Simplified, and why
//!
//! * `exceed_llc_capacity()` (the footprint test) applies only with NUMA
//!   balancing, which schedlab does not model: it is false, as upstream
//!   without `sched_numa_balancing`.
//! * `task_cache_work()` runs at the tick that queues it, not at the next
//!   return to user space (a running thread returns within microseconds).
//! * Epochs are `now / llc_epoch_period` on every CPU (upstream: each
//!   run queue advances its own from the same jiffies).

use alloc::vec::Vec;

use schedlab_topology::CpuId;

use crate::config::CasTunables;

/// `enum llc_mig`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum LlcMig {
    /// Respect the LLC preference: do not move.
    Forbid,
    /// Move for the LLC preference.
    Llc,
    /// Leave it to the generic balancer.
    Unrestricted,
}

/// `fits_llc_capacity()`: utilization under `llc_overaggr_pct` of
/// capacity (half as much again without SMT).
pub fn fits_llc_capacity(tun: &CasTunables, smt_threads: u64, util: u64, cap: u64) -> bool {
    let mut pct = tun.overaggr_pct as u64;
    if smt_threads == 1 {
        pct = pct * 3 / 2;
    }
    util * 100 < cap * pct
}

/// `util_greater()`: `a` is more than `llc_imb_pct` above `b`.
pub fn util_greater(tun: &CasTunables, a: u64, b: u64) -> bool {
    a * 100 > b * (100 + tun.imb_pct as u64)
}

/// `can_migrate_llc()`: may a task of utilization `tsk_util` go from the
/// LLC of `src` (its `(util, capacity)`) to that of `dst`, toward its
/// preferred LLC (`to_pref`) or out of it?
pub fn can_migrate_llc(
    tun: &CasTunables,
    smt_threads: u64,
    src: (u64, u64),
    dst: (u64, u64),
    tsk_util: u64,
    to_pref: bool,
) -> LlcMig {
    let src_util = src.0.saturating_sub(tsk_util);
    let dst_util = dst.0 + tsk_util;
    let fits = |u, c| fits_llc_capacity(tun, smt_threads, u, c);
    if !fits(dst_util, dst.1) && !fits(src_util, src.1) {
        return LlcMig::Unrestricted;
    }
    let forbid = if to_pref {
        !fits(dst_util, dst.1) && util_greater(tun, dst_util, src_util)
    } else {
        fits(src_util, src.1) || !util_greater(tun, src_util, dst_util)
    };
    if forbid {
        LlcMig::Forbid
    } else {
        LlcMig::Llc
    }
}

/// `get_sched_cache_scale()`: `None` means no limit (tolerance 100).
pub fn cache_scale(tun: &CasTunables, mul: u64) -> Option<u64> {
    match tun.aggr_tolerance {
        0 => Some(0),
        t if t >= 100 => None,
        t => Some(1 + (t as u64 - 1) * mul),
    }
}

/// `fits_capacity()`: `cap` within 80 % of `max`.
pub fn fits_capacity(cap: u64, max: u64) -> bool {
    cap * 1280 < max * 1024
}

/// `invalid_llc_nr()`: a process of one thread, or whose running threads
/// (times the SMT width) do not fit the LLC's CPUs, has no preference.
pub fn invalid_llc_nr(
    tun: &CasTunables,
    nr_threads: u32,
    nr_running_avg: u64,
    smt_threads: u64,
    llc_size: u64,
) -> bool {
    if nr_threads <= 1 {
        return true;
    }
    match cache_scale(tun, 1) {
        None => false,
        Some(scale) => !fits_capacity(nr_running_avg * smt_threads, scale * llc_size),
    }
}

/// `update_avg_scale()`: an average that moves by a `1/divisor` of the
/// difference, the divisor a quarter of the LLC's CPUs within 2..=8.
pub fn update_avg_scale(avg: &mut u64, sample: u64, llc_size: u64) {
    let divisor = (llc_size >> 2).clamp(2, 8) as i64;
    let diff = sample as i64 - *avg as i64;
    *avg = (*avg as i64 + diff / divisor).max(0) as u64;
}

/// `__shr_u64()`.
pub fn shr(v: u64, n: u64) -> u64 {
    if n >= 64 {
        0
    } else {
        v >> n
    }
}

/// A process's cache state (`mm->sc_stat` with its per-CPU
/// `sched_cache_time`), behind the process's own lock.
#[derive(Clone, Debug, Default)]
pub struct ProcCache {
    /// Per CPU: the epoch its runtime was last brought to, and the
    /// runtime (ns, halved each epoch).
    pub pcpu: Vec<(u64, u64)>,
    /// `sc_stat.epoch`: the last epoch a scan was queued for.
    pub epoch: u64,
    /// `sc_stat.next_scan`, ns.
    pub next_scan: u64,
    /// `sc_stat.cpu`: the CPU standing for the preferred LLC.
    pub cpu: Option<u32>,
    pub nr_running_avg: u64,
    /// Live threads (`get_nr_threads()`).
    pub nr_threads: u32,
}

impl ProcCache {
    pub fn new(cpus: usize) -> ProcCache {
        ProcCache {
            pcpu: alloc::vec![(0, 0); cpus],
            ..ProcCache::default()
        }
    }

    /// The runtime on `cpu` brought to `epoch`.
    pub fn runtime_at(&self, cpu: usize, epoch: u64) -> u64 {
        let (e, r) = self.pcpu[cpu];
        shr(r, epoch.saturating_sub(e))
    }

    /// `account_mm_sched()`'s part on the process: `delta` ns ran on `cpu`
    /// in `epoch`.
    pub fn account(&mut self, cpu: usize, epoch: u64, delta: u64) {
        let r = self.runtime_at(cpu, epoch);
        self.pcpu[cpu] = (epoch, r + delta);
    }
}

/// A CPU's side of occupancy (`rq->cpu_runtime`, `rq->cpu_epoch`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuRuntime {
    pub epoch: u64,
    pub runtime: u64,
}

impl CpuRuntime {
    /// `__update_mm_sched()`'s part on the run queue.
    pub fn bring_to(&mut self, epoch: u64) {
        if epoch > self.epoch {
            self.runtime = shr(self.runtime, epoch - self.epoch);
            self.epoch = epoch;
        }
    }
}

/// `fraction_mm_sched()`: the process's share of the CPU's recent runtime,
/// scaled to `NICE_0_LOAD` (1024).
pub fn fraction(proc_runtime: u64, cpu_runtime: u64) -> u64 {
    1024 * proc_runtime / (cpu_runtime + 1)
}

/// The end of `task_cache_work()`: given each LLC's `(occupancy, busiest
/// CPU)` in scan order and the current preferred CPU's LLC, the new
/// preferred CPU. The best LLC replaces the current one only with more than
/// twice its occupancy.
pub fn choose_preferred(
    llcs: &[(u16, u64, Option<u32>)],
    current_llc: Option<u16>,
    current: Option<u32>,
) -> Option<u32> {
    let (mut best, mut best_cpu, mut cur) = (0u64, None, 0u64);
    for &(llc, occ, cpu) in llcs {
        if occ > best {
            best = occ;
            best_cpu = cpu;
        }
        if Some(llc) == current_llc {
            cur = occ;
        }
    }
    if best > 2 * cur {
        best_cpu
    } else {
        current
    }
}

/// What `select_cache_cpu()` reads of a wake.
#[derive(Clone, Copy, Debug)]
pub struct CacheView {
    /// The task may run on one CPU only (`nr_cpus_allowed == 1`).
    pub pinned: bool,
    /// Its process's preferred CPU (`mm_sched_cpu`), if any and allowed.
    pub pref: Option<CpuId>,
    /// `cpus_share_cache(pref, prev)`.
    pub share_cache: bool,
    /// `_get_migrate_hint(prev, pref, task_util, true)`: moving toward the
    /// preferred LLC is forbidden (it would be overloaded).
    pub forbid: bool,
}

/// `select_cache_cpu()` of the cache-aware RFC series (Peter Zijlstra's
/// prototype "sched: Cache aware load-balancing", LKML, March 2025, and
/// Chen Yu's and Tim Chen's RFC postings after it), which
/// `select_task_rq_fair()` calls first for a wake (`new_cpu = prev_cpu =
/// select_cache_cpu(p, prev_cpu)`), so `wake_affine()` and
/// `select_idle_sibling()` then work from the preferred CPU: prev, unless
/// the task may move, its process has a preferred CPU, that CPU is in
/// another LLC than prev, and the hint does not forbid the move (the
/// RFC's `_get_migrate_hint(..., true) == mig_forbid` check, from the
/// LLC utilization periodic balancing last recorded). Left out: the NUMA
/// balancing check (`__migrate_degrades_locality()`; schedlab has no NUMA
/// balancing).
pub fn select_cache_cpu(v: &CacheView, prev: CpuId) -> CpuId {
    match v.pref {
        Some(cpu) if !v.pinned && !v.share_cache && !v.forbid => cpu,
        _ => prev,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `select_cache_cpu()` case by case, as its code reads: prev unless
    /// the task may move, has a preferred CPU in another LLC, and the hint
    /// allows the move.
    #[test]
    fn select_cache_cpu_follows_its_code_case_by_case() {
        let (prev, pref) = (CpuId::new(1), CpuId::new(9));
        let v = CacheView {
            pinned: false,
            pref: Some(pref),
            share_cache: false,
            forbid: false,
        };
        assert_eq!(
            select_cache_cpu(&v, prev),
            pref,
            "another LLC, allowed: the preferred CPU"
        );
        let cases = [
            (CacheView { pinned: true, ..v }, "nr_cpus_allowed == 1"),
            (
                CacheView { pref: None, ..v },
                "no preferred CPU (mm_sched_cpu < 0)",
            ),
            (
                CacheView {
                    share_cache: true,
                    ..v
                },
                "prev already in the preferred LLC",
            ),
            (
                CacheView { forbid: true, ..v },
                "the hint forbids: the preferred LLC would be overloaded",
            ),
        ];
        for (c, why) in cases {
            assert_eq!(select_cache_cpu(&c, prev), prev, "{why}: prev");
        }
    }

    fn t() -> CasTunables {
        CasTunables::default()
    }

    /// The decision matrix of `can_migrate_llc()` worked by hand from its
    /// code (SMT-2, capacity 100 so utilization reads as percent, no task
    /// utilization): busy is 50 % or more, "much busier" is more than 20 %
    /// above. The matrix in the comment above the upstream function
    /// differs in six cells (it reads 50 % as not busy toward the
    /// preferred LLC, and (50, 30), (50, 40), (60, 40) out of it as N):
    /// the code is what runs, so the code is what this follows.
    #[test]
    fn can_migrate_llc_follows_its_code_cell_by_cell() {
        let pcts = [30, 40, 50, 60];
        // Rows: src; columns: dst. Y = Llc, N = Forbid, G = Unrestricted.
        let toward = ["YYNN", "YYNN", "YYGG", "YYGG"];
        let out_of = ["NNNN", "NNNN", "YYGG", "YYGG"];
        for (table, to_pref) in [(toward, true), (out_of, false)] {
            for (i, row) in table.iter().enumerate() {
                for (j, want) in row.chars().enumerate() {
                    let got = can_migrate_llc(&t(), 2, (pcts[i], 100), (pcts[j], 100), 0, to_pref);
                    let want = match want {
                        'Y' => LlcMig::Llc,
                        'N' => LlcMig::Forbid,
                        _ => LlcMig::Unrestricted,
                    };
                    assert_eq!(
                        got, want,
                        "to_pref {to_pref}, src {}%, dst {}%: expected {want:?}, got {got:?}",
                        pcts[i], pcts[j]
                    );
                }
            }
        }
    }

    #[test]
    fn without_smt_an_llc_is_busy_only_past_75_percent() {
        assert!(fits_llc_capacity(&t(), 1, 74, 100));
        assert!(!fits_llc_capacity(&t(), 1, 75, 100));
        assert!(!fits_llc_capacity(&t(), 2, 50, 100));
        // The task's own utilization moves with it: 45 % + 10 % makes the
        // preferred LLC busy and more than 20 % above a 30 % source.
        assert_eq!(
            can_migrate_llc(&t(), 2, (40, 100), (45, 100), 10, true),
            LlcMig::Forbid,
            "dst 55 % after the move, src 30 %"
        );
    }

    #[test]
    fn invalid_llc_nr_drops_a_process_wider_than_its_llc() {
        // 8 CPUs of 4 SMT-2 cores: 3 running threads * 2 = 6 fit under 80 %
        // of 8 (6.4); 4 * 2 = 8 do not.
        assert!(!invalid_llc_nr(&t(), 8, 3, 2, 8));
        assert!(invalid_llc_nr(&t(), 8, 4, 2, 8));
        assert!(
            invalid_llc_nr(&t(), 1, 0, 2, 8),
            "one thread: nothing to share"
        );
        let all = CasTunables {
            aggr_tolerance: 100,
            ..t()
        };
        assert!(
            !invalid_llc_nr(&all, 8, 40, 2, 8),
            "tolerance 100 ignores the count"
        );
        let off = CasTunables {
            aggr_tolerance: 0,
            ..t()
        };
        assert!(invalid_llc_nr(&off, 8, 1, 2, 8), "tolerance 0 turns it off");
    }

    #[test]
    fn update_avg_scale_moves_a_quarter_of_an_llc_at_a_time() {
        // LLC of 16: divisor 4. 0 -> 8 -> ... truncating as div64_s64 does.
        let mut a = 0;
        let seen: Vec<u64> = (0..6)
            .map(|_| {
                update_avg_scale(&mut a, 8, 16);
                a
            })
            .collect();
        assert_eq!(seen, [2, 3, 4, 5, 5, 5]);
        let mut b = 8;
        update_avg_scale(&mut b, 0, 4);
        assert_eq!(b, 4, "an LLC of 4 uses the smallest divisor, 2");
    }

    #[test]
    fn occupancy_halves_each_epoch_and_the_preference_needs_twice_as_much() {
        let mut p = ProcCache::new(4);
        p.account(1, 3, 8_000);
        assert_eq!(p.runtime_at(1, 5), 2_000, "two epochs later: a quarter");
        let mut c = CpuRuntime {
            epoch: 3,
            runtime: 8_000,
        };
        c.bring_to(4);
        assert_eq!(c.runtime, 4_000);
        assert_eq!(fraction(4_000, 3_999), 1024);
        // LLC 0 holds 1500, LLC 8 holds 2000: not twice, keep CPU 0.
        let llcs = [(0, 1500, Some(1)), (8, 2000, Some(9))];
        assert_eq!(choose_preferred(&llcs, Some(0), Some(0)), Some(0));
        let llcs = [(0, 900, Some(1)), (8, 2000, Some(9))];
        assert_eq!(choose_preferred(&llcs, Some(0), Some(0)), Some(9));
        assert_eq!(
            choose_preferred(&llcs, None, None),
            Some(9),
            "none yet: the best"
        );
    }
}
