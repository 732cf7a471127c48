//! LLC warmth, in both directions, as ratios of simulated figures on the
//! same seeds: a process's threads sharing written data run faster in one
//! LLC than spread over two; two processes whose hot data exceeds an LLC
//! run slower packed into it than spread.

use schedlab_scenarios::{catalog, Params};
use schedlab_sim::Sim;

fn figure(name: &str, params: &[&str], fig: &str, seed: u64) -> f64 {
    let p = Params::parse(&params.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    let s = catalog::build(name, None, p).unwrap();
    let o = Sim::new(&s.spec, seed).run();
    let f = &s
        .figures
        .iter()
        .find(|(n, _)| n == fig)
        .expect("the figure")
        .1;
    f.compute(&o)
}

#[test]
fn co_locating_a_process_s_workers_pays() {
    for seed in 1..=3 {
        let at = |pl: &str| {
            let p = format!("placement={pl}");
            figure(
                "shared_workers",
                &["workers=8", "shared_bytes=4194304", &p],
                "item_us",
                seed,
            )
        };
        let (packed, spread) = (at("packed"), at("spread"));
        assert!(
            spread >= 1.15 * packed,
            "seed {seed}: 8 workers sharing 4 MiB: packed {packed:.1} µs per item, spread {spread:.1}: expected spread at least 15% slower"
        );
    }
}

#[test]
fn packing_more_hot_data_than_an_llc_holds_costs() {
    for seed in 1..=3 {
        let at = |pl: &str, fig: &str| {
            let p = format!("placement={pl}");
            figure("llc_overflow", &["shared_bytes=12582912", &p], fig, seed)
        };
        let (packed, spread) = (at("packed", "round_us"), at("spread", "round_us"));
        assert!(
            packed > spread,
            "seed {seed}: two processes of 12 MiB on 16 MiB LLCs: packed {packed:.1} µs per round, spread {spread:.1}: expected packed slower"
        );
        let (rp, rs) = (
            at("packed", "llc_refill_mib"),
            at("spread", "llc_refill_mib"),
        );
        assert!(
            rp > 10.0 * rs,
            "seed {seed}: packed, they evict each other: {rp:.1} MiB read against {rs:.1} spread"
        );
    }
}
