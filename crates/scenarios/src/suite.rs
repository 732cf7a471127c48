//! The suite's A/B arithmetic: per row, each side's values over the seeds
//! (the seed's "boots"), their medians, head/base, and whether the row
//! resolves.
//!
//! **Resolves** means a two-sided Mann-Whitney rank test rejects "the two
//! sides read alike" at [`ALPHA`] = 0.01 (normal approximation with the tie
//! and continuity corrections). So about `ALPHA × rows` rows would resolve
//! by chance if nothing differed. Both sides run the same seeds, so a row
//! the head's change never reaches reads the same on both sides, value for
//! value, and cannot resolve: the chance count is an upper bound here.

use crate::rows::{Direction, Row};

/// The rank test's level.
pub const ALPHA: f64 = 0.01;

/// One row's A/B.
#[derive(Clone, Debug)]
pub struct RowResult {
    pub row: &'static Row,
    /// Per seed, in seed order.
    pub base: Vec<f64>,
    pub head: Vec<f64>,
    /// The seeds whose run stalled, per side (their values are what the
    /// run measured until then).
    pub stalled: [Vec<u64>; 2],
}

impl RowResult {
    pub fn base_median(&self) -> f64 {
        median(&self.base)
    }

    pub fn head_median(&self) -> f64 {
        median(&self.head)
    }

    /// head / base of the medians (1 when both are 0).
    pub fn ratio(&self) -> f64 {
        let (b, h) = (self.base_median(), self.head_median());
        if b == 0.0 {
            if h == 0.0 {
                1.0
            } else {
                f64::INFINITY
            }
        } else {
            h / b
        }
    }

    /// The rank test's two-sided p-value.
    pub fn p(&self) -> f64 {
        mann_whitney_p(&self.base, &self.head)
    }

    pub fn resolves(&self) -> bool {
        self.p() < ALPHA
    }

    /// Whether the head's median is the better one in the row's direction.
    pub fn head_better(&self) -> bool {
        match self.row.direction {
            Direction::Lower => self.head_median() < self.base_median(),
            Direction::Higher => self.head_median() > self.base_median(),
        }
    }
}

/// The rows that resolve, and how many would by chance.
pub fn summary(rows: &[RowResult]) -> (usize, f64) {
    let k = rows.iter().filter(|r| r.resolves()).count();
    (k, ALPHA * rows.len() as f64)
}

pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// The smallest and largest value.
pub fn range(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        })
}

/// Two-sided p-value of the Mann-Whitney U test of `a` against `b`, by the
/// normal approximation with the tie correction and a continuity
/// correction of 1/2. 1 when the samples cannot be told apart (every value
/// tied, or a side empty).
pub fn mann_whitney_p(a: &[f64], b: &[f64]) -> f64 {
    let (n1, n2) = (a.len() as f64, b.len() as f64);
    if a.is_empty() || b.is_empty() {
        return 1.0;
    }
    // Midranks of the pooled sample.
    let mut all: Vec<(f64, bool)> = a
        .iter()
        .map(|&x| (x, true))
        .chain(b.iter().map(|&x| (x, false)))
        .collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    let n = all.len();
    let (mut r1, mut ties) = (0.0, 0.0);
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        let rank = (i + j) as f64 / 2.0 + 1.0;
        r1 += all[i..=j].iter().filter(|x| x.1).count() as f64 * rank;
        ties += t * t * t - t;
        i = j + 1;
    }
    let u = r1 - n1 * (n1 + 1.0) / 2.0;
    let mean = n1 * n2 / 2.0;
    let nn = n1 + n2;
    let var = n1 * n2 / 12.0 * ((nn + 1.0) - ties / (nn * (nn - 1.0)));
    if var <= 0.0 {
        return 1.0;
    }
    let z = ((u - mean).abs() - 0.5).max(0.0) / var.sqrt();
    (2.0 * normal_upper_tail(z)).min(1.0)
}

/// P(Z > z) for a standard normal Z: erfc(z/√2)/2 by the Numerical Recipes
/// `erfcc` Chebyshev fit (fractional error below 1.2e-7).
fn normal_upper_tail(z: f64) -> f64 {
    let x = z / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.5 * x.abs());
    let poly = -x * x - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * poly.exp();
    let erfc = if x >= 0.0 { erfc } else { 2.0 - erfc };
    erfc / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_normal_tail_matches_its_table() {
        for (z, p) in [
            (0.0, 0.5),
            (1.0, 0.158_655),
            (1.96, 0.024_998),
            (2.5758, 0.005),
        ] {
            let got = normal_upper_tail(z);
            assert!(
                (got - p).abs() < 1e-5,
                "P(Z > {z}) should be {p}, got {got}"
            );
        }
    }

    #[test]
    fn separated_samples_resolve_and_identical_ones_do_not() {
        let a: Vec<f64> = (0..10).map(|i| 10.0 + i as f64 * 0.1).collect();
        let b: Vec<f64> = (0..10).map(|i| 20.0 + i as f64 * 0.1).collect();
        // No overlap at 10 per side: z = (50 - 0.5) / sqrt(175) = 3.74.
        let p = mann_whitney_p(&a, &b);
        assert!(p < 0.001, "fully separated samples: p = {p}");
        assert_eq!(mann_whitney_p(&a, &a), 1.0, "a sample against itself");
        let same = vec![5.0; 10];
        assert_eq!(
            mann_whitney_p(&same, &same),
            1.0,
            "every value tied: nothing to tell apart"
        );
    }

    #[test]
    fn interleaved_samples_do_not_resolve() {
        let a: Vec<f64> = (0..10).map(|i| (2 * i) as f64).collect();
        let b: Vec<f64> = (0..10).map(|i| (2 * i + 1) as f64).collect();
        let p = mann_whitney_p(&a, &b);
        assert!(p > 0.5, "interleaved samples must not resolve: p = {p}");
    }

    #[test]
    fn medians_and_ranges() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(range(&[3.0, 1.0, 2.0]), (1.0, 3.0));
    }
}
