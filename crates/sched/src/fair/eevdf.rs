//! The formulas of the module doc: weights, the entity, `V`, the pick and
//! the placement.

use super::features::{FeatureSet, Features};

/// Weight of nice 0.
pub const NICE_0_WEIGHT: u32 = 1024;

/// Linux's `sched_prio_to_weight[]` (kernel/sched/core.c), nice -20..=19:
/// each step is about 1.25x, so one nice level is about 10% of CPU.
pub const NICE_TO_WEIGHT: [u32; 40] = [
    88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916, 9548, 7620, 6100, 4904,
    3906, 3121, 2501, 1991, 1586, 1277, 1024, 820, 655, 526, 423, 335, 272, 215, 172, 137, 110, 87,
    70, 56, 45, 36, 29, 23, 18, 15,
];

const _: () = assert!(NICE_TO_WEIGHT[20] == NICE_0_WEIGHT);

/// The weight of `nice` (clamped to -20..=19).
pub fn weight_of(nice: i8) -> u32 {
    NICE_TO_WEIGHT[(nice.clamp(-20, 19) + 20) as usize]
}

/// `calc_delta_fair()`: wall ns to virtual ns at `weight`.
pub fn calc_delta_fair(delta: u64, weight: u32) -> i64 {
    // Linux skips the scaling at nice 0 (`if (unlikely(se->load.weight !=
    // NICE_0_LOAD))`); here the same numbers, without a 128-bit division.
    if weight == NICE_0_WEIGHT {
        return delta as i64;
    }
    match delta.checked_mul(NICE_0_WEIGHT as u64) {
        Some(p) => (p / weight as u64) as i64,
        None => ((delta as u128 * NICE_0_WEIGHT as u128) / weight as u128) as i64,
    }
}

/// The fair band's switches and lengths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FairConfig {
    /// `sysctl_sched_base_slice`: the slice a task gets unless it asks.
    pub base_slice_ns: u64,
    /// The scheduler tick (`TICK_NSEC` = 1 s / `CONFIG_HZ`): the lag clamp,
    /// and, without `HRTICK`, when a used-up slice is seen.
    pub tick_ns: u64,
    /// Renew protection when the running entity is picked again.
    pub protect_on_repick: bool,
    /// The release's code and its `sched_features` ([`features`]).
    pub features: FeatureSet,
    /// `sysctl_sched_migration_cost` (500 µs): how long a waker must have
    /// run before a sync wake preempts it (`preempt_sync()`).
    pub migration_cost_ns: u64,
}

impl FairConfig {
    /// Linux's defaults for `ncpus` CPUs: base slice 0.7 ms scaled by
    /// `1 + ilog2(min(ncpus, 8))` (SCHED_TUNABLESCALING_LOG, as the design
    /// asks), a 1 ms tick (CONFIG_HZ=1000; a machine's own `hz` replaces
    /// it, [`FairConfig::with_hz`]), the model's base feature set, and the
    /// seed-004 fix on.
    pub fn for_cpus(ncpus: usize) -> FairConfig {
        let factor = 1 + (ncpus.clamp(1, 8) as u64).ilog2() as u64;
        FairConfig {
            base_slice_ns: 700_000 * factor,
            tick_ns: 1_000_000,
            protect_on_repick: true,
            features: FeatureSet::default(),
            migration_cost_ns: 500_000,
        }
    }

    /// The same with the tick of a kernel built with `CONFIG_HZ = hz`.
    pub fn with_hz(mut self, hz: u32) -> FairConfig {
        self.tick_ns = 1_000_000_000 / u64::from(hz.max(1));
        self
    }

    /// Whether feature `f` is on.
    #[inline]
    pub fn has(&self, f: Features) -> bool {
        self.features.on.contains(f)
    }

    /// `CONFIG_HZ` of the tick.
    pub fn hz(&self) -> u64 {
        1_000_000_000 / self.tick_ns.max(1)
    }
}

