//! Linux 6.19's fork placement: `select_task_rq_fair()` for `WF_FORK`,
//! which is `sched_balance_find_dst_cpu()` (`kernel/sched/fair.c`, formerly
//! `find_idlest_cpu()`) from the highest domain with `SD_BALANCE_FORK`:
//!
//! 1. [`find_dst_group`] (`sched_balance_find_dst_group()`): each group of
//!    the domain gets `update_sg_wakeup_stats()` ([`GroupStats`]) and a type
//!    ([`group_classify`]); the idlest non-local group is picked by
//!    [`update_pick_idlest`]; then the local group is kept unless the
//!    idlest is clearly better ([`prefer_idlest`]). No group: go down to
//!    the child domain.
//! 2. [`find_dst_group_cpu`] (`sched_balance_find_dst_group_cpu()`): the
//!    group's idle CPU in the shallowest idle state, else its least loaded
//!    CPU.
//! 3. If that CPU is not the one we stood on, start again from its highest
//!    domain smaller than the one just used; else go to the child domain.
//!
//! The domains are built from the topology as `build_sched_domains()`
//! builds them and `sd_parent_degenerate()` trims them: SMT (a core), MC
//! (an LLC), PKG (a node, when it holds several LLCs) and NUMA (the
//! machine, when it holds several nodes), each kept only if it spans more
//! CPUs than the level below it. A domain's groups are its child's spans
//! (single CPUs for the lowest), in `build_sched_groups()` order: from the
//! deciding CPU's group on, wrapping. `imbalance_pct` is `sd_init()`'s:
//! 110 for SMT, 117 otherwise.
//!
//! ## Simplified, and why
//!
//! * Only three group types arise here: `has_spare`, `fully_busy` and
//!   `overloaded`. `misfit_task` needs asymmetric capacity; `imbalanced`
//!   is set by Linux's load balancer (`linux/lb.rs`), not here; `asym_packing` and
//!   `smt_balance` are never set by `update_sg_wakeup_stats()`.
//! * Every CPU's capacity is `SCHED_CAPACITY_SCALE`; `cpu_util()` is the
//!   published `util_avg` capped at it, without `util_est`.
//! * The NUMA level keeps `SD_BALANCE_FORK`: schedlab's machines carry no
//!   SLIT distances, and Linux clears the flag only beyond
//!   `node_reclaim_distance` (30). A two-socket machine reporting 32 (many
//!   AMD EPYC boards) would not fork across sockets in Linux.
//! * No NUMA balancing (`numa_preferred_nid`), no SCHED_IDLE CPUs
//!   (`sched_idle_cpu()`), no core-scheduling cookie match.
//! * `find_idlest_group_cpu()` breaks a tie between equally shallow idle
//!   CPUs by the latest `idle_stamp`; the model keeps no stamp, so the
//!   first in id order wins.
//! * The new task carries no PELT of its own in these sums: Linux's
//!   `*_without()` helpers subtract `p`, which is on no queue at fork.

use schedlab_topology::{CpuId, CpuSet, Level, Topology};

use super::{Linux, CAPACITY, LLC_IMBALANCE_PCT};
use crate::policy::{Machine, SpawnRule};

/// `sd->imbalance_pct` of an SMT domain.
pub const SMT_IMBALANCE_PCT: u64 = 110;
/// `NUMA_IMBALANCE_MIN`: a pair of communicating tasks may stay local.
pub const NUMA_IMBALANCE_MIN: u64 = 2;
/// `scale_load_down(NICE_0_LOAD)`.
pub const NICE_0_LOAD: u64 = 1024;

/// One sched domain of a CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Domain {
    pub level: Level,
    pub span: CpuSet,
    /// The level whose spans are this domain's groups; `None`: single CPUs.
    pub child: Option<Level>,
    pub imbalance_pct: u64,
    /// `SD_NUMA`.
    pub numa: bool,
    /// `sd->imb_numa_nr` (used only when `numa`).
    pub imb_numa_nr: u64,
}

