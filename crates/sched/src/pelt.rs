//! Per-entity load tracking (PELT), as Linux's `kernel/sched/pelt.c` does it.
//!
//! A signal (running, runnable, weighted load) is summed over 1024 µs
//! periods with geometric decay, y^32 = 1/2: the contribution of the
//! period 32 ms ago weighs half the current one. Time is counted in 1024 ns
//! units, as Linux does (`delta >>= 10`).
//!
//! * [`decay_load`]: `val * y^n` with Linux's table of `y^n * 2^32` for
//!   n < 32 and a shift per 32 periods;
//! * `accumulate_sum` and `__accumulate_pelt_segments`: the three parts of
//!   an update crossing period boundaries (the rest of the last period, the
//!   full periods, the start of the current one);
//! * [`SchedAvg::update_sum`] (`___update_load_sum`) and
//!   [`SchedAvg::update_avg`] (`___update_load_avg`, dividing by
//!   `get_pelt_divider()` = `LOAD_AVG_MAX - 1024 + period_contrib`);
//! * [`SchedAvg::update_se`] (`__update_load_avg_se`),
//!   [`SchedAvg::update_blocked_se`] (`__update_load_avg_blocked_se`) and
//!   [`SchedAvg::update_cfs_rq`] (`__update_load_avg_cfs_rq`).
//!
//! Simplified: no frequency or CPU-capacity invariance (`clock_pelt` is the
//! task clock: every CPU runs at full capacity), no group entities, no
//! `util_est`; a CPU's sums are its own queue's signal (Linux's
//! `cfs_rq->avg`), not a sum of attached entities.

/// Periods for the signal to halve (`LOAD_AVG_PERIOD`).
pub const LOAD_AVG_PERIOD: u64 = 32;
/// The largest sum of a signal always on (`LOAD_AVG_MAX`).
pub const LOAD_AVG_MAX: u32 = 47742;
/// `PELT_MIN_DIVIDER`: `LOAD_AVG_MAX - 1024`.
pub const PELT_MIN_DIVIDER: u32 = LOAD_AVG_MAX - 1024;
/// `SCHED_CAPACITY_SHIFT`: a CPU's full capacity is 1024.
pub const SCHED_CAPACITY_SHIFT: u32 = 10;
pub const SCHED_CAPACITY_SCALE: u64 = 1 << SCHED_CAPACITY_SHIFT;

/// `runnable_avg_yN_inv[n]` = (2^32 - 1) * y^n, y = 2^(-1/32), as Linux's
/// generated `sched-pelt.h` has it (a test recomputes every entry).
const Y_INV: [u32; 32] = [
    0xffffffff, 0xfa83b2da, 0xf5257d14, 0xefe4b99a, 0xeac0c6e6, 0xe5b906e6, 0xe0ccdeeb, 0xdbfbb796,
    0xd744fcc9, 0xd2a81d91, 0xce248c14, 0xc9b9bd85, 0xc5672a10, 0xc12c4cc9, 0xbd08a39e, 0xb8fbaf46,
    0xb504f333, 0xb123f581, 0xad583ee9, 0xa9a15ab4, 0xa5fed6a9, 0xa2704302, 0x9ef5325f, 0x9b8d39b9,
    0x9837f050, 0x94f4efa8, 0x91c3d373, 0x8ea4398a, 0x8b95c1e3, 0x88980e80, 0x85aac367, 0x82cd8698,
];

/// `decay_load()`: `val * y^n`, zero past 63 half-lives.
pub fn decay_load(val: u64, n: u64) -> u64 {
    if n > LOAD_AVG_PERIOD * 63 {
        return 0;
    }
    let (mut val, mut n) = (val, n);
    if n >= LOAD_AVG_PERIOD {
        val >>= n / LOAD_AVG_PERIOD;
        n %= LOAD_AVG_PERIOD;
    }
    ((val as u128 * Y_INV[n as usize] as u128) >> 32) as u64
}

/// `__accumulate_pelt_segments()`: `d1 y^p + 1024 * sum(y^n, 1..p) + d3`.
fn accumulate_segments(periods: u64, d1: u32, d3: u32) -> u32 {
    let c1 = decay_load(d1 as u64, periods) as u32;
    let c2 = LOAD_AVG_MAX - decay_load(LOAD_AVG_MAX as u64, periods) as u32 - 1024;
    c1 + c2 + d3
}

