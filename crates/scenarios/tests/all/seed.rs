//! The seed's simulator experiments (the seed kernel, docs/REFERENCES.md), the cost model's
//! calibration, and determinism. Every assertion names the seed that
//! reproduces it (`schedlab run SCENARIO --seed N`).

use std::collections::BTreeMap;
use std::path::Path;

use schedlab_scenarios::{catalog, file, Params, Scenario};
use schedlab_sim::{first_divergence, Outcome, Sim};

fn scenario(name: &str, params: &[&str]) -> Scenario {
    let p = Params::parse(&params.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    catalog::build(name, None, p).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn figures(s: &Scenario, o: &Outcome) -> BTreeMap<String, f64> {
    s.figures
        .iter()
        .map(|(n, f)| (n.clone(), f.compute(o)))
        .collect()
}

fn run(s: &Scenario, seed: u64) -> BTreeMap<String, f64> {
    figures(s, &Sim::new(&s.spec, seed).run())
}

#[test]
fn a_split_pair_moves_once_into_one_llc() {
    let s = scenario("split_pair", &[]);
    for seed in 1..=40 {
        let f = run(&s, seed);
        assert_eq!(
            f["pair_moves"], 1.0,
            "seed {seed}: the split pair must move exactly once, moved {}",
            f["pair_moves"]
        );
        assert_eq!(
            f["final_same_llc"], 1.0,
            "seed {seed}: the pair must end in one LLC"
        );
        assert_eq!(
            f["final_same_core"], 0.0,
            "seed {seed}: on two different cores of it"
        );
    }
}

#[test]
fn a_server_with_a_client_in_each_llc_seldom_follows_them() {
    let moves = |k: u8, rounds: u64| -> Vec<f64> {
        let s = scenario(
            "server_two_llcs",
            &[&format!("waker_run={k}"), &format!("rounds={rounds}")],
        );
        (1..=40).map(|seed| run(&s, seed)["server_moves"]).collect()
    };
    let at8 = moves(8, 240);
    for (i, m) in at8.iter().enumerate() {
        assert!(
            *m <= 1.0,
            "seed {}: at 240 rounds with WAKER_RUN = 8 no run may move the server twice, moved {m}",
            i + 1
        );
    }
    let at1 = moves(1, 240);
    let most = at1.iter().cloned().fold(0.0, f64::max);
    assert!(most >= 20.0, "with waker_run = 1 the server should bounce (the seed saw 100 in one run), most was {most}");
    let totals: Vec<f64> = [1u8, 2, 4, 8]
        .iter()
        .map(|&k| moves(k, 24).iter().sum())
        .collect();
    for w in totals.windows(2) {
        assert!(
            w[1] <= w[0],
            "moves must not rise as k rises over 1, 2, 4, 8: totals {totals:?}"
        );
    }
}

/// Under independent, even parked wakes from two LLCs a run of k moves the
/// task on 1 in 2^(k+1) - 2 of them. The moves are a count, so the
/// tolerance is 4 standard deviations of a Poisson count (plus 2%).
#[test]
fn indep_wakes_move_at_the_formulas_rate() {
    for k in [2u32, 4, 6] {
        let s = scenario("indep_wakes", &[&format!("waker_run={k}"), "wakes=12000"]);
        let (mut moves, mut counted) = (0.0, 0.0);
        for seed in 1..=2 {
            let f = run(&s, seed);
            moves += f["moves"];
            counted += f["counted_wakes"];
        }
        let expect = counted / (2f64.powi(k as i32 + 1) - 2.0);
        let tol = 4.0 * expect.sqrt() + 0.02 * expect;
        assert!(
            (moves - expect).abs() <= tol,
            "k={k}: {moves} moves in {counted} counted wakes, expected {expect:.1} ± {tol:.1} (1 in {})",
            2u32.pow(k + 1) - 2
        );
    }
}

/// The cost model's calibration (docs/REFERENCES.md): on amd-2x8, reqrep.8 split across the
/// LLCs reads 1.15-1.35x the pair on two cores of one LLC, and the pair on
/// one core's siblings 1.05-1.25x two cores. Ratios of simulated time.
#[test]
fn the_cost_model_holds_the_seeds_placement_ratios() {
    let rtt = |placement: &str| {
        run(
            &scenario(
                "reqrep",
                &[&format!("placement={placement}"), "rounds=2000"],
            ),
            1,
        )["rtt_us"]
    };
    let (llc, split, core) = (rtt("same_llc"), rtt("split"), rtt("same_core"));
    let (r_split, r_core) = (split / llc, core / llc);
    assert!(
        (1.15..=1.35).contains(&r_split),
        "split/same_llc = {r_split:.3} ({split:.3} / {llc:.3} µs); the seed's metal: about 1.25"
    );
    assert!(
        (1.05..=1.25).contains(&r_core),
        "same_core/same_llc = {r_core:.3} ({core:.3} / {llc:.3} µs); the seed's metal: about 1.15"
    );
}

/// The fan-out: migrations with and without the rule are reported; the
/// claim is only that nothing ping-pongs (no waiter moves more than 3 times
/// in 16 rounds).
#[test]
fn a_fan_out_does_not_ping_pong() {
    for policy in ["waker-streak", "home"] {
        let s = scenario("fan_out", &[&format!("policy={policy}")]);
        for seed in 1..=10 {
            let o = Sim::new(&s.spec, seed).run();
            let total = figures(&s, &o)["migrations"];
            eprintln!("fan_out {policy} seed {seed}: {total} migrations");
            for (name, t) in &o.tasks {
                if name.starts_with("waiter") {
                    assert!(
                        t.migrations <= 3,
                        "seed {seed} ({policy}): {name} migrated {} times",
                        t.migrations
                    );
                }
            }
        }
    }
}

#[test]
fn a_leaving_threads_wakes_leave_the_task_home_in_the_simulator() {
    let s = scenario("leaving", &[]);
    for seed in 1..=5 {
        let f = run(&s, seed);
        assert_eq!(
            f["counted_wakes"], 7.0,
            "seed {seed}: only the 7 wakes before leaving are counted"
        );
        assert_eq!(f["sleeper_moves"], 0.0, "seed {seed}: the task stays home");
    }
    // Control: the same wakes without Leave reach a run of 8 and move it.
    let s = scenario("leaving", &["before=15", "after=0"]);
    assert_eq!(
        run(&s, 1)["sleeper_moves"],
        1.0,
        "15 counted far wakes must move the task"
    );
}

#[test]
fn the_same_seed_gives_the_same_trace_and_another_seed_another() {
    let s = scenario("server_two_llcs", &["waker_run=2"]);
    let a = Sim::new(&s.spec, 7).run().trace_hash;
    let b = Sim::new(&s.spec, 7).run().trace_hash;
    assert_eq!(a, b, "seed 7 twice");
    // Two simulations at once in one process, interleaved on two threads.
    let (x, y) = std::thread::scope(|sc| {
        let h1 = sc.spawn(|| Sim::new(&s.spec, 7).run().trace_hash);
        let h2 = sc.spawn(|| Sim::new(&s.spec, 8).run().trace_hash);
        (h1.join().unwrap(), h2.join().unwrap())
    });
    assert_eq!(x, a, "seed 7 beside another simulation");
    assert_ne!(y, a, "seed 8 must give another event stream");
    assert_eq!(
        first_divergence(&s.spec, 7),
        None,
        "the check mode finds no divergence"
    );
}

#[test]
fn a_scenario_file_runs_exactly_like_the_builtin() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/split_pair.toml");
    let f = file::load(&path, Params::default()).unwrap_or_else(|e| panic!("{e}"));
    let b = scenario("split_pair", &[]);
    for seed in [1, 2, 3] {
        let (x, y) = (Sim::new(&f.spec, seed).run(), Sim::new(&b.spec, seed).run());
        assert_eq!(
            x.trace_hash, y.trace_hash,
            "seed {seed}: file and built-in diverge"
        );
        assert_eq!(figures(&f, &x), figures(&b, &y));
    }
}

#[test]
fn unknown_scenarios_and_parameters_are_clear_errors() {
    let e = catalog::build("nope", None, Params::default()).unwrap_err();
    assert!(e.0.contains("unknown scenario \"nope\""), "{e}");
    let e =
        catalog::build("reqrep", None, Params::parse(&["bogus=1".into()]).unwrap()).unwrap_err();
    assert!(e.0.contains("no parameter \"bogus\""), "{e}");
    let e = catalog::build("reqrep", Some("x"), Params::default()).unwrap_err();
    assert!(e.0.contains("unknown topology"), "{e}");
}

/// `linux` beside the seed's rule (docs/REFERENCES.md): a sync wake
/// (`wake_affine_idle()`: the waker alone on its CPU) pulls a split
/// request/reply pair into one LLC on its first round trip, and a server
/// with a client in each LLC follows each client's LLC in turn: the
/// bouncing Linux's cache-aware scheduling was built against. The seed's
/// rule moves that server at most once.
#[test]
fn linux_joins_a_split_pair_at_once_and_bounces_a_shared_server() {
    let s = scenario("split_pair", &["policy=linux"]);
    for seed in 1..=5 {
        let f = run(&s, seed);
        assert_eq!(
            (f["pair_moves"], f["final_same_llc"]),
            (1.0, 1.0),
            "seed {seed}: linux must move the split pair once, into one LLC"
        );
    }
    let s = scenario("server_two_llcs", &["policy=linux", "rounds=240"]);
    for seed in 1..=3 {
        let f = run(&s, seed);
        assert!(
            f["server_moves"] >= 100.0,
            "seed {seed}: linux should bounce the server between the clients' LLCs \
             (about one move a round), moved {}",
            f["server_moves"]
        );
    }
}

/// The seed's blind spot and the rule that sees it: in `server_busy_near`
/// the near client's requests find the server busy (flags the seed's rule
/// never counts) and the far client's find it parked, so the seed's rule
/// follows the far client after K bursts, in every seed; counting flagged
/// wakes (`waker-streak:8:flags`) never moves the server while both run.
/// And the split pair still moves exactly once with flags counted.
#[test]
fn counting_flags_keeps_a_server_with_its_busy_near_client() {
    let seed_rule = scenario("server_busy_near", &["policy=waker-streak"]);
    let flags = scenario("server_busy_near", &["policy=waker-streak:8:flags"]);
    let split = scenario("split_pair", &["policy=waker-streak:8:flags"]);
    for seed in 1..=40 {
        let moved = run(&seed_rule, seed)["server_moves"];
        assert!(
            moved >= 1.0,
            "seed {seed}: the seed's rule must follow the far client (its parked wakes alone make the run), moved {moved}"
        );
        let kept = run(&flags, seed)["server_moves"];
        assert_eq!(
            kept, 0.0,
            "seed {seed}: with flags counted the near client's wakes break the far run: moved {kept}"
        );
        let pair = run(&split, seed)["pair_moves"];
        assert_eq!(
            pair, 1.0,
            "seed {seed}: the split pair moves exactly once with flags, moved {pair}"
        );
    }
}
