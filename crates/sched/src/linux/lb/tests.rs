//! Each decision against numbers worked by hand from `kernel/sched/fair.c`
//! and `sd_init()`, on amd-2x8 (two LLCs of four SMT-2 cores: SMT {2k,
//! 2k+1}, MC 0-7 and 8-15, one PKG (node) domain of 16) unless said.

use super::*;
use crate::config::CasTunables;
use crate::linux::fork::{domains, Domain};
use alloc::vec::Vec;
use schedlab_topology::preset;
use schedlab_topology::Level;

fn c(i: usize) -> CpuId {
    CpuId::new(i)
}

fn topo() -> Topology {
    preset("amd-2x8").unwrap()
}

/// The domain of CPU `cpu` at `level`.
fn dom(t: &Topology, cpu: usize, level: Level) -> Domain {
    let (d, n) = domains(t, c(cpu));
    d[..n]
        .iter()
        .flatten()
        .find(|d| d.level == level)
        .copied()
        .unwrap()
}

fn env(t: &Topology, dst: usize, level: Level, idle: Idle) -> LbEnv {
    let sd = dom(t, dst, level);
    LbEnv {
        sd,
        params: SdParams::of(&sd),
        dst: c(dst),
        idle,
        nr_balance_failed: 0,
        cas: None,
    }
}

/// `n` fair tasks each of load 1024 and util `util` per task (capped), on a
/// CPU; idle when `n == 0`.
fn busy(n: u32, util: u64) -> CpuStat {
    CpuStat {
        nr_running: n,
        h_nr_runnable: n,
        load: 1024 * n as u64,
        util: (util * n as u64).min(1024),
        runnable: 1024 * n as u64,
        idle: n == 0,
        pref_dst_llc: 0,
    }
}

fn stats(per: Vec<(usize, CpuStat)>) -> impl Fn(CpuId) -> CpuStat {
    move |x: CpuId| {
        per.iter()
            .find(|(i, _)| *i == x.index())
            .map_or(busy(0, 0), |(_, s)| *s)
    }
}

#[test]
fn sd_init_gives_intervals_of_the_span_and_cache_nice_tries_by_level() {
    let t = topo();
    let smt = SdParams::of(&dom(&t, 0, Level::Smt));
    let mc = SdParams::of(&dom(&t, 0, Level::Llc));
    let top = SdParams::of(&dom(&t, 0, Level::Node));
    assert_eq!(
        (
            smt.min_interval_ms,
            smt.max_interval_ms,
            smt.cache_nice_tries
        ),
        (2, 4, 0)
    );
    assert_eq!(
        (mc.min_interval_ms, mc.max_interval_ms, mc.cache_nice_tries),
        (8, 16, 1)
    );
    assert_eq!((top.min_interval_ms, top.cache_nice_tries), (16, 1));
    assert!(smt.share_cpucapacity && smt.share_llc && !mc.share_cpucapacity && mc.share_llc);
    assert!(!top.share_llc && top.prefer_sibling && mc.smt_groups && !smt.prefer_sibling);
    let two = preset("epyc-2s-384").unwrap();
    let numa = SdParams::of(&dom(&two, 0, Level::Machine));
    assert_eq!(numa.cache_nice_tries, 2, "a NUMA domain tries twice");
}

#[test]
fn get_sd_balance_interval_multiplies_a_busy_cpus_by_16_less_a_jiffy() {
    assert_eq!(balance_interval_ns(8, false, 16), 8 * JIFFY_NS);
    assert_eq!(
        balance_interval_ns(8, true, 16),
        127 * JIFFY_NS,
        "8 * 16 - 1"
    );
    // max_load_balance_interval = HZ * 16 / 10 = 1600 jiffies.
    assert_eq!(balance_interval_ns(256, true, 16), 1600 * JIFFY_NS);
    assert_eq!(
        balance_interval_ns(0, false, 16),
        JIFFY_NS,
        "at least one jiffy"
    );
}

