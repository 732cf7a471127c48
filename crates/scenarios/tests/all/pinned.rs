//! Behaviour pinned across refactors: the trace hash of every built-in
//! scenario and every suite row, under `home`, `waker-streak`, `linux` and `linux-cas`, at two
//! seeds. A re-architecture must leave every hash as it was; a change to
//! the model changes them once, in a commit that says so and regenerates
//! the file with
//!
//! ```text
//! SCHEDLAB_PIN=write cargo test -p schedlab-scenarios --test all pinned::
//! ```
//!
//! Each is also run twice in one process at the first seed (the same
//! stream both times), and none may stall.

use std::fmt::Write as _;
use std::path::Path;

use schedlab_scenarios::{catalog, rows, Params};
use schedlab_sim::Sim;

const SEEDS: [u64; 2] = [1, 2];
const POLICIES: [&str; 4] = ["home", "waker-streak", "linux", "linux-cas"];

/// Short runs keep this test quick: the first 50 ms of each scenario (the
/// whole of most) is where placement happens. The repeat run of the first
/// seed checks the scheduler's invariants after every event (as debug
/// builds do by default; the checks read, never change, so its hash must
/// match the unchecked run's); the others skip them, which in the test
/// profile are nearly all of this test's time. One thread per policy.
fn hashes() -> String {
    let names: Vec<&str> = catalog::names()
        .chain(rows::ROWS.iter().map(|r| r.name))
        .collect();
    let per_policy: Vec<Vec<String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = POLICIES
            .iter()
            .map(|&policy| {
                let names = &names;
                scope.spawn(move || names.iter().map(|name| lines(name, policy)).collect())
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a policy's runs"))
            .collect()
    });
    let mut out = String::new();
    for i in 0..names.len() {
        for lines in &per_policy {
            out.push_str(&lines[i]);
        }
    }
    out
}

/// The pinned lines of one scenario under one policy, one per seed.
fn lines(name: &str, policy: &str) -> String {
    let mut out = String::new();
    let mut args = vec![format!("policy={policy}")];
    if !matches!(name, "cs_spinners") {
        args.push("run_ms=50".to_string());
    }
    if name == "hackbench" {
        // Its default is 400 threads; two groups pin the same code.
        args.push("groups=2".to_string());
    }
    let p = Params::parse(&args).expect("k=v");
    let mut s = match catalog::build(name, None, p) {
        Ok(s) => s,
        // A scenario without a run_ms parameter of its own still
        // takes the common one; any other error is a real failure.
        Err(e) => panic!("{name} {policy}: {e}"),
    };
    for seed in SEEDS {
        s.spec.check_invariants = false;
        let o = Sim::new(&s.spec, seed).run();
        assert!(
            o.stall.is_none(),
            "{name} {policy} seed {seed}: a built-in stalled: {}",
            o.stall.as_ref().unwrap()
        );
        if seed == SEEDS[0] {
            // Run twice in one process: one seed, one stream; the second
            // with the invariants checked.
            s.spec.check_invariants = true;
            let again = Sim::new(&s.spec, seed).run();
            assert_eq!(
                (o.trace_hash, o.events),
                (again.trace_hash, again.events),
                "{name} {policy} seed {seed}: two runs of one seed differ"
            );
        }
        writeln!(
            out,
            "{name} {policy} {seed} {:016x} {}",
            o.trace_hash, o.events
        )
        .unwrap();
    }
    out
}

#[test]
fn trace_hashes_are_unchanged() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/trace_hashes.txt");
    let now = hashes();
    if std::env::var("SCHEDLAB_PIN").as_deref() == Ok("write") {
        std::fs::write(&path, &now).expect("write the pinned hashes");
        return;
    }
    let pinned = std::fs::read_to_string(&path).expect("tests/fixtures/trace_hashes.txt");
    for (want, got) in pinned.lines().zip(now.lines()) {
        assert_eq!(
            want, got,
            "scenario policy seed hash events: the event stream changed \
             (reproduce with `schedlab run SCENARIO --param policy=P --param run_ms=50 --seed N`)"
        );
    }
    assert_eq!(
        pinned.lines().count(),
        now.lines().count(),
        "the list of pinned (scenario, policy, seed) changed"
    );
}