/// The domains of `cpu`, lowest first, trimmed as Linux trims them.
pub fn domains(topo: &Topology, cpu: CpuId) -> ([Option<Domain>; 4], usize) {
    let mut out = [None; 4];
    let mut n = 0;
    let mut below: Option<(Level, usize)> = None;
    for level in [Level::Smt, Level::Llc, Level::Node, Level::Machine] {
        let span = topo.span(cpu, level);
        let weight = span.weight();
        if weight <= below.map_or(1, |(_, w)| w) {
            continue;
        }
        let numa = level == Level::Machine && topo.nodes().len() > 1;
        out[n] = Some(Domain {
            level,
            span,
            child: below.map(|(l, _)| l),
            imbalance_pct: if level == Level::Smt {
                SMT_IMBALANCE_PCT
            } else {
                LLC_IMBALANCE_PCT
            },
            numa,
            imb_numa_nr: if numa { imb_numa_nr(topo, cpu) } else { 0 },
        });
        n += 1;
        below = Some((level, weight));
    }
    (out, n)
}

/// The groups of `sd` as `build_sched_groups()` makes them: the child
/// domain's spans (single CPUs at the lowest level), the local group first,
/// then wrapping in id order.
pub fn groups(topo: &Topology, sd: &Domain, local: CpuId) -> alloc::vec::Vec<CpuSet> {
    let mut out = alloc::vec::Vec::new();
    let mut covered = CpuSet::new();
    for c in sd.span.iter_from(local) {
        if covered.contains(c) {
            continue;
        }
        let g = sd
            .child
            .map_or(CpuSet::single(c), |l| topo.span(c, l) & sd.span);
        covered = covered | g;
        out.push(g);
    }
    out
}

/// `build_sched_domains()`'s `imb_numa_nr` for the NUMA level: the LLCs
/// in a node when there are several, else an eighth of the node; at
/// least 1. (One NUMA level, so the span factor is 1.)
pub fn imb_numa_nr(topo: &Topology, cpu: CpuId) -> u64 {
    let node = topo.node_cpus(cpu).weight() as u64;
    let llcs = node / topo.llc_cpus(cpu).weight() as u64;
    let imb = if llcs == 1 { node >> 3 } else { llcs };
    imb.max(1)
}

/// `enum group_type`, the ones this path can see, idlest first.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum GroupType {
    HasSpare,
    FullyBusy,
    Overloaded,
}

/// `struct sg_lb_stats` as `update_sg_wakeup_stats()` fills it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupStats {
    /// `group_load`: the CPUs' `cpu_load()` (fair `load_avg`).
    pub load: u64,
    /// `group_util`: the CPUs' `cpu_util()`.
    pub util: u64,
    /// `group_runnable`: the CPUs' `runnable_avg`.
    pub runnable: u64,
    /// `sum_nr_running`.
    pub nr_running: u64,
    pub idle_cpus: u64,
    /// `group_weight`: the whole group's CPUs, the mask notwithstanding.
    pub weight: u64,
    /// `group_capacity`.
    pub capacity: u64,
}

impl GroupStats {
    /// `avg_load`, computed "only when group is fully busy or overloaded".
    pub fn avg_load(&self, ty: GroupType) -> u64 {
        match ty {
            GroupType::HasSpare => 0,
            _ => self.load * CAPACITY / self.capacity.max(1),
        }
    }
}

/// `group_is_overloaded()`.
pub fn group_is_overloaded(imbalance_pct: u64, s: &GroupStats) -> bool {
    if s.nr_running <= s.weight {
        return false;
    }
    s.capacity * 100 < s.util * imbalance_pct || s.capacity * imbalance_pct < s.runnable * 100
}

/// `group_has_capacity()`.
pub fn group_has_capacity(imbalance_pct: u64, s: &GroupStats) -> bool {
    if s.nr_running < s.weight {
        return true;
    }
    if s.capacity * imbalance_pct < s.runnable * 100 {
        return false;
    }
    s.capacity * 100 > s.util * imbalance_pct
}