#[test]
fn update_sg_lb_stats_sums_the_group_and_classifies_it() {
    let t = topo();
    let e = env(&t, 8, Level::Node, Idle::Idle);
    // LLC 0 runs 10 tasks on 8 CPUs: CPUs 0 and 1 two each.
    let st = stats(
        (0..8)
            .map(|i| (i, busy(1 + (i < 2) as u32, 1024)))
            .collect(),
    );
    let g = *t.llc_cpus(c(0));
    let s = update_sg_lb_stats(&e, &t, &g, false, &st);
    assert_eq!(
        (s.sum_nr_running, s.weight, s.cores, s.idle_cpus),
        (10, 8, 4, 0)
    );
    assert_eq!(
        (s.capacity, s.util, s.load),
        (8 * 1024, 8 * 1024, 10 * 1024)
    );
    // nr 10 > 8 and capacity * 100 < util * 117: overloaded.
    assert_eq!(s.group_type, GroupType::Overloaded);
    assert_eq!(s.avg_load, 10 * 1024 * 1024 / (8 * 1024), "1280");
    // The same group with 8 tasks at full util: not overloaded (nr <= 8),
    // no capacity (nr == weight and util * 117 > capacity * 100).
    let st = stats((0..8).map(|i| (i, busy(1, 1024))).collect());
    let s = update_sg_lb_stats(&e, &t, &g, false, &st);
    assert_eq!((s.group_type, s.avg_load), (GroupType::FullyBusy, 0));
    // Two tasks, one per core: spare, 6 idle.
    let st = stats(vec![(0, busy(1, 500)), (2, busy(1, 500))]);
    let s = update_sg_lb_stats(&e, &t, &g, false, &st);
    assert_eq!((s.group_type, s.idle_cpus), (GroupType::HasSpare, 6));
}

#[test]
fn smt_balance_marks_a_core_of_two_tasks_seen_from_an_idle_cpu() {
    let t = topo();
    // MC of CPU 2: groups are cores; core {0,1} runs two tasks.
    let e = env(&t, 2, Level::Llc, Idle::Idle);
    let st = stats(vec![(0, busy(1, 600)), (1, busy(1, 600))]);
    let core = *t.core_cpus(c(0));
    let s = update_sg_lb_stats(&e, &t, &core, false, &st);
    assert_eq!(s.group_type, GroupType::SmtBalance);
    let busy_dst = env(&t, 2, Level::Llc, Idle::NotIdle);
    let s = update_sg_lb_stats(&busy_dst, &t, &core, false, &st);
    assert_eq!(
        s.group_type,
        GroupType::HasSpare,
        "only for an idle destination"
    );
}

fn sg(ty: GroupType, idle: u64, nr: u64, avg: u64) -> SgStats {
    SgStats {
        span: CpuSet::new(),
        avg_load: avg,
        load: 0,
        capacity: 8 * 1024,
        util: 0,
        runnable: 0,
        sum_nr_running: nr,
        sum_h_nr_running: nr,
        idle_cpus: idle,
        weight: 8,
        cores: 4,
        group_type: ty,
        smt: false,
        nr_pref_dst_llc: 0,
    }
}

#[test]
fn update_sd_pick_busiest_takes_type_then_the_types_own_order() {
    use GroupType::*;
    let spare = sg(HasSpare, 4, 4, 0);
    assert!(
        update_sd_pick_busiest(None, &spare),
        "the first group with tasks"
    );
    assert!(
        !update_sd_pick_busiest(None, &sg(HasSpare, 8, 0, 0)),
        "no task to pull"
    );
    assert!(update_sd_pick_busiest(
        Some(&spare),
        &sg(Overloaded, 0, 12, 1300)
    ));
    assert!(!update_sd_pick_busiest(
        Some(&sg(Overloaded, 0, 12, 1300)),
        &spare
    ));
    // Overloaded: the higher avg_load.
    let o = sg(Overloaded, 0, 12, 1300);
    assert!(update_sd_pick_busiest(
        Some(&o),
        &sg(Overloaded, 0, 12, 1400)
    ));
    assert!(!update_sd_pick_busiest(
        Some(&o),
        &sg(Overloaded, 0, 12, 1300)
    ));
    // Spare: fewer idle CPUs, then more tasks; a tie keeps the first.
    assert!(update_sd_pick_busiest(Some(&spare), &sg(HasSpare, 3, 5, 0)));
    assert!(!update_sd_pick_busiest(
        Some(&spare),
        &sg(HasSpare, 5, 3, 0)
    ));
    assert!(update_sd_pick_busiest(Some(&spare), &sg(HasSpare, 4, 5, 0)));
    assert!(!update_sd_pick_busiest(
        Some(&spare),
        &sg(HasSpare, 4, 4, 0)
    ));
    // Fully busy: avg_load is 0 for both, so the later replaces the first
    // unless the first is made of SMT siblings.
    let fb = sg(FullyBusy, 0, 8, 0);
    assert!(update_sd_pick_busiest(Some(&fb), &sg(FullyBusy, 0, 8, 0)));
    let fb_smt = SgStats { smt: true, ..fb };
    assert!(!update_sd_pick_busiest(Some(&fb_smt), &fb));
    // LLC balance: more tasks preferring the destination's LLC.
    let l1 = SgStats {
        nr_pref_dst_llc: 1,
        ..sg(LlcBalance, 0, 4, 0)
    };
    let l3 = SgStats {
        nr_pref_dst_llc: 3,
        ..l1
    };
    assert!(update_sd_pick_busiest(Some(&l1), &l3) && !update_sd_pick_busiest(Some(&l3), &l1));
}