/// `struct sched_avg`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchedAvg {
    /// ns, advanced in whole 1024 ns units.
    pub last_update_time: u64,
    pub load_sum: u64,
    pub runnable_sum: u64,
    pub util_sum: u32,
    /// The part of the current period already summed, in 1024 ns units.
    pub period_contrib: u32,
    pub load_avg: u64,
    pub runnable_avg: u64,
    pub util_avg: u64,
}

impl SchedAvg {
    /// A signal starting at `now` with nothing summed.
    pub fn starting(now: u64) -> SchedAvg {
        SchedAvg {
            last_update_time: now,
            ..SchedAvg::default()
        }
    }

    /// `get_pelt_divider()`.
    pub fn divider(&self) -> u32 {
        PELT_MIN_DIVIDER + self.period_contrib
    }

    /// `accumulate_sum()`: returns how many period boundaries were crossed.
    fn accumulate(&mut self, delta: u64, load: u64, runnable: u64, running: bool) -> u64 {
        let mut contrib = delta as u32; // p == 0 -> delta < 1024
        let delta = delta + self.period_contrib as u64;
        let periods = delta / 1024;
        let mut rest = delta;
        if periods > 0 {
            self.load_sum = decay_load(self.load_sum, periods);
            self.runnable_sum = decay_load(self.runnable_sum, periods);
            self.util_sum = decay_load(self.util_sum as u64, periods) as u32;
            rest = delta % 1024;
            if load > 0 {
                contrib = accumulate_segments(periods, 1024 - self.period_contrib, rest as u32);
            }
        }
        self.period_contrib = rest as u32;
        if load > 0 {
            self.load_sum += load * contrib as u64;
        }
        if runnable > 0 {
            self.runnable_sum += (runnable * contrib as u64) << SCHED_CAPACITY_SHIFT;
        }
        if running {
            self.util_sum += contrib << SCHED_CAPACITY_SHIFT;
        }
        periods
    }

    /// `___update_load_sum()`: `true` when a period boundary was crossed
    /// (the averages are then due).
    pub fn update_sum(&mut self, now: u64, load: u64, runnable: u64, running: bool) -> bool {
        let Some(delta) = now.checked_sub(self.last_update_time) else {
            self.last_update_time = now;
            return false;
        };
        let delta = delta >> 10;
        if delta == 0 {
            return false;
        }
        self.last_update_time += delta << 10;
        // Running is a subset of runnable, which is a subset of loaded.
        let (runnable, running) = if load == 0 {
            (0, false)
        } else {
            (runnable, running)
        };
        self.accumulate(delta, load, runnable, running) > 0
    }

    /// `___update_load_avg()`.
    pub fn update_avg(&mut self, load: u64) {
        let divider = self.divider() as u64;
        self.load_avg = load * self.load_sum / divider;
        self.runnable_avg = self.runnable_sum / divider;
        self.util_avg = self.util_sum as u64 / divider;
    }

    /// `__update_load_avg_se()`: a task's entity of `weight`, queued
    /// (`on_rq`) and perhaps running.
    pub fn update_se(&mut self, now: u64, weight: u64, on_rq: bool, running: bool) -> bool {
        let on = on_rq as u64;
        if self.update_sum(now, on, on, running) {
            self.update_avg(weight);
            return true;
        }
        false
    }

    /// A delayed entity (`DELAY_DEQUEUE`): still on the queue for its load,
    /// neither runnable nor running (`se_runnable()` is false for it).
    pub fn update_delayed_se(&mut self, now: u64, weight: u64) -> bool {
        if self.update_sum(now, 1, 0, false) {
            self.update_avg(weight);
            return true;
        }
        false
    }

    /// `__update_load_avg_blocked_se()`: a parked task's entity decays.
    pub fn update_blocked_se(&mut self, now: u64, weight: u64) -> bool {
        if self.update_sum(now, 0, 0, false) {
            self.update_avg(weight);
            return true;
        }
        false
    }

