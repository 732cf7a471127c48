//! The shadow's report: the model's default fair class, the candidate
//! that agrees most with the kernel, and every candidate.

use schedlab_sim::sched::fair::{self, FairConfig, FeatureSet, Features, Kernel, ALL_FEATURES};
use serde::Serialize;

use super::{compare, place, Ev, Row, HZ_CANDIDATES};

/// The model's default fair class, the candidate that agrees most, and
/// every candidate, side by side.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// The scheduler tick the kernel was read to run (`CONFIG_HZ`), ns:
    /// the model row's.
    pub tick_ns: u64,
    /// The model's default set for `linux`, at the kernel's tick.
    pub model: Row,
    /// The candidate with the most decisions made alike (ties to the
    /// model's default, then to the kernel's tick).
    pub fit: Row,
    pub candidates: Vec<Row>,
    /// The model's wake placement against the kernel's ([`place`]), when
    /// the machine's shape is known.
    pub placement: Option<place::Placement>,
    /// The model's balancer against the kernel's migrations outside a
    /// wake ([`super::balance`]), when the machine's shape is known.
    pub balance: Option<super::balance::Balance>,
}

impl Report {
    /// The comparisons over `evs`, with the fair band of `ncpus` CPUs and
    /// the kernel's tick `tick_ns`.
    pub fn of(evs: &[Ev], ours: &dyn Fn(i32) -> bool, ncpus: usize, tick_ns: u64) -> Report {
        let base = FairConfig::for_cpus(ncpus);
        let hz = 1_000_000_000 / tick_ns.max(1);
        let row = |set: FeatureSet, hz: u64| {
            let mut c = base.with_hz(hz as u32);
            c.features = set;
            Row {
                set: set.to_string(),
                hz,
                agreement: compare(evs, ours, c),
            }
        };
        let default = FeatureSet::LINUX;
        let model = row(default, hz);
        let mut hzs: Vec<u64> = HZ_CANDIDATES.to_vec();
        if !hzs.contains(&hz) {
            hzs.push(hz);
        }
        let mut candidates = Vec::new();
        for set in candidate_sets(default) {
            for &h in &hzs {
                candidates.push(row(set, h));
            }
        }
        // Most alike first; among equals the model's set, then its tick.
        let rank = |r: &Row| {
            (
                std::cmp::Reverse(r.agreement.alike()),
                r.set != model.set,
                r.hz != hz,
            )
        };
        let fit = candidates
            .iter()
            .min_by_key(|r| rank(r))
            .cloned()
            .unwrap_or_else(|| model.clone());
        Report {
            tick_ns,
            model,
            fit,
            candidates,
            placement: None,
            balance: None,
        }
    }
}

/// The sets a fit tries: each release's defaults, and `default` with one
/// feature of the fair class's flipped at a time (`HRTICK` excepted: its
/// effect is a timer, the same at every candidate tick here).
pub fn candidate_sets(default: FeatureSet) -> Vec<FeatureSet> {
    let mut sets: Vec<FeatureSet> = fair::features::KERNELS
        .iter()
        .filter(|&&k| k != Kernel::Base)
        .map(|&k| FeatureSet::of(k))
        .collect();
    for f in ALL_FEATURES {
        let bit = f.set();
        if bit == Features::HRTICK {
            continue;
        }
        let on = default.on.with(bit, !default.has(bit));
        sets.push(FeatureSet { on, ..default });
    }
    sets.sort();
    sets.dedup();
    sets
}