#[test]
fn sibling_imbalance_evens_tasks_per_core() {
    let t = topo();
    let e = env(&t, 8, Level::Node, Idle::Idle);
    let (b, l) = (
        sg(GroupType::HasSpare, 3, 5, 0),
        sg(GroupType::HasSpare, 7, 1, 0),
    );
    assert_eq!(sibling_imbalance(&e, &b, &l), 4, "equal cores: 5 - 1");
    // Unequal: local 4 cores, busiest 2: (4*4 - 2*0) = 16, (32 + 6) / 6 = 6.
    let b2 = SgStats {
        cores: 2,
        ..sg(GroupType::HasSpare, 0, 4, 0)
    };
    let l0 = sg(GroupType::HasSpare, 8, 0, 0);
    assert_eq!(sibling_imbalance(&e, &b2, &l0), 6);
    // One task left over for an empty group: rounded to 2 to use it.
    let b3 = SgStats {
        cores: 8,
        ..sg(GroupType::HasSpare, 0, 2, 0)
    };
    let l4 = SgStats { cores: 2, ..l0 };
    // (2*2 - 8*0) = 4; (8 + 10) / 10 = 1 -> 2.
    assert_eq!(sibling_imbalance(&e, &b3, &l4), 2);
    let busy = env(&t, 8, Level::Node, Idle::NotIdle);
    assert_eq!(sibling_imbalance(&busy, &b, &l), 0, "a busy destination");
}

fn sds(local: SgStats, busiest: SgStats) -> SdStats {
    SdStats {
        groups: vec![local, busiest],
        total_load: local.load + busiest.load,
        total_capacity: local.capacity + busiest.capacity,
        local,
        busiest: Some(busiest),
    }
}

#[test]
fn calculate_imbalance_fills_spare_capacity_by_util_across_llcs() {
    let t = topo();
    let e = env(&t, 8, Level::Node, Idle::Idle);
    let local = SgStats {
        util: 1000,
        ..sg(GroupType::HasSpare, 7, 1, 0)
    };
    let b = sg(GroupType::Overloaded, 0, 12, 1536);
    // Not SD_SHARE_LLC, busiest overloaded: util, capacity - util.
    let m = calculate_imbalance(&e, &sds(local, b));
    assert_eq!(
        m,
        Migration {
            kind: MigrationType::Util,
            imbalance: 8192 - 1000
        }
    );
    // Inside an LLC (SD_SHARE_LLC) the same spare group evens tasks per
    // core instead: prefer_sibling, (12 - 1) >> 1 = 5.
    let mc = env(&t, 8, Level::Llc, Idle::Idle);
    let m = calculate_imbalance(&mc, &sds(local, b));
    assert_eq!(
        m,
        Migration {
            kind: MigrationType::Task,
            imbalance: 5
        }
    );
    // No prefer_sibling (groups of single CPUs: SMT domain): even the idle
    // CPUs, (7 - 0) >> 1 = 3.
    let smt = env(&t, 8, Level::Smt, Idle::Idle);
    let m = calculate_imbalance(&smt, &sds(local, SgStats { weight: 2, ..b }));
    assert_eq!(
        m,
        Migration {
            kind: MigrationType::Task,
            imbalance: 3
        }
    );
}

