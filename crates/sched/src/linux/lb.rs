//! Linux's load balancer, the decisions (`kernel/sched/fair.c`, read in the
//! tip `sched/core` tree of 2026 that carries `CONFIG_SCHED_CACHE`, and
//! `kernel/sched/topology.c`'s `sd_init()`): pure functions over what a
//! balancing CPU reads of the others ([`CpuStat`]) and of a task it may
//! move ([`TaskView`]). The CPU-side glue (intervals, messages, the pull
//! on the busiest CPU) is `linux::balance`.
//!
//! One pass of `sched_balance_rq()` at a domain, for a destination CPU:
//!
//! 1. [`should_we_balance`]: newly idle, always (when nothing runs there);
//!    otherwise only the first idle CPU of the local group (an idle core
//!    before an idle SMT thread of a busy core), else the group's first CPU;
//! 2. [`find_src_group`] (`sched_balance_find_src_group()`): every group
//!    of the domain gets [`update_sg_lb_stats`] and a [`GroupType`]; the
//!    busiest is [`update_sd_pick_busiest`]'s; the decision matrix of the
//!    source says whether the domain is balanced, else
//!    [`calculate_imbalance`] gives the [`Migration`] type and amount;
//! 3. [`find_src_rq`] (`sched_balance_find_src_rq()`): the CPU of that
//!    group to pull from, by migration type;
//! 4. on that CPU, `detach_tasks()`: its waiting fair tasks from the tail
//!    of `cfs_tasks` (least recently run first; cache-aware: by LLC
//!    preference, [`llc_order`]), each through [`can_migrate_task`]
//!    (`task_hot()` against the migration cost, relaxed after
//!    `cache_nice_tries` failures), until the imbalance is used up;
//! 5. nothing moved: `nr_balance_failed` grows, and [`need_active_balance`]
//!    may push the running task.
//!
//! ## Simplified, and why
//!
//! * Every CPU has `SCHED_CAPACITY_SCALE` (no asymmetric capacity, no RT
//!   or IRQ pressure): no `misfit_task`, `asym_packing` groups, and
//!   `check_cpu_capacity()` is always false.
//! * No `group_imbalanced` (the `sgc->imbalance` hint a child domain leaves
//!   when affinity defeated it) and no `LBF_DST_PINNED` retry with another
//!   destination of the group, no `redo` with another busiest CPU when
//!   every task there was pinned: the next balance tries again.
//! * No EAS, no NUMA balancing (`fbq_type` is `all`,
//!   `migrate_degrades_locality()` is 0).
//! * `cpu_util_cfs()` is the published `util_avg` capped at capacity,
//!   `cpu_util_cfs_boost()` the larger of it and `runnable_avg`;
//!   `task_util_est()` is the task's `util_avg`.
//! * `task_is_ineligible_on_dst_cpu()` (PLACE_LAG's soft limit on a first
//!   attempt) is not modelled: it matters only when the destination has
//!   tasks queued, and pulls here go to idle or lightly loaded CPUs.
//! * Every non-NUMA domain carries `SD_PREFER_SIBLING` (`sd_init()`'s
//!   default; NUMA clears it), so a group made of a child domain prefers
//!   siblings; a group of one CPU carries no flag.

use schedlab_topology::{CpuId, CpuSet, Topology};

use super::fork::adjust_numa_imbalance;
use super::CAPACITY;

mod env;
pub use env::{
    balance_interval_ns, Attempt, CasEnv, CpuStat, GroupType, Idle, LbEnv, Migration,
    MigrationType, SdParams, SgStats, BUSY_FACTOR, JIFFY_NS, MAX_PINNED_INTERVAL_MS,
    SCHED_NR_MIGRATE,
};

/// `group_has_capacity()` over [`SgStats`].
fn has_capacity(pct: u64, s: &SgStats) -> bool {
    if s.sum_nr_running < s.weight {
        return true;
    }
    if s.capacity * pct < s.runnable * 100 {
        return false;
    }
    s.capacity * 100 > s.util * pct
}

/// `group_is_overloaded()` over [`SgStats`] (no EAS).
fn is_overloaded(pct: u64, s: &SgStats) -> bool {
    if s.sum_nr_running <= s.weight {
        return false;
    }
    s.capacity * 100 < s.util * pct || s.capacity * pct < s.runnable * 100
}

/// `group_classify()`, with `group_llc_balance` and `group_smt_balance`
/// already decided for a non-local group.
pub fn group_classify(pct: u64, s: &SgStats, llc_balance: bool, smt_balance: bool) -> GroupType {
    if is_overloaded(pct, s) {
        GroupType::Overloaded
    } else if llc_balance {
        GroupType::LlcBalance
    } else if smt_balance {
        GroupType::SmtBalance
    } else if !has_capacity(pct, s) {
        GroupType::FullyBusy
    } else {
        GroupType::HasSpare
    }
}