/// `group_classify()`, for the types this path can see.
pub fn group_classify(imbalance_pct: u64, s: &GroupStats) -> GroupType {
    if group_is_overloaded(imbalance_pct, s) {
        GroupType::Overloaded
    } else if !group_has_capacity(imbalance_pct, s) {
        GroupType::FullyBusy
    } else {
        GroupType::HasSpare
    }
}

/// `update_pick_idlest()`: does `s` replace the idlest so far?
pub fn update_pick_idlest(
    idlest: Option<(GroupType, &GroupStats)>,
    ty: GroupType,
    s: &GroupStats,
) -> bool {
    let Some((ity, is)) = idlest else {
        return true;
    };
    if ty != ity {
        return ty < ity;
    }
    match ty {
        GroupType::Overloaded | GroupType::FullyBusy => is.avg_load(ity) > s.avg_load(ty),
        GroupType::HasSpare => {
            is.idle_cpus < s.idle_cpus || (is.idle_cpus == s.idle_cpus && is.util > s.util)
        }
    }
}

/// `adjust_numa_imbalance()`.
pub fn adjust_numa_imbalance(imbalance: u64, dst_running: u64, imb_numa_nr: u64) -> u64 {
    if dst_running > imb_numa_nr || imbalance > NUMA_IMBALANCE_MIN {
        imbalance
    } else {
        0
    }
}

/// The end of `sched_balance_find_dst_group()`: go to the idlest group
/// rather than stay in the local one? `imb_numa_nr` is the domain's,
/// already narrowed to the task's CPUs in the local group.
pub fn prefer_idlest(
    sd: &Domain,
    local: (GroupType, &GroupStats),
    idlest: (GroupType, &GroupStats),
    imb_numa_nr: u64,
) -> bool {
    let ((lty, ls), (ity, is)) = (local, idlest);
    if lty != ity {
        return lty > ity;
    }
    match lty {
        GroupType::Overloaded | GroupType::FullyBusy => {
            let (la, ia) = (ls.avg_load(lty), is.avg_load(ity));
            let imbalance = NICE_0_LOAD * (sd.imbalance_pct - 100) / 100;
            if sd.numa && ia + imbalance >= la {
                return false;
            }
            if ia >= la + imbalance {
                return false;
            }
            100 * la > sd.imbalance_pct * ia
        }
        GroupType::HasSpare => {
            if sd.numa {
                let imbalance = ls.idle_cpus.abs_diff(is.idle_cpus);
                if adjust_numa_imbalance(imbalance, ls.nr_running + 1, imb_numa_nr) == 0 {
                    return false;
                }
            }
            ls.idle_cpus < is.idle_cpus
        }
    }
}

/// `update_sg_wakeup_stats()` over the group's CPUs in `mask`.
pub fn group_stats(m: &Machine<'_>, group: &CpuSet, mask: &CpuSet) -> GroupStats {
    let mut s = GroupStats {
        weight: group.weight() as u64,
        capacity: group.weight() as u64 * CAPACITY,
        ..GroupStats::default()
    };
    for c in (*group & *mask).iter() {
        let nr = m.load(c) as u64;
        s.load += m.load_avg(c) as u64;
        s.util += (m.util(c) as u64).min(CAPACITY);
        s.runnable += m.runnable_avg(c) as u64;
        s.nr_running += nr;
        if nr == 0 && Linux::idle(m, c) {
            s.idle_cpus += 1;
        }
    }
    s
}