#[test]
fn calculate_imbalance_moves_load_to_the_average_when_both_are_overloaded() {
    let t = topo();
    let e = env(&t, 8, Level::Node, Idle::Idle);
    // busiest 12 tasks' load 12288 on 8192: avg 1536; local 9216: 1152;
    // domain 21504 / 16384 * 1024 = 1344. min((1536-1344)*8192,
    // (1344-1152)*8192) / 1024 = 1536.
    let b = SgStats {
        load: 12288,
        ..sg(GroupType::Overloaded, 0, 12, 1536)
    };
    let l = SgStats {
        load: 9216,
        ..sg(GroupType::Overloaded, 0, 9, 1152)
    };
    let m = calculate_imbalance(&e, &sds(l, b));
    assert_eq!(
        m,
        Migration {
            kind: MigrationType::Load,
            imbalance: 1536
        }
    );
    // A fully busy local group gets its avg_load now: 12000 -> 1500, under
    // busiest's 1536 and the domain's (24288 / 16384 * 1024 = 1518), so it
    // takes min(1536 - 1518, 1518 - 1500) * 8192 / 1024 = 144.
    let fl = SgStats {
        load: 12000,
        ..sg(GroupType::FullyBusy, 0, 8, 0)
    };
    let m = calculate_imbalance(&e, &sds(fl, b));
    assert_eq!(
        m,
        Migration {
            kind: MigrationType::Load,
            imbalance: 144
        }
    );
    // At 12400 (avg 1550) it is above the busiest group: nothing.
    let fl = SgStats { load: 12400, ..fl };
    assert_eq!(calculate_imbalance(&e, &sds(fl, b)).imbalance, 0);
}

#[test]
fn find_src_group_leaves_spare_groups_to_an_idle_cpu() {
    let t = topo();
    // LLC 0 runs 2 tasks (6 idle), LLC 1 none.
    let st = stats(vec![(0, busy(1, 800)), (2, busy(1, 800))]);
    let idle = env(&t, 8, Level::Node, Idle::Idle);
    let s = update_sd_lb_stats(&idle, &t, &st);
    // prefer_sibling and sibling_imbalance = 2 > 1: forced; (2 - 0) >> 1.
    let (g, m) = find_src_group(&idle, &s).expect("imbalanced for an idle CPU");
    assert_eq!(g.span, *t.llc_cpus(c(0)));
    assert_eq!(
        m,
        Migration {
            kind: MigrationType::Task,
            imbalance: 1
        }
    );
    // A busy destination (CPU 9 runs a task): spare groups are balanced.
    let st = stats(vec![
        (0, busy(1, 800)),
        (2, busy(1, 800)),
        (9, busy(1, 800)),
    ]);
    let busy_env = env(&t, 9, Level::Node, Idle::NotIdle);
    let s = update_sd_lb_stats(&busy_env, &t, &st);
    assert!(find_src_group(&busy_env, &s).is_none());
    // One task there is not worth it: 1 vs 0 is no imbalance per core.
    let st = stats(vec![(0, busy(1, 800))]);
    let s = update_sd_lb_stats(&idle, &t, &st);
    assert!(find_src_group(&idle, &s).is_none());
}

#[test]
fn find_src_rq_picks_by_migration_type() {
    let t = topo();
    let e = env(&t, 8, Level::Node, Idle::Idle);
    let g = *t.llc_cpus(c(0));
    let st = stats(vec![
        (1, busy(1, 1024)),
        (3, busy(3, 300)),
        (5, busy(2, 700)),
    ]);
    let task = Migration {
        kind: MigrationType::Task,
        imbalance: 1,
    };
    assert_eq!(
        find_src_rq(&e, &g, task, &st),
        Some(c(3)),
        "the most fair tasks"
    );
    let util = Migration {
        kind: MigrationType::Util,
        imbalance: 100,
    };
    // util caps at 1024 and runnable is 1024 * n: CPU 3 (3072) > CPU 5.
    assert_eq!(find_src_rq(&e, &g, util, &st), Some(c(3)));
    let only = stats(vec![(1, busy(1, 1024))]);
    assert_eq!(
        find_src_rq(&e, &g, util, &only),
        None,
        "one task: util never pulls it"
    );
    let load = Migration {
        kind: MigrationType::Load,
        imbalance: 500,
    };
    assert_eq!(
        find_src_rq(&e, &g, load, &only),
        None,
        "a lone task heavier than the imbalance stays"
    );
    assert_eq!(
        find_src_rq(&e, &g, load, &st),
        Some(c(3)),
        "the highest load"
    );
}

