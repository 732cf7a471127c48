//! `sched_balance_newidle()`'s walk over a CPU's domains, with Linux's
//! proportional newly idle balance (`NI_RANDOM`, Peter Zijlstra's
//! "sched/fair: Proportional newidle balance", 33cf66d88306, merged for
//! 6.19 and taken by 6.18's stable series): each domain keeps how often a
//! newly idle balance there was tried (`newidle_call`) and how often it
//! pulled (`newidle_success`, weighted), and the ratio of the two per 1024
//! calls (`newidle_ratio`, starting at one half); a balance at that domain
//! runs only when a 1024-sided die (`sched_rng() % 1024`) shows at most
//! `1 + newidle_ratio`, and a success then counts `1024 / (1 + ratio)`
//! (rounded), so a domain that rarely pulls is rarely tried and one that
//! always pulls climbs back to always.
//!
//! The die is `prandom_u32_state()` (lib/random32.c's Tausworthe
//! generator), one state per CPU as `sched_rnd_state` is; Linux seeds it
//! from the machine's entropy at boot, the model from the run's seed
//! (`Balance::seed`) and the CPU, through `prandom_seed_state()` and
//! `prandom_warmup()`.
//!
//! Simplified: `max_newidle_lb_cost` is the model's estimate (not the
//! measured cost of each balance, so the success statistics are updated at
//! every balance that ran, as Linux's `if (cost)` does for any balance that
//! took time).

/// `struct rnd_state`: lib/random32.c's four-part Tausworthe state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RndState {
    s: [u32; 4],
}

impl RndState {
    /// `prandom_seed_state()` then `prandom_warmup()` (ten draws), for
    /// the stream of `cpu` under the run's `seed`.
    pub fn seeded(seed: u64, cpu: u64) -> RndState {
        let seed = seed ^ cpu.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let i = ((seed >> 32) ^ (seed << 10) ^ seed) as u32;
        let at_least = |x: u32, m: u32| if x < m { x + m } else { x };
        let mut r = RndState {
            s: [
                at_least(i, 2),
                at_least(i, 8),
                at_least(i, 16),
                at_least(i, 128),
            ],
        };
        for _ in 0..10 {
            r.next_u32();
        }
        r
    }

    /// `prandom_u32_state()`.
    pub fn next_u32(&mut self) -> u32 {
        fn taus(s: u32, a: u32, b: u32, c: u32, d: u32) -> u32 {
            ((s & c) << d) ^ (((s << a) ^ s) >> b)
        }
        let s = &mut self.s;
        s[0] = taus(s[0], 6, 13, 4_294_967_294, 18);
        s[1] = taus(s[1], 2, 27, 4_294_967_288, 2);
        s[2] = taus(s[2], 13, 21, 4_294_967_280, 7);
        s[3] = taus(s[3], 3, 12, 4_294_967_168, 13);
        s[0] ^ s[1] ^ s[2] ^ s[3]
    }
}

/// One domain's `newidle_call`, `newidle_success` and `newidle_ratio`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewidleStats {
    pub call: u32,
    pub success: u32,
    pub ratio: u32,
}

impl Default for NewidleStats {
    /// `sd_init()`: "50% success rate".
    fn default() -> NewidleStats {
        NewidleStats {
            call: 512,
            success: 256,
            ratio: 512,
        }
    }
}

impl NewidleStats {
    /// `update_newidle_stats()`: one call, `success` (weighted) of it; at
    /// 1024 calls the ratio is the successes, and both halve.
    pub fn update(&mut self, success: u32) {
        self.call += 1;
        self.success += success;
        if self.call >= 1024 {
            self.ratio = self.success;
            self.call /= 2;
            self.success /= 2;
        }
    }
}

/// A CPU's `NI_RANDOM` state: on or off, each domain's statistics, and
/// its dice (`sched_rnd_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Newidle {
    pub ni_random: bool,
    pub stats: [NewidleStats; 4],
    pub rnd: RndState,
}

impl Newidle {
    /// For `cpu`, the dice seeded from the run's `seed`.
    pub fn new(ni_random: bool, seed: u64, cpu: u64) -> Newidle {
        Newidle {
            ni_random,
            stats: [NewidleStats::default(); 4],
            rnd: RndState::seeded(seed, cpu),
        }
    }