/// `sched_balance_find_dst_group()`: the group to go to, or `None` to
/// stay in the local one.
pub fn find_dst_group(m: &Machine<'_>, sd: &Domain, mask: &CpuSet, this: CpuId) -> Option<CpuSet> {
    let topo = m.topology();
    let mut local: Option<(GroupType, GroupStats, CpuSet)> = None;
    let mut idlest: Option<(GroupType, GroupStats, CpuSet)> = None;
    for group in groups(topo, sd, this) {
        if !group.intersects(mask) {
            continue;
        }
        let s = group_stats(m, &group, mask);
        let ty = group_classify(sd.imbalance_pct, &s);
        if group.contains(this) {
            local = Some((ty, s, group));
        } else if update_pick_idlest(idlest.as_ref().map(|(t, s, _)| (*t, s)), ty, &s) {
            idlest = Some((ty, s, group));
        }
    }
    let (ity, is, ig) = idlest?;
    let Some((lty, ls, lg)) = local else {
        return Some(ig);
    };
    let mut imb = sd.imb_numa_nr;
    if *mask != *topo.cpus() {
        imb = imb.min((lg & *mask).weight() as u64);
    }
    prefer_idlest(sd, (lty, &ls), (ity, &is), imb).then_some(ig)
}

/// `sched_balance_find_dst_group_cpu()`: the group's idle CPU in the
/// shallowest state, else its least loaded CPU (else `this`).
pub fn find_dst_group_cpu(m: &Machine<'_>, group: &CpuSet, mask: &CpuSet, this: CpuId) -> CpuId {
    if group.weight() == 1 {
        return group.first().unwrap_or(this);
    }
    let mut shallowest: Option<(u8, CpuId)> = None;
    let mut least: (u64, CpuId) = (u64::MAX, this);
    for c in (*group & *mask).iter() {
        if Linux::idle(m, c) {
            let depth = m.doorbell(c).load().depth;
            if shallowest.is_none_or(|(d, _)| depth < d) {
                shallowest = Some((depth, c));
            }
        } else if shallowest.is_none() {
            let load = m.load_avg(c) as u64;
            if load < least.0 {
                least = (load, c);
            }
        }
    }
    shallowest.map_or(least.1, |(_, c)| c)
}

/// `sched_balance_find_dst_cpu(sd, p, cpu, prev_cpu, SD_BALANCE_FORK)`
/// from `cpu`'s highest domain; `None` when the machine is one CPU or the
/// task may run nowhere in it (Linux then keeps `prev_cpu`).
pub fn find_dst_cpu(m: &Machine<'_>, cpu: CpuId, mask: &CpuSet) -> Option<CpuId> {
    let topo = m.topology();
    let (mut doms, mut n) = domains(topo, cpu);
    let top = doms[n.checked_sub(1)?]?;
    if !top.span.intersects(mask) {
        return None;
    }
    let (mut cpu, mut new_cpu) = (cpu, cpu);
    // `sd`, as an index into `cpu`'s domains, or none left.
    let mut sd = n.checked_sub(1);
    while let Some(i) = sd {
        let d = doms[i].expect("a domain below the count");
        let down = i.checked_sub(1);
        let Some(group) = find_dst_group(m, &d, mask, cpu) else {
            sd = down;
            continue;
        };
        new_cpu = find_dst_group_cpu(m, &group, mask, cpu);
        if new_cpu == cpu {
            sd = down;
            continue;
        }
        // The highest domain of the new CPU smaller than this one.
        let weight = d.span.weight();
        cpu = new_cpu;
        (doms, n) = domains(topo, cpu);
        sd = (0..n)
            .rev()
            .find(|&j| doms[j].is_some_and(|x| x.span.weight() < weight));
    }
    Some(new_cpu)
}

/// `spawn = "linux"`: Linux's fork placement for any policy.
#[derive(Clone, Copy, Debug, Default)]
pub struct LinuxFork;