#[test]
fn should_we_balance_names_the_first_idle_core_then_the_first_cpu() {
    let t = topo();
    // Machine domain from CPU 8: the local group is LLC 1 (8-15).
    let local = *t.llc_cpus(c(8));
    let mut e = env(&t, 10, Level::Node, Idle::Idle);
    // CPU 8 busy, 9 idle (its core busy), 10 and 11 idle (an idle core).
    let st = stats(vec![
        (8, busy(1, 500)),
        (12, busy(1, 500)),
        (13, busy(1, 500)),
    ]);
    assert!(
        should_we_balance(&e, &t, &local, &st),
        "10 is the first CPU of an idle core"
    );
    e.dst = c(9);
    assert!(!should_we_balance(&e, &t, &local, &st), "9's core is busy");
    // No idle core: the first idle SMT thread of a busy core.
    let st = stats(
        (8..16)
            .filter(|i| i % 2 == 0)
            .map(|i| (i, busy(1, 500)))
            .collect(),
    );
    assert!(should_we_balance(&e, &t, &local, &st));
    // Nobody idle: the group's first CPU.
    let st = stats((8..16).map(|i| (i, busy(1, 500))).collect());
    assert!(!should_we_balance(&e, &t, &local, &st));
    e.dst = c(8);
    assert!(should_we_balance(&e, &t, &local, &st));
    // Newly idle: every CPU with nothing to run.
    let n = env(&t, 13, Level::Node, Idle::NewlyIdle);
    assert!(should_we_balance(&n, &t, &local, &stats(Vec::new())));
}

fn view(hot: bool) -> TaskView {
    TaskView {
        allowed_on_dst: true,
        hot,
        load: 600,
        util: 300,
        degrades_llc: false,
        prefers_dst_llc: false,
    }
}

#[test]
fn can_migrate_task_keeps_a_cache_hot_task_until_balancing_failed_enough() {
    let t = topo();
    let mut a = env(&t, 8, Level::Node, Idle::Idle).attempt();
    let k = MigrationType::Task;
    assert_eq!(can_migrate_task(&a, k, &view(false)), CanMigrate::Yes);
    assert_eq!(can_migrate_task(&a, k, &view(true)), CanMigrate::Hot);
    a.nr_balance_failed = 1;
    assert_eq!(
        can_migrate_task(&a, k, &view(true)),
        CanMigrate::Hot,
        "1 is not > 1"
    );
    a.nr_balance_failed = 2;
    assert_eq!(can_migrate_task(&a, k, &view(true)), CanMigrate::Yes);
    let smt = env(&t, 8, Level::Smt, Idle::Idle).attempt();
    assert_eq!(
        can_migrate_task(&smt, k, &view(true)),
        CanMigrate::Yes,
        "siblings share it"
    );
    let pinned = TaskView {
        allowed_on_dst: false,
        ..view(false)
    };
    assert_eq!(can_migrate_task(&a, k, &pinned), CanMigrate::Pinned);
}