    /// `__update_load_avg_cfs_rq()`: a CPU's queue of total `weight`,
    /// `nr_runnable` tasks, one of them running or not.
    pub fn update_cfs_rq(
        &mut self,
        now: u64,
        weight: u64,
        nr_runnable: u64,
        running: bool,
    ) -> bool {
        if self.update_sum(now, weight, nr_runnable, running) {
            self.update_avg(1);
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn the_decay_table_is_y_to_the_n_times_2_to_the_32() {
        for (n, &v) in Y_INV.iter().enumerate() {
            let want = (u32::MAX as f64) * 0.5f64.powf(n as f64 / 32.0);
            assert!(
                (v as f64 - want).abs() <= 1.0,
                "runnable_avg_yN_inv[{n}] = {v:#x}, y^n*(2^32-1) = {want}"
            );
        }
    }

    /// Worked by hand from `decay_load()`: 1024 over 32 periods is one
    /// shift (512), then y^0 = 0xffffffff/2^32 rounds down to 511; over one
    /// period, 1024 * 0xfa83b2da >> 32 = 1001.
    #[test]
    fn decay_load_matches_linuxs_rounding() {
        assert_eq!(decay_load(1024, 32), 511);
        assert_eq!(decay_load(1024, 1), 1002);
        assert_eq!(decay_load(1024, 0), 1023);
        assert_eq!(
            decay_load(u32::MAX as u64, 32 * 64),
            0,
            "gone past 63 half-lives"
        );
    }

    /// `__accumulate_pelt_segments(1, 1024, 0)`: c1 = 1002, c2 = 47742 -
    /// decay_load(47742, 1) - 1024 = 47742 - 46718 - 1024 = 0, c3 = 0.
    #[test]
    fn one_whole_period_accumulates_its_decayed_self() {
        assert_eq!(decay_load(LOAD_AVG_MAX as u64, 1), 46718);
        assert_eq!(accumulate_segments(1, 1024, 0), 1002);
    }

    fn run_pattern(busy_us: u64, period_us: u64, total_ms: u64) -> SchedAvg {
        let mut sa = SchedAvg::starting(0);
        let mut t = 0;
        while t < total_ms * MS {
            sa.update_se(t, 1024, true, false);
            t += busy_us * 1000;
            sa.update_se(t, 1024, true, true);
            t += (period_us - busy_us) * 1000;
            sa.update_se(t, 1024, false, false);
        }
        sa
    }

    #[test]
    fn a_task_running_all_the_time_converges_to_full_capacity() {
        let mut sa = SchedAvg::starting(0);
        for ms in 1..=1000 {
            sa.update_se(ms * MS, 1024, true, true);
        }
        assert!(
            (1000..=1024).contains(&sa.util_avg),
            "util_avg after 1 s always running: expected about 1024, got {}",
            sa.util_avg
        );
        assert!(
            (1000..=1024).contains(&sa.load_avg),
            "load_avg of a nice-0 task always runnable: got {}",
            sa.load_avg
        );
    }

    #[test]
    fn a_task_running_a_quarter_of_each_period_converges_to_a_quarter() {
        // 256 µs of each 1024 µs period; sampled at the end of a period.
        let sa = run_pattern(256, 1024, 1000);
        assert!(
            (230..=282).contains(&sa.util_avg),
            "util_avg running 25% of every period: expected about 256, got {}",
            sa.util_avg
        );
    }

    #[test]
    fn a_blocked_entity_halves_every_32_ms() {
        let mut sa = SchedAvg::starting(0);
        for ms in 1..=1000 {
            sa.update_se(ms * MS, 1024, true, true);
        }
        let full = sa.util_avg;
        let start = sa.last_update_time;
        // 32 periods of 1024 µs.
        sa.update_blocked_se(start + 32 * 1024 * 1024, 1024);
        let half = sa.util_avg;
        sa.update_blocked_se(start + 64 * 1024 * 1024, 1024);
        let quarter = sa.util_avg;
        assert!(
            half.abs_diff(full / 2) <= 8,
            "after 32 periods blocked: expected about {}, got {half}",
            full / 2
        );
        assert!(
            quarter.abs_diff(full / 4) <= 8,
            "after 64 periods blocked: expected about {}, got {quarter}",
            full / 4
        );
    }

    #[test]
    fn a_signal_off_stays_zero_and_time_going_backwards_resets() {
        let mut sa = SchedAvg::starting(10 * MS);
        assert!(!sa.update_se(5 * MS, 1024, true, true), "time going back");
        assert_eq!(sa.last_update_time, 5 * MS);
        sa.update_se(50 * MS, 1024, false, true);
        assert_eq!(
            sa.util_avg, 0,
            "running is ignored when the entity is not loaded"
        );
    }
}