/// One task's fair-band numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entity {
    pub weight: u32,
    pub slice: u64,
    pub vruntime: i64,
    pub deadline: i64,
    pub vlag: i64,
    pub vprot: i64,
    /// When it last started running (wall ns), for `update_curr`.
    pub exec_start: u64,
    /// Wall ns run in all.
    pub sum_exec: u64,
    /// `sum_exec` when it was last picked (`prev_sum_exec_runtime`).
    pub prev_sum_exec: u64,
    /// `deadline` holds the deadline relative to `vruntime`: it left its
    /// queue while runnable (`PLACE_REL_DEADLINE`, `se->rel_deadline`).
    pub rel_deadline: bool,
}

impl Entity {
    pub fn new(nice: i8, slice: u64) -> Entity {
        Entity {
            weight: weight_of(nice),
            slice,
            vruntime: 0,
            deadline: 0,
            vlag: 0,
            vprot: 0,
            exec_start: 0,
            sum_exec: 0,
            prev_sum_exec: 0,
            rel_deadline: false,
        }
    }

    pub fn vslice(&self) -> i64 {
        calc_delta_fair(self.slice, self.weight)
    }

    /// `protect_slice()`.
    pub fn protected(&self) -> bool {
        self.vprot > self.vruntime
    }

    /// `update_curr()`: charges the time since `exec_start` and renews a
    /// reached deadline (`update_deadline()`), as Linux does on every path
    /// that calls it (tick, pick, enqueue, dequeue). `None` when no time
    /// passed (Linux returns early then); else whether the deadline was
    /// renewed.
    pub fn update_curr(&mut self, now: u64) -> Option<bool> {
        let delta = now.saturating_sub(self.exec_start);
        self.exec_start = now;
        if delta == 0 {
            return None;
        }
        self.sum_exec += delta;
        self.vruntime += calc_delta_fair(delta, self.weight);
        Some(self.update_deadline())
    }

    /// [`Entity::update_curr`] and the reschedule it asks for: time passed,
    /// another fair entity waits (`nr_queued > 1`), and the deadline was
    /// renewed or the protection has ended (commit 0b9ca2dcabc3,
    /// "sched/fair: Always trigger resched at the end of a protected
    /// period").
    pub fn update_curr_asks(&mut self, now: u64, others_wait: bool) -> bool {
        self.update_curr(now)
            .is_some_and(|renewed| others_wait && (renewed || !self.protected()))
    }

    /// `update_deadline()`: renews the deadline once reached; `true` asks for
    /// a reschedule.
    pub fn update_deadline(&mut self) -> bool {
        if self.vruntime < self.deadline {
            return false;
        }
        self.deadline = self.vruntime + self.vslice();
        true
    }

    /// `set_protect_slice()` with the queue's smallest slice `min_slice`.
    pub fn set_protect(&mut self, min_slice: u64) {
        let s = min_slice.min(self.slice);
        self.vprot = if s == self.slice {
            self.deadline
        } else {
            self.deadline
                .min(self.vruntime + calc_delta_fair(s, self.weight))
        };
    }

    /// `__entity_slice_used()`: run since its pick, times `tasks`, beyond
    /// its slice.
    pub fn slice_used(&self, tasks: u64) -> bool {
        (self.sum_exec - self.prev_sum_exec) * tasks > self.slice
    }

    /// `update_entity_lag()` against the average `v_avg`.
    pub fn update_lag(&mut self, v_avg: i64, tick_ns: u64) {
        let limit = calc_delta_fair((2 * self.slice).max(tick_ns), self.weight);
        self.vlag = (v_avg - self.vruntime).clamp(-limit, limit);
    }
}

/// Weighted sums of a set of entities, relative to `base`.
#[derive(Clone, Copy, Debug)]
pub struct Avg {
    pub base: i64,
    pub sum: i128,
    pub weight: u128,
}