#[test]
fn can_migrate_task_with_cas_keeps_a_task_in_its_llc_unless_failures_pile_up() {
    let t = topo();
    let mut a = env(&t, 8, Level::Node, Idle::Idle).attempt();
    a.cas = true;
    let stays = TaskView {
        degrades_llc: true,
        ..view(false)
    };
    assert_eq!(
        can_migrate_task(&a, MigrationType::Load, &stays),
        CanMigrate::LlcPinned
    );
    // An LLC migration takes only tasks preferring the destination's LLC.
    assert_eq!(
        can_migrate_task(&a, MigrationType::LlcTask, &view(false)),
        CanMigrate::LlcPinned
    );
    let wants = TaskView {
        prefers_dst_llc: true,
        ..view(false)
    };
    assert_eq!(
        can_migrate_task(&a, MigrationType::LlcTask, &wants),
        CanMigrate::Yes
    );
    // nr_balance_failed >= cache_nice_tries + 1 lifts the preference.
    a.nr_balance_failed = 2;
    assert_eq!(
        can_migrate_task(&a, MigrationType::Load, &stays),
        CanMigrate::Yes
    );
}

#[test]
fn detach_tasks_takes_no_more_than_the_imbalance_relaxed_by_failures() {
    let t = topo();
    let mut a = env(&t, 8, Level::Node, Idle::Idle).attempt();
    let load = Migration {
        kind: MigrationType::Load,
        imbalance: 500,
    };
    assert_eq!(detach_amount(&a, load, &view(false)), None, "600 > 500");
    a.nr_balance_failed = 1;
    assert_eq!(
        detach_amount(&a, load, &view(false)),
        Some(-100),
        "600 >> 1 <= 500"
    );
    let util = Migration {
        kind: MigrationType::Util,
        imbalance: 400,
    };
    assert_eq!(detach_amount(&a, util, &view(false)), Some(100));
    let task = Migration {
        kind: MigrationType::Task,
        imbalance: 2,
    };
    assert_eq!(detach_amount(&a, task, &view(false)), Some(1));
}

#[test]
fn need_active_balance_after_cache_nice_tries_plus_two_or_for_an_llc_move() {
    let t = topo();
    let mut a = env(&t, 8, Level::Node, Idle::Idle).attempt();
    a.nr_balance_failed = 3;
    assert!(
        !need_active_balance(&a, MigrationType::Task, false),
        "3 is not > 1 + 2"
    );
    a.nr_balance_failed = 4;
    assert!(need_active_balance(&a, MigrationType::Task, false));
    assert!(!need_active_balance(&a, MigrationType::Load, false));
    a.nr_balance_failed = 0;
    assert!(need_active_balance(&a, MigrationType::LlcTask, false));
    assert!(
        !need_active_balance(&a, MigrationType::LlcTask, true),
        "alb_break_llc"
    );
}

#[test]
fn order_tasks_by_llc_puts_the_destinations_first_and_the_sources_last() {
    assert_eq!(llc_order(Some(1), 0, 1), 0);
    assert_eq!(llc_order(None, 0, 1), 1);
    assert_eq!(llc_order(Some(2), 0, 1), 2);
    assert_eq!(llc_order(Some(0), 0, 1), 3);
}

#[test]
fn llc_balance_needs_preferring_tasks_and_room_in_the_destination() {
    let t = topo();
    let mut e = env(&t, 8, Level::Node, Idle::Idle);
    e.cas = Some(CasEnv {
        tun: CasTunables::default(),
        smt_threads: 2,
        dst_llc: 1,
        // LLC 0 at 40 %, LLC 1 at 10 % of 8192.
        llc_stats: vec![(3277, 8192), (819, 8192)],
    });
    let mut st_cpu = busy(1, 900);
    st_cpu.pref_dst_llc = 1;
    let st = stats(vec![(0, st_cpu), (2, busy(1, 900))]);
    let g = *t.llc_cpus(c(0));
    let s = update_sg_lb_stats(&e, &t, &g, false, &st);
    assert_eq!(
        (s.nr_pref_dst_llc, s.group_type),
        (1, GroupType::LlcBalance)
    );
    let s = update_sd_lb_stats(&e, &t, &st);
    let (_, m) = find_src_group(&e, &s).expect("an LLC balance");
    assert_eq!(
        m,
        Migration {
            kind: MigrationType::LlcTask,
            imbalance: 1
        }
    );
    // The destination at 60 % and more than 20 % above the source: no.
    if let Some(cas) = e.cas.as_mut() {
        cas.llc_stats[1] = (4915, 8192);
    }
    let s = update_sg_lb_stats(&e, &t, &g, false, &st);
    assert_eq!(s.group_type, GroupType::HasSpare);
}