pub use super::fork::groups;

/// `update_sg_lb_stats()` for `group` (`local`: it holds the destination).
pub fn update_sg_lb_stats(
    env: &LbEnv,
    topo: &Topology,
    group: &CpuSet,
    local: bool,
    stat: &impl Fn(CpuId) -> CpuStat,
) -> SgStats {
    let mut s = SgStats {
        span: *group,
        avg_load: 0,
        load: 0,
        capacity: group.weight() as u64 * CAPACITY,
        util: 0,
        runnable: 0,
        sum_nr_running: 0,
        sum_h_nr_running: 0,
        idle_cpus: 0,
        weight: group.weight() as u64,
        cores: 0,
        group_type: GroupType::HasSpare,
        smt: env.params.smt_groups && group.weight() > 1,
        nr_pref_dst_llc: 0,
    };
    let mut cores = CpuSet::new();
    for c in (*group & env.sd.span).iter() {
        let r = stat(c);
        s.load += r.load;
        s.util += r.util.min(CAPACITY);
        s.runnable += r.runnable;
        s.sum_h_nr_running += r.h_nr_runnable as u64;
        s.sum_nr_running += r.nr_running as u64;
        if let Some(cas) = &env.cas {
            if topo.llc_ordinal(c) as u16 != cas.dst_llc {
                s.nr_pref_dst_llc += r.pref_dst_llc as u64;
            }
        }
        if let Some(first) = topo.core_cpus(c).first() {
            cores.insert(first);
        }
        if r.nr_running == 0 && r.idle {
            s.idle_cpus += 1;
        }
    }
    s.cores = cores.weight() as u64;
    let (mut llc_balance, mut smt_balance) = (false, false);
    if !local {
        // `smt_balance()`: an SMT core with more than one fair task, seen
        // from an idle destination.
        smt_balance = env.idle.any() && s.smt && s.sum_h_nr_running > 1;
        llc_balance = self::llc_balance(env, topo, &s);
    }
    s.group_type = group_classify(env.sd.imbalance_pct, &s, llc_balance, smt_balance);
    if s.group_type == GroupType::Overloaded {
        s.avg_load = s.load * CAPACITY / s.capacity;
    }
    s
}

/// `llc_balance()`: a group of another LLC holds tasks preferring the
/// destination's, and moving one is allowed ([`super::cas::can_migrate_llc`]
/// gives `mig_llc`), unless balancing failed past `cache_nice_tries`.
fn llc_balance(env: &LbEnv, topo: &Topology, s: &SgStats) -> bool {
    let Some(cas) = &env.cas else { return false };
    if env.params.share_llc || env.nr_balance_failed > env.params.cache_nice_tries {
        return false;
    }
    let Some(first) = s.span.first() else {
        return false;
    };
    let src = cas.llc_stats[topo.llc_ordinal(first)];
    let dst = cas.llc_stats[cas.dst_llc as usize];
    s.nr_pref_dst_llc > 0
        && super::cas::can_migrate_llc(&cas.tun, cas.smt_threads, src, dst, 0, true)
            == super::cas::LlcMig::Llc
}

/// `update_sd_pick_busiest()`: does `sg` replace `busiest`?
pub fn update_sd_pick_busiest(busiest: Option<&SgStats>, sg: &SgStats) -> bool {
    if sg.sum_h_nr_running == 0 {
        return false;
    }
    let Some(b) = busiest else {
        return true;
    };
    if sg.group_type != b.group_type {
        return sg.group_type > b.group_type;
    }
    let spare = |b: &SgStats| {
        !(sg.idle_cpus > b.idle_cpus
            || (sg.idle_cpus == b.idle_cpus && sg.sum_nr_running <= b.sum_nr_running))
    };
    match sg.group_type {
        GroupType::Overloaded => sg.avg_load > b.avg_load,
        GroupType::LlcBalance => sg.nr_pref_dst_llc > b.nr_pref_dst_llc,
        GroupType::SmtBalance if sg.idle_cpus != 0 || b.idle_cpus != 0 => spare(b),
        GroupType::SmtBalance | GroupType::FullyBusy => {
            !(sg.avg_load < b.avg_load || (sg.avg_load == b.avg_load && b.smt))
        }
        GroupType::HasSpare => {
            if b.smt != sg.smt {
                return !(sg.smt && sg.sum_h_nr_running <= 1);
            }
            spare(b)
        }
    }
}

