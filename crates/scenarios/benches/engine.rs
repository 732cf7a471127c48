//! Simulator throughput: events per wall second (divan's items/s) on
//! amd-2x8 reqrep and on epyc-2s-384 with 768 tasks (384 pairs; the anchor,
//! scx's simulator, reports 1.15-1.85 M events/s on a flat 384-CPU machine
//! with 768 tasks and about 0.9 M on two sockets of 24 LLCs:
//! docs/REFERENCES.md). Invariant checks are off, as in a release
//! `schedlab run`. `--profile dist` measures the LTO build (README).
//!
//! `cargo bench -p schedlab-scenarios --bench engine`
//!
//! On a shared machine the absolute figures move by 2x from one sitting to
//! the next: compare two builds by alternating their bench binaries in one
//! sitting (`target/release/deps/engine-* --bench --sample-count 15`), and
//! report the ratio of the medians.

use divan::counter::ItemsCount;
use divan::Bencher;
use schedlab_scenarios::{catalog, Params, Scenario};
use schedlab_sim::Sim;

fn main() {
    divan::main();
}

fn scenario(name: &str, topo: &str, params: &[&str]) -> Scenario {
    let p = Params::parse(&params.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    let mut s = catalog::build(name, Some(topo), p).unwrap();
    s.spec.check_invariants = false;
    s
}

fn bench(b: Bencher, s: &Scenario) {
    let probe = Sim::new(&s.spec, 1).run();
    eprintln!(
        "{}: {} events, {:.3} simulated ms per run",
        s.name,
        probe.events,
        probe.end_ns as f64 / 1e6
    );
    b.counter(ItemsCount::new(probe.events))
        .bench(|| Sim::new(&s.spec, 1).run().events);
}

#[divan::bench(sample_count = 10)]
fn reqrep_amd_2x8(b: Bencher) {
    bench(b, &scenario("reqrep", "amd-2x8", &["rounds=20000"]));
}

#[divan::bench(sample_count = 5)]
fn many_pairs_epyc_2s_384(b: Bencher) {
    bench(
        b,
        &scenario("many_pairs", "epyc-2s-384", &["pairs=384", "rounds=50"]),
    );
}