impl Avg {
    /// The sums over `entities` (the queue and, if it is fair and runnable,
    /// the running one).
    pub fn of<'a>(entities: impl Iterator<Item = &'a Entity> + Clone, fallback: i64) -> Avg {
        let mut a = Avg::at(entities.clone().next().map_or(fallback, |e| e.vruntime));
        for e in entities {
            a.add(e);
        }
        a
    }

    /// Empty sums relative to `base`.
    #[inline]
    pub fn at(base: i64) -> Avg {
        Avg {
            base,
            sum: 0,
            weight: 0,
        }
    }

    /// `e` counted in the sums.
    #[inline]
    pub fn add(&mut self, e: &Entity) {
        self.sum += (e.vruntime - self.base) as i128 * e.weight as i128;
        self.weight += e.weight as u128;
    }

    /// `avg_vruntime()`: `V`, rounded toward minus infinity as Linux does.
    pub fn v(&self) -> i64 {
        if self.weight == 0 {
            return self.base;
        }
        // The same floor in 64 bits when the sums fit (a 128-bit division
        // is a library call).
        let q = match (i64::try_from(self.sum), i64::try_from(self.weight)) {
            (Ok(sum), Ok(w)) => sum.div_euclid(w) as i128,
            _ => {
                let w = self.weight as i128;
                if self.sum < 0 {
                    (self.sum - (w - 1)) / w
                } else {
                    self.sum / w
                }
            }
        };
        self.base + q as i64
    }

    /// `vruntime_eligible()`: `v <= V`, without dividing.
    pub fn eligible(&self, v: i64) -> bool {
        if self.weight == 0 {
            return true;
        }
        (v - self.base) as i128 * self.weight as i128 <= self.sum
    }
}

/// Which entity `pick_eevdf` chose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pick {
    /// The running entity, again.
    Current,
    /// The queued entity at this index.
    Queued(usize),
    Nothing,
}

/// `pick_eevdf()` over `queue` and the running entity `curr` (if it is fair
/// and still runnable); `protect`: a protected `curr` is picked again
/// (`RUN_TO_PARITY`, unless a shorter slice woke: `PREEMPT_SHORT`).
pub fn pick_eevdf<'a>(
    queue: impl Iterator<Item = &'a Entity> + Clone,
    curr: Option<&'a Entity>,
    protect: bool,
    zero_v: i64,
) -> Pick {
    // Alone, an entity is its own mean, so eligible: the running one alone
    // is picked again, a queued one alone is picked (the general path
    // below gives the same; `one_entity_alone_is_picked_as_the_mean_would`
    // holds it). Most picks of a lightly loaded CPU are these.
    let mut q = queue.clone();
    match (q.next().is_some(), q.next().is_some(), curr) {
        (false, _, Some(_)) => return Pick::Current,
        (false, _, None) => return Pick::Nothing,
        (true, false, None) => return Pick::Queued(0),
        _ => {}
    }
    pick_eevdf_full(queue, curr, protect, zero_v)
}

/// [`pick_eevdf`] over the weighted mean, whatever the queue.
fn pick_eevdf_full<'a>(
    queue: impl Iterator<Item = &'a Entity> + Clone,
    curr: Option<&'a Entity>,
    protect: bool,
    zero_v: i64,
) -> Pick {
    let avg = Avg::of(queue.clone().chain(curr), zero_v);
    let curr = curr.filter(|c| avg.eligible(c.vruntime));
    if let Some(c) = curr {
        if protect && c.protected() {
            return Pick::Current;
        }
    }
    let mut best: Option<(usize, i64)> = None;
    for (i, e) in queue.clone().enumerate() {
        if avg.eligible(e.vruntime) && best.is_none_or(|(_, d)| e.deadline < d) {
            best = Some((i, e.deadline));
        }
    }
    match (best, curr) {
        (Some((_, d)), Some(c)) if c.deadline <= d => Pick::Current,
        (Some((i, _)), _) => Pick::Queued(i),
        (None, Some(_)) => Pick::Current,
        (None, None) => {
            // Every entity ineligible cannot happen for a weighted mean; take
            // the earliest deadline so rounding can never idle a CPU.
            match queue.enumerate().min_by_key(|(_, e)| e.deadline) {
                Some((i, _)) => Pick::Queued(i),
                None => Pick::Nothing,
            }
        }
    }
}