/// `sibling_imbalance()`: tasks to move so both groups run as many per core.
pub fn sibling_imbalance(env: &LbEnv, busiest: &SgStats, local: &SgStats) -> i64 {
    if !env.idle.any() || busiest.sum_nr_running == 0 {
        return 0;
    }
    let (nb, nl) = (busiest.cores as i64, local.cores as i64);
    let (bs, ls) = (busiest.sum_nr_running as i64, local.sum_nr_running as i64);
    if nb == nl {
        return (bs - ls).max(0);
    }
    let mut imb = (nl * bs - nb * ls).max(0);
    imb = (2 * imb + nl + nb) / (nl + nb);
    if imb <= 1 && ls == 0 && bs > 1 {
        imb = 2;
    }
    imb
}

/// `struct sd_lb_stats`, as far as the decisions read it.
#[derive(Clone, Debug)]
pub struct SdStats {
    /// Every group, the local one first.
    pub groups: alloc::vec::Vec<SgStats>,
    pub local: SgStats,
    pub busiest: Option<SgStats>,
    pub total_load: u64,
    pub total_capacity: u64,
}

/// `update_sd_lb_stats()`.
pub fn update_sd_lb_stats(
    env: &LbEnv,
    topo: &Topology,
    stat: &impl Fn(CpuId) -> CpuStat,
) -> SdStats {
    let mut local = None;
    let mut busiest: Option<SgStats> = None;
    let (mut total_load, mut total_capacity) = (0, 0);
    let mut all = alloc::vec::Vec::new();
    for g in groups(topo, &env.sd, env.dst) {
        let is_local = g.contains(env.dst);
        let s = update_sg_lb_stats(env, topo, &g, is_local, stat);
        if is_local {
            local = Some(s);
        } else if update_sd_pick_busiest(busiest.as_ref(), &s) {
            busiest = Some(s);
        }
        total_load += s.load;
        total_capacity += s.capacity;
        all.push(s);
    }
    SdStats {
        groups: all,
        local: local.expect("the destination is in its own domain"),
        busiest,
        total_load,
        total_capacity,
    }
}

/// `calculate_imbalance()`.
pub fn calculate_imbalance(env: &LbEnv, sds: &SdStats) -> Migration {
    let (mut local, b) = (sds.local, sds.busiest.expect("a busiest group"));
    let m = |kind, imbalance| Migration { kind, imbalance };
    match b.group_type {
        GroupType::SmtBalance => return m(MigrationType::Task, 1),
        GroupType::LlcBalance => return m(MigrationType::LlcTask, 1),
        _ => {}
    }
    if local.group_type == GroupType::HasSpare {
        if b.group_type > GroupType::FullyBusy && !env.params.share_llc {
            let imb = local.capacity.max(local.util) - local.util;
            if env.idle.any() && imb == 0 {
                return m(MigrationType::Task, 1);
            }
            return m(MigrationType::Util, imb as i64);
        }
        let mut imb = if b.weight == 1 || env.params.prefer_sibling {
            sibling_imbalance(env, &b, &local)
        } else {
            (local.idle_cpus as i64 - b.idle_cpus as i64).max(0)
        };
        if env.sd.numa {
            imb = adjust_numa_imbalance(imb as u64, local.sum_nr_running + 1, env.sd.imb_numa_nr)
                as i64;
        }
        return m(MigrationType::Task, imb >> 1);
    }
    let avg = sds.total_load * CAPACITY / sds.total_capacity.max(1);
    if local.group_type < GroupType::Overloaded {
        local.avg_load = local.load * CAPACITY / local.capacity;
        if local.avg_load >= b.avg_load || local.avg_load >= avg {
            return m(MigrationType::Load, 0);
        }
    }
    let imb = ((b.avg_load.saturating_sub(avg)) * b.capacity)
        .min(avg.saturating_sub(local.avg_load) * local.capacity)
        / CAPACITY;
    m(MigrationType::Load, imb as i64)
}

/// `sched_balance_find_src_group()`: the busiest group and what to move,
/// or `None` when the domain is balanced for this destination.
pub fn find_src_group(env: &LbEnv, sds: &SdStats) -> Option<(SgStats, Migration)> {
    let b = sds.busiest?;
    let local = &sds.local;
    if local.group_type > b.group_type {
        return None;
    }
    if local.group_type == GroupType::Overloaded {
        if local.avg_load >= b.avg_load {
            return None;
        }
        let avg = sds.total_load * CAPACITY / sds.total_capacity.max(1);
        if local.avg_load >= avg || 100 * b.avg_load <= env.sd.imbalance_pct * local.avg_load {
            return None;
        }
    }
    // `prefer_sibling` is the busiest group's flag: its child domain's.
    let prefer_sibling = env.params.prefer_sibling;
    let force = prefer_sibling
        && local.group_type == GroupType::HasSpare
        && (b.group_type == GroupType::LlcBalance || sibling_imbalance(env, &b, local) > 1);
    if !force && b.group_type != GroupType::Overloaded {
        if !env.idle.any() {
            return None;
        }
        let smt_vs_nonsmt = local.smt != b.smt;
        if !(b.group_type == GroupType::SmtBalance && smt_vs_nonsmt) {
            if b.weight > 1 && local.idle_cpus <= b.idle_cpus + 1 {
                return None;
            }
            if b.sum_h_nr_running == 1 {
                return None;
            }
        }
    }
    let mig = calculate_imbalance(env, sds);
    (mig.imbalance > 0).then_some((b, mig))
}

