//! Whether a simulated figure is within tolerance of the real runs.
//!
//! A simulated median is **within tolerance** when it lies in the real
//! runs' interquartile range widened by [`TOLERANCE`] on each side:
//! `p25 / 1.25 <= sim <= p75 * 1.25` (inclusive). A figure whose real
//! runs spread widely gets a wide band; one that repeats tightly must be
//! predicted tightly. The rule was written before the first validation
//! ran and is not tuned to its results.

/// The factor the real interquartile range is widened by, each side.
pub const TOLERANCE: f64 = 1.25;

/// Where a simulated median stands against the real runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Verdict {
    /// The band: the real p25 / TOLERANCE to the real p75 * TOLERANCE.
    pub lo: f64,
    pub hi: f64,
    pub inside: bool,
}

/// The nearest-rank quantile `p` of `v`.
pub fn quantile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[((s.len() - 1) as f64 * p).round() as usize]
}

/// The verdict rule (module doc).
pub fn verdict(real: &[f64], sim: f64) -> Verdict {
    let (lo, hi) = (
        quantile(real, 0.25) / TOLERANCE,
        quantile(real, 0.75) * TOLERANCE,
    );
    Verdict {
        lo,
        hi,
        inside: lo <= sim && sim <= hi,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_band_is_the_interquartile_range_widened_by_the_tolerance() {
        let real = [8.0, 9.0, 10.0, 11.0, 12.0];
        // p25 = 9, p75 = 11 (nearest rank): the band is 7.2 to 13.75.
        let v = verdict(&real, 10.0);
        assert!(
            (v.lo - 7.2).abs() < 1e-9 && (v.hi - 13.75).abs() < 1e-9,
            "{v:?}"
        );
        assert!(v.inside, "the median is inside");
        assert!(!verdict(&real, 7.1).inside, "below the band");
        assert!(!verdict(&real, 13.8).inside, "above the band");
        assert!(verdict(&real, 7.2).inside, "the lower edge is inside");
        assert!(verdict(&real, 13.75).inside, "the upper edge is inside");
    }
}
