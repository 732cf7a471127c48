//! `detach_tasks()`'s side of a balance: which waiting task may move
//! (`can_migrate_task()`), how much of the imbalance it covers, the order
//! cache-aware scheduling tries them in, and whether to push the running
//! task instead (`need_active_balance()`).

use super::env::{Attempt, Migration, MigrationType};

/// A waiting task as `can_migrate_task()` sees it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct TaskView {
    pub allowed_on_dst: bool,
    /// `delta = now - exec_start` < `sysctl_sched_migration_cost`.
    pub hot: bool,
    pub load: u64,
    pub util: u64,
    /// Cache-aware: `migrate_degrades_llc()` says moving it breaks its
    /// process's LLC preference.
    pub degrades_llc: bool,
    /// Cache-aware: it prefers the destination's LLC.
    pub prefers_dst_llc: bool,
}

/// Why `can_migrate_task()` refused, or that it agreed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum CanMigrate {
    Yes,
    /// Its mask does not name the destination (`LBF_SOME_PINNED`).
    Pinned,
    /// Cache-aware: it would leave its preferred LLC (`LBF_LLC_PINNED`
    /// unless the migration is an LLC one).
    LlcPinned,
    /// Cache-hot and balancing has not failed often enough.
    Hot,
}

/// `task_hot()`'s test of time: the task last ran (`exec_start`, ns) less
/// than the migration cost before `now` (a cost of 0: never hot).
pub fn task_hot(now: u64, exec_start: u64, migration_cost: u64) -> bool {
    now.saturating_sub(exec_start) < migration_cost
}

/// `can_migrate_task()` for a waiting (not running) task.
pub fn can_migrate_task(env: &Attempt, kind: MigrationType, t: &TaskView) -> CanMigrate {
    if !t.allowed_on_dst {
        return CanMigrate::Pinned;
    }
    if env.cas && env.nr_balance_failed < env.params.cache_nice_tries + 1 {
        let wrong = kind == MigrationType::LlcTask && !t.prefers_dst_llc;
        if wrong || t.degrades_llc {
            return CanMigrate::LlcPinned;
        }
    }
    // `task_hot()`: SMT siblings share the cache; otherwise the migration
    // cost decides.
    let hot = !env.params.share_cpucapacity && t.hot;
    if !hot || env.nr_balance_failed > env.params.cache_nice_tries {
        CanMigrate::Yes
    } else {
        CanMigrate::Hot
    }
}

/// `detach_tasks()`'s accounting of one candidate that may move: `Some`
/// with what is left of the imbalance, or `None` to skip it.
pub fn detach_amount(env: &Attempt, mig: Migration, t: &TaskView) -> Option<i64> {
    let shr = |v: u64| v >> env.nr_balance_failed.min(63);
    match mig.kind {
        MigrationType::Load => {
            let load = t.load.max(1);
            (shr(load) as i64 <= mig.imbalance).then(|| mig.imbalance - load as i64)
        }
        MigrationType::Util => {
            (shr(t.util) as i64 <= mig.imbalance).then(|| mig.imbalance - t.util as i64)
        }
        MigrationType::Task | MigrationType::LlcTask => Some(mig.imbalance - 1),
    }
}

/// `order_tasks_by_llc()`'s rank of a task (cache-aware, source and
/// destination in different LLCs): 0 prefers the destination's LLC, 1 has
/// no preference, 2 prefers a third LLC, 3 prefers the source's.
pub fn llc_order(pref: Option<u16>, src_llc: u16, dst_llc: u16) -> u8 {
    match pref {
        Some(p) if p == dst_llc => 0,
        None => 1,
        Some(p) if p == src_llc => 3,
        Some(_) => 2,
    }
}

/// `need_active_balance()` once `detach_tasks()` moved nothing, with the
/// failure already counted: a task-count imbalance that failed past
/// `cache_nice_tries + 2`, or an LLC migration; unless `alb_break_llc()`
/// (`llc_stays`) says the running task should stay in its LLC.
pub fn need_active_balance(env: &Attempt, kind: MigrationType, llc_stays: bool) -> bool {
    if llc_stays {
        return false;
    }
    (kind == MigrationType::Task && env.nr_balance_failed > env.params.cache_nice_tries + 2)
        || kind == MigrationType::LlcTask
}