/// `sched_balance_find_src_rq()`: the CPU of `group` to pull from.
pub fn find_src_rq(
    env: &LbEnv,
    group: &CpuSet,
    mig: Migration,
    stat: &impl Fn(CpuId) -> CpuStat,
) -> Option<CpuId> {
    let mut best: Option<(u64, CpuId)> = None;
    for c in (*group & env.sd.span).iter() {
        let r = stat(c);
        let nr = r.h_nr_runnable as u64;
        if nr == 0 {
            continue;
        }
        let key = match mig.kind {
            // Equal capacities: `load_i * cap_j > load_j * cap_i` is a
            // plain comparison of loads.
            MigrationType::Load => {
                if nr == 1 && r.load as i64 > mig.imbalance {
                    continue;
                }
                r.load
            }
            MigrationType::Util => {
                if nr <= 1 {
                    continue;
                }
                r.util.max(r.runnable)
            }
            MigrationType::Task => nr,
            MigrationType::LlcTask => r.pref_dst_llc as u64,
        };
        if best.is_none_or(|(k, _)| key > k) {
            best = Some((key, c));
        }
    }
    // `busiest_*` start at 0: a CPU with nothing to offer is never picked.
    best.filter(|(k, _)| *k > 0).map(|(_, c)| c)
}

/// `should_we_balance()` for a periodic or idle balance: the first idle
/// CPU of the local group (an idle core first, then an idle thread of a
/// busy core), else the group's first CPU, balances this level.
pub fn should_we_balance(
    env: &LbEnv,
    topo: &Topology,
    local: &CpuSet,
    stat: &impl Fn(CpuId) -> CpuStat,
) -> bool {
    if env.idle == Idle::NewlyIdle {
        return stat(env.dst).nr_running == 0;
    }
    let idle = |c: CpuId| {
        let r = stat(c);
        r.idle && r.nr_running == 0
    };
    let mut idle_smt = None;
    let mut skip = CpuSet::new();
    for c in local.iter() {
        if skip.contains(c) || !idle(c) {
            continue;
        }
        let core = *topo.core_cpus(c);
        if !env.params.share_cpucapacity && core.weight() > 1 && !core.iter().all(idle) {
            idle_smt.get_or_insert(c);
            skip = skip | core;
            continue;
        }
        return c == env.dst;
    }
    if let Some(c) = idle_smt {
        return c == env.dst;
    }
    local.first() == Some(env.dst)
}

/// What one `sched_balance_rq()` decides for `env.dst` at `env.sd`, before
/// it asks the busiest CPU for tasks.
#[derive(Clone, Debug)]
pub enum Verdict {
    /// [`should_we_balance`] leaves this level to another CPU.
    NotThisCpu,
    /// Balanced: [`find_src_group`] or [`find_src_rq`] found nothing to
    /// move (the group statistics, for what the caller records of them).
    Balanced(SdStats),
    /// Pull `mig` from `src`.
    Pull {
        src: CpuId,
        mig: Migration,
        sds: SdStats,
    },
}

/// One `sched_balance_rq()` up to its choice of the busiest CPU: the
/// steps 1 to 3 of the module doc, over what `stat` reads of each CPU.
/// The simulator's balancer and the recording's shadow both decide with it.
pub fn decide(env: &LbEnv, topo: &Topology, stat: &impl Fn(CpuId) -> CpuStat) -> Verdict {
    let local = groups(topo, &env.sd, env.dst)[0];
    if !should_we_balance(env, topo, &local, stat) {
        return Verdict::NotThisCpu;
    }
    let sds = update_sd_lb_stats(env, topo, stat);
    let found = find_src_group(env, &sds)
        .and_then(|(g, mig)| find_src_rq(env, &g.span, mig, stat).map(|c| (c, mig)));
    match found {
        Some((src, mig)) => Verdict::Pull { src, mig, sds },
        None => Verdict::Balanced(sds),
    }
}

mod detach;
pub use detach::{
    can_migrate_task, detach_amount, llc_order, need_active_balance, task_hot, CanMigrate, TaskView,
};

#[cfg(test)]
mod tests;