    /// `sched_balance_newidle()`'s walk over `n` domains of estimated
    /// costs `costs`, for a CPU of `avg_idle`: nothing when no CPU has a
    /// task waiting (`overloaded` false) or `avg_idle` is under the lowest
    /// domain's cost; else, for each domain, bottom up, while `avg_idle`
    /// covers the cost spent so far plus the domain's: with `NI_RANDOM`,
    /// the die decides whether to try it (a skipped domain counts a call
    /// without success, and the walk goes on up); a tried one is
    /// `try_level(i)`, its success counted with its weight, and the first
    /// that pulls (returns true) ends the walk. Whether one did.
    pub fn walk(
        &mut self,
        (avg_idle, costs, n): (u64, &[u64; 4], usize),
        overloaded: bool,
        mut try_level: impl FnMut(usize) -> bool,
    ) -> bool {
        if n == 0 || avg_idle < costs[0] || !overloaded {
            return false;
        }
        let mut curr_cost = 0;
        for (i, &cost) in costs.iter().enumerate().take(n) {
            if avg_idle < curr_cost + cost {
                break;
            }
            let mut weight = 1;
            if self.ni_random {
                let d1k = self.rnd.next_u32() % 1024;
                weight = 1 + self.stats[i].ratio;
                if d1k > weight {
                    self.stats[i].update(0);
                    continue;
                }
                weight = (1024 + weight / 2) / weight;
            }
            let pulled = try_level(i);
            curr_cost += cost;
            self.stats[i].update(weight * u32::from(pulled));
            if pulled {
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    /// lib/random32.c by hand: seed 1 gives i = (0 ^ 1024 ^ 1) = 1025,
    /// every part at least its minimum, so all four are 1025; the first
    /// draw (worked from the TAUSWORTHE macro) is 0x1082100e.
    #[test]
    fn prandom_matches_lib_random32_worked_by_hand() {
        let i = 1025u32;
        let mut r = RndState { s: [i; 4] };
        assert_eq!(r.next_u32(), 0x1082_100e);
        // seeded() = the same seeding and ten warm-up draws: cpu 0, seed 1.
        let mut w = RndState { s: [i; 4] };
        for _ in 0..10 {
            w.next_u32();
        }
        assert_eq!(RndState::seeded(1, 0), w);
        assert_eq!(w.clone().next_u32(), 0x3041_1120, "the eleventh draw");
        assert_ne!(RndState::seeded(1, 1), w, "each CPU its own stream");
    }

    #[test]
    fn newidle_stats_count_calls_and_weighted_successes_per_1024() {
        let mut s = NewidleStats::default();
        s.update(0);
        assert_eq!((s.call, s.success, s.ratio), (513, 256, 512));
        for _ in 0..510 {
            s.update(0);
        }
        s.update(2);
        // The 1024th call: the ratio is the successes (258), both halve.
        assert_eq!((s.call, s.success, s.ratio), (512, 129, 258));
    }

    /// amd-2x8's cpu0: SMT, LLC and machine domains of 2, 8 and 16
    /// CPUs, each costing 100 ns a CPU, and an `avg_idle` of 1 ms.
    fn walk(ni: &mut Newidle, try_level: impl FnMut(usize) -> bool) -> bool {
        ni.walk((1_000_000, &[200, 800, 1600, 0], 3), true, try_level)
    }

    /// Without NI_RANDOM every domain is tried until one pulls; with it,
    /// a domain whose ratio is 1023 (weight 1024: every die at most 1023)
    /// always is, and one whose ratio is 0 (weight 1) only on a die of 0
    /// or 1: about 2 in 1024.
    #[test]
    fn ni_random_tries_a_domain_as_often_as_it_succeeds() {
        let mut o = Newidle::new(false, 7, 0);
        let mut tried = Vec::new();
        walk(&mut o, |i| {
            tried.push(i);
            false
        });
        assert_eq!(tried, [0, 1, 2], "every domain");
        let mut o = Newidle::new(true, 7, 0);
        let mut n = 0;
        for _ in 0..1000 {
            o.stats[0].ratio = 1023;
            walk(&mut o, |i| {
                n += u32::from(i == 0);
                true
            });
        }
        assert_eq!(n, 1000, "a domain that always succeeds is always tried");
        let mut o = Newidle::new(true, 7, 0);
        let mut n = 0;
        for _ in 0..10_240 {
            o.stats[0] = NewidleStats {
                call: 0,
                success: 0,
                ratio: 0,
            };
            walk(&mut o, |i| {
                n += u32::from(i == 0);
                false
            });
        }
        assert!(
            (5..=45).contains(&n),
            "ratio 0: about 20 of 10,240 walks try the domain, got {n}"
        );
    }
}