impl SpawnRule for LinuxFork {
    fn place_new(&mut self, m: &Machine<'_>, spawner: CpuId, mask: &CpuSet) -> Option<CpuId> {
        find_dst_cpu(m, spawner, mask).filter(|c| mask.contains(*c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::shared::Shared;
    use crate::testhost::TestHost;
    use crate::{SpawnPolicy, TaskSpec};
    use alloc::vec::Vec;
    use schedlab_topology::preset;

    fn c(i: usize) -> CpuId {
        CpuId::new(i)
    }

    fn stats(nr: u64, weight: u64, util: u64, runnable: u64) -> GroupStats {
        GroupStats {
            nr_running: nr,
            weight,
            capacity: weight * CAPACITY,
            util,
            runnable,
            ..GroupStats::default()
        }
    }

    /// A machine with every CPU asleep (idle) but `busy`, each running one
    /// task; `depth` sets chosen CPUs' idle depth.
    fn machine(
        name: &str,
        busy: &[usize],
        depth: &[(usize, u8)],
    ) -> Shared<super::super::LinuxTask> {
        let topo = preset(name).expect("a preset");
        let cfg = Config::for_topology(&topo);
        let sh = Shared::new(topo, cfg, 16);
        for &b in busy {
            sh.doorbell(c(b)).answer();
            sh.set_load(c(b), 1);
        }
        for &(cpu, d) in depth {
            sh.doorbell(c(cpu)).sleep(d);
        }
        sh
    }

    /// Where a fork from cpu0 goes, on `sh` as it stands.
    fn from0(sh: &Shared<super::super::LinuxTask>, mask: &CpuSet) -> Option<CpuId> {
        find_dst_cpu(&sh.machine(c(0), 0), c(0), mask)
    }

    #[test]
    fn domains_are_trimmed_as_sd_parent_degenerate_trims_them() {
        let t = preset("amd-2x8").unwrap();
        let (d, n) = domains(&t, c(0));
        let got: Vec<_> = d[..n]
            .iter()
            .map(|x| x.unwrap())
            .map(|x| (x.level, x.span.weight(), x.child, x.imbalance_pct, x.numa))
            .collect();
        assert_eq!(
            got,
            [
                (Level::Smt, 2, None, 110, false),
                (Level::Llc, 8, Some(Level::Smt), 117, false),
                (Level::Node, 16, Some(Level::Llc), 117, false),
            ],
            "amd-2x8: SMT, MC, PKG; the machine level equals the node and goes"
        );
        let t = preset("epyc-2s-384").unwrap();
        let (d, n) = domains(&t, c(0));
        assert_eq!(n, 4, "epyc-2s-384: SMT, MC, PKG, NUMA");
        let numa = d[3].unwrap();
        assert!(numa.numa && numa.child == Some(Level::Node));
        assert_eq!(numa.imb_numa_nr, 12, "12 LLCs per node: imb_numa_nr = 12");
        // One LLC per node: PKG is degenerate, NUMA's groups are the LLCs,
        // and imb_numa_nr is an eighth of the node (112 >> 3 = 14).
        let t = preset("spr-2s").unwrap();
        let (d, n) = domains(&t, c(0));
        let top = d[n - 1].unwrap();
        assert_eq!((n, top.child, top.imb_numa_nr), (3, Some(Level::Llc), 14));
    }

    #[test]
    fn group_classify_checks_overload_then_capacity() {
        // Four CPUs; the thresholds are 117%: util > 4096 * 100 / 117 =
        // 3500.9 and runnable > 4096 * 1.17 = 4792.3.
        let pct = 117;
        let cases = [
            (
                stats(2, 4, 4000, 4000),
                GroupType::HasSpare,
                "fewer tasks than CPUs",
            ),
            (
                stats(4, 4, 3600, 4000),
                GroupType::FullyBusy,
                "util 3600 past 3500.9",
            ),
            (
                stats(4, 4, 3000, 4000),
                GroupType::HasSpare,
                "util under the line",
            ),
            (
                stats(5, 4, 3600, 4000),
                GroupType::Overloaded,
                "more tasks and util past it",
            ),
            (
                stats(5, 4, 3000, 4200),
                GroupType::HasSpare,
                "more tasks, util and runnable under",
            ),
            (
                stats(5, 4, 3000, 4800),
                GroupType::Overloaded,
                "runnable 4800 past 4792.3",
            ),
            (
                stats(4, 4, 3000, 4800),
                GroupType::FullyBusy,
                "runnable past, tasks not more",
            ),
        ];
        for (s, want, why) in cases {
            assert_eq!(group_classify(pct, &s), want, "{why}: {s:?}");
        }
    }

    #[test]
    fn update_pick_idlest_takes_type_then_idle_cpus_then_util() {
        let spare = |idle, util| GroupStats {
            idle_cpus: idle,
            util,
            ..stats(1, 4, util, 0)
        };
        let busy = |load| GroupStats {
            load,
            ..stats(4, 4, 0, 0)
        };
        assert!(
            update_pick_idlest(None, GroupType::Overloaded, &busy(9999)),
            "the first group is taken"
        );
        let (a, b) = (spare(2, 500), spare(3, 900));
        assert!(
            update_pick_idlest(Some((GroupType::HasSpare, &a)), GroupType::HasSpare, &b),
            "more idle CPUs"
        );
        assert!(!update_pick_idlest(
            Some((GroupType::HasSpare, &b)),
            GroupType::HasSpare,
            &a
        ));
        let (a, b) = (spare(2, 500), spare(2, 400));
        assert!(
            update_pick_idlest(Some((GroupType::HasSpare, &a)), GroupType::HasSpare, &b),
            "as idle, lower util"
        );
        assert!(
            !update_pick_idlest(Some((GroupType::HasSpare, &a)), GroupType::HasSpare, &a),
            "a tie keeps the first"
        );
        let (x, y) = (busy(4000), busy(3000));
        assert!(
            update_pick_idlest(Some((GroupType::FullyBusy, &x)), GroupType::FullyBusy, &y),
            "lower avg_load"
        );
        assert!(
            !update_pick_idlest(Some((GroupType::HasSpare, &a)), GroupType::FullyBusy, &y),
            "a busier type never"
        );
        assert!(
            update_pick_idlest(Some((GroupType::FullyBusy, &y)), GroupType::HasSpare, &a),
            "an idler type always"
        );
    }

    #[test]
    fn sched_balance_find_dst_group_compares_local_with_idlest() {
        let t = preset("epyc-2s-384").unwrap();
        let (d, _) = domains(&t, c(0));
        let (llc, numa) = (d[1].unwrap(), d[3].unwrap());
        let spare = |nr, idle| GroupStats {
            idle_cpus: idle,
            ..stats(nr, 16, 0, 0)
        };
        let hs = GroupType::HasSpare;
        // Has spare, not NUMA: strictly more idle CPUs only.
        assert!(!prefer_idlest(
            &llc,
            (hs, &spare(1, 3)),
            (hs, &spare(1, 3)),
            0
        ));
        assert!(prefer_idlest(
            &llc,
            (hs, &spare(1, 2)),
            (hs, &spare(1, 3)),
            0
        ));
        // NUMA, imb_numa_nr 12: an imbalance of up to 2 idle CPUs is
        // allowed while the local group would run at most 12 tasks.
        assert!(
            !prefer_idlest(&numa, (hs, &spare(3, 190)), (hs, &spare(0, 192)), 12),
            "imbalance 2, 4 running"
        );
        assert!(
            prefer_idlest(&numa, (hs, &spare(3, 189)), (hs, &spare(0, 192)), 12),
            "imbalance 3"
        );
        assert!(
            prefer_idlest(&numa, (hs, &spare(12, 190)), (hs, &spare(0, 192)), 12),
            "13 would run: past 12"
        );
        // Fully busy: imbalance = 1024 * 17 / 100 = 174 of avg_load; stay
        // unless 100 * local > 117 * idlest. avg_load = load * 1024 / 16384.
        let fb = GroupType::FullyBusy;
        let busy = |avg: u64| GroupStats {
            load: avg * 16,
            ..stats(16, 16, 0, 0)
        };
        assert!(
            prefer_idlest(&llc, (fb, &busy(1200)), (fb, &busy(1000)), 0),
            "120000 > 117000"
        );
        assert!(
            !prefer_idlest(&llc, (fb, &busy(1100)), (fb, &busy(1000)), 0),
            "110000 <= 117000"
        );
        assert!(
            prefer_idlest(&numa, (fb, &busy(1200)), (fb, &busy(1000)), 0),
            "NUMA: 1000 + 174 < 1200"
        );
        assert!(
            !prefer_idlest(&numa, (fb, &busy(1150)), (fb, &busy(1000)), 0),
            "NUMA: 1174 >= 1150 stays"
        );
        // Different types: the idler wins.
        assert!(prefer_idlest(&llc, (fb, &busy(10)), (hs, &spare(16, 0)), 0));
        assert!(!prefer_idlest(
            &llc,
            (hs, &spare(16, 0)),
            (fb, &busy(10)),
            0
        ));
    }

    #[test]
    fn sched_balance_find_dst_cpu_spreads_a_fork_to_the_idler_llc() {
        // amd-2x8, the parent runs on cpu0: PKG's groups are the LLCs, 7
        // idle against 8, so the other LLC; its first idle CPU is 8; from
        // 8 down, every core and sibling is as idle as 8's own: stay.
        let sh = machine("amd-2x8", &[0], &[]);
        let all = *sh.topology().cpus();
        assert_eq!(from0(&sh, &all), Some(c(8)));
        // Both LLCs have one busy CPU: stay in the LLC; MC's groups are
        // cores, cpu0's has 1 idle against 2: the first idle core, {2,3}.
        let sh = machine("amd-2x8", &[0, 8], &[]);
        assert_eq!(from0(&sh, &all), Some(c(2)));
        // The shallowest idle state wins inside the group: cpu8 is deeper
        // than the rest of its LLC.
        let deep: Vec<(usize, u8)> = (8..16).map(|i| (i, if i == 8 { 2 } else { 1 })).collect();
        let sh = machine("amd-2x8", &[0], &deep);
        assert_eq!(from0(&sh, &all), Some(c(9)));
        // A mask of LLC 0: the other LLC is skipped as no CPU is allowed.
        let sh = machine("amd-2x8", &[0], &[]);
        let llc0 = CpuSet::range(0, 8);
        assert_eq!(from0(&sh, &llc0), Some(c(2)));
        // Everything busy: every group fully busy at load 0, no better
        // group; the fork stays on the parent's CPU.
        let every: Vec<usize> = (0..16).collect();
        let sh = machine("amd-2x8", &every, &[]);
        assert_eq!(from0(&sh, &all), Some(c(0)));
    }

    #[test]
    fn sched_balance_find_dst_cpu_keeps_a_fork_on_its_node_while_numa_allows() {
        // epyc-2s-384, parent on cpu0: NUMA compares nodes, 191 idle with
        // 192; imbalance 1 with 2 running <= 12 is allowed: stay on the
        // node. PKG compares LLCs: 15 idle against 16, so the next LLC
        // (cpus 8-15 and 200-207), whose first idle CPU is 8.
        let sh = machine("epyc-2s-384", &[0], &[]);
        let all = *sh.topology().cpus();
        assert_eq!(from0(&sh, &all), Some(c(8)));
    }

    #[test]
    fn spawn_linux_places_through_the_machine_rule() {
        let mut h = TestHost::quiet("amd-2x8", |cfg| cfg.spawn = SpawnPolicy::Linux);
        // cpu0 idle: every level is as idle as the local group: stay.
        let a = h.spawn(c(0), TaskSpec::fair(0));
        assert_eq!(h.cpu_of(a), c(0));
        // cpu0 runs `a`: the other LLC, then cpu0's LLC's next free core.
        let b = h.spawn(c(0), TaskSpec::fair(0));
        assert_eq!(h.cpu_of(b), c(8), "the idler LLC");
        let d = h.spawn(c(0), TaskSpec::fair(0));
        assert_eq!(h.cpu_of(d), c(2), "LLCs even: a free core of cpu0's LLC");
    }
}