/// `place_entity()`: where a joining entity starts, given `avg`, the sums
/// of the entities already there ([`Avg::of`]). With `PLACE_LAG` its lag is
/// kept, scaled by the queue's weight (none on an empty queue:
/// `cfs_rq->nr_queued` is 0); a deadline kept relative
/// (`PLACE_REL_DEADLINE`) is made absolute again, else the deadline is a
/// slice on, half of one for a new task (`PLACE_DEADLINE_INITIAL`).
pub fn place_entity(se: &mut Entity, avg: Avg, initial: bool, features: Features) {
    let mut lag = 0i128;
    if features.contains(Features::PLACE_LAG) && avg.weight > 0 {
        lag = se.vlag as i128;
        let (w, wj) = (avg.weight, avg.weight + se.weight as u128);
        lag = match (i64::try_from(lag), i64::try_from(wj), i64::try_from(w)) {
            (Ok(l), Ok(wj), Ok(w)) if l.checked_mul(wj).is_some() => (l * wj / w) as i128,
            _ => lag * wj as i128 / w as i128,
        };
    }
    se.vruntime = avg.v() - lag as i64;
    if se.rel_deadline {
        se.deadline += se.vruntime;
        se.rel_deadline = false;
        return;
    }
    let mut vslice = se.vslice();
    if initial && features.contains(Features::PLACE_DEADLINE_INITIAL) {
        vslice /= 2;
    }
    se.deadline = se.vruntime + vslice;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fair::features::Kernel;
    use proptest::prelude::*;

    fn arb_entity() -> impl Strategy<Value = Entity> {
        (
            -20i8..=19,
            -1_000_000i64..1_000_000,
            0i64..5_000_000,
            -3_000_000i64..3_000_000,
        )
            .prop_map(|(nice, v, d, p)| {
                let mut e = Entity::new(nice, 2_800_000);
                e.vruntime = v;
                e.deadline = v + d;
                e.vprot = v + p;
                e
            })
    }

    proptest! {
        /// The shortcuts of `pick_eevdf` (one entity alone, or none) pick
        /// what the weighted mean picks, for any entities, protection and
        /// `RUN_TO_PARITY`.
        #[test]
        fn one_entity_alone_is_picked_as_the_mean_would(
            queue in proptest::collection::vec(arb_entity(), 0..4),
            curr in proptest::option::of(arb_entity()),
            parity in any::<bool>(),
            zero_v in -1_000_000i64..1_000_000,
        ) {
            let fast = pick_eevdf(queue.iter(), curr.as_ref(), parity, zero_v);
            let full = pick_eevdf_full(queue.iter(), curr.as_ref(), parity, zero_v);
            prop_assert_eq!(fast, full, "queue {:?}, curr {:?}", queue, curr);
        }
    }

    fn ent(v: i64, w_nice: i8) -> Entity {
        let mut e = Entity::new(w_nice, 2_800_000);
        e.vruntime = v;
        e.deadline = v + e.vslice();
        e
    }

    #[test]
    fn eligibility_is_against_the_weighted_average() {
        // Weights 1024 and 3121 (nice -5): V = (0*1024 + 1000*3121)/4145.
        let a = ent(0, 0);
        let b = ent(1000, -5);
        let avg = Avg::of([&a, &b].into_iter(), 0);
        assert_eq!(avg.v(), 1000 * 3121 / 4145);
        assert!(avg.eligible(a.vruntime), "below V is eligible");
        assert!(!avg.eligible(b.vruntime), "above V is not");
        assert!(avg.eligible(avg.v()), "V itself is eligible");
    }

    #[test]
    fn pick_takes_the_earliest_eligible_deadline() {
        let mut a = ent(0, 0);
        let mut b = ent(10, 0);
        let c = ent(5000, 0);
        a.deadline = 900;
        b.deadline = 100; // earliest, and eligible (10 <= V)
        assert_eq!(
            pick_eevdf([&a, &b, &c].into_iter(), None, true, 0),
            Pick::Queued(1)
        );
        // c has the earliest deadline but is not eligible.
        let mut c2 = c;
        c2.deadline = 1;
        assert_eq!(
            pick_eevdf([&a, &b, &c2].into_iter(), None, true, 0),
            Pick::Queued(1)
        );
    }

    #[test]
    fn a_protected_current_is_picked_again() {
        let mut cur = ent(0, 0);
        cur.set_protect(cur.slice);
        let mut q = ent(0, 0);
        q.deadline = 1; // earlier deadline, eligible
        assert_eq!(
            pick_eevdf([&q].into_iter(), Some(&cur), true, 0),
            Pick::Current
        );
        cur.vruntime = cur.vprot; // protection over
        cur.deadline = cur.vprot + cur.vslice();
        assert_eq!(
            pick_eevdf([&q].into_iter(), Some(&cur), true, 0),
            Pick::Queued(0)
        );
    }

    #[test]
    fn place_scales_the_lag_by_the_queue_weight() {
        // A queue of one nice-0 entity at v = 10_000; a joiner with lag 600
        // (it was owed service) and the same weight: lag' = 600 * 2048/1024.
        let other = ent(10_000, 0);
        let mut se = Entity::new(0, 2_800_000);
        se.vlag = 600;
        let all = Kernel::L6_19.defaults();
        place_entity(&mut se, Avg::of([&other].into_iter(), 0), false, all);
        assert_eq!(se.vruntime, 10_000 - 1200);
        assert_eq!(se.deadline, se.vruntime + se.vslice());
        // Without PLACE_LAG it starts at V.
        let mut se = Entity::new(0, 2_800_000);
        se.vlag = 600;
        place_entity(
            &mut se,
            Avg::of([&other].into_iter(), 0),
            false,
            all.with(Features::PLACE_LAG, false),
        );
        assert_eq!(se.vruntime, 10_000, "NO_PLACE_LAG: placed at V");
        // On an empty queue the lag is dropped (`cfs_rq->nr_queued` is 0),
        // and a new task's first deadline is half a slice away.
        let mut se = Entity::new(0, 2_800_000);
        se.vlag = -300;
        place_entity(&mut se, Avg::of(core::iter::empty(), 7_000), true, all);
        assert_eq!(se.vruntime, 7_000);
        assert_eq!(se.deadline, 7_000 + se.vslice() / 2);
        let mut se = Entity::new(0, 2_800_000);
        let no_initial = all.with(Features::PLACE_DEADLINE_INITIAL, false);
        place_entity(
            &mut se,
            Avg::of(core::iter::empty(), 7_000),
            true,
            no_initial,
        );
        assert_eq!(
            se.deadline,
            7_000 + se.vslice(),
            "NO_PLACE_DEADLINE_INITIAL"
        );
        // A deadline kept relative is made absolute again, whatever it
        // would have been.
        let mut se = Entity::new(0, 2_800_000);
        (se.deadline, se.rel_deadline) = (1_234, true);
        place_entity(&mut se, Avg::of([&other].into_iter(), 0), false, all);
        assert_eq!((se.deadline, se.rel_deadline), (10_000 + 1_234, false));
    }

    #[test]
    fn lag_is_clamped() {
        let mut e = ent(0, 0);
        e.update_lag(1 << 40, 1_000_000);
        assert_eq!(e.vlag, calc_delta_fair(2 * e.slice, e.weight));
        e.update_lag(-(1 << 40), 1_000_000);
        assert_eq!(e.vlag, -calc_delta_fair(2 * e.slice, e.weight));
    }

    #[test]
    fn slice_scales_with_log_cpus() {
        assert_eq!(FairConfig::for_cpus(1).base_slice_ns, 700_000);
        assert_eq!(FairConfig::for_cpus(4).base_slice_ns, 2_100_000);
        assert_eq!(FairConfig::for_cpus(16).base_slice_ns, 2_800_000);
    }

    proptest::proptest! {
        /// The 64-bit fast paths give the 128-bit formulas' numbers,
        /// including past 64 bits and below zero.
        #[test]
        fn the_fast_paths_agree_with_128_bit_arithmetic(
            delta in proptest::prop_oneof![0u64..1 << 40, proptest::num::u64::ANY],
            nice in -20i8..20,
            sum in proptest::prop_oneof![-(1i128 << 70)..(1i128 << 70), -1000i128..1000],
            weight in proptest::prop_oneof![1u128..1 << 20, 1u128..1 << 70],
        ) {
            let w = weight_of(nice);
            let wide = ((delta as u128 * NICE_0_WEIGHT as u128) / w as u128) as i64;
            proptest::prop_assert_eq!(calc_delta_fair(delta, w), wide);
            let a = Avg { base: 7, sum, weight };
            let q = if sum < 0 {
                (sum - (weight as i128 - 1)) / weight as i128
            } else {
                sum / weight as i128
            };
            proptest::prop_assert_eq!(a.v(), 7 + q as i64);
        }
    }
}
